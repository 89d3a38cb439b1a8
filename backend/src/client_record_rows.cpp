// The recording as the client's observer: each subscribe as the core makes
// the demand, and (RecordOptions::outcomes) what happened to each demand and
// task, as the result's rows (docs/trace-format.md, *Result rows: CSV*),
// written as each ends. The rows are the trace's: `demand` and `artifact`
// are the recording's ids; `task` is the client's task number, the same in
// both files.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>

#include "client_record.h"
#include "demandflight/format/result_rows.h"

namespace dfl::backend {
namespace {

std::uint64_t pack(DemandHandle h) {
  return (std::uint64_t{h.generation} << 32) | h.slot;
}

std::filesystem::path beside(const std::filesystem::path& first, const char* suffix) {
  std::filesystem::path path = first;
  path.replace_filename(first.stem().string() + suffix);
  return path;
}

}  // namespace

std::filesystem::path record_outcome_path(const std::filesystem::path& first, bool tasks) {
  return beside(first, tasks ? ".tasks.csv" : ".demands.csv");
}

void Recording::open_rows() {
  sides_[kDemandRows].path = record_outcome_path(options_.path, false);
  sides_[kTaskRows].path = record_outcome_path(options_.path, true);
  for (Side& side : sides_) {
    side.fd = ::open(side.path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (side.fd < 0) {
      const int error = errno;
      for (Side& opened : sides_) {
        if (opened.fd >= 0) ::close(opened.fd);
      }
      if (fd_ >= 0) ::close(fd_);
      throw std::runtime_error("cannot create " + side.path.string() + ": " + std::strerror(error));
    }
  }
  // The result rows' columns (format/result_rows.h), and the demand's reason.
  sides_[kDemandRows].pending = std::string(format::CsvRows::kDemandColumns) + ",reason\n";
  sides_[kTaskRows].pending = std::string(format::CsvRows::kTaskColumns) + "\n";
  pending_rows_ = sides_[kDemandRows].pending.size() + sides_[kTaskRows].pending.size();
}

void Recording::append_row(std::size_t side, std::string row) {
  std::unique_lock lock(mutex_);
  if (!status_.error.empty()) return;
  while (pending_.size() + pending_rows_ + row.size() > options_.buffer_bytes &&
         pending_rows_ + pending_.size() > 0 && status_.error.empty()) {
    ++status_.waits;  // The disk is behind: wait rather than drop a row.
    wake_writer_.notify_one();
    space_.wait(lock);
  }
  pending_rows_ += row.size();
  sides_[side].pending += row;
}

void Recording::on_subscribe(double t, DemandHandle demand, const ArtifactRef& artifact,
                             const DemandOptions& options, std::optional<TaskId> task) {
  std::string artifact_id = subscribe(t, demand, artifact, options);
  if (!options_.outcomes) return;
  DemandRow row;
  row.owner = "o" + std::to_string(options.owner);
  row.artifact = std::move(artifact_id);
  row.priority = options.priority;
  row.t_subscribe = t;
  if (task) {
    row.task = task->value;
    row.served_by = "join";  // "transfer" if the call makes the task (TaskCreated).
  }
  last_subscribe_ = pack(demand);
  live_demands_[last_subscribe_] = std::move(row);
}

void Recording::on_delivered(double /*t*/, DemandHandle demand, const DemandResult& result) {
  if (!options_.outcomes) return;
  if (auto it = live_demands_.find(pack(demand)); it != live_demands_.end())
    it->second.reason = result.reason;
}

void Recording::on_command(double t, const Command& command) {
  if (!options_.outcomes) return;
  dispatch(command, Overloaded{
      [&](const TaskCreated& c) { task_created(t, c); },
      [&](const TaskPriorityChanged& c) { task_priority_changed(t, c); },
      [&](const OrphanDecided& c) { orphan_decided(t, c); },
      [&](const StartTransfer& c) { transfer_started(t, c); },
      [&](const StartFinalize& c) { finalize_started(t, c); },
      [&](const Deliver& c) { delivered(t, c); },
      [&](const TaskEnded& c) { task_ended(t, c); },
      // Nothing of a row: the task's own figures come with its end.
      [](const AbortTransfer&) {}, [](const EvictArtifact&) {}, [](const DropPartial&) {},
      [](const DemandAttached&) {}, [](const DemandPriorityChanged&) {}});
}

void Recording::task_created(double t, const TaskCreated& created) {
  auto demand = live_demands_.find(last_subscribe_);
  TaskRow row;
  row.t_start = t;
  if (demand != live_demands_.end() && demand->second.task == created.task.value) {
    demand->second.served_by = "transfer";
    row.artifact = demand->second.artifact;
  }
  live_tasks_[created.task.value] = std::move(row);
}

void Recording::task_priority_changed(double t, const TaskPriorityChanged& changed) {
  auto it = live_tasks_.find(changed.task.value);
  if (it == live_tasks_.end()) return;
  TaskRow& task = it->second;
  if (task.timeline.empty() || task.effective != changed.priority) {
    if (!task.timeline.empty() && task.timeline.back().first == t) {
      task.timeline.back().second = changed.priority;  // Same instant: the last.
    } else {
      task.timeline.emplace_back(t, changed.priority);
    }
  }
  task.effective = changed.priority;
}

void Recording::orphan_decided(double t, const OrphanDecided& decided) {
  // The first answer, and a later one that stopped it (as the simulator's rows).
  if (!decided.first_decision && decided.decision == OrphanDecision::complete) return;
  auto it = live_tasks_.find(decided.task.value);
  if (it == live_tasks_.end()) return;
  it->second.decisions.emplace_back(t, decided);
}

void Recording::transfer_started(double t, const StartTransfer& start) {
  auto task = live_tasks_.find(start.task.value);
  if (task != live_tasks_.end() && !task->second.t_first_start) task->second.t_first_start = t;
}

void Recording::finalize_started(double t, const StartFinalize& finalize) {
  auto task = live_tasks_.find(finalize.task.value);
  if (task != live_tasks_.end()) task->second.t_received = t;
}

void Recording::delivered(double t, const Deliver& deliver) {
  auto it = live_demands_.find(pack(deliver.demand));
  if (it == live_demands_.end()) return;
  const DemandRow& d = it->second;
  const char* served_by = d.served_by;
  if (d.task == 0 && deliver.outcome == DemandOutcome::succeeded) served_by = "cache";
  const std::string demand = record_demand_id(deliver.demand);
  format::DemandRowFields fields;
  fields.demand = demand;
  fields.owner = d.owner;
  fields.artifact = d.artifact;
  fields.priority = d.priority;
  fields.t_subscribe = record_time(d.t_subscribe);
  fields.t_end = record_time(t);
  fields.latency_s = record_time(record_time(t) - record_time(d.t_subscribe));
  fields.outcome = to_string(deliver.outcome);
  if (d.task != 0) fields.task = d.task;
  fields.served_by = served_by;
  std::string row;
  format::CsvRows::append(row, fields);
  row += ',';
  format::CsvRows::append_text(row, d.reason.empty() && deliver.outcome != DemandOutcome::succeeded
                                        ? std::string(to_string(deliver.outcome))
                                        : d.reason);
  row += '\n';
  live_demands_.erase(it);
  append_row(kDemandRows, std::move(row));
}

void Recording::task_ended(double t, const TaskEnded& ended) {
  auto it = live_tasks_.find(ended.task.value);
  if (it == live_tasks_.end()) return;
  TaskRow& task = it->second;
  // Its last demands' terminals took it to the orphan level as it ended:
  // not a level it ran at.
  auto& timeline = task.timeline;
  if (timeline.size() > 1 && timeline.back().first == t && !timeline.back().second &&
      timeline[timeline.size() - 2].second) {
    timeline.pop_back();
  }
  std::vector<std::pair<double, std::optional<Priority>>> rounded;
  for (const auto& [at, priority] : timeline)
    rounded.emplace_back(record_time(at), priority);
  std::vector<format::OrphanDecisionFields> decisions;
  for (const auto& [at, answer] : task.decisions)
    decisions.push_back(format::OrphanDecisionFields{record_time(at), answer.decision,
                                                     answer.bytes_done});
  format::TaskRowFields fields;
  fields.task = ended.task.value;
  fields.artifact = task.artifact;
  fields.t_start = record_time(task.t_start);
  if (task.t_first_start) fields.t_first_start = record_time(*task.t_first_start);
  if (task.t_received) fields.t_received = record_time(*task.t_received);
  fields.t_end = record_time(t);
  fields.outcome = to_string(ended.outcome);
  fields.attempts = ended.attempts;
  fields.bytes_transferred = ended.bytes_transferred;
  fields.installs = ended.outcome == TaskOutcome::installed ? 1 : 0;
  fields.priority_timeline = rounded;
  fields.orphan_decisions = decisions;
  std::string row;
  format::CsvRows::append(row, fields);
  row += '\n';
  live_tasks_.erase(it);
  append_row(kTaskRows, std::move(row));
}

}  // namespace dfl::backend
