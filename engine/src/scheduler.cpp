// The scheduler core. See scheduler.h for the contract and docs/design.md §3 for the
// life cycle.
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
// The three models differ only in the few places marked "model rule".

#include "demandflight/engine/scheduler.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <map>
#include <set>
#include <unordered_map>

#include "demandflight/engine/detail/hash_slots.h"
#include "demandflight/engine/installed_index.h"
#include "engine_assert.h"
#include "task_queue.h"

namespace dfl {
namespace {

constexpr std::uint32_t kNone = std::numeric_limits<std::uint32_t>::max();
// Orphans run below every real priority; real priorities are int32, so any
// int64 below INT32_MIN is a safe sentinel.
constexpr std::int64_t kOrphanLevel = std::numeric_limits<std::int64_t>::min();

std::optional<Priority> public_priority(std::int64_t effective) {
  if (effective == kOrphanLevel) return std::nullopt;
  return static_cast<Priority>(effective);
}

// Counts of active demands per priority. Almost every task sees at most a few
// distinct priorities, so they are kept inline and scanned; more spill to a
// vector. The max is a scan over distinct priorities, not over demands.
class PriorityHistogram {
 public:
  void add(Priority priority) {
    Bin* bins = data();
    for (std::size_t i = 0; i < size(); ++i) {
      if (bins[i].priority == priority) {
        ++bins[i].count;
        return;
      }
    }
    if (spill_.empty() && inline_size_ < kInline) {
      inline_[inline_size_++] = Bin{priority, 1};
      return;
    }
    if (spill_.empty()) {
      spill_.assign(inline_.begin(), inline_.begin() + inline_size_);
      inline_size_ = 0;
    }
    spill_.push_back(Bin{priority, 1});
  }

  void remove(Priority priority) {
    Bin* bins = data();
    const std::size_t n = size();
    for (std::size_t i = 0; i < n; ++i) {
      if (bins[i].priority != priority) continue;
      if (--bins[i].count > 0) return;
      bins[i] = bins[n - 1];
      if (spill_.empty()) {
        --inline_size_;
      } else {
        spill_.pop_back();
      }
      return;
    }
    DFL_ASSERT(false, "priority histogram: removing a priority that is not counted");
  }

  std::optional<Priority> max() const {
    const Bin* bins = data();
    std::optional<Priority> best;
    for (std::size_t i = 0; i < size(); ++i) {
      if (!best || bins[i].priority > *best) best = bins[i].priority;
    }
    return best;
  }

  std::uint32_t total() const {
    std::uint32_t sum = 0;
    for (std::size_t i = 0; i < size(); ++i)
      sum += data()[i].count;
    return sum;
  }

  std::uint32_t count(Priority priority) const {
    for (std::size_t i = 0; i < size(); ++i) {
      if (data()[i].priority == priority) return data()[i].count;
    }
    return 0;
  }

  void clear() {
    inline_size_ = 0;
    spill_.clear();
  }

 private:
  struct Bin {
    Priority priority = 0;
    std::uint32_t count = 0;
  };
  static constexpr std::uint8_t kInline = 4;

  std::size_t size() const { return spill_.empty() ? inline_size_ : spill_.size(); }
  Bin* data() { return spill_.empty() ? inline_.data() : spill_.data(); }
  const Bin* data() const { return spill_.empty() ? inline_.data() : spill_.data(); }

  std::array<Bin, kInline> inline_{};
  std::uint8_t inline_size_ = 0;
  std::vector<Bin> spill_;
};

enum class TimerKind : std::uint8_t { deadline, retry };

// Ordered by (time, arming order) so equal times fire deterministically.
struct Timer {
  double at_s = 0;
  std::uint64_t seq = 0;
  TimerKind kind = TimerKind::deadline;
  std::uint32_t index = kNone;  // Demand or task slot.
  std::uint64_t identity = 0;   // Demand slot generation or TaskId, to reject stale entries.

