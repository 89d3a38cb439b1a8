// ResultRecorder: turns what a runtime did into a Result.
//
// The simulator and `demandflight replay` (the real backend) both feed it the
// engine's commands and their own transfer figures, so that one trace run in
// both worlds is scored by the same code (the definitions are in result.h).
// Header-only: it sits on the simulator's hot path.
//
// It reads the engine's commands and nothing of the engine's state. A runtime
// calls before_subscribe() for each subscribe, before the commands that
// subscribe emitted go in (the commands say which task the new demand joined,
// or deliver its immediate terminal); commands go in as the engine emitted
// them; after_commands() once a batch is handled.
#pragma once

#include <array>
#include <deque>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "demandflight/engine/command.h"
#include "demandflight/engine/ids.h"
#include "demandflight/format/result.h"
#include "demandflight/format/trace.h"

namespace dfl::format {

class ResultRecorder {
 public:
  ResultRecorder(const Trace& trace, std::string model, std::string policy, std::uint64_t seed)
      : trace_(trace) {
    result_.trace_name = trace.name;
    result_.model = std::move(model);
    result_.policy = std::move(policy);
    result_.seed = seed;
    result_.demands.reserve(trace.demand_ids.size());
    // Tasks are made only by subscribes: no task table grows by copying
    // (pages are touched as tasks come; the rest is only address space).
    result_.tasks.reserve(trace.demand_ids.size());
    // Aliases with one key share one key index (faults, orphan installs).
    key_of_artifact_.reserve(trace.artifacts.size());
    key_index_.reserve(trace.artifacts.size());  // No rehash: it would hash every key again.
    for (const Artifact& a : trace.artifacts) {
      auto [it, inserted] =
          key_index_.try_emplace(a.key, static_cast<std::uint32_t>(key_index_.size()));
      key_of_artifact_.push_back(it->second);
      if (inserted) {
        key_size_.push_back(a.size_bytes);
        key_artifact_.push_back(static_cast<std::uint32_t>(&a - trace.artifacts.data()));
      }
    }
    orphan_install_size_.assign(key_index_.size(), 0);
    partial_pending_.assign(key_index_.size(), 0);
    // One KeyRef per key for the scheduler: the tasks, commands and installed
    // index share these, so keys are compared by pointer and never copied.
    // The keys lie in one block that each KeyRef shares, so that an evicted
    // key maps back to its index by its address.
    key_block_size_ = key_artifact_.size();
    key_block_ = std::make_shared<ArtifactKey[]>(key_block_size_);
    key_refs_.reserve(key_artifact_.size());
    for (std::size_t k = 0; k < key_artifact_.size(); ++k) {
      key_block_[k] = trace.artifacts[key_artifact_[k]].key;
      key_refs_.emplace_back(std::shared_ptr<const ArtifactKey>(key_block_, &key_block_[k]));
    }
  }
  ResultRecorder(const ResultRecorder&) = delete;
  ResultRecorder& operator=(const ResultRecorder&) = delete;

  // --- Streamed runs (sim --stream) --------------------------------------------
  // Rows go to `sink` as they end, demands in subscribe order and tasks in
  // start order, and are not kept: a row waits only while an earlier one is
  // still running. Demand ids come from `stream`, which is told when a demand
  // ends and when its row is written; latencies go to a LatencySpill. Call
  // before the first subscribe.
  void stream_rows(RowSink& sink, TraceStream& stream) {
    sink_ = &sink;
    stream_ = &stream;
    latencies_ = std::make_unique<LatencySpill>();
  }
  bool streaming() const { return sink_ != nullptr; }

  // The trace's artifacts read since the last call (a streamed trace's
  // catalog grows as it is read): their keys get indices. A runtime calls it
  // before a record naming a new artifact goes in.
  void add_artifacts() {
    for (std::size_t a = key_of_artifact_.size(); a < trace_.artifacts.size(); ++a) {
      const ArtifactKey& key = trace_.artifacts[a].key;
      auto [it, inserted] =
          key_index_.try_emplace(key, static_cast<std::uint32_t>(key_index_.size()));
      key_of_artifact_.push_back(it->second);
      if (!inserted) continue;
      key_size_.push_back(trace_.artifacts[a].size_bytes);
      key_artifact_.push_back(static_cast<std::uint32_t>(a));
      orphan_install_size_.push_back(0);
      partial_pending_.push_back(0);
      // Outside key_block_: charge_pending() finds it by key_index_.
      key_refs_.emplace_back(std::make_shared<const ArtifactKey>(key));
    }
  }

