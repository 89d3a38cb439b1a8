// Result: what a run produced, in the result format of docs/trace-format.md.
//
// write_result_json() is deterministic: the same Result gives the same bytes.
// Definitions the format leaves to the implementation:
// - latency_s: t_end - t_subscribe over *succeeded* demands; percentiles by
//   nearest rank; null when no demand succeeded. `latency_s_by_priority`
//   (an added field) gives the same per subscribe priority.
// - priority_pollution_s: task-seconds, summed over tasks, during which a
//   task's effective priority was above the highest priority among its active
//   demands (demands not yet told their terminal, at the priority they last
//   asked for). The demand model scores 0 by construction.
// - bytes_wasted: bytes received by transfers that were then aborted, bytes of
//   transfers whose result failed verification, and the size of every artifact
//   installed while nobody waited for it (a completed orphan) that no later
//   subscribe used before it was evicted or the run ended.
#pragma once

#include <array>
#include <cstdint>
#include <cstdio>
#include <iosfwd>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "demandflight/engine/orphan_policy.h"
#include "demandflight/engine/outcome.h"
#include "demandflight/format/trace.h"

namespace dfl::format {

// How a demand was served: it made the task (transfer), joined a live task
// (join), re-attached to an orphan that was still running or finalizing
// (reattach), or succeeded from the cache (cache); none for a demand refused
// at once (a stale owner generation, a deadline already past).
enum class ServedBy : std::uint8_t { none, transfer, join, reattach, cache };
std::string_view to_string(ServedBy served_by);

struct DemandResult {
  std::uint32_t demand = 0;  // Index into Trace::demand_ids.
  std::uint32_t owner = 0;
  std::uint32_t artifact = 0;
  Priority priority = 0;  // At subscribe.
  double t_subscribe = 0;
  double t_end = 0;
  DemandOutcome outcome = DemandOutcome::failed;
  bool ended = false;  // False only if the run stopped before its terminal (a bug).
  std::uint64_t task = 0;  // The TaskId that served it (tasks[task - 1]); 0 for none.
  ServedBy served_by = ServedBy::none;
};

// An answer of the orphan policy about a task (OrphanDecided): its first
// one, and a later one that stopped the task (a re-ask that kept it
// completing changes nothing and is not listed; the decision log has it).
struct OrphanDecisionResult {
  double t = 0;
  OrphanDecision decision = OrphanDecision::abort;
  std::uint64_t bytes_done = 0;
};

struct TaskResult {
  std::uint32_t artifact = 0;  // The alias of the subscribe that created it.
  double t_start = 0;
  double t_end = 0;
  std::optional<double> t_first_start;  // Its first transfer's start; none: never started.
  // When its last transfer had all its bytes and its finalize (verification
  // and install) began; none: no transfer completed. t_end - t_received is
  // the finalize's time, t_received - t_first_start the transfers' (with any
  // retries and their backoff).
  std::optional<double> t_received;
  TaskOutcome outcome = TaskOutcome::failed;
  std::uint32_t attempts = 0;
  std::uint64_t bytes_transferred = 0;
  std::uint32_t installs = 0;
  // (time, effective priority; nullopt: the orphan level, no active demand
  // from then on). A change at t_end (the last demands' terminals) is not
  // listed: t_end and outcome say how the task ended.
  std::vector<std::pair<double, std::optional<Priority>>> priority_timeline;
  std::vector<OrphanDecisionResult> orphan_decisions;
};

struct Percentiles {
  std::optional<double> p50, p95, p99;
};

struct Summary {
  std::uint64_t bytes_transferred = 0;
  std::uint64_t bytes_wasted = 0;
  std::uint64_t installs = 0;
  std::uint64_t transfers_started = 0;
  std::uint64_t cache_hits = 0;
  std::array<std::uint64_t, 5> outcomes{};  // By DemandOutcome.
  Percentiles latency_s;
  std::map<Priority, Percentiles> latency_s_by_priority;
  double priority_pollution_s = 0;
  double makespan_s = 0;  // Virtual time at which the run ended (added field).
  // Records that did nothing: cancels and set_priority records of demands that
  // had ended already (their terminal came first).
  std::uint64_t ignored_cancels = 0;
  std::uint64_t ignored_set_priorities = 0;
};

struct Result {
  std::string trace_name;
  std::string model;
  std::string policy;
  std::uint64_t seed = 0;
  std::vector<DemandResult> demands;  // In trace (subscribe) order.
  std::vector<TaskResult> tasks;      // In start order.
  Summary summary;
  // Settings of the run that cannot take effect, in words (also on stderr).
  std::vector<std::string> warnings;
  // What the policy says about its run, a JSON object written verbatim as
  // "policy_report" (the oracle's; empty: none).
  std::string policy_report_json;
  // A streamed run (sim --stream) hands its rows to a RowSink as they end
  // and keeps none: `demands` and `tasks` stay empty and these count them.
  std::uint64_t streamed_demands = 0;
  std::uint64_t streamed_tasks = 0;
  std::uint64_t demand_count() const { return demands.size() + streamed_demands; }
  std::uint64_t task_count() const { return tasks.size() + streamed_tasks; }
};

// Fills the latency fields of result.summary from result.demands.
void compute_latencies(Result& result);
// The same, with `scratch` (room for one double per succeeded demand; at
// most result.demands.size()) as its working memory, which a caller can
// have ready in advance.
void compute_latencies(Result& result, double* scratch);

Percentiles percentiles(std::vector<double> values);
Percentiles percentiles(double* first, double* last);  // Reorders the values.

void write_result_json(const Result& result, const Trace& trace, std::ostream& out);

// Where a streamed run's rows go as they end: demands in subscribe order,
// tasks in start order (recorder.h, ResultRecorder::stream_rows).
class RowSink {
 public:
  virtual ~RowSink() = default;
  virtual void demand(const DemandResult& d, std::string_view demand_id) = 0;
  virtual void task(const TaskResult& t) = 0;
};

// write_result_json()'s bytes, written piece by piece for a run whose rows
// are not kept: the head at once, each demand row as it comes, the task rows
// into a temporary file (they follow every demand row in the document), and
// at finish() the task rows and the summary. `head` gives the trace name,
// model, policy and seed; `trace` the names (owners, artifacts), which must
// be there when a row naming them comes.
class ResultJsonWriter final : public RowSink {
 public:
  ResultJsonWriter(std::ostream& out, const Result& head, const Trace& trace);
  ~ResultJsonWriter() override;
  void demand(const DemandResult& d, std::string_view demand_id) override;
  void task(const TaskResult& t) override;
  // The summary, warnings and policy report of `result`; then the document is complete.
  void finish(const Result& result);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// A streamed run's rows as CSV, for pandas to read in chunks: one file of
// demand rows and one of task rows (either path may be empty: not written),
// gzip-compressed when the name ends in `.gz`. The columns are the result
// JSON's fields, in its order; the task file starts with `task` (the index a
// demand row's `task` names), and a task's priority_timeline and
// orphan_decisions are JSON text in one column each. Empty fields are nulls.
class CsvRowWriter final : public RowSink {
 public:
  CsvRowWriter(const std::string& demands_path, const std::string& tasks_path,
               const Trace& trace, std::string policy);
  ~CsvRowWriter() override;
  void demand(const DemandResult& d, std::string_view demand_id) override;
  void task(const TaskResult& t) override;
  // Flushes and closes both files; throws std::runtime_error if that fails.
  void finish();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The rows of a run in memory as CsvRowWriter writes a streamed run's (either
// path may be empty: not written). Throws std::runtime_error if writing fails.
void write_rows_csv(const Result& result, const Trace& trace, const std::string& demands_path,
                    const std::string& tasks_path);

// Exact nearest-rank percentiles of values that need not fit in memory: the
// latencies of a streamed run. Values go to a temporary file (12 bytes
// each); finish() selects each rank by radix selection on the values' bits,
// 16 bits per pass over the file (at most four passes, usually two or three),
// and gives exactly what compute_latencies() gives for the same values.
class LatencySpill {
 public:
  // `collect_at_most`: a rank's candidates are gathered and selected in
  // memory once they are this few (tests make it small to exercise the
  // passes).
  explicit LatencySpill(std::uint64_t collect_at_most = std::uint64_t{1} << 20);
  ~LatencySpill();
  LatencySpill(const LatencySpill&) = delete;
  LatencySpill& operator=(const LatencySpill&) = delete;
  void add(Priority priority, double latency_s);
  std::uint64_t size() const { return count_; }
  // Fills latency_s and latency_s_by_priority.
  void finish(Summary& summary);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::uint64_t count_ = 0;
  std::uint64_t collect_at_most_;
};

// A compact, readable summary: outcomes, bytes, wasted, latency percentiles
// overall and by priority, pollution. `clock` names the time ("simulated").
void print_summary(const Result& result, const Trace& trace, const char* clock, std::FILE* out);

}  // namespace dfl::format
