// The engine's invariant check (scheduler.h lists what it checks), run after
// every entry point in debug and test builds (DFL_CHECK_INVARIANTS) and on
// demand (Scheduler::check_invariants).
#include "scheduler_impl.h"

namespace dfl {

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
      if (!rules_.shares_tasks) continue;
      for (std::uint32_t v = tasks_[u].key_next; v != kNone; v = tasks_[v].key_next) {
        DFL_CHECK(!key_equal_(*tasks_[u].key, *tasks_[v].key),
                  "more than one live task for one key");
      }
    }
  }

  for (std::uint32_t t = 0; t < tasks_.capacity(); ++t) {
    const Task& task = tasks_[t];
    DFL_CHECK(!task.op_live || (task.id.value != 0 && (task.state() == TaskState::transferring ||
                                                       task.state() == TaskState::finalizing)),
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
      DFL_CHECK(task.state() == TaskState::transferring || task.state() == TaskState::finalizing,
                "queued or backoff task without an active demand");
      DFL_CHECK(task.orphan(), "task without demands not marked orphan");
    } else if (rules_.priority_never_falls) {
      DFL_CHECK(task.effective == task.max_ever, "callbacks priority is not max-ever");
      DFL_CHECK(!task.orphan(), "task with demands marked orphan");
    } else {
      DFL_CHECK(task.effective == *max_priority, "effective priority is not max of active");
      DFL_CHECK(!task.orphan(), "task with demands marked orphan");
    }

    switch (task.state()) {
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
        DFL_CHECK(listed == task.orphan(), "orphan list disagrees with the task");
        DFL_CHECK(task.timer_seq == 0 ||
                      (task.orphan() && timers_.armed(task.retry_at_s, task.timer_seq,
                                                      TimerKind::orphan_reask)),
                  "a transferring task's timer is not its orphan re-ask");
        break;
      }
      case TaskState::backoff:
        DFL_CHECK(task.timer_seq != 0, "backoff task without a retry timer");
        DFL_CHECK(
            timers_.armed(task.retry_at_s, task.timer_seq, TimerKind::retry),
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
  for (const auto& [key, partial] : partials_.by_key()) {
    partial_bytes += partial.bytes;
    DFL_CHECK(partial.bytes > 0, "an empty kept partial");
    auto it = partials_.by_age().find(partial.seq);
    DFL_CHECK(it != partials_.by_age().end() && it->second == key, "partial order disagrees");
  }
  DFL_CHECK(partials_.by_age().size() == partials_.size(), "partial order holds dropped keys");
  DFL_CHECK(partial_bytes == partials_.used_bytes(), "kept partial bytes are wrong");
  DFL_CHECK(partials_.used_bytes() <= config_.partial_bytes, "kept partials over their budget");
  DFL_CHECK(partials_.size() <= config_.max_partials, "too many kept partials");
  std::size_t queue_entries = 0;
  for (std::uint32_t o = 0; o < queue_.origins(); ++o) {
    std::optional<detail::TaskQueue::Entry> last;
    bool last_sorted = false;
    queue_.for_each(o, [&](const detail::TaskQueue::Entry& entry, bool sorted) {
      ++queue_entries;
      const Task& task = tasks_[entry.task];
      DFL_CHECK(task.id.value != 0 && task.state() == TaskState::queued && task.origin == o,
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
    if (rules_.knows_owners_and_deadlines && demand.deadline_s != kNoDeadline) {
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
    } else if (timer.kind == TimerKind::orphan_reask) {
      DFL_CHECK(tasks_[timer.index].id.value == timer.identity && tasks_[timer.index].orphan() &&
                    tasks_[timer.index].state() == TaskState::transferring,
                "orphan re-ask timer for a task that is not a transferring orphan");
    } else {
      DFL_CHECK(tasks_[timer.index].id.value == timer.identity &&
                    tasks_[timer.index].state() == TaskState::backoff,
                "retry timer for a task not in backoff");
    }
  }
}

}  // namespace dfl
