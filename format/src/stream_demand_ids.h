// The demand ids of a streamed trace (TraceStream, trace.h): what must be
// known of every id ever read, in memory that does not grow with the trace.
//
// A trace names demands by id; read whole, every id stays (Trace::demand_ids).
// Streamed, an id is needed while its demand can still be cancelled or have
// its priority set by name (until it ends) and until its result row is
// written (in subscribe order); after that only the fact that it was used
// counts: a later subscribe may not reuse it, and a later cancel of it is a
// cancel of an ended demand, not of an unknown one. Ids of the form
// PREFIX<decimal> with one prefix (what `demandflight gen` and `import` write:
// d1, d2, ...) are remembered as one bit each, from the first number seen and
// for 2^31 numbers on (a 256 MB bitmap at most); any other id keeps its string.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <absl/container/flat_hash_map.h>
#include <absl/container/flat_hash_set.h>

namespace dfl::format::detail {

class SeenIds {
 public:
  bool contains(std::string_view id) const;
  void insert(std::string_view id);
  // Memory beyond the bitmap: ids that are not PREFIX<decimal> (for tests).
  std::size_t other_ids() const { return others_.size(); }

 private:
  // The number of `id` if it is prefix_ + a canonical decimal below the cap.
  std::optional<std::uint64_t> number(std::string_view id) const;
  std::string prefix_;
  bool has_prefix_ = false;
  std::uint64_t base_ = 0;  // The first number seen: bit i is number base_ + i.
  std::vector<std::uint64_t> bits_;
  absl::flat_hash_set<std::string> others_;
};

class StreamDemandIds {
 public:
  static constexpr std::uint32_t kEnded = 0xffffffff;

  // The new demand's index; nullopt when the id was used before.
  std::optional<std::uint32_t> add(std::string_view id);
  // A cancel's or set_priority's demand: its index while it has not ended,
  // kEnded after, nullopt if no subscribe ever used the id.
  std::optional<std::uint32_t> find(std::string_view id) const;
  const std::string& id(std::uint32_t demand) const { return ids_[demand - base_]; }
  void ended(std::uint32_t demand);
  // Demands before `demand` + 1 have been written: their ids may go.
  void written(std::uint32_t demand);
  std::uint64_t count() const { return base_ + ids_.size(); }
  std::size_t kept() const { return ids_.size(); }

 private:
  std::deque<std::string> ids_;  // Of demands [base_, base_ + size); stable addresses.
  std::uint64_t base_ = 0;
  absl::flat_hash_map<std::string_view, std::uint32_t> live_;  // Views into ids_.
  SeenIds seen_;
};

}  // namespace dfl::format::detail
