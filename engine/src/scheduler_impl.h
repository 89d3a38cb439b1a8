// Scheduler::Impl: the engine's entry points and the flow of demands and
// tasks through them. Its parts are in files of their own (engine/src):
// the task state machine (task_state_machine.h), the three models' rules
// (model_rules.h), demands and owners (demands.h), tasks (task.h), the
// priority histogram (priority_histogram.h), storage (slab.h), timers
// (timers.h), kept partials (kept_partials.h), the key history
// (key_history.h), backoff (backoff.h), operation ids (op_ids.h), the queue
// (task_queue.h), and the invariant check (invariants.cpp).
//
// Storage is chosen so that the common operations cost O(1) or O(log queue):
// - demands and tasks live in slabs (vectors with free lists) and refer to each
//   other by index; a demand handle carries the slot's generation, so a stale
//   handle is detected without any lookup;
// - a task's active demands form an intrusive doubly linked list, and a small
//   histogram of their priorities gives the max without a scan;
// - each origin has its own queue (task_queue.h: O(1) for tasks that enter
//   in first-enqueue order), so a saturated origin never blocks the tasks of
//   another (no head-of-line blocking) and picking the next task is O(origins);
// - deadlines and retry timers share one ordered timer set.
// The three models differ only where a rule of model_rules.h is asked.
#pragma once

#include "demandflight/engine/scheduler.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <bit>
#include <limits>
#include <map>
#include <set>
#include <unordered_map>

#include "demandflight/engine/detail/hash_slots.h"
#include "demandflight/engine/installed_index.h"
#include "backoff.h"
#include "demands.h"
#include "engine_assert.h"
#include "kept_partials.h"
#include "model_rules.h"
#include "key_history.h"
#include "op_ids.h"
#include "priority_histogram.h"
#include "slab.h"
#include "task.h"
#include "task_queue.h"
#include "task_state_machine.h"
#include "timers.h"

namespace dfl {

using namespace dfl::detail;  // The engine's parts: this header is the engine's own.

class Scheduler::Impl {
 public:
  Impl(SchedulerConfig config, std::shared_ptr<OrphanPolicy> policy)
      : config_(config),
        rules_(config.model),
        identity_{rules_.keys_by_resource},
        policy_(std::move(policy)),
        key_equal_(identity_.equal()),
        installed_(config.cache_bytes, identity_) {
    DFL_ASSERT(config_.max_transfers > 0, "max_transfers must be at least 1");
    DFL_ASSERT(config_.max_per_origin > 0, "max_per_origin must be at least 1");
    DFL_ASSERT(config_.retry.max_attempts > 0, "retry.max_attempts must be at least 1");
    policy_observes_ = policy_ != nullptr && policy_->uses_key_history();
    track_history_ = policy_observes_ && config_.key_history_limit > 0;
  }

  // --- Users ---------------------------------------------------------------

  std::size_t key_hash(const ArtifactKey& key) const { return installed_.hash(key); }

  // `shared`, if not null, is a KeyRef to `key` that a new task may share.
  DemandHandle subscribe(double now, const ArtifactKey& key, const KeyRef* shared,
                         std::size_t key_hash, const DemandOptions& options) {
    advance(now);
    ++stats_.demands_subscribed;
    DFL_ASSERT(!origins_problem(options.origin, options.mirrors, config_.max_origins),
               "the subscribe's origins break origins_problem()");
    DFL_ASSERT(demands_.live() < config_.max_live_demands, "too many live demands");

    const std::uint32_t d = demands_.acquire();
    Demand& demand = demands_[d];
    demand.live = true;
    demand.owner = options.owner;
    demand.owner_generation = options.owner_generation;
    demand.priority = options.priority;
    demand.deadline_s = options.deadline_s;
    const DemandHandle handle{d, demand.generation};

    OwnerState& owner = owner_for(options.owner);
    link_owner(d, owner);

    // Immediate terminals, each still delivered through the outbox.
    // Model rule: the callbacks model knows neither owner generations nor deadlines.
    const bool legacy = !rules_.knows_owners_and_deadlines;
    // The key is hashed at most once per subscribe (by the caller, which may
    // have done it once for many); the index and the task map share it.
    // Every subscribe counts as a request of the key, refused ones too.
    note_request(key, key_hash);
    if (!legacy && owner.ended_through && options.owner_generation <= *owner.ended_through) {
      end_demand(d, DemandOutcome::owner_ended);
    } else if (!legacy && options.deadline_s <= now) {
      end_demand(d, DemandOutcome::timed_out);
    } else {
      if (installed_.touch(key, key_hash)) {
        ++stats_.cache_hits;
        end_demand(d, DemandOutcome::succeeded);
      } else {
        attach(d, key, shared, key_hash, options);
      }
    }
    settle();
    return handle;
  }

  void cancel(double now, DemandHandle handle) {
    advance(now);
    const std::uint32_t d = resolve(handle);
    if (d == kNone) {
      ++stats_.stale_calls_ignored;
      ++stats_.stale_cancels_ignored;
    } else if (rules_.cancel_ends_whole_task) {
      // Model rule: the legacy cancel looks the task up and ends all of it.
      cancel_whole_task(demands_[d].task, d, DemandOutcome::cancelled);
    } else {
      end_demand(d, DemandOutcome::cancelled);
    }
    settle();
  }

  void set_priority(double now, DemandHandle handle, Priority priority) {
    advance(now);
    const std::uint32_t d = resolve(handle);
    if (d == kNone) {
      ++stats_.stale_calls_ignored;
      ++stats_.stale_priority_changes_ignored;
    } else {
      Demand& demand = demands_[d];
      Task& task = tasks_[demand.task];
      if (priority != demand.priority) {
        task.priorities.remove(demand.priority);
        task.priorities.add(priority);
        task.max_ever = std::max(task.max_ever, priority);
        demand.priority = priority;
        outbox_.emplace_back(DemandPriorityChanged{handle, task.id, priority});
        update_priority(demand.task);
      }
    }
    settle();
  }

