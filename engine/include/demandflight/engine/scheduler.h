// Scheduler: the sans-I/O core. Physical ArtifactTasks shared by Demands.
//
// Callers that ask for the same ArtifactKey share one physical task (transfer,
// verify, install), while each caller owns its Demand: it cancels only its own
// wait, has its own deadline and priority, and receives exactly one terminal.
// See docs/design.md §3 for the contracts and the task life cycle.
//
// The core does no I/O and reads no clock. Every entry point takes `now_s`
// (seconds, never decreasing). It appends Commands to an outbox, which the
// runtime drains with take_commands() after each call and carries out outside
// any lock; the runtime feeds back events (transfer progress / finished,
// finalize finished) and calls on_timer() at next_wakeup_s().
//
// Invariants, checked after every entry point in debug and test builds
// (DFL_CHECK_INVARIANTS):
// - a key has at most one live task (demand and callbacks models);
// - a task's effective priority is the max over its active demands (demand
//   model), the max ever seen (callbacks), or the orphan level with none;
// - queued tasks are in exactly one origin queue under their current priority;
// - running transfers never exceed max_transfers or max_per_origin;
// - a task without active demands is transferring (orphan completing) or
//   finalizing; queued and backoff tasks always have one.
//
// Not thread-safe: runtimes serialise calls (the backend holds one mutex).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "demandflight/engine/artifact_key.h"
#include "demandflight/engine/command.h"
#include "demandflight/engine/config.h"
#include "demandflight/engine/ids.h"
#include "demandflight/engine/orphan_policy.h"
#include "demandflight/engine/outcome.h"

namespace dfl {

// Everything about a demand except the key: who owns it, how urgent it is,
// until when it waits, and where the artifact comes from.
struct DemandOptions {
  OwnerId owner = 0;
  OwnerGeneration owner_generation = 0;
  Priority priority = 0;
  double deadline_s = kNoDeadline;  // Absolute; at now >= deadline the demand times out.
  OriginId origin = 0;              // Used by the task's creator; joiners share it.
  // Further origins of the artifact, in order of preference after `origin`
  // (docs/design.md, *Mirrors and failover*); as `origin`, the task's creator's.
  // Read during subscribe only: the span need not outlive the call.
  std::span<const OriginId> mirrors;
  std::uint64_t size_bytes = 0;     // Expected size; 0 when unknown.
};

// At most this many origins per artifact: `origin` and 31 mirrors.
inline constexpr std::size_t kMaxOriginsPerArtifact = 32;

// What is wrong with a subscribe's origins, in words that begin with the
// field ("origin: ...", "mirrors: ..."); nullopt when nothing is. The one
// statement of the rule: the scheduler requires it of every subscribe, and
// whoever takes origins from outside (the client, the Python Engine) checks it
// first and names its own argument.
std::optional<std::string> origins_problem(OriginId origin, std::span<const OriginId> mirrors,
                                           std::uint32_t max_origins);

// The life-cycle states of a live task. Terminal outcomes (installed, failed,
// dropped, aborted) are not states: the task is released when it reaches one.
enum class TaskState : std::uint8_t {
  queued,        // Waiting for a transfer slot, ordered by (priority, FIFO).
  transferring,  // Holds a slot; never preempted.
  backoff,       // A retryable failure; waiting for the retry timer.
  finalizing,    // Verify + atomic install; holds no transfer slot.
};
std::string_view to_string(TaskState state);

struct TaskInfo {
  TaskId id;
  ArtifactKey key;
  TaskState state = TaskState::queued;
  std::optional<Priority> effective_priority;  // nullopt: orphan level.
  // The highest priority among its active demands; nullopt: none. It differs
  // from effective_priority only in the callbacks model.
  std::optional<Priority> demanded_priority;
  std::uint32_t active_demands = 0;
  std::uint32_t attempts = 0;
  std::uint64_t resume_offset_bytes = 0;
  std::uint64_t bytes_transferred = 0;
  OriginId origin = 0;  // Where its current (or next) attempt goes.
  std::optional<TransferId> transfer;  // Set while transferring.
  std::optional<FinalizeId> finalize;  // Set while finalizing.
};

struct DemandInfo {
  TaskId task;
  OwnerId owner = 0;
  OwnerGeneration owner_generation = 0;
  Priority priority = 0;
  double deadline_s = kNoDeadline;
};

struct SchedulerStats {
  std::uint64_t demands_subscribed = 0;
  std::uint64_t tasks_created = 0;
  std::uint64_t transfers_started = 0;
  std::uint64_t finalizes_started = 0;
  std::uint64_t installs = 0;
  std::uint64_t cache_hits = 0;
  std::uint64_t orphan_aborts = 0;
  std::uint64_t orphan_completes = 0;     // Decisions, including repeated asks.
  std::uint64_t partials_kept = 0;        // keep_partial decisions that kept bytes.
  std::uint64_t partials_resumed = 0;     // New tasks that started from a kept partial.
  std::uint64_t partials_dropped = 0;     // Forgotten unused (budget, or installed).
  std::uint64_t stale_calls_ignored = 0;  // cancel / set_priority on an ended handle,
  std::uint64_t stale_cancels_ignored = 0;           // of which cancels,
  std::uint64_t stale_priority_changes_ignored = 0;  // and set_priority calls.
  std::uint64_t late_events_ignored = 0;  // Events for aborted or unknown ids.
  std::uint64_t cancels_refused = 0;      // callbacks model: cancel while finalizing.
  std::uint64_t failovers = 0;            // Attempts sent to another origin than the last.
  std::uint64_t breaker_opens = 0;        // Origins' breakers opened (docs/design.md).
};

class Scheduler {
 public:
  explicit Scheduler(SchedulerConfig config = {},
                     std::shared_ptr<OrphanPolicy> orphan_policy = nullptr);
  ~Scheduler();
  Scheduler(Scheduler&&) noexcept;
  Scheduler& operator=(Scheduler&&) noexcept;
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // --- Calls from users ---------------------------------------------------

