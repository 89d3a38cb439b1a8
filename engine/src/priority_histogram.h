// PriorityHistogram: the priorities of a task's active demands, as counts,
// which give the highest without a scan over the demands.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "demandflight/engine/ids.h"
#include "engine_assert.h"

namespace dfl::detail {

// Counts of active demands per priority. Almost every task sees at most a few
// distinct priorities, so they are kept inline and scanned; more spill to a
// vector. The max is a scan over distinct priorities, not over demands.
class PriorityHistogram {
 public:
  void add(Priority priority) {
    Bin* bins = data();
    for (std::size_t i = 0; i < size(); ++i) {
      if (bins[i].priority == priority) {
        ++bins[i].count;
        return;
      }
    }
    if (spill_.empty() && inline_size_ < kInline) {
      inline_[inline_size_++] = Bin{priority, 1};
      return;
    }
    if (spill_.empty()) {
      spill_.assign(inline_.begin(), inline_.begin() + inline_size_);
      inline_size_ = 0;
    }
    spill_.push_back(Bin{priority, 1});
  }

  void remove(Priority priority) {
    Bin* bins = data();
    const std::size_t n = size();
    for (std::size_t i = 0; i < n; ++i) {
      if (bins[i].priority != priority) continue;
      if (--bins[i].count > 0) return;
      bins[i] = bins[n - 1];
      if (spill_.empty()) {
        --inline_size_;
      } else {
        spill_.pop_back();
      }
      return;
    }
    DFL_ASSERT(false, "priority histogram: removing a priority that is not counted");
  }

  std::optional<Priority> max() const {
    const Bin* bins = data();
    std::optional<Priority> best;
    for (std::size_t i = 0; i < size(); ++i) {
      if (!best || bins[i].priority > *best) best = bins[i].priority;
    }
    return best;
  }

  std::uint32_t total() const {
    std::uint32_t sum = 0;
    for (std::size_t i = 0; i < size(); ++i)
      sum += data()[i].count;
    return sum;
  }

  std::uint32_t count(Priority priority) const {
    for (std::size_t i = 0; i < size(); ++i) {
      if (data()[i].priority == priority) return data()[i].count;
    }
    return 0;
  }

  void clear() {
    inline_size_ = 0;
    spill_.clear();
  }

 private:
  struct Bin {
    Priority priority = 0;
    std::uint32_t count = 0;
  };
  static constexpr std::uint8_t kInline = 4;

  std::size_t size() const { return spill_.empty() ? inline_size_ : spill_.size(); }
  Bin* data() { return spill_.empty() ? inline_.data() : spill_.data(); }
  const Bin* data() const { return spill_.empty() ? inline_.data() : spill_.data(); }

  std::array<Bin, kInline> inline_{};
  std::uint8_t inline_size_ = 0;
  std::vector<Bin> spill_;
};

}  // namespace dfl::detail