  // --- Keys ------------------------------------------------------------------
  std::size_t key_count() const { return key_size_.size(); }
  std::uint32_t key_of_artifact(std::uint32_t artifact) const { return key_of_artifact_[artifact]; }
  std::uint32_t key_of_task(TaskId task) { return track(task).key; }
  // The key as a KeyRef for Scheduler::subscribe.
  const KeyRef& key_ref(std::uint32_t key) const { return key_refs_[key]; }
  // The id of the first alias of a key, for displays.
  const std::string& key_name(std::uint32_t key) const {
    return trace_.artifacts[key_artifact_[key]].id;
  }

  // --- Calls into the engine -------------------------------------------------
  // A subscribe of `r` at `t`, before its commands: the next DemandAttached,
  // or a Deliver of a handle not yet known, is this demand's.
  void before_subscribe(double t, const Record& r) {
    // Rows are in subscribe order, and a demand's index is its subscribe's
    // number: the row of demand d is row d.
    const DemandResult row{r.demand, r.owner, r.artifact, r.priority, t, 0,
                           DemandOutcome::failed, false};
    if (r.demand != demand_base_ + rows_.size() + result_.demands.size())
      throw std::logic_error("subscribes out of order");
    if (streaming()) {
      rows_.push_back(row);
    } else {
      result_.demands.push_back(row);
    }
    creating_artifact_ = r.artifact;
    subscribing_ = r.demand;
    created_task_ = 0;
  }

  // --- What the runtime saw ----------------------------------------------------
  void transfer_started() { ++result_.summary.transfers_started; }
  // Body bytes an attempt of `task` received (aborted or not).
  void transfer_bytes(TaskId task, std::uint64_t bytes) {
    result_.summary.bytes_transferred += bytes;
    track(task).bytes += bytes;
  }
  // Bytes thrown away: a body that failed verification.
  void wasted(std::uint64_t bytes) { result_.summary.bytes_wasted += bytes; }
  // An attempt of `task` was aborted (its AbortTransfer went through on())
  // after receiving `bytes`. They are wasted, with whatever the task resumed
  // from a kept partial, unless the abort keeps them as a partial: then they
  // are wasted only if the partial is dropped or never resumed.
  void attempt_aborted(TaskId task, std::uint64_t bytes) {
    TaskTrack& tracked = track(task);
    const std::uint64_t total = tracked.carried + bytes;
    tracked.carried = 0;
    tracked.abort_pending = false;
    if (tracked.keep_partial) {
      std::uint64_t& pending = partial_pending_[tracked.key];
      if (pending == 0 && total > 0) ++pending_partials_;
      pending = total;
    } else {
      result_.summary.bytes_wasted += total;
    }
    if (tracked.ended) release_track(task);
  }

  // --- Commands ----------------------------------------------------------------
  void on(double, const DemandAttached& c) {
    if (subscribing_ == kNoDemand) throw std::logic_error("a demand attached outside a subscribe");
    if (c.demand.slot >= live_.size()) live_.resize(c.demand.slot + 1);
    live_[c.demand.slot] = LiveDemand{c.demand.generation, true, subscribing_};
    DemandResult& d = demand_row(subscribing_);
    d.task = c.task.value;
    // A task at the orphan level (no TaskPriorityChanged has raised it yet) is
    // an orphan this demand re-attaches to.
    d.served_by = c.task.value == created_task_     ? ServedBy::transfer
                  : !track(c.task).effective ? ServedBy::reattach
                                             : ServedBy::join;
    subscribing_ = kNoDemand;
  }
  void on(double, const DemandPriorityChanged&) {}  // The task's change, if any, follows.

