// Demand and OwnerState: a caller's claim on a task, and its owner's. Demands
// live in a slab; a task's active demands and an owner's form intrusive
// doubly linked lists through them.
#pragma once

#include <cstdint>
#include <optional>

#include "demandflight/engine/ids.h"
#include "slab.h"

namespace dfl::detail {

struct OwnerState {
  std::uint32_t head = kNone;  // Active demands of this owner (intrusive list).
  std::uint32_t active = 0;
  // No active demand and nothing to remember: the entry may be swept. Idle
  // entries are kept for a while so an owner that comes and goes (a subsystem
  // with one request at a time) does not allocate on every subscribe.
  bool idle = false;
  // Generations <= this have ended; subscribes with them are stale.
  std::optional<OwnerGeneration> ended_through;
};

struct Demand {
  std::uint32_t generation = 0;  // Bumped when the slot is freed.
  bool live = false;
  std::uint32_t task = kNone;
  std::uint32_t prev_in_task = kNone;
  std::uint32_t next_in_task = kNone;
  OwnerId owner = 0;
  OwnerState* owner_state = nullptr;  // Stable: unordered_map values do not move.
  std::uint32_t prev_in_owner = kNone;
  std::uint32_t next_in_owner = kNone;
  OwnerGeneration owner_generation = 0;
  Priority priority = 0;
  double deadline_s = kNoDeadline;
  std::uint64_t timer_seq = 0;  // 0: no deadline timer armed.
  std::uint32_t next_free = kNone;
};

}  // namespace dfl::detail
