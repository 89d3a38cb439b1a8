// Commands: what the engine wants the runtime to do.
//
// The engine never calls out. Each entry point appends commands to an outbox;
// the runtime drains it after the call returns (outside any lock) and carries
// them out in order. Deliver commands are how callers learn their terminal, so
// user callbacks never run inside an engine call.
#pragma once

#include <cstdint>
#include <optional>
#include <utility>
#include <variant>

#include "demandflight/engine/artifact_key.h"
#include "demandflight/engine/ids.h"
#include "demandflight/engine/orphan_policy.h"
#include "demandflight/engine/outcome.h"

namespace dfl {

// Start transferring `key` from `origin`, beginning at `resume_offset_bytes`.
// The runtime reports progress and the end with `transfer`. An attempt 1 with
// a non-zero offset resumes a kept partial of the key (AbortTransfer with
// keep_partial); later attempts resume the task's own earlier bytes.
// Keys in commands are KeyRefs: the task's own key, shared, never copied.
struct StartTransfer {
  TaskId task;
  TransferId transfer;
  KeyRef key;
  OriginId origin = 0;
  std::uint64_t resume_offset_bytes = 0;
  std::uint64_t size_bytes = 0;  // Expected total size; 0 when unknown.
  std::uint32_t attempt = 1;     // 1 for the first attempt of this task.
  // The task's effective priority as the transfer starts (what a runtime asks
  // the origin for: an HTTP priority, a stream weight); nullopt: the orphan
  // level, no active demand. Later changes come as TaskPriorityChanged.
  std::optional<Priority> priority;
};

// Stop the transfer now. The engine has already forgotten it: any later event
// that names `transfer` is ignored.
// With `keep_partial`, the runtime keeps the bytes received so far for the
// key (`kept_bytes` is the engine's count: resume offset plus this attempt's
// bytes as last reported or probed); the next task of the key starts from
// them, until DropPartial says they may go.
struct AbortTransfer {
  TaskId task;
  TransferId transfer;
  bool keep_partial = false;
  std::uint64_t kept_bytes = 0;
};

// The engine forgot a kept partial of `key` (the partial budget is full, or
// the key got installed): the runtime may delete its bytes.
struct DropPartial {
  KeyRef key;
  std::uint64_t bytes = 0;
};

// Verify the received bytes and install them atomically.
struct StartFinalize {
  TaskId task;
  FinalizeId finalize;
  KeyRef key;
  std::uint64_t size_bytes = 0;
};

// Tell the caller behind `demand` its one terminal outcome.
struct Deliver {
  DemandHandle demand;
  DemandOutcome outcome;
  TaskId task;  // The task that served the demand; 0 for cache hits and refusals.
};

// The installed-artifact index evicted `key` (LRU, over capacity): the runtime
// may delete its bytes.
struct EvictArtifact {
  KeyRef key;
  std::uint64_t size_bytes = 0;
};

// Observations: what the engine decided about demands and tasks, always
// emitted (a runtime that needs none of them skips them). With these a
// runtime or a recorder follows every demand and task from the commands
// alone, without keeping a copy of the engine's state.
// A physical task was created by the subscribe that this call handled (its
// key is that subscribe's key; Scheduler::task_for() has it too).
struct TaskCreated {
  TaskId task;
};
// A demand attached to a task (new or live): it is one of the task's active
// demands from now until its Deliver. Cache hits and refused subscribes
// attach to nothing; their Deliver comes alone.
struct DemandAttached {
  DemandHandle demand;
  TaskId task;
  Priority priority = 0;
};
// A live demand's own priority changed (set_priority). The task's follows in
// a TaskPriorityChanged if it changed too.
struct DemandPriorityChanged {
  DemandHandle demand;
  TaskId task;
  Priority priority = 0;
};
// The task's effective priority (the one it is queued and run at) or the
// highest priority among its active demands changed. They differ only in the
// callbacks model, whose priority never falls.
struct TaskPriorityChanged {
  TaskId task;
  std::optional<Priority> priority;  // Effective; nullopt: orphan level, below every real one.
  std::optional<Priority> demanded;  // Max over the active demands; nullopt: none.
};
// The orphan policy was asked about `task` (a transfer nobody waits for) and
// answered `decision`: once when it became an orphan (first_decision), then
// on every change of slot pressure while it keeps completing. It comes
// before the AbortTransfer and TaskEnded that an abort or keep_partial causes.
struct OrphanDecided {
  TaskId task;
  OrphanDecision decision = OrphanDecision::abort;
  bool first_decision = true;
  std::uint64_t bytes_done = 0;  // OrphanView::bytes_done.
};
struct TaskEnded {
  TaskId task;
  TaskOutcome outcome;
  std::uint32_t attempts = 0;
  std::uint64_t bytes_transferred = 0;
};

using Command =
    std::variant<StartTransfer, AbortTransfer, StartFinalize, Deliver, EvictArtifact, DropPartial,
                 TaskCreated, DemandAttached, DemandPriorityChanged, TaskPriorityChanged, OrphanDecided,
                 TaskEnded>;

// The one dispatch of the engine's commands, which every user of them goes
// through (the simulator, the client's core and its recording, the test
// drivers, the Python Engine): calls `handler(c)` with the command `command`
// holds. The handler must take every kind of command, so a new kind is a
// compile error wherever it is not handled: a kind its user ignores has an
// overload that does nothing, and no handler has a generic catch-all (a
// generic lambda that forwards to overloads of each kind is fine).
template <class Handler>
decltype(auto) dispatch(Command& command, Handler&& handler) {
  return std::visit(std::forward<Handler>(handler), command);
}
template <class Handler>
decltype(auto) dispatch(const Command& command, Handler&& handler) {
  return std::visit(std::forward<Handler>(handler), command);
}

// A handler made of lambdas, one per kind: dispatch(c, Overloaded{...}).
template <class... F>
struct Overloaded : F... {
  using F::operator()...;
};
template <class... F>
Overloaded(F...) -> Overloaded<F...>;

}  // namespace dfl