  // Creates a demand for `key`. Joins the live task of that key, or starts a
  // new one, or succeeds from the installed index. Immediate terminals (cache
  // hit, stale owner generation, deadline <= now) are delivered through the
  // outbox like every other terminal, never inline.
  DemandHandle subscribe(double now_s, const ArtifactKey& key, const DemandOptions& options);

  // The hash under which this scheduler files `key` (it depends on the model:
  // the callbacks model knows a key by its resource name only). A caller that
  // subscribes the same keys again and again, as the simulator replaying a
  // trace does, hashes each key once and passes the hash to the overload
  // below, which skips hashing three strings per subscribe.
  std::size_t key_hash(const ArtifactKey& key) const;
  // As above, with `key_hash` equal to key_hash(key): checked in builds
  // without NDEBUG, trusted in release builds.
  DemandHandle subscribe(double now_s, const ArtifactKey& key, std::size_t key_hash,
                         const DemandOptions& options);
  // As above, with the key shared: a task this subscribe creates keeps `key`
  // itself rather than a copy, and later subscribes with the same KeyRef find
  // that task (and the installed key) without comparing strings. For callers
  // that hold their keys as KeyRefs already (a manifest, a trace).
  DemandHandle subscribe(double now_s, const KeyRef& key, std::size_t key_hash,
                         const DemandOptions& options);

  // Withdraws this demand only (demand model). Idempotent: a stale, unknown or
  // already-ended handle is a no-op.
  void cancel(double now_s, DemandHandle demand);

  // Raises or lowers this demand's priority. A no-op on an ended handle.
  void set_priority(double now_s, DemandHandle demand, Priority priority);

