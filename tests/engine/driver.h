// Driver: a fake runtime for engine tests. It plays the part of sim/ or
// backend/: calls the scheduler with explicit times, drains the outbox after
// every call, records what the engine asked for, and runs user callbacks for
// deliveries outside the engine call (they may call back into the scheduler).
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "demandflight/engine/scheduler.h"

namespace dfl::testing {

inline ArtifactKey key(const std::string& resource, const std::string& revision = "r1",
                       const std::string& target = "pc", std::int64_t generation = 0) {
  return ArtifactKey{resource, revision, target, generation};
}

// Completes every orphan (the policies library's always-complete, which the
// engine's own tests cannot link: the engine builds alone).
class CompleteEveryOrphan final : public OrphanPolicy {
 public:
  OrphanDecision decide(const OrphanView&) override { return OrphanDecision::complete; }
  std::string_view name() const override { return "complete-every-orphan"; }
};

inline DemandOptions opts(OwnerId owner, Priority priority, double deadline_s = kNoDeadline) {
  DemandOptions o;
  o.owner = owner;
  o.priority = priority;
  o.deadline_s = deadline_s;
  o.size_bytes = 1000;
  return o;
}

struct Delivery {
  DemandHandle demand;
  DemandOutcome outcome;
  TaskId task;
  double at_s;
};

class Driver {
 public:
  explicit Driver(SchedulerConfig config = small_config(),
                  std::shared_ptr<OrphanPolicy> policy = nullptr)
      : scheduler(config, std::move(policy)) {}

  static SchedulerConfig small_config() {
    SchedulerConfig c;
    c.max_transfers = 2;
    c.max_per_origin = 2;
    return c;
  }
  // One transfer slot: a queued task waits for the running one.
  static SchedulerConfig one_slot() {
    SchedulerConfig c = small_config();
    c.max_transfers = 1;
    c.max_per_origin = 1;
    return c;
  }

  Scheduler scheduler;
  double now = 0;

  std::vector<StartTransfer> started;
  std::vector<AbortTransfer> aborted;
  std::vector<StartFinalize> finalizes;
  std::vector<Delivery> delivered;
  std::vector<EvictArtifact> evicted;
  std::vector<DropPartial> dropped_partials;
  std::vector<TaskPriorityChanged> priority_changes;
  std::vector<OrphanDecided> orphan_decisions;
  std::vector<DemandAttached> attached;
  std::vector<DemandPriorityChanged> demand_priority_changes;
  std::vector<TaskEnded> task_ends;
  std::map<DemandHandle, std::function<void(DemandOutcome)>> on_terminal;

  void at(double t) { now = t; }

  DemandHandle subscribe(const ArtifactKey& k, const DemandOptions& o) {
    const DemandHandle h = scheduler.subscribe(now, k, o);
    drain();
    return h;
  }
  void cancel(DemandHandle h) {
    scheduler.cancel(now, h);
    drain();
  }
  void set_priority(DemandHandle h, Priority p) {
    scheduler.set_priority(now, h, p);
    drain();
  }
  void end_owner(OwnerId owner, std::optional<OwnerGeneration> g = std::nullopt) {
    scheduler.end_owner(now, owner, g);
    drain();
  }
  void tick(double t) {
    now = t;
    scheduler.on_timer(now);
    drain();
  }

  TransferId transfer_of(const ArtifactKey& k) const {
    auto info = scheduler.task_for(k);
    EXPECT_TRUE(info && info->transfer) << "no transfer running for " << to_string(k);
    return info && info->transfer ? *info->transfer : TransferId{};
  }
  FinalizeId finalize_of(const ArtifactKey& k) const {
    auto info = scheduler.task_for(k);
    EXPECT_TRUE(info && info->finalize) << "no finalize running for " << to_string(k);
    return info && info->finalize ? *info->finalize : FinalizeId{};
  }

  void finish_transfer(TransferId id, TransferStatus status, std::uint64_t bytes = 1000) {
    scheduler.on_transfer_finished(now, id, status, bytes);
    drain();
  }
  void finish_transfer(const ArtifactKey& k, TransferStatus status = TransferStatus::ok,
                       std::uint64_t bytes = 1000) {
    finish_transfer(transfer_of(k), status, bytes);
  }
  void finish_finalize(FinalizeId id, FinalizeStatus status) {
    scheduler.on_finalize_finished(now, id, status);
    drain();
  }
  void finish_finalize(const ArtifactKey& k, FinalizeStatus status = FinalizeStatus::installed) {
    finish_finalize(finalize_of(k), status);
  }
  // Transfer ok, then verify + install ok.
  void complete(const ArtifactKey& k) {
    finish_transfer(k);
    finish_finalize(k);
  }

  std::vector<DemandOutcome> outcomes(DemandHandle h) const {
    std::vector<DemandOutcome> out;
    for (const auto& d : delivered) {
      if (d.demand == h) out.push_back(d.outcome);
    }
    return out;
  }
  // The one terminal of `h`, or nullopt while it has none. Fails the test if
  // there is more than one.
  std::optional<DemandOutcome> outcome(DemandHandle h) const {
    const auto all = outcomes(h);
    EXPECT_LE(all.size(), 1u) << "demand received more than one terminal";
    if (all.empty()) return std::nullopt;
    return all.front();
  }
  std::size_t transfers_of(const ArtifactKey& k) const {
    std::size_t n = 0;
    for (const auto& s : started)
      n += s.key == k;
    return n;
  }
  std::optional<Priority> priority_of(const ArtifactKey& k) const {
    auto info = scheduler.task_for(k);
    return info ? info->effective_priority : std::nullopt;
  }
  std::optional<TaskState> state_of(const ArtifactKey& k) const {
    auto info = scheduler.task_for(k);
    if (!info) return std::nullopt;
    return info->state;
  }

  void drain() {
    std::vector<Command> commands;
    scheduler.take_commands(commands);
    for (auto& command : commands) {
      dispatch(command, [this](auto& c) { record(c); });
    }
  }

 private:
  void record(StartTransfer& c) { started.push_back(c); }
  void record(AbortTransfer& c) { aborted.push_back(c); }
  void record(StartFinalize& c) { finalizes.push_back(c); }
  void record(EvictArtifact& c) { evicted.push_back(c); }
  void record(DropPartial& c) { dropped_partials.push_back(c); }
  void record(TaskCreated&) {}
  void record(DemandAttached& c) { attached.push_back(c); }
  void record(DemandPriorityChanged& c) { demand_priority_changes.push_back(c); }
  void record(TaskPriorityChanged& c) { priority_changes.push_back(c); }
  void record(OrphanDecided& c) { orphan_decisions.push_back(c); }
  void record(TaskEnded& c) { task_ends.push_back(c); }
  void record(Deliver& c) {
    delivered.push_back(Delivery{c.demand, c.outcome, c.task, now});
    auto it = on_terminal.find(c.demand);
    if (it != on_terminal.end()) {
      auto callback = std::move(it->second);
      on_terminal.erase(it);
      callback(c.outcome);  // Outside the engine call: it may re-enter.
    }
  }
};

}  // namespace dfl::testing