  const DemandResult& on(double t, const Deliver& c) {
    std::uint32_t demand = 0;
    if (LiveDemand* live_demand = live(c.demand); live_demand != nullptr) {
      demand = live_demand->demand;
      live_demand->live = false;
    } else if (subscribing_ != kNoDemand) {
      demand = subscribing_;  // An immediate terminal: a cache hit or a refusal.
      subscribing_ = kNoDemand;
      if (c.outcome == DemandOutcome::succeeded) demand_row(demand).served_by = ServedBy::cache;
    } else {
      throw std::logic_error("delivery to an unknown demand");
    }
    DemandResult& d = demand_row(demand);
    if (d.ended) throw std::logic_error("a demand received a second terminal");
    if (stream_ != nullptr) stream_->demand_ended(demand);
    d.ended = true;
    d.t_end = t;
    d.outcome = c.outcome;
    ++result_.summary.outcomes[static_cast<std::size_t>(c.outcome)];
    if (c.outcome == DemandOutcome::succeeded) {
      if (c.task.value == 0) {
        // A cache hit: a completed orphan of that key has been used after all.
        ++result_.summary.cache_hits;
        std::uint64_t& pending = orphan_install_size_[key_of_artifact_[d.artifact]];
        if (pending != 0) --pending_orphan_installs_;
        pending = 0;
      } else {
        track(c.task).succeeded = true;
      }
    }
    return d;
  }

  void on(double, const EvictArtifact& c) {
    charge_pending(c.key, orphan_install_size_, pending_orphan_installs_);
  }

  const TaskResult& on(double t, const TaskCreated& c) {
    if (c.task.value != task_base_ + task_rows_.size() + result_.tasks.size())
      throw std::logic_error("task ids are not dense");
    track(c.task).key = key_of_artifact_[creating_artifact_];
    created_task_ = c.task.value;
    TaskResult task;
    task.artifact = creating_artifact_;
    task.t_start = t;
    if (streaming()) {
      task_rows_.push_back(TaskRow{std::move(task), false});
      return task_rows_.back().row;
    }
    result_.tasks.push_back(std::move(task));
    return result_.tasks.back();
  }

  const TaskResult& on(double t, const TaskPriorityChanged& c) {
    TaskResult& task = task_row(c.task);
    TaskTrack& tracked = track(c.task);
    // The timeline is the effective priority's; an event may change only the
    // demanded one.
    if (task.priority_timeline.empty() || tracked.effective != c.priority) {
      if (!task.priority_timeline.empty() && task.priority_timeline.back().first == t) {
        task.priority_timeline.back().second = c.priority;  // Same instant: keep the last.
      } else {
        task.priority_timeline.emplace_back(t, c.priority);
      }
    }
    tracked.effective = c.priority;
    tracked.demanded = c.demanded;
    touched_.push_back(c.task.value);
    return task;
  }

  void on(double t, const OrphanDecided& c) {
    if (!c.first_decision && c.decision == OrphanDecision::complete) return;
    task_row(c.task).orphan_decisions.push_back(
        OrphanDecisionResult{t, c.decision, c.bytes_done});
  }

  void on(double t, const TaskEnded& c) {
    TaskResult& task = task_row(c.task);
    TaskTrack& tracked = track(c.task);
    if (streaming()) task_rows_[c.task.value - task_base_].ended = true;
    // Its last demands' terminals took it to the orphan level as it ended:
    // not a change it ran at (result.h).
    auto& timeline = task.priority_timeline;
    if (timeline.size() > 1 && timeline.back().first == t && !timeline.back().second &&
        timeline[timeline.size() - 2].second) {
      timeline.pop_back();
    }
    task.t_end = t;
    task.outcome = c.outcome;
    task.attempts = c.attempts;
    task.bytes_transferred = tracked.bytes;
    task.installs = c.outcome == TaskOutcome::installed ? 1 : 0;
    result_.summary.installs += task.installs;
    if (c.outcome == TaskOutcome::installed && !tracked.succeeded) {
      // Installed while nobody waited: wasted unless a later subscribe uses it.
      if (orphan_install_size_[tracked.key] == 0) ++pending_orphan_installs_;
      orphan_install_size_[tracked.key] = key_size_[tracked.key];
    }
    close_pollution(t, tracked);
    if (tracked.abort_pending) {
      tracked.ended = true;  // Released by attempt_aborted().
    } else {
      release_track(c.task);
    }
  }