  void hold_starts(double now, std::optional<Priority> at_or_below) {
    advance(now);
    hold_at_or_below_ = at_or_below ? std::optional<std::int64_t>(*at_or_below) : std::nullopt;
    settle();
  }

  void end_owner(double now, OwnerId owner_id, std::optional<OwnerGeneration> generation) {
    advance(now);
    auto it = owners_.find(owner_id);
    // An explicit generation is remembered even for an owner with no demands
    // yet, so that a late subscribe of that generation is still refused.
    if (it == owners_.end() && generation && rules_.knows_owners_and_deadlines) {
      it = owners_.emplace(owner_id, OwnerState{}).first;
    }
    if (it != owners_.end()) {
      OwnerState& owner = it->second;
      if (owner.idle && generation && rules_.knows_owners_and_deadlines) {
        owner.idle = false;  // It has a watermark to remember now.
        --idle_owners_;
      }
      // Without a generation the owner is gone whole: every generation ends,
      // and no watermark is kept (the owner id may be used again).
      const OwnerGeneration through =
          generation.value_or(std::numeric_limits<OwnerGeneration>::max());
      if (rules_.cancel_ends_whole_task) {
        // Model rule: the legacy scheduler has no owners. The owner's teardown
        // cancels each of its requests, and each cancel ends a whole task
        // (except while finalizing, where the legacy cancel is refused).
        std::vector<DemandHandle> handles;
        for (std::uint32_t d = owner.head; d != kNone; d = demands_[d].next_in_owner) {
          if (demands_[d].owner_generation <= through) handles.push_back(handle_of(d));
        }
        for (const DemandHandle handle : handles) {
          const std::uint32_t d = resolve(handle);  // An earlier cancel may have ended it.
          if (d != kNone) cancel_whole_task(demands_[d].task, d, DemandOutcome::owner_ended);
        }
      } else {
        if (generation) {
          owner.ended_through = std::max(owner.ended_through.value_or(through), through);
        }
        std::uint32_t d = owner.head;
        while (d != kNone) {
          const std::uint32_t next = demands_[d].next_in_owner;
          if (demands_[d].owner_generation <= through) end_demand(d, DemandOutcome::owner_ended);
          d = next;
        }
      }
      forget_owner_if_idle(owner_id);
    }
    settle();
  }

  // --- Runtime events ------------------------------------------------------

  void note_installed(double now, const ArtifactKey& key, std::uint64_t size_bytes) {
    advance(now);
    evicted_.clear();
    installed_.insert(KeyRef(key), installed_.hash(key), size_bytes, evicted_);
    for (auto& entry : evicted_) {
      outbox_.emplace_back(EvictArtifact{std::move(entry.key), entry.size_bytes});
    }
    drop_partial(key);
    settle();
  }

  void forget_installed(double now, const ArtifactKey& key) {
    advance(now);
    installed_.erase(key);
    settle();
  }

  void set_progress_probe(std::function<std::uint64_t(TransferId)> probe) {
    progress_probe_ = std::move(probe);
  }

  void on_transfer_progress(double now, TransferId transfer, std::uint64_t bytes) {
    advance(now);
    const std::uint32_t t = resolve_op(transfer.value, TaskState::transferring);
    if (t != kNone) tasks_[t].attempt_bytes = bytes;
    settle();
  }

  void on_transfer_finished(double now, TransferId transfer, TransferStatus status,
                            std::uint64_t bytes, std::optional<double> retry_after_s) {
    advance(now);
    const std::uint32_t t = resolve_op(transfer.value, TaskState::transferring);
    if (t != kNone) {
      release_slot(t);
      Task& task = tasks_[t];
      task.attempt_bytes = bytes;
      task.bytes_transferred += bytes;
      switch (status) {
        case TransferStatus::ok:
          origins_[task.origin].breaker.succeeded();
          task.resume_offset_bytes += bytes;
          start_finalize(t);
          break;
        case TransferStatus::retryable_error:
          // The bytes that arrived stay: the next attempt resumes after them.
          task.resume_offset_bytes += bytes;
          origin_failed(task.origin);
          retry_or_fail(t, retry_after_s.value_or(0));
          break;
        case TransferStatus::permanent_error:
          if (task.origin_list != 0) {
            // This origin will not serve it; another mirror may.
            task.excluded_origins |= 1u << task.origin_at;
            retry_or_fail(t, 0, /*excluded_now=*/true);
          } else {
            finish_task(t, TaskOutcome::failed, DemandOutcome::failed);
          }
          break;
      }
    }
    settle();
  }

  void on_finalize_finished(double now, FinalizeId finalize, FinalizeStatus status) {
    advance(now);
    const std::uint32_t t = resolve_op(finalize.value, TaskState::finalizing);
    if (t != kNone) {
      tasks_[t].op_live = false;
      Task& task = tasks_[t];
      switch (status) {
        case FinalizeStatus::installed: {
          ++stats_.installs;
          evicted_.clear();
          installed_.insert(task.key, task.key_hash, task.size_bytes, evicted_);
          for (auto& entry : evicted_) {
            outbox_.emplace_back(EvictArtifact{std::move(entry.key), entry.size_bytes});
          }
          drop_partial(*task.key);  // Another task of the key kept one (independent model).
          finish_task(t, TaskOutcome::installed, DemandOutcome::succeeded);
          break;
        }
        case FinalizeStatus::verify_failed:
          // The bytes were wrong: nothing of them can be resumed from.
          task.resume_offset_bytes = 0;
          origin_failed(task.origin);
          retry_or_fail(t);
          break;
        case FinalizeStatus::error:
          finish_task(t, TaskOutcome::failed, DemandOutcome::failed);
          break;
      }
    }
    settle();
  }