  // Queued tasks at or below this priority (orphans included) start no
  // transfer until the hold is lifted (nullopt) or their priority rises
  // above it: a runtime's pause (Client::pause). Transfers already running
  // are the runtime's to hold; they keep their slots.
  void hold_starts(double now_s, std::optional<Priority> at_or_below);

  // The owner is gone. With a generation: every active demand of `owner` whose
  // generation is <= `generation` ends owner_ended, and later subscribes with
  // such a generation are stale and end owner_ended at once. Without one:
  // every active demand of `owner` ends owner_ended and nothing is remembered,
  // so the owner id may be used again.
  void end_owner(double now_s, OwnerId owner, std::optional<OwnerGeneration> generation);

  // Optional: the runtime's answer to "how many bytes has this transfer
  // received so far in this attempt", asked only when an orphan policy is
  // about to decide (a simulator can answer exactly at any instant). Without
  // it the engine uses the last on_transfer_progress. Must not call into the
  // scheduler.
  void set_progress_probe(std::function<std::uint64_t(TransferId)> probe);

  // --- Events from the runtime --------------------------------------------

  // The runtime found `key` installed outside any task (for example in its
  // cache directory at start-up): it enters the installed index, and later
  // subscribes for it are cache hits. May evict others (EvictArtifact).
  void note_installed(double now_s, const ArtifactKey& key, std::uint64_t size_bytes);
  // The runtime found `key`'s installed bytes gone (another process evicted
  // them): it leaves the installed index, and the next subscribe starts a
  // task. No command is emitted; a no-op for a key that is not there.
  void forget_installed(double now_s, const ArtifactKey& key);

  // `bytes_received` counts this attempt's bytes so far (after the resume offset).
  void on_transfer_progress(double now_s, TransferId transfer, std::uint64_t bytes_received);
  // `bytes_received`: this attempt's bytes in total. Kept as resume offset on
  // a retryable error. `retry_after_s`: the server's Retry-After, if it gave
  // one: the next attempt waits at least that long (the backoff if longer).
  void on_transfer_finished(double now_s, TransferId transfer, TransferStatus status,
                            std::uint64_t bytes_received,
                            std::optional<double> retry_after_s = std::nullopt);
  void on_finalize_finished(double now_s, FinalizeId finalize, FinalizeStatus status);
  // Fires due deadlines and retry timers. Every entry point does this first,
  // so a runtime only has to call it at next_wakeup_s().
  void on_timer(double now_s);

  // When the engine must be called again (on_timer), or nullopt.
  std::optional<double> next_wakeup_s() const;

  // --- Outbox -------------------------------------------------------------

  // Moves the pending commands into `out` (cleared first), in emission order.
  void take_commands(std::vector<Command>& out);
  std::vector<Command> take_commands();
  bool has_commands() const;

  // --- Introspection (tests, demo, runtimes) -------------------------------

  std::optional<TaskInfo> task_for(const ArtifactKey& key) const;
  std::optional<DemandInfo> demand(DemandHandle handle) const;  // nullopt once ended.
  // The task serving a live demand; nullopt once the demand has ended.
  std::optional<TaskInfo> task_of(DemandHandle handle) const;
  std::vector<TaskInfo> tasks() const;  // Every live task, in creation order.
  std::size_t live_tasks() const;
  std::size_t live_demands() const;
  std::size_t remembered_keys() const;  // Keys in the request history (key_history_limit).
  // The kept partial of `key` (bytes), if the engine holds one.
  std::optional<std::uint64_t> kept_partial(const ArtifactKey& key) const;
  std::uint64_t kept_partial_bytes() const;  // All kept partials together.
  std::size_t queued_tasks() const;
  std::uint32_t running_transfers() const;
  const SchedulerStats& stats() const;
  const SchedulerConfig& config() const;
  double now_s() const;

  // Runs the full invariant check now (also in release builds); aborts with a
  // message on the first violation.
  void check_invariants() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace dfl