  // A first attempt with an offset resumes the key's kept partial: its bytes
  // are used (unless this task is aborted in turn).
  void on(double t, const StartTransfer& c) {
    if (c.attempt == 1) task_row(c.task).t_first_start = t;
    if (c.attempt != 1 || c.resume_offset_bytes == 0 || pending_partials_ == 0) return;
    TaskTrack& tracked = track(c.task);
    std::uint64_t& pending = partial_pending_[tracked.key];
    if (pending != 0) --pending_partials_;
    tracked.carried = pending;
    pending = 0;
  }
  void on(double, const AbortTransfer& c) {
    TaskTrack& tracked = track(c.task);
    tracked.keep_partial = c.keep_partial;
    tracked.abort_pending = true;  // Until attempt_aborted() (see TaskTrack).
  }
  void on(double, const DropPartial& c) {
    charge_pending(c.key, partial_pending_, pending_partials_);
  }

  void on(double t, const StartFinalize& c) { task_row(c.task).t_received = t; }

  // After a batch of commands: priority pollution may have started or stopped.
  void after_commands(double t) {
    for (std::uint64_t id : touched_) {
      if (track_ended(id)) continue;
      TaskTrack& task = track(TaskId{id});
      if (task.ended) continue;
      const bool polluted = task.effective && task.demanded && *task.effective > *task.demanded;
      if (polluted && task.polluted_since < 0) task.polluted_since = t;
      if (!polluted) close_pollution(t, task);
    }
    touched_.clear();
    if (streaming()) flush_rows();
  }

  // Records that did nothing (the engine's SchedulerStats counts them), and
  // settings that could not take effect.
  void ignored(std::uint64_t cancels, std::uint64_t set_priorities) {
    result_.summary.ignored_cancels = cancels;
    result_.summary.ignored_set_priorities = set_priorities;
  }
  void warn(std::string warning) { result_.warnings.push_back(std::move(warning)); }

  // The run is over at `t`.
  Result finish(double t) {
    result_.summary.makespan_s = t;
    for (TaskTrack& task : tracks_)  // Free slots are closed already.
      close_pollution(t, task);
    for (std::uint64_t pending : orphan_install_size_)
      result_.summary.bytes_wasted += pending;
    for (std::uint64_t pending : partial_pending_)  // Kept, never resumed.
      result_.summary.bytes_wasted += pending;
    if (streaming()) {
      flush_rows(/*all=*/true);
      latencies_->finish(result_.summary);
    } else {
      compute_latencies(result_, latency_scratch_.get());
    }
    return std::move(result_);
  }

  const Result& result() const { return result_; }

  // The run so far, for the oracle's probes (sim/oracle.h): the priority
  // pollution up to `t`, intervals still open included, and the rows of the
  // demands still waiting. Cost: the live tasks and demands, not the run.
  double pollution_s_at(double t) const {
    double total = result_.summary.priority_pollution_s;
    for (const TaskTrack& task : tracks_)
      if (task.polluted_since >= 0) total += t - task.polluted_since;
    return total;
  }
  template <class F>
  void for_each_live_demand(F&& f) {
    for (const LiveDemand& d : live_)
      if (d.live) f(static_cast<const DemandResult&>(demand_row(d.demand)));
  }
  // A subscribe has gone in (before_subscribe) and the engine has not yet
  // attached or answered its demand: what it emits first is still about
  // earlier events (timers due at the same instant).
  bool subscribing() const { return subscribing_ != kNoDemand; }