  void on_timer(double now) {
    advance(now);
    settle();
  }

  std::optional<double> next_wakeup_s() const {
    return timers_.next_s();
  }

  // --- Outbox and introspection -------------------------------------------

  void take_commands(std::vector<Command>& out) {
    out.clear();
    out.swap(outbox_);
  }
  bool has_commands() const { return !outbox_.empty(); }

  std::optional<TaskInfo> task_for(const ArtifactKey& key) const {
    const std::uint32_t t = find_task(key, installed_.hash(key));
    if (t == kNone) return std::nullopt;
    return info(t);
  }

  std::optional<DemandInfo> demand(DemandHandle handle) const {
    const std::uint32_t d = resolve(handle);
    if (d == kNone) return std::nullopt;
    const Demand& demand = demands_[d];
    return DemandInfo{tasks_[demand.task].id, demand.owner, demand.owner_generation,
                      demand.priority, demand.deadline_s};
  }

  std::optional<TaskInfo> task_of(DemandHandle handle) const {
    const std::uint32_t d = resolve(handle);
    if (d == kNone || demands_[d].task == kNone) return std::nullopt;
    return info(demands_[d].task);
  }

  std::vector<TaskInfo> tasks() const {
    std::vector<TaskInfo> out;
    for (std::uint32_t t = 0; t < tasks_.capacity(); ++t) {
      if (tasks_[t].id.value != 0) out.push_back(info(t));
    }
    std::sort(out.begin(), out.end(),
              [](const TaskInfo& a, const TaskInfo& b) { return a.id < b.id; });
    return out;
  }

  std::size_t live_tasks() const { return tasks_.live(); }
  std::size_t live_demands() const { return demands_.live(); }
  std::size_t queued_tasks() const { return queue_.size(); }
  std::size_t remembered_keys() const { return history_.size(); }
  std::optional<std::uint64_t> kept_partial(const ArtifactKey& key) const {
    return partials_.bytes(key);
  }
  std::uint64_t kept_partial_bytes() const { return partials_.used_bytes(); }
  std::uint32_t running_transfers() const { return running_; }
  const SchedulerStats& stats() const { return stats_; }
  const SchedulerConfig& config() const { return config_; }
  double now() const { return now_; }

  void check_invariants() const;

 private:
  // --- Time ----------------------------------------------------------------

  // Every entry point starts here: time never goes backwards, and whatever
  // was due by `now` (deadlines, retry timers) happens before the call itself.
  void advance(double now) {
    DFL_ASSERT(!std::isnan(now), "now is NaN");
    DFL_ASSERT(now >= now_, "time went backwards");
    now_ = now;
    while (const std::optional<Timer> due = timers_.pop_due(now)) {
      const Timer& timer = *due;
      if (timer.kind == TimerKind::deadline) {
        Demand& demand = demands_[timer.index];
        DFL_ASSERT(demand.live && demand.generation == timer.identity, "stale deadline timer");
        demand.timer_seq = 0;
        end_demand(timer.index, DemandOutcome::timed_out);
      } else if (timer.kind == TimerKind::orphan_reask) {
        Task& task = tasks_[timer.index];
        DFL_ASSERT(task.id.value == timer.identity && task.orphan() &&
                       task.state() == TaskState::transferring,
                   "stale orphan re-ask timer");
        task.timer_seq = 0;
        decide_orphan(timer.index, /*first_decision=*/false);
      } else {
        Task& task = tasks_[timer.index];
        DFL_ASSERT(task.id.value == timer.identity && task.state() == TaskState::backoff,
                   "stale retry timer");
        task.timer_seq = 0;
        enter(timer.index, TaskEvent::retry_due);
        enqueue(timer.index);
      }
    }
  }

  std::uint64_t arm_timer(double at_s, TimerKind kind, std::uint32_t index,
                          std::uint64_t identity) {
    return timers_.arm(at_s, kind, index, identity);
  }
  void disarm_timer(double at_s, std::uint64_t& seq) { timers_.disarm(at_s, seq); }

  // --- Demands -------------------------------------------------------------

  std::uint32_t resolve(DemandHandle handle) const {
    if (handle.slot >= demands_.capacity()) return kNone;
    const Demand& demand = demands_[handle.slot];
    if (!demand.live || demand.generation != handle.generation) return kNone;
    return handle.slot;
  }

  DemandHandle handle_of(std::uint32_t d) const { return {d, demands_[d].generation}; }

  // Joins the live task of the demand's key, or creates one.
  void attach(std::uint32_t d, const ArtifactKey& key, const KeyRef* shared, std::size_t key_hash,
              const DemandOptions& options) {
    // Model rule: the independent model never shares a task. It shares the
    // key, though: a new task of a key that a live task has takes its KeyRef
    // (keys are immutable), rather than a copy of the strings.
    std::uint32_t t = find_task(key, key_hash);
    if (t == kNone || !rules_.shares_tasks) {
      const KeyRef* same = t != kNone ? &tasks_[t].key : shared;
      t = create_task(same != nullptr ? *same : KeyRef(key), key_hash, options);
    }

    Demand& demand = demands_[d];
    Task& task = tasks_[t];
    demand.task = t;
    push_front<&Demand::prev_in_task, &Demand::next_in_task>(d, task.demand_head);
    ++task.active_demands;
    task.priorities.add(demand.priority);
    task.max_ever = std::max(task.max_ever, demand.priority);
    // A new demand re-attaches to an orphan that is still completing.
    if (task.orphan()) {
      enter(t, TaskEvent::reattached);
      forget_orphan(t);
    }
    if (rules_.knows_owners_and_deadlines && demand.deadline_s != kNoDeadline) {
      demand.timer_seq = arm_timer(demand.deadline_s, TimerKind::deadline, d, demand.generation);
    }
    outbox_.emplace_back(DemandAttached{handle_of(d), task.id, demand.priority});
    update_priority(t);
  }

