// Slab: the engine's storage of demands and tasks, by index.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

#include "engine_assert.h"

namespace dfl::detail {

// No index: the end of an intrusive list, an empty slot, a missing task.
inline constexpr std::uint32_t kNone = std::numeric_limits<std::uint32_t>::max();

// Free-list slab: indices stay valid until released.
template <class T>
class Slab {
 public:
  std::uint32_t acquire() {
    if (free_ != kNone) {
      const std::uint32_t index = free_;
      free_ = items_[index].next_free;
      items_[index].next_free = kNone;
      ++live_;
      return index;
    }
    DFL_ASSERT(items_.size() < kNone, "slab is full");
    items_.emplace_back();
    ++live_;
    return static_cast<std::uint32_t>(items_.size() - 1);
  }
  void release(std::uint32_t index) {
    items_[index].next_free = free_;
    free_ = index;
    --live_;
  }
  T& operator[](std::uint32_t index) { return items_[index]; }
  const T& operator[](std::uint32_t index) const { return items_[index]; }
  std::size_t capacity() const { return items_.size(); }
  std::size_t live() const { return live_; }

 private:
  std::vector<T> items_;
  std::uint32_t free_ = kNone;
  std::size_t live_ = 0;
};

}  // namespace dfl::detail