 private:
  // Per physical task, by TaskId (ids are dense: the engine numbers tasks 1,
  // 2, 3, ... in creation order, as results list them).
  struct TaskTrack {
    std::uint32_t key = 0;
    std::uint64_t bytes = 0;    // Received by all its attempts, aborted ones included.
    bool succeeded = false;     // Some demand was told success by it.
    // An AbortTransfer went out and its attempt_aborted() has not come yet:
    // the simulator reports it at once, but the real backend's I/O thread
    // reports it after the engine's TaskEnded, and it still needs the key,
    // keep_partial and carried. Such a task keeps its track, ended, until then.
    bool abort_pending = false;
    bool ended = false;
    bool keep_partial = false;  // Its abort kept the bytes as a partial.
    std::uint64_t carried = 0;  // Bytes of a kept partial it resumed from.
    // Priority pollution: the effective priority against what the active
    // demands ask for (TaskPriorityChanged).
    std::optional<Priority> effective;
    std::optional<Priority> demanded;
    double polluted_since = -1;  // -1 when not polluted.
  };

  // Per live demand, by handle slot (slots are dense).
  struct LiveDemand {
    std::uint32_t generation = 0;
    bool live = false;
    std::uint32_t demand = 0;  // Index into the trace's demands.
  };

  // Charges the bytes `table` holds for `key` as wasted (a completed orphan
  // evicted unused, a kept partial dropped unresumed); `nonzero` counts the
  // table's non-zero entries, so that an empty table costs no lookup.
  void charge_pending(const KeyRef& key, std::vector<std::uint64_t>& table, std::size_t& nonzero) {
    if (nonzero == 0) return;
    std::uint32_t index = 0;
    const ArtifactKey* p = key.get();
    const ArtifactKey* first = key_block_.get();
    if (std::less_equal<>{}(first, p) && std::less<>{}(p, first + key_block_size_)) {
      index = static_cast<std::uint32_t>(p - first);  // One of key_ref()'s.
    } else {
      auto it = key_index_.find(*key);
      if (it == key_index_.end()) return;
      index = it->second;
    }
    std::uint64_t& pending = table[index];
    if (pending == 0) return;
    result_.summary.bytes_wasted += pending;
    pending = 0;
    --nonzero;
  }

  void close_pollution(double t, TaskTrack& task) {
    if (task.polluted_since < 0) return;
    result_.summary.priority_pollution_s += t - task.polluted_since;
    task.polluted_since = -1;
  }

  // A task's track; made on first use. Only live
  // tasks hold a track: a million-demand run has hundreds of thousands of
  // tasks but only a few thousand at a time, and a table of them all was a
  // tenth of the simulate phase in page faults alone. A task's track is
  // released at its TaskEnded, or at its last attempt_aborted() if that comes
  // later (TaskTrack::abort_pending); asked for after that, a track is a
  // scratch one: nothing reads a task's figures any more (its bytes went into
  // the result at TaskEnded, as before).
  TaskTrack& track(TaskId task) {
    if (task.value < track_base_) {  // Ended, and its slot forgotten.
      ended_scratch_ = TaskTrack{};
      return ended_scratch_;
    }
    const std::uint64_t index = task.value - track_base_;
    if (index >= track_slot_.size()) track_slot_.resize(index + 1, kNoTrack);
    std::uint32_t& slot = track_slot_[index];
    if (slot == kNoTrack) {
      if (free_tracks_.empty()) {
        slot = static_cast<std::uint32_t>(tracks_.size());
        tracks_.emplace_back();
      } else {
        slot = free_tracks_.back();
        free_tracks_.pop_back();
        tracks_[slot] = TaskTrack{};
      }
    } else if (slot == kEndedTrack) {
      ended_scratch_ = TaskTrack{};
      return ended_scratch_;
    }
    return tracks_[slot];
  }
  // The task has ended: its track goes back to the pool.
  void release_track(TaskId task) {
    std::uint32_t& slot = track_slot_[task.value - track_base_];
    free_tracks_.push_back(slot);
    slot = kEndedTrack;
    // The window starts at the oldest task that has not ended.
    while (!track_slot_.empty() && track_slot_.front() == kEndedTrack) {
      track_slot_.pop_front();
      ++track_base_;
    }
  }
  bool track_ended(std::uint64_t id) const {
    return id < track_base_ || track_slot_[id - track_base_] == kEndedTrack;
  }

  // The row of a demand or task still being recorded.
  DemandResult& demand_row(std::uint32_t demand) {
    return streaming() ? rows_[demand - demand_base_] : result_.demands[demand];
  }
  TaskResult& task_row(TaskId task) {
    if (!streaming()) return result_.tasks[task.value - 1];
    if (task.value < task_base_) throw std::logic_error("a task written already changed");
    return task_rows_[task.value - task_base_].row;
  }