  // Ends one demand with `outcome`: delivers it, unlinks it, frees its slot,
  // and lets its task react to the loss (drop, orphan, lower priority).
  void end_demand(std::uint32_t d, DemandOutcome outcome) {
    Demand& demand = demands_[d];
    const std::uint32_t t = demand.task;
    release_demand(d, outcome);
    if (t != kNone) on_demand_left(t);
  }

  // Delivers and frees a demand without touching its task's bookkeeping
  // beyond the demand list (the caller handles the task).
  void release_demand(std::uint32_t d, DemandOutcome outcome) {
    Demand& demand = demands_[d];
    DFL_ASSERT(demand.live, "ending a demand twice");
    const TaskId task_id = demand.task != kNone ? tasks_[demand.task].id : TaskId{};
    outbox_.emplace_back(Deliver{handle_of(d), outcome, task_id});
    disarm_timer(demand.deadline_s, demand.timer_seq);
    unlink_task(d);
    OwnerState& owner = *demand.owner_state;
    unlink_owner(d, owner);
    demand.live = false;
    demand.task = kNone;
    demand.owner_state = nullptr;
    ++demand.generation;
    demands_.release(d);
    if (owner.active == 0 && !owner.ended_through && !owner.idle) mark_idle(owner);
  }

  OwnerState& owner_for(OwnerId id) {
    OwnerState& owner = owners_[id];
    if (owner.idle) {
      owner.idle = false;
      --idle_owners_;
    }
    return owner;
  }

  // Bounds the idle entries: past the limit they are all swept at once, so the
  // cost is amortised O(1) per demand. Invalidates references to idle owners.
  void mark_idle(OwnerState& owner) {
    owner.idle = true;
    if (++idle_owners_ <= kIdleOwnersMax) return;
    std::erase_if(owners_, [](const auto& entry) { return entry.second.idle; });
    idle_owners_ = 0;
  }

  // A demand sits on two intrusive doubly linked lists, its owner's and its
  // task's; `Prev`/`Next` pick which one.
  template <std::uint32_t Demand::*Prev, std::uint32_t Demand::*Next>
  void push_front(std::uint32_t d, std::uint32_t& head) {
    demands_[d].*Prev = kNone;
    demands_[d].*Next = head;
    if (head != kNone) demands_[head].*Prev = d;
    head = d;
  }

  template <std::uint32_t Demand::*Prev, std::uint32_t Demand::*Next>
  void unlink(std::uint32_t d, std::uint32_t& head) {
    Demand& demand = demands_[d];
    if (demand.*Prev != kNone) {
      demands_[demand.*Prev].*Next = demand.*Next;
    } else {
      head = demand.*Next;
    }
    if (demand.*Next != kNone) demands_[demand.*Next].*Prev = demand.*Prev;
    demand.*Prev = demand.*Next = kNone;
  }

  void link_owner(std::uint32_t d, OwnerState& owner) {
    demands_[d].owner_state = &owner;
    push_front<&Demand::prev_in_owner, &Demand::next_in_owner>(d, owner.head);
    ++owner.active;
  }

  void unlink_owner(std::uint32_t d, OwnerState& owner) {
    unlink<&Demand::prev_in_owner, &Demand::next_in_owner>(d, owner.head);
    --owner.active;
  }

  void unlink_task(std::uint32_t d) {
    Demand& demand = demands_[d];
    if (demand.task == kNone) return;
    Task& task = tasks_[demand.task];
    unlink<&Demand::prev_in_task, &Demand::next_in_task>(d, task.demand_head);
    --task.active_demands;
    task.priorities.remove(demand.priority);
  }

  void forget_owner_if_idle(OwnerId owner_id) {
    auto it = owners_.find(owner_id);
    if (it != owners_.end() && it->second.idle) {
      owners_.erase(it);
      --idle_owners_;
    }
  }

  // --- Tasks ---------------------------------------------------------------

  // The live task for `key` (the newest, in the independent model), or kNone.
  // Compares keys only on a hash match.
  std::uint32_t find_task(const ArtifactKey& key, std::size_t key_hash) const {
    const std::size_t at = key_heads_.find(key_hash, any_slot);
    if (at == detail::HashSlots::kNotFound) return kNone;
    for (std::uint32_t t = key_heads_.slot_at(at); t != kNone; t = tasks_[t].key_next) {
      const ArtifactKey* held = tasks_[t].key.get();
      if (held == &key || key_equal_(*held, key)) return t;
    }
    return kNone;
  }

  std::uint32_t create_task(KeyRef key, std::size_t key_hash, const DemandOptions& options) {
    const std::uint32_t t = tasks_.acquire();
    Task& task = tasks_[t];
    task = Task{};
    task.key = std::move(key);
    task.key_hash = key_hash;
    task.id = TaskId{++last_task_id_};
    link_key(t);
    task.origin = options.origin;
    task.origin_list = origin_lists_.intern(options.origin, options.mirrors);
    for (OriginId o : origin_lists_.get(task.origin_list))
      origin(o);  // Make sure every origin's queue exists.
    if (task.origin_list != 0) {
      ++tasks_with_mirrors_;
      move_to_origin(task, choose_for(task, 0));
    }
    task.size_bytes = options.size_bytes;
    task.seq = ++enqueue_seq_;
    task.max_ever = options.priority;
    task.effective = options.priority;
    task.demanded = options.priority;  // Its creator attaches next.
    ++stats_.tasks_created;
    outbox_.emplace_back(TaskCreated{task.id});
    outbox_.emplace_back(TaskPriorityChanged{task.id, options.priority, options.priority});
    origin(task.origin);  // Make sure the origin's queue exists.
    insert_queued(t);
    return t;
  }

