// OrphanPolicy: what to do with a transfer that nobody waits for any more.
//
// When the last active demand leaves a transferring task, aborting wastes the
// bytes already received; completing spends slot time and bandwidth on
// something that may never be used (docs/design.md §4). The engine asks the policy
// when a transfer becomes orphaned and again whenever slot pressure changes
// (the queue's length or top priority, or the number of free slots), for as
// long as the orphan keeps running.
//
// Policies are pure decisions over a read-only view: they must not call into
// the scheduler.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>

#include "demandflight/engine/artifact_key.h"
#include "demandflight/engine/ids.h"

namespace dfl {

enum class OrphanDecision : std::uint8_t {
  abort,     // Stop the transfer now; the task ends `aborted`.
  complete,  // Keep going below every real priority; install; tell nobody.
  // Stop now, but keep the bytes received: the next task of this key resumes
  // after them instead of starting over (Chromium's HTTP cache keeps truncated
  // entries the same way). Kept partials share SchedulerConfig::partial_bytes,
  // oldest dropped first; with nothing received it is the same as abort.
  keep_partial,
};
// "abort", "complete", "keep_partial" (as results, decision logs and Python
// name them).
std::string_view to_string(OrphanDecision decision);

struct OrphanView {
  double now_s = 0;
  const ArtifactKey* key = nullptr;
  // The orphaned task: a policy that keeps state per orphan keys it by this
  // (in the independent model several tasks of one key may be orphans).
  TaskId task;
  std::uint64_t size_bytes = 0;       // Expected size; 0 when unknown.
  std::uint64_t bytes_done = 0;       // Resume offset + bytes of this attempt.
  std::uint64_t bytes_remaining = 0;  // size - done, 0 when size unknown.
  double elapsed_s = 0;               // Since this attempt started.
  double throughput_Bps = 0;          // This attempt's average so far.
  std::uint32_t queued_tasks = 0;     // Tasks waiting for a slot.
  std::uint64_t queued_bytes = 0;     // Their expected sizes, summed.
  std::optional<Priority> queued_top_priority;
  std::uint32_t free_slots = 0;  // Global transfer slots free.
  bool first_decision = true;    // False when re-asked on pressure change.
  // The key's request history, for policies whose uses_key_history() is true
  // (SchedulerConfig::key_history_limit keys are remembered): subscribes so far, time since the
  // last one, and the gap between the last two (nullopt with fewer than two).
  std::uint32_t key_demands = 0;
  double since_last_demand_s = 0;
  std::optional<double> previous_gap_s;
  // The installed-artifact index: its capacity and what is in it.
  std::uint64_t cache_capacity_bytes = 0;
  std::uint64_t cache_used_bytes = 0;
  // Kept partials (keep_partial): their budget and what is in it.
  std::uint64_t partial_capacity_bytes = 0;
  std::uint64_t partial_used_bytes = 0;
};

class OrphanPolicy {
 public:
  virtual ~OrphanPolicy() = default;
  virtual OrphanDecision decide(const OrphanView& view) = 0;
  virtual std::string_view name() const = 0;
  // Whether decide() reads the key's request history (key_demands,
  // since_last_demand_s, previous_gap_s). The engine keeps that history only
  // for policies that do: it costs a hash-map update per subscribe.
  virtual bool uses_key_history() const { return false; }
  // Called for every subscribe (before the cache is looked at) when
  // uses_key_history() is true, so that a policy can learn online what
  // happens to keys after its decisions. Must not call into the scheduler.
  virtual void observe_request(const ArtifactKey& /*key*/, double /*now_s*/) {}
  // Called right after decide() answered `complete`: a virtual time at which
  // to be asked again about this orphan (a linger's end, a break-even point)
  // though slot pressure has not changed; nullopt, or a time not after
  // view.now_s (or not finite), asks for none. The latest answer replaces an earlier one;
  // the engine forgets it when the orphan's transfer ends or a demand
  // re-attaches. Must not call into the scheduler.
  virtual std::optional<double> ask_again_at_s(const OrphanView& /*view*/) {
    return std::nullopt;
  }
};

}  // namespace dfl