  // Streamed: hands the rows that have ended, and every row before them has,
  // to the sink (`all`: every row, at the end of the run).
  void flush_rows(bool all = false) {
    while (!rows_.empty() && (all || rows_.front().ended)) {
      const DemandResult& d = rows_.front();
      if (d.ended && d.outcome == DemandOutcome::succeeded)
        latencies_->add(d.priority, d.t_end - d.t_subscribe);
      sink_->demand(d, stream_->demand_id(d.demand));
      stream_->demand_written(d.demand);
      rows_.pop_front();
      ++demand_base_;
      ++result_.streamed_demands;
    }
    while (!task_rows_.empty() && (all || task_rows_.front().ended)) {
      sink_->task(task_rows_.front().row);
      task_rows_.pop_front();
      ++task_base_;
      ++result_.streamed_tasks;
    }
  }

  LiveDemand* live(DemandHandle h) {
    if (h.slot >= live_.size()) return nullptr;
    LiveDemand& d = live_[h.slot];
    return d.live && d.generation == h.generation ? &d : nullptr;
  }

  const Trace& trace_;
  Result result_;
  std::unordered_map<ArtifactKey, std::uint32_t> key_index_;
  std::vector<std::uint32_t> key_of_artifact_;
  std::vector<std::uint32_t> key_artifact_;  // First alias of each key.
  std::vector<std::uint64_t> key_size_;
  std::shared_ptr<ArtifactKey[]> key_block_;  // By key index: the trace's keys at the start
  std::size_t key_block_size_ = 0;            // (a streamed trace's others are add_artifacts').
  std::vector<KeyRef> key_refs_;              // Sharing key_block_.
  // Room for every demand's latency (finish); not initialized, so that its
  // pages are untouched until finish() writes them.
  std::unique_ptr<double[]> latency_scratch_ =
      std::make_unique_for_overwrite<double[]>(trace_.demand_ids.size());
  std::vector<std::uint64_t> orphan_install_size_;  // Per key: completed orphan not yet used.
  std::size_t pending_orphan_installs_ = 0;         // Keys with a non-zero entry above.
  std::vector<std::uint64_t> partial_pending_;      // Per key: kept partial not yet resumed.
  std::size_t pending_partials_ = 0;                // Keys with a non-zero entry above.
  // Streamed runs: the rows not yet written (demand_base_ is the index of
  // rows_.front(), task_base_ the TaskId of task_rows_.front()).
  RowSink* sink_ = nullptr;
  TraceStream* stream_ = nullptr;
  std::unique_ptr<LatencySpill> latencies_;
  std::deque<DemandResult> rows_;
  std::uint64_t demand_base_ = 0;
  struct TaskRow {
    TaskResult row;
    bool ended = false;
  };
  std::deque<TaskRow> task_rows_;
  std::uint64_t task_base_ = 1;
  std::vector<LiveDemand> live_;
  std::uint32_t creating_artifact_ = 0;
  static constexpr std::uint32_t kNoDemand = 0xffffffff;
  std::uint32_t subscribing_ = kNoDemand;  // The demand of the subscribe in progress,
  std::uint64_t created_task_ = 0;         // and the task it made, if any.
  static constexpr std::uint32_t kNoTrack = 0xffffffff;     // Not tracked yet.
  static constexpr std::uint32_t kEndedTrack = 0xfffffffe;  // Ended: released.
  // By TaskId - track_base_: its slot in tracks_. Tasks before track_base_
  // have all ended; so the window spans the tasks alive, not all tasks.
  std::deque<std::uint32_t> track_slot_;
  std::uint64_t track_base_ = 1;
  std::vector<TaskTrack> tracks_;                           // Live tasks' tracks, and free slots,
  std::vector<std::uint32_t> free_tracks_;                  // listed here.
  TaskTrack ended_scratch_;
  std::vector<std::uint64_t> touched_;  // Tasks whose pollution may have changed.
};

}  // namespace dfl::format
