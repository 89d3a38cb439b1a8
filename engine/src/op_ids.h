// OpIds: transfer and finalize ids that carry their task's slot.
//
// An id holds the task's slot in its low 32 bits and a count of operations
// above it, so an event finds its task without a lookup table. The count
// wraps after 2^32 operations (0 is skipped): an id is unique among that many
// consecutive operations, and ordered as started within them; a long-running
// client (2^32 operations are some 50 days at a thousand a second) goes on
// instead of stopping.
#pragma once

#include <cstdint>

namespace dfl::detail {

class OpIds {
 public:
  std::uint64_t next(std::uint32_t slot) {
    count_ = count_ == 0xffffffffu ? 1 : count_ + 1;
    return (count_ << 32) | slot;
  }
  static std::uint32_t slot_of(std::uint64_t op) {
    return static_cast<std::uint32_t>(op & 0xffffffffu);
  }

 private:
  std::uint64_t count_ = 0;  // Operations started, modulo 2^32.
};

}  // namespace dfl::detail