  OriginSlots& origin(OriginId id) {
    if (id >= origins_.size()) origins_.resize(id + 1);
    return origins_[id];
  }

  void insert_queued(std::uint32_t t) {
    Task& task = tasks_[t];
    queue_.push(t, task.origin, task.effective, task.seq);
    queued_bytes_ += task.size_bytes;
  }

  void remove_queued(std::uint32_t t) {
    queue_.remove(t);
    queued_bytes_ -= tasks_[t].size_bytes;
  }

  // The key's request history, for orphan policies.
  void note_request(const ArtifactKey& key, std::size_t key_hash) {
    if (!policy_observes_) return;
    policy_->observe_request(key, now_);
    if (track_history_) history_.note(key_hash, now_);
  }

  // Queued again after backoff: a new round, from the first origin the task
  // may ask (mirrors.h).
  void enqueue(std::uint32_t t) {
    Task& task = tasks_[t];
    if (task.origin_list != 0) move_to_origin(task, choose_for(task, 0));
    insert_queued(t);
  }

  // --- Mirrors (mirrors.h) ---------------------------------------------------

  std::uint32_t choose_for(const Task& task, std::uint32_t from) const {
    return choose_origin(origin_lists_.get(task.origin_list), from, task.excluded_origins, now_,
                         [this](OriginId o) -> const Breaker& { return origins_[o].breaker; });
  }

  // Points a task that is not queued at index `at` of its list.
  void move_to_origin(Task& task, std::uint32_t at) {
    const OriginId next = origin_lists_.get(task.origin_list)[at];
    if (next != task.origin && task.attempts > 0) ++stats_.failovers;
    task.origin_at = static_cast<std::uint8_t>(at);
    task.origin = next;
  }

  // A retryable failure at origin `o` (of any task); a breaker that opens
  // sends the tasks queued for it to their next choice.
  void origin_failed(OriginId o) {
    if (!origins_[o].breaker.failed(now_, config_.breaker)) return;
    ++stats_.breaker_opens;
    if (tasks_with_mirrors_ == 0) return;
    for (std::uint32_t t = 0; t < tasks_.capacity(); ++t) {
      Task& task = tasks_[t];
      if (task.id.value == 0 || task.origin != o || task.origin_list == 0 ||
          task.state() != TaskState::queued)
        continue;
      const std::uint32_t at = choose_for(task, 0);
      if (at == task.origin_at) continue;
      remove_queued(t);
      move_to_origin(task, at);
      insert_queued(t);
    }
  }

  // The model's priority rule, applied after every change of a task's demands:
  // `demanded` is the highest priority its active demands ask for.
  std::int64_t compute_effective(const Task& task, std::int64_t demanded) const {
    if (task.active_demands == 0) return kOrphanLevel;
    // Model rule: the legacy priority is the maximum ever seen.
    if (rules_.priority_never_falls) return task.max_ever;
    return demanded;
  }

  void update_priority(std::uint32_t t) {
    Task& task = tasks_[t];
    const std::int64_t demanded =
        task.active_demands == 0 ? kOrphanLevel : std::int64_t{*task.priorities.max()};
    const std::int64_t effective = compute_effective(task, demanded);
    if (effective == task.effective && demanded == task.demanded) return;
    if (effective != task.effective && task.state() == TaskState::queued) {
      remove_queued(t);
      task.effective = effective;
      insert_queued(t);
    } else {
      task.effective = effective;
    }
    task.demanded = demanded;
    outbox_.emplace_back(
        TaskPriorityChanged{task.id, public_priority(effective), public_priority(demanded)});
  }

  // A task lost one active demand.
  void on_demand_left(std::uint32_t t) {
    Task& task = tasks_[t];
    if (task.active_demands > 0) {
      update_priority(t);
      return;
    }
    switch (task.state()) {
      case TaskState::queued:
        remove_queued(t);
        release_task(t, TaskOutcome::dropped);
        return;
      case TaskState::backoff:
        disarm_timer(task.retry_at_s, task.timer_seq);
        release_task(t, TaskOutcome::dropped);
        return;
      case TaskState::transferring:
        enter(t, TaskEvent::orphaned);
        update_priority(t);
        decide_orphan(t, /*first_decision=*/true);
        return;
      case TaskState::finalizing:
        // Verify + install completes; nobody is told.
        enter(t, TaskEvent::orphaned);
        update_priority(t);
        return;
    }
    DFL_UNREACHABLE();
  }

  // The callbacks model's cancel: the whole task of that resource ends, every
  // waiter is told `cancelled` (the requester gets `requester_outcome`). While
  // finalizing the legacy scheduler cannot cancel at all.
  void cancel_whole_task(std::uint32_t t, std::uint32_t requester,
                         DemandOutcome requester_outcome) {
    Task& task = tasks_[t];
    TaskOutcome outcome = TaskOutcome::dropped;
    switch (task.state()) {
      case TaskState::finalizing:
        ++stats_.cancels_refused;
        return;
      case TaskState::queued:
        remove_queued(t);
        break;
      case TaskState::backoff:
        disarm_timer(task.retry_at_s, task.timer_seq);
        break;
      case TaskState::transferring:
        release_slot(t);
        outbox_.emplace_back(AbortTransfer{task.id, TransferId{task.op}});
        outcome = TaskOutcome::aborted;
        break;
    }
    release_demand(requester, requester_outcome);
    while (task.demand_head != kNone)
      release_demand(task.demand_head, DemandOutcome::cancelled);
    release_task(t, outcome);
  }