  friend bool operator<(const Timer& a, const Timer& b) {
    if (a.at_s != b.at_s) return a.at_s < b.at_s;
    return a.seq < b.seq;
  }
};

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

struct Task {
  TaskId id;  // 0 while the slot is free.
  TaskState state = TaskState::queued;
  // Transferring or finalizing with no active demand (policy said complete).
  bool orphan = false;
  // The key, shared with the commands and the installed index (and with the
  // subscriber, if it passed a KeyRef).
  KeyRef key;
  std::size_t key_hash = 0;  // Under the model's identity.
  // The other live tasks with this key hash (Impl::key_heads_), newest first.
  std::uint32_t key_prev = kNone;
  std::uint32_t key_next = kNone;
  OriginId origin = 0;
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
  double retry_at_s = 0;
  std::uint64_t timer_seq = 0;  // 0: no retry timer armed.
  // Slot pressure at the last orphan decision, to re-ask when it changes.
  std::uint64_t asked_pressure = 0;
  std::uint32_t next_free = kNone;
};

// A kept partial (OrphanDecision::keep_partial): bytes a later task resumes.
struct Partial {
  std::uint64_t bytes = 0;
  std::uint64_t seq = 0;  // Keep order: the oldest is dropped first.
  KeyRef key;             // For DropPartial.
};

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

struct OriginSlots {
  std::uint32_t running = 0;
};

// SplitMix64's finaliser: a well-mixed 64-bit value from any 64-bit input.
std::uint64_t splitmix64(std::uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Uniform double in [0, 1) from the top 53 bits: the same on every standard
// library (std::uniform_real_distribution is not).
double unit_interval(std::uint64_t bits) {
  return static_cast<double>(bits >> 11) * 0x1.0p-53;
}

}  // namespace

class Scheduler::Impl {
 public:
  Impl(SchedulerConfig config, std::shared_ptr<OrphanPolicy> policy)
      : config_(config),
        identity_{config.model == Model::callbacks},
        policy_(policy ? std::move(policy) : std::make_shared<AlwaysAbortPolicy>()),
        key_equal_(identity_.equal()),
        installed_(config.cache_bytes, identity_) {
    DFL_ASSERT(config_.max_transfers > 0, "max_transfers must be at least 1");
    DFL_ASSERT(config_.max_per_origin > 0, "max_per_origin must be at least 1");
    DFL_ASSERT(config_.retry.max_attempts > 0, "retry.max_attempts must be at least 1");
    policy_observes_ = policy_->uses_key_history();
    track_history_ = policy_observes_ && config_.key_history_limit > 0;
  }

  // --- Users ---------------------------------------------------------------

  std::size_t key_hash(const ArtifactKey& key) const { return installed_.hash(key); }

