// KeyHistory: when each key was asked for, for the orphan policies that read
// it (OrphanView::key_demands, since_last_demand_s, previous_gap_s). Bounded:
// past twice the limit, all but the `limit` most recently requested keys are
// forgotten at once (amortised O(1) per request).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <vector>

namespace dfl::detail {

class KeyHistory {
 public:
  struct Entry {
    std::uint32_t demands = 0;  // Subscribes of the key so far.
    double last_s = 0;          // The last one.
    double previous_s = -1;     // The one before it; -1 when none.
    std::uint64_t seq = 0;      // Number of the last request, among all keys.
  };

  explicit KeyHistory(std::uint32_t limit) : limit_(limit) {}

  void note(std::size_t key_hash, double now) {
    Entry& h = entries_[key_hash];
    h.previous_s = h.demands == 0 ? -1 : h.last_s;
    ++h.demands;
    h.last_s = now;
    h.seq = ++requests_;
    if (entries_.size() > 2 * static_cast<std::size_t>(limit_)) prune();
  }
  const Entry* find(std::size_t key_hash) const {
    auto it = entries_.find(key_hash);
    return it == entries_.end() ? nullptr : &it->second;
  }
  std::size_t size() const { return entries_.size(); }

 private:
  // Keeps the `limit_` most recently requested keys. Request numbers are
  // unique (times may tie), so exactly that many stay.
  void prune() {
    std::vector<std::uint64_t> seqs;
    seqs.reserve(entries_.size());
    for (const auto& [hash, h] : entries_)
      seqs.push_back(h.seq);
    auto cut = seqs.end() - static_cast<std::ptrdiff_t>(limit_);
    std::nth_element(seqs.begin(), cut, seqs.end());
    const std::uint64_t oldest_kept = *cut;
    std::erase_if(entries_, [&](const auto& item) { return item.second.seq < oldest_kept; });
  }

  std::uint32_t limit_;
  std::uint64_t requests_ = 0;
  std::unordered_map<std::size_t, Entry> entries_;  // By key hash under the identity.
};

}  // namespace dfl::detail