  void decide_orphan(std::uint32_t t, bool first_decision) {
    Task& task = tasks_[t];
    if (progress_probe_) {
      task.attempt_bytes = std::max(task.attempt_bytes, progress_probe_(TransferId{task.op}));
    }
    OrphanView view;
    view.now_s = now_;
    view.key = task.key.get();
    view.task = task.id;
    view.size_bytes = task.size_bytes;
    view.bytes_done = task.resume_offset_bytes + task.attempt_bytes;
    view.bytes_remaining =
        task.size_bytes > view.bytes_done ? task.size_bytes - view.bytes_done : 0;
    view.elapsed_s = now_ - task.attempt_started_s;
    view.throughput_Bps =
        view.elapsed_s > 0 ? static_cast<double>(task.attempt_bytes) / view.elapsed_s : 0.0;
    view.queued_tasks = static_cast<std::uint32_t>(queue_.size());
    view.queued_bytes = queued_bytes_;
    view.queued_top_priority = queued_top();
    view.free_slots = config_.max_transfers - running_;
    if (const KeyHistory::Entry* h = history_.find(task.key_hash)) {
      view.key_demands = h->demands;
      view.since_last_demand_s = now_ - h->last_s;
      if (h->previous_s >= 0) view.previous_gap_s = h->last_s - h->previous_s;
    }
    view.cache_capacity_bytes = installed_.capacity_bytes();
    view.cache_used_bytes = installed_.used_bytes();
    view.partial_capacity_bytes = config_.partial_bytes;
    view.partial_used_bytes = partials_.used_bytes();
    view.first_decision = first_decision;
    task.asked_pressure = pressure();

    // Without a policy, every orphan is aborted.
    const OrphanDecision decision = policy_ ? policy_->decide(view) : OrphanDecision::abort;
    outbox_.emplace_back(OrphanDecided{task.id, decision, first_decision, view.bytes_done});
    if (decision == OrphanDecision::complete) {
      ++stats_.orphan_completes;
      if (first_decision) orphans_.push_back(t);
      // Asked to be asked again at a time of its own: that replaces any earlier one.
      disarm_timer(task.retry_at_s, task.timer_seq);
      if (const std::optional<double> again = policy_->ask_again_at_s(view);
          again && *again > now_ && std::isfinite(*again)) {
        task.retry_at_s = *again;
        task.timer_seq = arm_timer(*again, TimerKind::orphan_reask, t, task.id.value);
      }
      return;
    }
    ++stats_.orphan_aborts;
    release_slot(t);  // Also forgets it as an orphan.
    // Kept before the abort is emitted: a DropPartial of an older partial of
    // the same key must reach the runtime before the new bytes are handed over.
    // A runtime may report more than the expected size; never keep past it.
    const std::uint64_t keepable =
        task.size_bytes > 0 ? std::min(view.bytes_done, task.size_bytes) : view.bytes_done;
    const std::uint64_t kept =
        decision == OrphanDecision::keep_partial ? keep_partial(task.key, keepable) : 0;
    outbox_.emplace_back(AbortTransfer{task.id, TransferId{task.op}, kept > 0, kept});
    release_task(t, TaskOutcome::aborted);
  }

  // --- Kept partials -------------------------------------------------------

  // Remembers `bytes` received of `key` for the next task of the key; returns
  // what is kept (0: nothing, the budget is off or too small, or no bytes).
  std::uint64_t keep_partial(const KeyRef& key, std::uint64_t bytes) {
    if (bytes == 0 || bytes > config_.partial_bytes || config_.max_partials == 0) return 0;
    // Installed meanwhile (another task of the key, independent model): no use.
    if (installed_.contains(*key)) return 0;
    drop_partial(*key);  // An older, shorter partial of the key: superseded.
    while (partials_.used_bytes() + bytes > config_.partial_bytes ||
           partials_.size() >= config_.max_partials) {
      drop_partial(*partials_.oldest());
    }
    partials_.keep(key, bytes);
    ++stats_.partials_kept;
    return bytes;
  }

  // Forgets the kept partial of `key`, if any, and lets the runtime delete it.
  void drop_partial(const ArtifactKey& key) {
    std::optional<Partial> partial = partials_.take(key);
    if (!partial) return;
    outbox_.emplace_back(DropPartial{std::move(partial->key), partial->bytes});
    ++stats_.partials_dropped;
  }

  // A new task of `key` takes over its kept partial: it resumes after it.
  std::uint64_t take_partial(const ArtifactKey& key) {
    const std::optional<Partial> partial = partials_.take(key);
    if (!partial) return 0;
    ++stats_.partials_resumed;
    return partial->bytes;
  }

  void forget_orphan(std::uint32_t t) {
    auto it = std::find(orphans_.begin(), orphans_.end(), t);
    if (it != orphans_.end()) orphans_.erase(it);
    Task& task = tasks_[t];
    disarm_timer(task.retry_at_s, task.timer_seq);  // Its re-ask, if one is armed.
  }

  std::optional<Priority> queued_top() const {
    const std::optional<std::int64_t> top = queue_.top_priority();
    if (!top) return std::nullopt;
    return public_priority(*top);
  }

  // A fingerprint of slot pressure: queue length, top queued priority, free
  // slots. Orphans are asked again when it changes.
  std::uint64_t pressure() const {
    const std::optional<Priority> top = queued_top();
    std::uint64_t h = queue_.size();
    h = h * 0x9E3779B97F4A7C15ull + (top ? static_cast<std::uint32_t>(*top) + 1ull : 0ull);
    h = h * 0x9E3779B97F4A7C15ull + (config_.max_transfers - running_);
    return h;
  }