  // `shared`, if not null, is a KeyRef to `key` that a new task may share.
  DemandHandle subscribe(double now, const ArtifactKey& key, const KeyRef* shared,
                         std::size_t key_hash, const DemandOptions& options) {
    advance(now);
    ++stats_.demands_subscribed;
    DFL_ASSERT(options.origin < config_.max_origins, "origin id above max_origins");
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
    const bool legacy = config_.model == Model::callbacks;
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
    } else if (config_.model == Model::callbacks) {
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

  void end_owner(double now, OwnerId owner_id, std::optional<OwnerGeneration> generation) {
    advance(now);
    auto it = owners_.find(owner_id);
    // An explicit generation is remembered even for an owner with no demands
    // yet, so that a late subscribe of that generation is still refused.
    if (it == owners_.end() && generation && config_.model != Model::callbacks) {
      it = owners_.emplace(owner_id, OwnerState{}).first;
    }
    if (it != owners_.end()) {
      OwnerState& owner = it->second;
      if (owner.idle && generation && config_.model != Model::callbacks) {
        owner.idle = false;  // It has a watermark to remember now.
        --idle_owners_;
      }
      // Without a generation the owner is gone whole: every generation ends,
      // and no watermark is kept (the owner id may be used again).
      const OwnerGeneration through =
          generation.value_or(std::numeric_limits<OwnerGeneration>::max());
      if (config_.model == Model::callbacks) {
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
          task.resume_offset_bytes += bytes;
          start_finalize(t);
          break;
        case TransferStatus::retryable_error:
          // The bytes that arrived stay: the next attempt resumes after them.
          task.resume_offset_bytes += bytes;
          retry_or_fail(t, retry_after_s.value_or(0));
          break;
        case TransferStatus::permanent_error:
          finish_task(t, TaskOutcome::failed, DemandOutcome::failed);
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
    if (timers_.empty()) return std::nullopt;
    return timers_.begin()->at_s;
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
    auto it = partials_.find(key);
    if (it == partials_.end()) return std::nullopt;
    return it->second.bytes;
  }
  std::uint64_t kept_partial_bytes() const { return partial_used_; }
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
    while (!timers_.empty() && timers_.begin()->at_s <= now) {
      const Timer timer = *timers_.begin();
      timers_.erase(timers_.begin());
      if (timer.kind == TimerKind::deadline) {
        Demand& demand = demands_[timer.index];
        DFL_ASSERT(demand.live && demand.generation == timer.identity, "stale deadline timer");
        demand.timer_seq = 0;
        end_demand(timer.index, DemandOutcome::timed_out);
      } else {
        Task& task = tasks_[timer.index];
        DFL_ASSERT(task.id.value == timer.identity && task.state == TaskState::backoff,
                   "stale retry timer");
        task.timer_seq = 0;
        enqueue(timer.index);
      }
    }
  }

  std::uint64_t arm_timer(double at_s, TimerKind kind, std::uint32_t index,
                          std::uint64_t identity) {
    const std::uint64_t seq = ++timer_seq_;
    timers_.insert(Timer{at_s, seq, kind, index, identity});
    return seq;
  }

  void disarm_timer(double at_s, std::uint64_t& seq) {
    if (seq == 0) return;
    const std::size_t erased = timers_.erase(Timer{at_s, seq, TimerKind::deadline, kNone, 0});
    DFL_ASSERT(erased == 1, "disarming a timer that is not armed");
    seq = 0;
  }

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
    if (t == kNone || config_.model == Model::independent) {
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
    if (task.orphan) {
      task.orphan = false;
      forget_orphan(t);
    }
    if (config_.model != Model::callbacks && demand.deadline_s != kNoDeadline) {
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
    task.state = TaskState::queued;
    queue_.push(t, task.origin, task.effective, task.seq);
    queued_bytes_ += task.size_bytes;
  }

  void remove_queued(std::uint32_t t) {
    queue_.remove(t);
    queued_bytes_ -= tasks_[t].size_bytes;
  }

  // The key's request history, for orphan policies. Bounded: past the limit,
  // the half least recently requested is forgotten (amortised O(1)).
  void note_request(const ArtifactKey& key, std::size_t key_hash) {
    if (!policy_observes_) return;
    policy_->observe_request(key, now_);
    if (!track_history_) return;
    KeyHistory& h = history_[key_hash];
    h.previous_s = h.demands == 0 ? -1 : h.last_s;
    ++h.demands;
    h.last_s = now_;
    h.seq = ++requests_;
    if (history_.size() > 2 * static_cast<std::size_t>(config_.key_history_limit)) prune_history();
  }

  // Keeps the key_history_limit most recently requested keys. Request
  // numbers are unique (times may tie), so exactly that many stay.
  void prune_history() {
    std::vector<std::uint64_t> seqs;
    seqs.reserve(history_.size());
    for (const auto& [hash, h] : history_)
      seqs.push_back(h.seq);
    auto cut = seqs.end() - static_cast<std::ptrdiff_t>(config_.key_history_limit);
    std::nth_element(seqs.begin(), cut, seqs.end());
    const std::uint64_t oldest_kept = *cut;
    std::erase_if(history_, [&](const auto& item) { return item.second.seq < oldest_kept; });
  }

  void enqueue(std::uint32_t t) { insert_queued(t); }

  // The model's priority rule, applied after every change of a task's demands.
  std::int64_t compute_effective(const Task& task) const {
    if (task.active_demands == 0) return kOrphanLevel;
    // Model rule: the legacy priority is the maximum ever seen.
    if (config_.model == Model::callbacks) return task.max_ever;
    return *task.priorities.max();
  }

  void update_priority(std::uint32_t t) {
    Task& task = tasks_[t];
    const std::int64_t effective = compute_effective(task);
    const std::int64_t demanded =
        task.active_demands == 0 ? kOrphanLevel : std::int64_t{*task.priorities.max()};
    if (effective == task.effective && demanded == task.demanded) return;
    if (effective != task.effective && task.state == TaskState::queued) {
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
    switch (task.state) {
      case TaskState::queued:
        remove_queued(t);
        release_task(t, TaskOutcome::dropped);
        return;
      case TaskState::backoff:
        disarm_timer(task.retry_at_s, task.timer_seq);
        release_task(t, TaskOutcome::dropped);
        return;
      case TaskState::transferring:
        task.orphan = true;
        update_priority(t);
        decide_orphan(t, /*first_decision=*/true);
        return;
      case TaskState::finalizing:
        // Verify + install completes; nobody is told.
        task.orphan = true;
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
    switch (task.state) {
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
    if (auto it = history_.find(task.key_hash); it != history_.end()) {
      view.key_demands = it->second.demands;
      view.since_last_demand_s = now_ - it->second.last_s;
      if (it->second.previous_s >= 0)
        view.previous_gap_s = it->second.last_s - it->second.previous_s;
    }
    view.cache_capacity_bytes = installed_.capacity_bytes();
    view.cache_used_bytes = installed_.used_bytes();
    view.partial_capacity_bytes = config_.partial_bytes;
    view.partial_used_bytes = partial_used_;
    view.first_decision = first_decision;
    task.asked_pressure = pressure();

    const OrphanDecision decision = policy_->decide(view);
    if (decision == OrphanDecision::complete) {
      ++stats_.orphan_completes;
      if (first_decision) orphans_.push_back(t);
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
    while (partial_used_ + bytes > config_.partial_bytes ||
           partials_.size() >= config_.max_partials) {
      drop_partial(*partial_order_.begin()->second);  // Oldest first.
    }
    const std::uint64_t seq = ++partial_seq_;
    partials_.emplace(*key, Partial{bytes, seq, key});
    partial_order_.emplace(seq, key);
    partial_used_ += bytes;
    ++stats_.partials_kept;
    return bytes;
  }

  // Forgets the kept partial of `key`, if any, and lets the runtime delete it.
  void drop_partial(const ArtifactKey& key) {
    if (partials_.empty()) return;
    auto it = partials_.find(key);
    if (it == partials_.end()) return;
    outbox_.emplace_back(DropPartial{it->second.key, it->second.bytes});
    ++stats_.partials_dropped;
    forget_partial(it);
  }

  void forget_partial(std::unordered_map<ArtifactKey, Partial>::iterator it) {
    partial_used_ -= it->second.bytes;
    partial_order_.erase(it->second.seq);
    partials_.erase(it);
  }

  // A new task of `key` takes over its kept partial: it resumes after it.
  std::uint64_t take_partial(const ArtifactKey& key) {
    if (partials_.empty()) return 0;
    auto it = partials_.find(key);
    if (it == partials_.end()) return 0;
    const std::uint64_t bytes = it->second.bytes;
    forget_partial(it);
    ++stats_.partials_resumed;
    return bytes;
  }

  void forget_orphan(std::uint32_t t) {
    auto it = std::find(orphans_.begin(), orphans_.end(), t);
    if (it != orphans_.end()) orphans_.erase(it);
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
    task.state = TaskState::transferring;
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
                                       task.resume_offset_bytes, task.size_bytes, task.attempts});
  }

  // The transfer ended or is being aborted: its slot is free and its id dead.
  void release_slot(std::uint32_t t) {
    Task& task = tasks_[t];
    DFL_ASSERT(task.state == TaskState::transferring, "releasing a slot that is not held");
    task.op_live = false;
    --running_;
    --origins_[task.origin].running;
    if (task.orphan) forget_orphan(t);
  }

  void start_finalize(std::uint32_t t) {
    Task& task = tasks_[t];
    task.state = TaskState::finalizing;
    task.op = next_op_id(t);
    ++stats_.finalizes_started;
    outbox_.emplace_back(StartFinalize{task.id, FinalizeId{task.op}, task.key, task.size_bytes});
  }

  // A retryable failure: back off and retry, or fail once attempts run out.
  // Nobody waits for an orphan, so an orphan that fails is dropped.
  void retry_or_fail(std::uint32_t t, double at_least_s = 0) {
    Task& task = tasks_[t];
    if (task.attempts >= config_.retry.max_attempts) {
      finish_task(t, TaskOutcome::failed, DemandOutcome::failed);
      return;
    }
    if (task.active_demands == 0) {
      release_task(t, TaskOutcome::dropped);
      return;
    }
    task.state = TaskState::backoff;
    // The server's Retry-After is honoured: retrying sooner only earns another 503/429.
    task.retry_at_s = now_ + std::max(backoff_delay_s(task.id, task.attempts), at_least_s);
    if (task.retry_at_s <= now_) {
      // No backoff (retry base_s 0): queued again at once, as the timer's
      // firing would; a timer due now would outlive this call unfired.
      task.timer_seq = 0;
      enqueue(t);
      return;
    }
    task.timer_seq = arm_timer(task.retry_at_s, TimerKind::retry, t, task.id.value);
  }

  // Exponential backoff with jitter: base * 2^(attempt-1), capped, scaled by
  // 1 + jitter * U(-1, 1). U is drawn from the seed, the task and the attempt
  // (a counter-based draw), not from one shared stream: two tasks that fail
  // at the same instant get the same delays in whichever order a runtime
  // reports them (the simulator's lone-finalize timers and its Execs, or the
  // simulator and the real backend, order simultaneous events differently).
  double backoff_delay_s(TaskId task, std::uint32_t failed_attempt) const {
    const RetryConfig& retry = config_.retry;
    const double exponent = std::min<double>(failed_attempt - 1, 62);
    const double delay = std::min(retry.cap_s, retry.base_s * std::exp2(exponent));
    const std::uint64_t bits =
        splitmix64(splitmix64(config_.seed ^ splitmix64(task.value)) ^ failed_attempt);
    const double scale = 1.0 + retry.jitter * (2.0 * unit_interval(bits) - 1.0);
    return std::max(0.0, delay * scale);
  }

  // Ends every active demand of the task with `demand_outcome`, then the task.
  void finish_task(std::uint32_t t, TaskOutcome outcome, DemandOutcome demand_outcome) {
    Task& task = tasks_[t];
    while (task.demand_head != kNone)
      release_demand(task.demand_head, demand_outcome);
    release_task(t, outcome);
  }

  void release_task(std::uint32_t t, TaskOutcome outcome) {
    Task& task = tasks_[t];
    DFL_ASSERT(task.active_demands == 0 && task.demand_head == kNone,
               "releasing a task that still has demands");
    if (task.effective != kOrphanLevel || task.demanded != kOrphanLevel) {
      outbox_.emplace_back(TaskPriorityChanged{task.id, std::nullopt, std::nullopt});
    }
    outbox_.emplace_back(TaskEnded{task.id, outcome, task.attempts, task.bytes_transferred});
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

  // Transfer and finalize ids carry their task's slot in their low 32 bits
  // and a count of operations above it, so an event finds its task without a
  // lookup table. The count wraps after 2^32 operations (0 is skipped): an id
  // is unique among that many consecutive operations, and ordered as started
  // within them; a long-running client (2^32 operations are some 50 days at
  // a thousand a second) goes on instead of stopping.
  std::uint64_t next_op_id(std::uint32_t t) {
    last_op_count_ = last_op_count_ == 0xffffffffu ? 1 : last_op_count_ + 1;
    tasks_[t].op_live = true;
    return (last_op_count_ << 32) | t;
  }

  // The task slot an operation id carries (next_op_id).
  static std::uint32_t slot_of_op(std::uint64_t op) {
    return static_cast<std::uint32_t>(op & 0xffffffffu);
  }

  std::uint32_t resolve_op(std::uint64_t op, TaskState expected) {
    const std::uint32_t t = slot_of_op(op);
    if (t >= tasks_.capacity() || !tasks_[t].op_live || tasks_[t].op != op ||
        tasks_[t].state != expected) {
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
    out.state = task.state;
    out.effective_priority = public_priority(task.effective);
    out.active_demands = task.active_demands;
    out.attempts = task.attempts;
    out.resume_offset_bytes = task.resume_offset_bytes;
    out.bytes_transferred = task.bytes_transferred;
    out.origin = task.origin;
    if (task.state == TaskState::transferring) out.transfer = TransferId{task.op};
    if (task.state == TaskState::finalizing) out.finalize = FinalizeId{task.op};
    return out;
  }

  SchedulerConfig config_;
  KeyIdentity identity_;
  std::shared_ptr<OrphanPolicy> policy_;
  std::function<std::uint64_t(TransferId)> progress_probe_;
  std::uint64_t queued_bytes_ = 0;  // Sum of the sizes of queued tasks.
  struct KeyHistory {
    std::uint32_t demands = 0;  // Subscribes of the key so far.
    double last_s = 0;          // The last one.
    double previous_s = -1;     // The one before it; -1 when none.
    std::uint64_t seq = 0;      // Number of the last request, among all keys.
  };
  std::uint64_t requests_ = 0;
  bool policy_observes_ = false;  // The policy reads the history: it sees every request.
  bool track_history_ = false;    // The policy reads it and the limit is not 0.
  std::unordered_map<std::size_t, KeyHistory> history_;  // By key hash under the identity.
  // Kept partials by exact key, and their keep order (oldest first).
  std::unordered_map<ArtifactKey, Partial> partials_;
  std::map<std::uint64_t, KeyRef> partial_order_;
  std::uint64_t partial_used_ = 0;
  std::uint64_t partial_seq_ = 0;
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
  detail::TaskQueue queue_;
  std::uint32_t running_ = 0;
  std::set<Timer> timers_;
  std::vector<std::uint32_t> orphans_;  // Transferring orphans that the policy let complete.
  InstalledIndex installed_;
  std::vector<InstalledIndex::Entry> evicted_;

  std::uint64_t last_task_id_ = 0;
  std::uint64_t last_op_count_ = 0;  // Operations started, modulo 2^32 (next_op_id).
  std::uint64_t enqueue_seq_ = 0;
  std::uint64_t timer_seq_ = 0;
  std::vector<Command> outbox_;
  SchedulerStats stats_;
};

// The full invariant check: O(live state). Every violation names itself.
void Scheduler::Impl::check_invariants() const {
  std::size_t live_tasks = 0;
  std::size_t queued = 0;
  std::uint64_t queued_bytes = 0;
  std::uint32_t running = 0;
  std::vector<std::uint32_t> running_per_origin(origins_.size(), 0);
  std::size_t demands_in_tasks = 0;

  // Key map: each list holds live tasks of its hash, linked both ways; in the
  // shared models no two of them have one key (contract 1).
  std::vector<bool> keyed(tasks_.capacity(), false);
  std::size_t keyed_count = 0;
  std::vector<std::pair<std::size_t, std::uint32_t>> heads;
  key_heads_.for_each(
      [&](std::size_t hash, std::uint32_t first) { heads.emplace_back(hash, first); });
  std::vector<std::size_t> head_hashes;
  for (const auto& [hash, first] : heads)
    head_hashes.push_back(hash);
  std::sort(head_hashes.begin(), head_hashes.end());
  DFL_CHECK(std::adjacent_find(head_hashes.begin(), head_hashes.end()) == head_hashes.end(),
            "two key lists for one hash");
  for (const auto& [hash, first] : heads) {
    DFL_CHECK(tasks_[first].key_prev == kNone, "a key list's head has a predecessor");
    for (std::uint32_t u = first; u != kNone; u = tasks_[u].key_next) {
      DFL_CHECK(!keyed[u], "a task is in the key map twice");
      DFL_CHECK(tasks_[u].id.value != 0 && tasks_[u].key_hash == hash,
                "the key map holds a dead task or one of another hash");
      DFL_CHECK(tasks_[u].key_next == kNone || tasks_[tasks_[u].key_next].key_prev == u,
                "key list links disagree");
      keyed[u] = true;
      ++keyed_count;
      if (config_.model == Model::independent) continue;
      for (std::uint32_t v = tasks_[u].key_next; v != kNone; v = tasks_[v].key_next) {
        DFL_CHECK(!key_equal_(*tasks_[u].key, *tasks_[v].key),
                  "more than one live task for one key");
      }
    }
  }

  for (std::uint32_t t = 0; t < tasks_.capacity(); ++t) {
    const Task& task = tasks_[t];
    DFL_CHECK(!task.op_live || (task.id.value != 0 && (task.state == TaskState::transferring ||
                                                       task.state == TaskState::finalizing)),
              "operation ids outlive their tasks");
    if (task.id.value == 0) continue;
    ++live_tasks;
    DFL_CHECK(task.key_hash == installed_.hash(*task.key), "stale key hash");
    DFL_CHECK(task.origin < origins_.size(), "task origin without slots");

    // Demand list, counts and histogram agree.
    std::uint32_t count = 0;
    std::uint32_t prev = kNone;
    std::optional<Priority> max_priority;
    for (std::uint32_t d = task.demand_head; d != kNone; d = demands_[d].next_in_task) {
      const Demand& demand = demands_[d];
      DFL_CHECK(demand.live, "task lists an ended demand");
      DFL_CHECK(demand.task == t, "demand listed under another task");
      DFL_CHECK(demand.prev_in_task == prev, "broken demand list back link");
      DFL_CHECK(task.priorities.count(demand.priority) > 0, "demand priority not counted");
      max_priority = std::max(max_priority.value_or(demand.priority), demand.priority);
      prev = d;
      ++count;
      DFL_CHECK(count <= demands_.live(), "demand list cycles");
    }
    DFL_CHECK(count == task.active_demands, "active demand count is wrong");
    DFL_CHECK(task.priorities.total() == count, "priority histogram total is wrong");
    DFL_CHECK(task.demanded == (count == 0 ? kOrphanLevel : std::int64_t{*max_priority}),
              "announced demanded priority is not the max over active demands");
    demands_in_tasks += count;

    // Effective priority follows the model's rule.
    if (count == 0) {
      DFL_CHECK(task.effective == kOrphanLevel, "task without demands above orphan level");
      DFL_CHECK(task.state == TaskState::transferring || task.state == TaskState::finalizing,
                "queued or backoff task without an active demand");
      DFL_CHECK(task.orphan, "task without demands not marked orphan");
    } else if (config_.model == Model::callbacks) {
      DFL_CHECK(task.effective == task.max_ever, "callbacks priority is not max-ever");
      DFL_CHECK(!task.orphan, "task with demands marked orphan");
    } else {
      DFL_CHECK(task.effective == *max_priority, "effective priority is not max of active");
      DFL_CHECK(!task.orphan, "task with demands marked orphan");
    }

    switch (task.state) {
      case TaskState::queued: {
        ++queued;
        queued_bytes += task.size_bytes;
        DFL_CHECK(queue_.contains(t), "queued task not in the queue");
        const auto entry = queue_.entry(t);
        DFL_CHECK(entry.priority == task.effective && entry.seq == task.seq,
                  "queued task not queued under its priority and sequence");
        DFL_CHECK(task.timer_seq == 0, "queued task with a retry timer");
        break;
      }
      case TaskState::transferring: {
        DFL_CHECK(!queue_.contains(t), "a transferring task is still queued");
        ++running;
        ++running_per_origin[task.origin];
        DFL_CHECK(task.op_live && slot_of_op(task.op) == t, "transfer id not registered");
        const bool listed = std::find(orphans_.begin(), orphans_.end(), t) != orphans_.end();
        DFL_CHECK(listed == task.orphan, "orphan list disagrees with the task");
        break;
      }
      case TaskState::backoff:
        DFL_CHECK(task.timer_seq != 0, "backoff task without a retry timer");
        DFL_CHECK(
            timers_.count(Timer{task.retry_at_s, task.timer_seq, TimerKind::retry, t, 0}) == 1,
            "retry timer missing");
        break;
      case TaskState::finalizing: {
        DFL_CHECK(task.op_live && slot_of_op(task.op) == t, "finalize id not registered");
        break;
      }
    }

    DFL_CHECK(keyed[t], "live task missing from the key map");
  }

  DFL_CHECK(live_tasks == tasks_.live(), "task slab count is wrong");
  DFL_CHECK(keyed_count == live_tasks, "key map holds dead tasks");
  DFL_CHECK(queued == queue_.size(), "queued count is wrong");
  DFL_CHECK(queued_bytes == queued_bytes_, "queued bytes are wrong");
  std::uint64_t partial_bytes = 0;
  for (const auto& [key, partial] : partials_) {
    partial_bytes += partial.bytes;
    DFL_CHECK(partial.bytes > 0, "an empty kept partial");
    auto it = partial_order_.find(partial.seq);
    DFL_CHECK(it != partial_order_.end() && it->second == key, "partial order disagrees");
  }
  DFL_CHECK(partial_order_.size() == partials_.size(), "partial order holds dropped keys");
  DFL_CHECK(partial_bytes == partial_used_, "kept partial bytes are wrong");
  DFL_CHECK(partial_used_ <= config_.partial_bytes, "kept partials over their budget");
  DFL_CHECK(partials_.size() <= config_.max_partials, "too many kept partials");
  std::size_t queue_entries = 0;
  for (std::uint32_t o = 0; o < queue_.origins(); ++o) {
    std::optional<detail::TaskQueue::Entry> last;
    bool last_sorted = false;
    queue_.for_each(o, [&](const detail::TaskQueue::Entry& entry, bool sorted) {
      ++queue_entries;
      const Task& task = tasks_[entry.task];
      DFL_CHECK(task.id.value != 0 && task.state == TaskState::queued && task.origin == o,
                "the queue holds a task that is not queued there");
      if (last && last->priority == entry.priority && sorted == last_sorted) {
        DFL_CHECK(last->seq < entry.seq, "a queue lane is out of first-enqueue order");
      }
      last = entry;
      last_sorted = sorted;
    });
    DFL_CHECK(queue_.size(o) <= queued, "per-origin queue size is wrong");
  }
  DFL_CHECK(queue_entries == queued, "the queue holds tasks that are not queued");
  DFL_CHECK(running == running_, "running count is wrong");
  DFL_CHECK(running <= config_.max_transfers, "max_transfers exceeded");
  for (std::size_t o = 0; o < origins_.size(); ++o) {
    DFL_CHECK(running_per_origin[o] == origins_[o].running, "per-origin running count is wrong");
    DFL_CHECK(origins_[o].running <= config_.max_per_origin, "max_per_origin exceeded");
  }

  // Demands: every live demand is in a task (and counted there) and in its owner.
  std::size_t live_demands = 0;
  for (std::uint32_t d = 0; d < demands_.capacity(); ++d) {
    const Demand& demand = demands_[d];
    if (!demand.live) continue;
    ++live_demands;
    DFL_CHECK(demand.task != kNone && tasks_[demand.task].id.value != 0,
              "live demand without a live task");
    DFL_CHECK(demand.owner_state != nullptr, "live demand without an owner");
    if (config_.model != Model::callbacks && demand.deadline_s != kNoDeadline) {
      DFL_CHECK(demand.deadline_s > now_, "live demand past its deadline");
      DFL_CHECK(demand.timer_seq != 0, "deadline without a timer");
    }
  }
  DFL_CHECK(live_demands == demands_.live(), "demand slab count is wrong");
  DFL_CHECK(live_demands == demands_in_tasks, "demands outside tasks");
  std::size_t owned = 0;
  std::size_t idle = 0;
  for (const auto& [id, owner] : owners_) {
    idle += owner.idle;
    DFL_CHECK(!owner.idle || (owner.active == 0 && !owner.ended_through),
              "an owner marked idle has something to remember");
    std::uint32_t count = 0;
    for (std::uint32_t d = owner.head; d != kNone; d = demands_[d].next_in_owner) {
      DFL_CHECK(demands_[d].live && demands_[d].owner == id, "owner lists a foreign demand");
      ++count;
    }
    DFL_CHECK(count == owner.active, "owner active count is wrong");
    owned += count;
  }
  DFL_CHECK(owned == live_demands, "demands missing from their owners");
  DFL_CHECK(idle == idle_owners_, "idle owner count is wrong");

  for (const Timer& timer : timers_) {
    DFL_CHECK(timer.at_s > now_, "a due timer was not fired");
    if (timer.kind == TimerKind::deadline) {
      DFL_CHECK(demands_[timer.index].live && demands_[timer.index].generation == timer.identity,
                "deadline timer for an ended demand");
    } else {
      DFL_CHECK(tasks_[timer.index].id.value == timer.identity &&
                    tasks_[timer.index].state == TaskState::backoff,
                "retry timer for a task not in backoff");
    }
  }
}

// --- Public facade ---------------------------------------------------------

Scheduler::Scheduler(SchedulerConfig config, std::shared_ptr<OrphanPolicy> orphan_policy)
    : impl_(std::make_unique<Impl>(config, std::move(orphan_policy))) {}
Scheduler::~Scheduler() = default;
Scheduler::Scheduler(Scheduler&&) noexcept = default;
Scheduler& Scheduler::operator=(Scheduler&&) noexcept = default;

DemandHandle Scheduler::subscribe(double now_s, const ArtifactKey& key,
                                  const DemandOptions& options) {
  return impl_->subscribe(now_s, key, nullptr, impl_->key_hash(key), options);
}
std::size_t Scheduler::key_hash(const ArtifactKey& key) const {
  return impl_->key_hash(key);
}
DemandHandle Scheduler::subscribe(double now_s, const ArtifactKey& key, std::size_t key_hash,
                                  const DemandOptions& options) {
#ifndef NDEBUG
  DFL_ASSERT(key_hash == impl_->key_hash(key), "subscribe with a hash that is not key_hash(key)");
#endif
  return impl_->subscribe(now_s, key, nullptr, key_hash, options);
}
DemandHandle Scheduler::subscribe(double now_s, const KeyRef& key, std::size_t key_hash,
                                  const DemandOptions& options) {
  DFL_ASSERT(key, "subscribe with an empty KeyRef");
#ifndef NDEBUG
  DFL_ASSERT(key_hash == impl_->key_hash(*key), "subscribe with a hash that is not key_hash(key)");
#endif
  return impl_->subscribe(now_s, *key, &key, key_hash, options);
}
void Scheduler::cancel(double now_s, DemandHandle demand) {
  impl_->cancel(now_s, demand);
}
void Scheduler::set_priority(double now_s, DemandHandle demand, Priority priority) {
  impl_->set_priority(now_s, demand, priority);
}
void Scheduler::end_owner(double now_s, OwnerId owner, std::optional<OwnerGeneration> generation) {
  impl_->end_owner(now_s, owner, generation);
}
void Scheduler::set_progress_probe(std::function<std::uint64_t(TransferId)> probe) {
  impl_->set_progress_probe(std::move(probe));
}
void Scheduler::on_transfer_progress(double now_s, TransferId transfer,
                                     std::uint64_t bytes_received) {
  impl_->on_transfer_progress(now_s, transfer, bytes_received);
}
void Scheduler::on_transfer_finished(double now_s, TransferId transfer, TransferStatus status,
                                     std::uint64_t bytes_received,
                                     std::optional<double> retry_after_s) {
  impl_->on_transfer_finished(now_s, transfer, status, bytes_received, retry_after_s);
}
void Scheduler::on_finalize_finished(double now_s, FinalizeId finalize, FinalizeStatus status) {
  impl_->on_finalize_finished(now_s, finalize, status);
}
void Scheduler::on_timer(double now_s) {
  impl_->on_timer(now_s);
}
void Scheduler::note_installed(double now_s, const ArtifactKey& key, std::uint64_t size_bytes) {
  impl_->note_installed(now_s, key, size_bytes);
}
void Scheduler::forget_installed(double now_s, const ArtifactKey& key) {
  impl_->forget_installed(now_s, key);
}
std::optional<double> Scheduler::next_wakeup_s() const {
  return impl_->next_wakeup_s();
}
void Scheduler::take_commands(std::vector<Command>& out) {
  impl_->take_commands(out);
}
std::vector<Command> Scheduler::take_commands() {
  std::vector<Command> out;
  impl_->take_commands(out);
  return out;
}
bool Scheduler::has_commands() const {
  return impl_->has_commands();
}
std::optional<TaskInfo> Scheduler::task_for(const ArtifactKey& key) const {
  return impl_->task_for(key);
}
std::optional<DemandInfo> Scheduler::demand(DemandHandle handle) const {
  return impl_->demand(handle);
}
std::vector<TaskInfo> Scheduler::tasks() const {
  return impl_->tasks();
}
std::size_t Scheduler::live_tasks() const {
  return impl_->live_tasks();
}
std::size_t Scheduler::live_demands() const {
  return impl_->live_demands();
}
std::size_t Scheduler::remembered_keys() const {
  return impl_->remembered_keys();
}
std::optional<std::uint64_t> Scheduler::kept_partial(const ArtifactKey& key) const {
  return impl_->kept_partial(key);
}
std::uint64_t Scheduler::kept_partial_bytes() const {
  return impl_->kept_partial_bytes();
}
std::size_t Scheduler::queued_tasks() const {
  return impl_->queued_tasks();
}
std::uint32_t Scheduler::running_transfers() const {
  return impl_->running_transfers();
}
const SchedulerStats& Scheduler::stats() const {
  return impl_->stats();
}
const SchedulerConfig& Scheduler::config() const {
  return impl_->config();
}
double Scheduler::now_s() const {
  return impl_->now();
}
void Scheduler::check_invariants() const {
  impl_->check_invariants();
}

std::string_view to_string(TaskState state) {
  switch (state) {
    case TaskState::queued:
      return "queued";
    case TaskState::transferring:
      return "transferring";
    case TaskState::backoff:
      return "backoff";
    case TaskState::finalizing:
      return "finalizing";
  }
  DFL_UNREACHABLE();
}

}  // namespace dfl
