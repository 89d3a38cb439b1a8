// Task: one physical transfer, verification and install, shared by the
// demands of its key. Its phase is the state machine's (task_state_machine.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>

#include "demandflight/engine/artifact_key.h"
#include "demandflight/engine/ids.h"
#include "mirrors.h"
#include "priority_histogram.h"
#include "slab.h"
#include "task_state_machine.h"

namespace dfl::detail {

// Orphans run below every real priority; real priorities are int32, so any
// int64 below INT32_MIN is a safe sentinel.
constexpr std::int64_t kOrphanLevel = std::numeric_limits<std::int64_t>::min();

inline std::optional<Priority> public_priority(std::int64_t effective) {
  if (effective == kOrphanLevel) return std::nullopt;
  return static_cast<Priority>(effective);
}

struct Task {
  TaskId id;  // 0 while the slot is free.
  TaskPhase phase = TaskPhase::queued;  // Changed by Impl::enter() only.
  TaskState state() const { return public_state(phase); }
  bool orphan() const { return is_orphan(phase); }
  // The key, shared with the commands and the installed index (and with the
  // subscriber, if it passed a KeyRef).
  KeyRef key;
  std::size_t key_hash = 0;  // Under the model's identity.
  // The other live tasks with this key hash (Impl::key_heads_), newest first.
  std::uint32_t key_prev = kNone;
  std::uint32_t key_next = kNone;
  OriginId origin = 0;  // Where the current (or next) attempt goes.
  // Mirrors (mirrors.h): the task's list of origins (0: `origin` alone), the
  // index of `origin` in it, the indices it will not ask again (a bit each),
  // and how many origins have failed in this round.
  std::uint32_t origin_list = 0;
  std::uint32_t excluded_origins = 0;
  std::uint8_t origin_at = 0;
  std::uint8_t round_failures = 0;
  std::uint64_t size_bytes = 0;
  std::uint64_t seq = 0;  // First-enqueue order.
  std::int64_t effective = kOrphanLevel;
  std::int64_t demanded = kOrphanLevel;  // Max over the active demands, as last announced.
  Priority max_ever = 0;                 // callbacks model: the legacy priority rule.
  PriorityHistogram priorities;
  std::uint32_t demand_head = kNone;
  std::uint32_t active_demands = 0;
  std::uint32_t attempts = 0;
  std::uint64_t resume_offset_bytes = 0;
  std::uint64_t attempt_bytes = 0;
  double attempt_started_s = 0;
  std::uint64_t bytes_transferred = 0;
  std::uint64_t op = 0;  // Current (or last) TransferId or FinalizeId value,
  bool op_live = false;  // and whether events for it are still expected.
  // The task's one timer: its retry time in backoff, or, transferring as an
  // orphan, when its policy asked to be asked again.
  double retry_at_s = 0;
  std::uint64_t timer_seq = 0;  // 0: no timer armed.
  // Slot pressure at the last orphan decision, to re-ask when it changes.
  std::uint64_t asked_pressure = 0;
  std::uint32_t next_free = kNone;
};

// Transfers running per origin (max_per_origin), and its breaker.
struct OriginSlots {
  std::uint32_t running = 0;
  Breaker breaker;
};

}  // namespace dfl::detail