  void start_transfer(std::uint32_t t) {
    Task& task = tasks_[t];
    remove_queued(t);
    enter(t, TaskEvent::slot_granted);
    ++task.attempts;
    // The first attempt takes over the key's kept partial, if there is one (a
    // queued task that is dropped before it starts leaves it kept).
    if (task.attempts == 1) task.resume_offset_bytes = take_partial(*task.key);
    task.attempt_bytes = 0;
    task.attempt_started_s = now_;
    task.op = next_op_id(t);
    ++running_;
    ++origins_[task.origin].running;
    ++stats_.transfers_started;
    outbox_.emplace_back(StartTransfer{task.id, TransferId{task.op}, task.key, task.origin,
                                       task.resume_offset_bytes, task.size_bytes, task.attempts,
                                       public_priority(task.effective)});
  }

  // The transfer ended or is being aborted: its slot is free and its id dead.
  void release_slot(std::uint32_t t) {
    Task& task = tasks_[t];
    DFL_ASSERT(task.state() == TaskState::transferring, "releasing a slot that is not held");
    task.op_live = false;
    --running_;
    --origins_[task.origin].running;
    if (task.orphan()) forget_orphan(t);
  }

  void start_finalize(std::uint32_t t) {
    Task& task = tasks_[t];
    enter(t, TaskEvent::body_received);
    task.op = next_op_id(t);
    ++stats_.finalizes_started;
    outbox_.emplace_back(StartFinalize{task.id, FinalizeId{task.op}, task.key, task.size_bytes});
  }

  // A retryable failure: back off and retry, or fail once attempts run out.
  // Nobody waits for an orphan, so an orphan that fails is dropped.
  // With mirrors, the next origin of the list is asked at once, until every
  // origin has failed in this round (mirrors.h).
  // `excluded_now`: the origin that failed was just excluded (a permanent
  // error); it does not count in the round.
  void retry_or_fail(std::uint32_t t, double at_least_s = 0, bool excluded_now = false) {
    Task& task = tasks_[t];
    const std::span<const OriginId> list = origin_lists_.get(task.origin_list);
    const std::uint32_t budget =
        std::max<std::uint32_t>(config_.retry.max_attempts, static_cast<std::uint32_t>(list.size()));
    const bool none_left = task.origin_list != 0 && choose_for(task, 0) == list.size();
    if (task.attempts >= budget || none_left) {
      finish_task(t, TaskOutcome::failed, DemandOutcome::failed);
      return;
    }
    if (task.active_demands == 0) {
      release_task(t, TaskOutcome::dropped);
      return;
    }
    if (task.origin_list != 0) {
      const auto allowed = static_cast<std::uint32_t>(
          list.size() - static_cast<std::size_t>(std::popcount(task.excluded_origins)));
      if (!excluded_now) ++task.round_failures;
      if (task.round_failures < allowed) {
        move_to_origin(task, choose_for(task, task.origin_at + 1u));
        task.timer_seq = 0;
        enter(t, TaskEvent::retry_now);
        insert_queued(t);
        return;
      }
      task.round_failures = 0;  // Every origin failed: back off, then start over.
    }
    // The server's Retry-After is honoured: retrying sooner only earns another 503/429.
    task.retry_at_s = now_ + std::max(detail::backoff_delay_s(config_.retry, config_.seed, task.id, task.attempts), at_least_s);
    if (task.retry_at_s <= now_) {
      // No backoff (retry base_s 0): queued again at once, as the timer's
      // firing would; a timer due now would outlive this call unfired.
      task.timer_seq = 0;
      enter(t, TaskEvent::retry_now);
      enqueue(t);
      return;
    }
    enter(t, TaskEvent::retry_later);
    task.timer_seq = arm_timer(task.retry_at_s, TimerKind::retry, t, task.id.value);
  }


  // Ends every active demand of the task with `demand_outcome`, then the task.
  void finish_task(std::uint32_t t, TaskOutcome outcome, DemandOutcome demand_outcome) {
    Task& task = tasks_[t];
    while (task.demand_head != kNone)
      release_demand(task.demand_head, demand_outcome);
    release_task(t, outcome);
  }

  // Every change of a task's phase: the state machine (task_state_machine.h)
  // says where `event` leads.
  void enter(std::uint32_t t, TaskEvent event) {
    Task& task = tasks_[t];
    const std::optional<TaskPhase> next = next_phase(task.phase, event);
    DFL_ASSERT(next.has_value(), "a task event its phase does not allow");
    task.phase = *next;
  }

  void release_task(std::uint32_t t, TaskOutcome outcome) {
    Task& task = tasks_[t];
    DFL_ASSERT(task_may_end(task.phase, outcome), "a task ending from a phase that cannot");
    DFL_ASSERT(task.active_demands == 0 && task.demand_head == kNone,
               "releasing a task that still has demands");
    if (task.effective != kOrphanLevel || task.demanded != kOrphanLevel) {
      outbox_.emplace_back(TaskPriorityChanged{task.id, std::nullopt, std::nullopt});
    }
    outbox_.emplace_back(TaskEnded{task.id, outcome, task.attempts, task.bytes_transferred});
    if (task.origin_list != 0) --tasks_with_mirrors_;
    task.op_live = false;
    erase_key(t);
    task.key = KeyRef{};  // A free slot pins no key.
    task.id = TaskId{};
    task.priorities.clear();
    tasks_.release(t);
  }

  // O(1) both ways, however many live tasks share a key hash: the independent
  // model can queue thousands for one popular key.
  void link_key(std::uint32_t t) {
    Task& task = tasks_[t];
    task.key_prev = kNone;
    task.key_next = kNone;
    const std::size_t at = key_heads_.find(task.key_hash, any_slot);
    if (at == detail::HashSlots::kNotFound) {
      key_heads_.insert(task.key_hash, t);
    } else {
      task.key_next = key_heads_.slot_at(at);
      tasks_[task.key_next].key_prev = t;
      key_heads_.set_slot_at(at, t);
    }
  }

