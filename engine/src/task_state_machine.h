// The life cycle of a physical task, in one place: its phases, the events
// that move it between them, and the outcomes it may end with from each.
//
// docs/design.md §3 draws it. The transitions are next_phase() below, and
// every change of phase in the engine goes through it (Impl::enter).
//
// - queued: waiting for a transfer slot, ordered by (priority, first enqueue).
// - transferring: holds a slot; never preempted.
// - orphan_transferring: holds a slot with no active demand: the orphan policy
//   said complete (or, during its decision, is being asked); asked again when
//   slot pressure changes.
// - backoff: a retryable failure; waiting for the retry timer.
// - finalizing / orphan_finalizing: verify and install, with or without an
//   active demand; no transfer slot.
//
// A task ends (is released) with one TaskOutcome; task_may_end says from
// which phases. Public views (TaskInfo::state) show four states: the orphan
// phases show as transferring and finalizing.
#pragma once

#include <cstdint>
#include <optional>

#include "demandflight/engine/outcome.h"
#include "demandflight/engine/scheduler.h"

namespace dfl::detail {

enum class TaskPhase : std::uint8_t {
  queued,
  transferring,
  orphan_transferring,
  backoff,
  finalizing,
  orphan_finalizing,
};

enum class TaskEvent : std::uint8_t {
  slot_granted,   // The queue's turn came: its transfer starts.
  orphaned,       // Its last active demand left while transferring or finalizing.
  reattached,     // A new demand joined an orphan.
  body_received,  // The transfer finished: verify and install.
  retry_later,    // A retryable failure with demands waiting: back off.
  retry_now,      // The same, with no backoff to wait (retry base_s 0).
  retry_due,      // The retry timer fired.
};

// The phase `event` moves a task in `phase` to; nullopt when the event cannot
// happen there (an engine bug, which the caller asserts against).
constexpr std::optional<TaskPhase> next_phase(TaskPhase phase, TaskEvent event) {
  using P = TaskPhase;
  using E = TaskEvent;
  switch (event) {
    case E::slot_granted:
      if (phase == P::queued) return P::transferring;
      break;
    case E::orphaned:
      if (phase == P::transferring) return P::orphan_transferring;
      if (phase == P::finalizing) return P::orphan_finalizing;
      break;
    case E::reattached:
      if (phase == P::orphan_transferring) return P::transferring;
      if (phase == P::orphan_finalizing) return P::finalizing;
      break;
    case E::body_received:
      if (phase == P::transferring) return P::finalizing;
      if (phase == P::orphan_transferring) return P::orphan_finalizing;
      break;
    case E::retry_later:
      if (phase == P::transferring || phase == P::finalizing) return P::backoff;
      break;
    case E::retry_now:
      if (phase == P::transferring || phase == P::finalizing) return P::queued;
      break;
    case E::retry_due:
      if (phase == P::backoff) return P::queued;
      break;
  }
  return std::nullopt;
}

// Whether a task in `phase` may end with `outcome`.
constexpr bool task_may_end(TaskPhase phase, TaskOutcome outcome) {
  using P = TaskPhase;
  switch (outcome) {
    case TaskOutcome::installed:  // Its install succeeded.
      return phase == P::finalizing || phase == P::orphan_finalizing;
    case TaskOutcome::failed:  // A permanent error, or the attempts ran out.
      return phase != P::queued && phase != P::backoff;
    case TaskOutcome::dropped:  // Nobody waits any more, and nothing is under way.
      return phase == P::queued || phase == P::backoff || phase == P::orphan_transferring ||
             phase == P::orphan_finalizing;
    case TaskOutcome::aborted:  // Its transfer is stopped: the orphan policy, or a
      return phase == P::orphan_transferring ||  // legacy cancel of the whole task.
             phase == P::transferring;
  }
  return false;
}

constexpr TaskState public_state(TaskPhase phase) {
  switch (phase) {
    case TaskPhase::queued:
      return TaskState::queued;
    case TaskPhase::transferring:
    case TaskPhase::orphan_transferring:
      return TaskState::transferring;
    case TaskPhase::backoff:
      return TaskState::backoff;
    case TaskPhase::finalizing:
    case TaskPhase::orphan_finalizing:
      return TaskState::finalizing;
  }
  return TaskState::queued;
}

constexpr bool is_orphan(TaskPhase phase) {
  return phase == TaskPhase::orphan_transferring || phase == TaskPhase::orphan_finalizing;
}

}  // namespace dfl::detail
