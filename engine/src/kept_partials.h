// KeptPartials: the bytes of aborted transfers kept for the next task of
// their key (OrphanDecision::keep_partial), within a budget of bytes and of
// entries; past it the oldest are dropped first.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <unordered_map>

#include "demandflight/engine/artifact_key.h"
#include "engine_assert.h"

namespace dfl::detail {

struct Partial {
  std::uint64_t bytes = 0;
  std::uint64_t seq = 0;  // Keep order: the oldest is dropped first.
  KeyRef key;             // For DropPartial.
};

class KeptPartials {
 public:
  bool empty() const { return partials_.empty(); }
  std::size_t size() const { return partials_.size(); }
  std::uint64_t used_bytes() const { return used_; }
  std::optional<std::uint64_t> bytes(const ArtifactKey& key) const {
    auto it = partials_.find(key);
    if (it == partials_.end()) return std::nullopt;
    return it->second.bytes;
  }
  // The oldest partial's key (the first to drop); the set must not be empty.
  const KeyRef& oldest() const { return partial_order_.begin()->second; }

  // Keeps `bytes` of `key`, which has no partial: the caller made room.
  void keep(const KeyRef& key, std::uint64_t bytes) {
    DFL_ASSERT(!partials_.contains(*key), "keeping a second partial of a key");
    const std::uint64_t seq = ++seq_;
    partials_.emplace(*key, Partial{bytes, seq, key});
    partial_order_.emplace(seq, key);
    used_ += bytes;
  }
  // Forgets the partial of `key` and returns it; nullopt when there is none.
  std::optional<Partial> take(const ArtifactKey& key) {
    if (partials_.empty()) return std::nullopt;
    auto it = partials_.find(key);
    if (it == partials_.end()) return std::nullopt;
    Partial partial = std::move(it->second);
    used_ -= partial.bytes;
    partial_order_.erase(partial.seq);
    partials_.erase(it);
    return partial;
  }

  // For the invariant check.
  const std::unordered_map<ArtifactKey, Partial>& by_key() const { return partials_; }
  const std::map<std::uint64_t, KeyRef>& by_age() const { return partial_order_; }

 private:
  std::unordered_map<ArtifactKey, Partial> partials_;  // By exact key.
  std::map<std::uint64_t, KeyRef> partial_order_;      // Keep order, oldest first.
  std::uint64_t used_ = 0;
  std::uint64_t seq_ = 0;
};

}  // namespace dfl::detail