  void erase_key(std::uint32_t t) {
    Task& task = tasks_[t];
    if (task.key_next != kNone) tasks_[task.key_next].key_prev = task.key_prev;
    if (task.key_prev != kNone) {
      tasks_[task.key_prev].key_next = task.key_next;
    } else {
      const std::size_t at = key_heads_.find(task.key_hash, any_slot);
      DFL_ASSERT(at != detail::HashSlots::kNotFound && key_heads_.slot_at(at) == t,
                 "task missing from the key map");
      if (task.key_next != kNone) {
        key_heads_.set_slot_at(at, task.key_next);
      } else {
        key_heads_.erase(at);
      }
    }
    task.key_prev = task.key_next = kNone;
  }

  std::uint64_t next_op_id(std::uint32_t t) {
    tasks_[t].op_live = true;
    return op_ids_.next(t);
  }
  static std::uint32_t slot_of_op(std::uint64_t op) { return OpIds::slot_of(op); }

  std::uint32_t resolve_op(std::uint64_t op, TaskState expected) {
    const std::uint32_t t = slot_of_op(op);
    if (t >= tasks_.capacity() || !tasks_[t].op_live || tasks_[t].op != op ||
        tasks_[t].state() != expected) {
      ++stats_.late_events_ignored;
      return kNone;
    }
    return t;
  }

  // --- After every call ----------------------------------------------------

  // Fills free slots in queue order, then re-asks orphans whose view of slot
  // pressure changed; an abort frees a slot, so repeat until nothing moves.
  void settle() {
    for (;;) {
      pump();
      if (!reconsider_orphans()) break;
    }
#ifdef DFL_CHECK_INVARIANTS
    check_invariants();
#endif
  }

  void pump() {
    while (running_ < config_.max_transfers && queue_.size() > 0) {
      std::optional<detail::TaskQueue::Entry> best;
      for (std::uint32_t o = 0; o < origins_.size(); ++o) {
        if (origins_[o].running >= config_.max_per_origin) continue;
        const auto head = queue_.head(o);
        // The head is its lane's highest priority: held, the whole lane is.
        if (head && hold_at_or_below_ && head->priority <= *hold_at_or_below_) continue;
        if (head && (!best || detail::TaskQueue::before(*head, *best))) best = head;
      }
      if (!best) return;  // Every origin with queued work is at its limit.
      start_transfer(best->task);
    }
  }

  bool reconsider_orphans() {
    if (orphans_.empty()) return false;
    const std::uint64_t now_pressure = pressure();
    // Copy: an abort removes the task from orphans_.
    const std::vector<std::uint32_t> orphans = orphans_;
    bool aborted = false;
    for (std::uint32_t t : orphans) {
      if (tasks_[t].asked_pressure == now_pressure) continue;
      const std::uint64_t before = stats_.orphan_aborts;
      decide_orphan(t, /*first_decision=*/false);
      aborted |= stats_.orphan_aborts != before;
      if (aborted) break;  // Pressure changed again; start over.
    }
    return aborted;
  }

  TaskInfo info(std::uint32_t t) const {
    const Task& task = tasks_[t];
    TaskInfo out;
    out.id = task.id;
    out.key = *task.key;
    out.state = task.state();
    out.effective_priority = public_priority(task.effective);
    out.demanded_priority = public_priority(task.demanded);
    out.active_demands = task.active_demands;
    out.attempts = task.attempts;
    out.resume_offset_bytes = task.resume_offset_bytes;
    out.bytes_transferred = task.bytes_transferred;
    out.origin = task.origin;
    if (task.state() == TaskState::transferring) out.transfer = TransferId{task.op};
    if (task.state() == TaskState::finalizing) out.finalize = FinalizeId{task.op};
    return out;
  }

  SchedulerConfig config_;
  ModelRules rules_;
  KeyIdentity identity_;
  std::shared_ptr<OrphanPolicy> policy_;  // Null: abort every orphan.
  std::function<std::uint64_t(TransferId)> progress_probe_;
  std::uint64_t queued_bytes_ = 0;  // Sum of the sizes of queued tasks.
  bool policy_observes_ = false;  // The policy reads the history: it sees every request.
  bool track_history_ = false;    // The policy reads it and the limit is not 0.
  KeyHistory history_{config_.key_history_limit};
  KeptPartials partials_;
  double now_ = 0;

  Slab<Demand> demands_;
  Slab<Task> tasks_;
  std::unordered_map<OwnerId, OwnerState> owners_;
  std::size_t idle_owners_ = 0;
  static constexpr std::size_t kIdleOwnersMax = 4096;
  // Live tasks by key hash (under the model's identity): the newest, whose
  // Task::key_next links the others. A list, because hashes collide and the
  // independent model keeps several tasks per key. One entry per hash.
  KeyIdentity::Equal key_equal_;
  detail::HashSlots key_heads_;
  static bool any_slot(std::uint32_t) {
    return true;
  }  // The hash's one entry.
  std::vector<OriginSlots> origins_;
  OriginLists origin_lists_;
  std::size_t tasks_with_mirrors_ = 0;  // Live tasks with a list: breakers reroute them.
  detail::TaskQueue queue_;
  std::uint32_t running_ = 0;
  std::optional<std::int64_t> hold_at_or_below_;  // hold_starts(): queued at or below wait.
  Timers timers_;
  std::vector<std::uint32_t> orphans_;  // Transferring orphans that the policy let complete.
  InstalledIndex installed_;
  std::vector<InstalledIndex::Entry> evicted_;

  std::uint64_t last_task_id_ = 0;
  OpIds op_ids_;
  std::uint64_t enqueue_seq_ = 0;
  std::vector<Command> outbox_;
  SchedulerStats stats_;
};

}  // namespace dfl
