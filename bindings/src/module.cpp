// demandflight._core: the C++ core for Python (pybind11).
//
// The public Python API is the package around it (bindings/python/demandflight):
// this module only exposes what that package needs: trace parsing, one
// simulation (in the calling process: the package runs each in a fresh one),
// the orphan view and a bridge for Python-defined policies, and the engine.
// Long C++ work runs with the GIL released; a Python policy takes it back for
// each decision.
#include <pybind11/functional.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdio>
#include <fstream>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>
#include <variant>
#include <vector>

#include "demandflight/engine/scheduler.h"
#include "demandflight/format/describe.h"
#include "demandflight/format/generator.h"
#include "demandflight/format/import.h"
#include "demandflight/format/resample.h"
#include "demandflight/policies/registry.h"
#include "demandflight/sim/oracle.h"
#include "demandflight/format/result.h"
#include "demandflight/format/score.h"
#include "demandflight/format/defaults.h"
#include "demandflight/sim/simulator.h"
#include "demandflight/format/trace.h"
#include "demandflight/format/trace_writer.h"

namespace py = pybind11;
using namespace pybind11::literals;

namespace dfl::python {

void add_trace_writer(py::module_& m);  // trace_writer.cpp

namespace {

// The value of `Enum` (one of `values`) that to_string() calls `name`; a
// ValueError naming `argument` and the names otherwise.
template <class Enum>
Enum named(const char* argument, const std::string& name, std::initializer_list<Enum> values) {
  std::string known;
  for (Enum v : values) {
    if (to_string(v) == name) return v;
    known += (known.empty() ? "" : ", ") + std::string(to_string(v));
  }
  throw py::value_error(std::string(argument) + " must be one of " + known + ", not '" + name + "'");
}

// The model named `name`, or a ValueError naming the argument.
Model model_of(const std::string& name) {
  if (auto model = parse_model(name)) return *model;
  throw py::value_error("model must be " + model_names_text() + ", not \"" + name + "\"");
}

// --- Policies defined in Python ----------------------------------------------

OrphanDecision to_decision(const py::handle& answer) {
  if (py::isinstance<OrphanDecision>(answer)) return answer.cast<OrphanDecision>();
  if (py::isinstance<py::str>(answer)) {
    const std::string text = answer.cast<std::string>();
    if (text == "abort") return OrphanDecision::abort;
    if (text == "complete") return OrphanDecision::complete;
    if (text == "keep_partial") return OrphanDecision::keep_partial;
  }
  throw py::value_error(
      "an orphan policy's decide() must return Decision.ABORT, COMPLETE or "
      "KEEP_PARTIAL (or \"abort\", \"complete\", \"keep_partial\"), not " +
      py::repr(answer).cast<std::string>());
}

// An OrphanPolicy whose decide() calls a Python object's decide(view). The
// engine calls it with the GIL released; it takes the GIL for each call.
class PythonPolicy final : public OrphanPolicy {
 public:
  explicit PythonPolicy(py::object policy) : policy_(std::move(policy)) {
    py::gil_scoped_acquire gil;
    name_ = py::str(policy_.attr("name")).cast<std::string>();
    history_ = py::bool_(policy_.attr("uses_key_history")).cast<bool>();
    observes_ = py::hasattr(policy_, "observe_request");
    reasks_ = py::hasattr(policy_, "ask_again_at_s");
  }
  ~PythonPolicy() override {
    py::gil_scoped_acquire gil;
    policy_ = py::object();
  }

  OrphanDecision decide(const OrphanView& view) override {
    py::gil_scoped_acquire gil;
    // The view is only valid during the call: Python gets a copy.
    return to_decision(policy_.attr("decide")(view));
  }
  void observe_request(const ArtifactKey& key, double now_s) override {
    if (!observes_) return;
    py::gil_scoped_acquire gil;
    policy_.attr("observe_request")(key, now_s);
  }
  std::optional<double> ask_again_at_s(const OrphanView& view) override {
    if (!reasks_) return std::nullopt;
    py::gil_scoped_acquire gil;
    const py::object at = policy_.attr("ask_again_at_s")(view);
    if (at.is_none()) return std::nullopt;
    return at.cast<double>();
  }
  std::string_view name() const override { return name_; }
  bool uses_key_history() const override { return history_; }

 private:
  py::object policy_;
  std::string name_;
  bool history_ = false;
  bool observes_ = false;
  bool reasks_ = false;
};

std::shared_ptr<OrphanPolicy> policy_from(const py::object& policy) {
  if (policy.is_none()) return nullptr;
  if (py::isinstance<py::str>(policy)) {
    return policies::make_orphan_policy(policy.cast<std::string>());
  }
  return std::make_shared<PythonPolicy>(policy);
}

// --- Traces ------------------------------------------------------------------

using TracePtr = std::shared_ptr<const format::Trace>;

TracePtr parse_trace(const std::string& text, const std::string& name) {
  py::gil_scoped_release release;
  std::istringstream in(text);
  return std::make_shared<const format::Trace>(format::read_trace(in, name));
}

TracePtr load_trace(const std::string& path) {
  py::gil_scoped_release release;
  return std::make_shared<const format::Trace>(format::read_trace(path));
}

// A plain description of a parsed trace, for equality and inspection: the
// header's effective values (defaults applied) and every record with names.
py::dict trace_to_dict(const format::Trace& t) {
  py::dict platform("client_bandwidth_Bps"_a = t.platform.client_bandwidth_Bps,
                    "client_latency_s"_a = t.platform.client_latency_s,
                    "disk_write_Bps"_a = t.platform.disk_write_Bps,
                    "hash_Bps"_a = t.platform.hash_Bps);
  py::dict origins;
  for (const auto& o : t.platform.origins) {
    origins[py::str(o.name)] =
        py::dict("bandwidth_Bps"_a = o.bandwidth_Bps, "latency_s"_a = o.latency_s);
  }
  platform["origins"] = origins;
  py::dict scheduler(
      "max_transfers"_a = t.scheduler.max_transfers,
      "max_per_origin"_a = t.scheduler.max_per_origin, "cache_bytes"_a = t.scheduler.cache_bytes,
      "retry_max_attempts"_a = t.scheduler.retry_max_attempts,
      "retry_base_s"_a = t.scheduler.retry_base_s, "retry_cap_s"_a = t.scheduler.retry_cap_s,
      "retry_jitter"_a = t.scheduler.retry_jitter,
      "breaker_failures"_a = t.scheduler.breaker_failures,
      "breaker_open_s"_a = t.scheduler.breaker_open_s,
      "throttle"_a = py::dict(
          "background_at_or_below"_a =
              t.scheduler.throttle.background_at_or_below
                  ? py::object(py::int_(*t.scheduler.throttle.background_at_or_below))
                  : py::none(),
          "background_Bps"_a = t.scheduler.throttle.background_Bps,
          "overall_Bps"_a = t.scheduler.throttle.overall_Bps));
  py::list artifacts;
  for (const auto& a : t.artifacts) {
    py::dict artifact(
        "id"_a = a.id, "resource"_a = a.key.resource, "revision"_a = a.key.revision,
        "target"_a = a.key.target, "generation"_a = a.key.generation, "size"_a = a.size_bytes,
        "origin"_a = t.platform.origins[a.origin].name, "sha256"_a = a.sha256);
    if (!a.mirrors.empty()) {  // The artifact line's `origins`: `origin` first.
      py::list names;
      names.append(t.platform.origins[a.origin].name);
      for (std::uint32_t m : a.mirrors)
        names.append(t.platform.origins[m].name);
      artifact["origins"] = names;
    }
    artifacts.append(artifact);
  }
  py::list records;
  for (const auto& r : t.records) {
    py::dict d("op"_a = std::string(format::to_string(r.op)), "t"_a = r.t);
    switch (r.op) {
      case format::Op::subscribe:
        d["demand"] = t.demand_ids[r.demand];
        d["owner"] = t.owners[r.owner];
        d["artifact"] = t.artifacts[r.artifact].id;
        d["priority"] = r.priority;
        d["owner_generation"] = r.owner_generation;
        d["timeout_s"] = r.has_timeout() ? py::object(py::float_(r.timeout_s)) : py::none();
        break;
      case format::Op::cancel:
        d["demand"] = t.demand_ids[r.demand];
        break;
      case format::Op::set_priority:
        d["demand"] = t.demand_ids[r.demand];
        d["priority"] = r.priority;
        break;
      case format::Op::end_owner:
        d["owner"] = t.owners[r.owner];
        d["owner_generation"] =
            r.has_generation ? py::object(py::int_(r.owner_generation)) : py::none();
        break;
      case format::Op::fault: {
        const format::FaultSpec& f = t.faults[r.fault];
        d["kind"] = std::string(format::to_string(f.kind));
        if (f.kind == format::FaultKind::origin_down) {
          d["origin"] = t.platform.origins[f.origin].name;
          d["duration_s"] = f.duration_s;
        } else {
          d["artifact"] = t.artifacts[r.artifact].id;
          d["count"] = f.count;
          if (f.kind == format::FaultKind::transfer_error) {
            d["after_fraction"] = f.after_fraction;
            d["retryable"] = f.retryable;
          }
        }
        break;
      }
      case format::Op::throttle: {
        const ThrottleConfig& c = t.throttles[r.fault];
        d["background_at_or_below"] = c.background_at_or_below
                                          ? py::object(py::int_(*c.background_at_or_below))
                                          : py::none();
        d["background_Bps"] = c.background_Bps;
        d["overall_Bps"] = c.overall_Bps;
        break;
      }
    }
    records.append(d);
  }
  return py::dict("name"_a = t.name, "seed"_a = t.seed, "platform"_a = platform,
                  "scheduler"_a = scheduler, "artifacts"_a = artifacts, "records"_a = records);
}

// --- One simulation ------------------------------------------------------------

format::NetworkModel network_model_of(const std::string& name) {
  if (auto model = format::parse_network_model(name)) return *model;
  throw py::value_error("network_model must be one of " + format::network_model_names_text() +
                        ", not \"" + name + "\"");
}

// The options both kinds of run take from Python.
sim::SimOptions sim_options(const std::string& model, const py::object& policy,
                            const std::string& policy_name, std::optional<std::uint64_t> seed,
                            std::optional<std::uint32_t> max_transfers,
                            std::optional<std::uint32_t> max_per_origin,
                            const std::optional<std::string>& network_model) {
  sim::SimOptions options;
  options.model = model_of(model);
  options.policy = policy_name;
  if (!py::isinstance<py::str>(policy) && !policy.is_none()) {
    options.policy_object = policy_from(policy);
  } else {
    sim::check_sim_policy(policy_name);
  }
  options.seed = seed;
  options.max_transfers = max_transfers;
  options.max_per_origin = max_per_origin;
  if (network_model) options.network_model = network_model_of(*network_model);
  return options;
}

// What `demandflight sim` prints for `result`.
std::string summary_text(const format::Result& result, const format::Trace& trace) {
  char* buffer = nullptr;
  std::size_t size = 0;
  FILE* memory = ::open_memstream(&buffer, &size);
  format::print_summary(result, trace, "simulated", memory);
  std::fclose(memory);
  std::string summary(buffer, size);
  std::free(buffer);
  return summary;
}

// The rows of `result` by column, pickled to `path` for the parent process
// (bindings/python/demandflight/_simulate.py builds the DataFrames from them):
// {"demands": {column: values}, "tasks": {...}}, the columns and values of the
// result JSON's rows. Numbers are the bytes of a float64 or int64 array (a
// null is NaN: t_end, latency_s, task, t_first_start, t_received); text is a
// list of str or None, one object per distinct name; a task's
// priority_timeline and orphan_decisions are lists as in the JSON.
void write_row_columns(const format::Result& result, const format::Trace& trace,
                       const std::string& path) {
  constexpr double kNull = std::numeric_limits<double>::quiet_NaN();
  auto bytes_of = [](const auto& values) {
    return py::bytes(reinterpret_cast<const char*>(values.data()),
                     values.size() * sizeof(values[0]));
  };
  // One Python str per distinct name: the pickle then holds each once.
  std::vector<py::object> owners(trace.owners.size()), artifacts(trace.artifacts.size());
  auto owner = [&](std::uint32_t i) {
    if (!owners[i]) owners[i] = py::str(trace.owners[i]);
    return owners[i];
  };
  auto artifact = [&](std::uint32_t i) {
    if (!artifacts[i]) artifacts[i] = py::str(trace.artifacts[i].id);
    return artifacts[i];
  };
  std::map<std::string_view, py::object> words;  // Outcomes, served_by, decisions.
  auto word = [&](std::string_view w) {
    py::object& o = words[w];
    if (!o) o = py::str(std::string(w));
    return o;
  };

  const std::size_t n = result.demands.size();
  py::list demand(n), demand_owner(n), demand_artifact(n), outcome(n), served_by(n);
  std::vector<std::int64_t> priority(n);
  std::vector<double> t_subscribe(n), t_end(n), latency(n), task(n);
  for (std::size_t i = 0; i < n; ++i) {
    const format::DemandResult& d = result.demands[i];
    demand[i] = py::str(trace.demand_ids[d.demand]);
    demand_owner[i] = owner(d.owner);
    demand_artifact[i] = artifact(d.artifact);
    priority[i] = d.priority;
    t_subscribe[i] = d.t_subscribe;
    t_end[i] = d.ended ? d.t_end : kNull;
    latency[i] = d.ended ? d.t_end - d.t_subscribe : kNull;
    outcome[i] = d.ended ? word(to_string(d.outcome)) : py::none();
    task[i] = d.task != 0 ? static_cast<double>(d.task - 1) : kNull;
    served_by[i] = d.served_by != format::ServedBy::none ? word(to_string(d.served_by))
                                                          : py::none();
  }
  py::dict demands("demand"_a = demand, "owner"_a = demand_owner, "artifact"_a = demand_artifact,
                   "priority"_a = bytes_of(priority), "t_subscribe"_a = bytes_of(t_subscribe),
                   "t_end"_a = bytes_of(t_end), "latency_s"_a = bytes_of(latency),
                   "outcome"_a = outcome, "task"_a = bytes_of(task), "served_by"_a = served_by);

  const std::size_t m = result.tasks.size();
  py::list task_artifact(m), task_outcome(m), timelines(m), decisions(m);
  std::vector<double> t_start(m), t_first_start(m), t_received(m), task_end(m);
  std::vector<std::int64_t> attempts(m), bytes(m), installs(m);
  const py::str policy(result.policy);
  for (std::size_t i = 0; i < m; ++i) {
    const format::TaskResult& t = result.tasks[i];
    task_artifact[i] = artifact(t.artifact);
    t_start[i] = t.t_start;
    t_first_start[i] = t.t_first_start.value_or(kNull);
    t_received[i] = t.t_received.value_or(kNull);
    task_end[i] = t.t_end;
    task_outcome[i] = word(to_string(t.outcome));
    attempts[i] = t.attempts;
    bytes[i] = static_cast<std::int64_t>(t.bytes_transferred);
    installs[i] = t.installs;
    py::list timeline(t.priority_timeline.size());
    for (std::size_t k = 0; k < t.priority_timeline.size(); ++k) {
      const auto& [at, level] = t.priority_timeline[k];
      py::list change(2);
      change[0] = py::float_(at);
      change[1] = level ? py::object(py::int_(*level)) : py::none();
      timeline[k] = change;
    }
    timelines[i] = timeline;
    py::list answers(t.orphan_decisions.size());
    for (std::size_t k = 0; k < t.orphan_decisions.size(); ++k) {
      const format::OrphanDecisionResult& o = t.orphan_decisions[k];
      answers[k] = py::dict("t"_a = o.t, "decision"_a = word(to_string(o.decision)),
                            "bytes_done"_a = o.bytes_done, "policy"_a = policy);
    }
    decisions[i] = answers;
  }
  py::dict tasks("artifact"_a = task_artifact, "t_start"_a = bytes_of(t_start),
                 "t_first_start"_a = bytes_of(t_first_start),
                 "t_received"_a = bytes_of(t_received), "t_end"_a = bytes_of(task_end),
                 "outcome"_a = task_outcome, "attempts"_a = bytes_of(attempts),
                 "bytes_transferred"_a = bytes_of(bytes), "installs"_a = bytes_of(installs),
                 "priority_timeline"_a = timelines, "orphan_decisions"_a = decisions);
  py::object file = py::module_::import("builtins").attr("open")(path, "wb");
  py::module_::import("pickle").attr("dump")(py::dict("demands"_a = demands, "tasks"_a = tasks),
                                             file, "protocol"_a = 5);
  file.attr("close")();
}

// Runs the simulation in this process (once per process: SimGrid) and writes
// the result JSON to `out_path` (none if empty). Returns the printed summary.
std::string simulate(const TracePtr& trace, const std::string& model, const py::object& policy,
                     const std::string& policy_name, std::optional<std::uint64_t> seed,
                     std::optional<std::uint32_t> max_transfers,
                     std::optional<std::uint32_t> max_per_origin,
                     std::optional<std::string> network_model, const std::string& out_path,
                     const std::string& timeline_path, const std::string& decisions_path,
                     double decision_horizon_s, const std::vector<std::string>& oracle_bases,
                     const std::string& resample, const std::string& head_path,
                     const std::string& rows_path) {
  const format::Resample how = format::parse_resample(resample);
  sim::SimOptions options = sim_options(model, policy, policy_name, seed, max_transfers,
                                        max_per_origin, network_model);
  options.timeline_path = timeline_path;
  options.decisions_path = decisions_path;
  options.decision_horizon_s = decision_horizon_s;
  for (const std::string& base : oracle_bases)
    sim::check_sim_policy(base);
  options.oracle_bases = oracle_bases;
  format::Result result;
  // The run's seed draws the resampling too (format/resample.h); the result
  // names the resampled trace's owners and demands.
  std::optional<format::Trace> resampled;
  const format::Trace* ran = trace.get();
  {
    py::gil_scoped_release release;
    if (how != format::Resample::none) {
      resampled = format::resample(*trace, how, options.seed.value_or(trace->seed));
      ran = &*resampled;
    }
    result = sim::simulate(*ran, options);
    for (const std::string& warning : result.warnings)
      std::fprintf(stderr, "demandflight: warning: %s\n", warning.c_str());
    if (!out_path.empty()) {
      std::ofstream out(out_path);
      format::write_result_json(result, *ran, out);
      if (!out) throw std::runtime_error("cannot write " + out_path);
    }
    if (!head_path.empty()) {  // The result without its rows (rows_path has them).
      std::vector<format::DemandResult> demands = std::exchange(result.demands, {});
      std::vector<format::TaskResult> tasks = std::exchange(result.tasks, {});
      std::ofstream head(head_path);
      format::write_result_json(result, *ran, head);
      if (!head) throw std::runtime_error("cannot write " + head_path);
      result.demands = std::move(demands);
      result.tasks = std::move(tasks);
    }
  }
  if (!rows_path.empty()) write_row_columns(result, *ran, rows_path);
  return summary_text(result, *ran);
}

// A streamed run (sim --stream): the trace at `path` read as the simulation
// reaches it, each row written to the CSV files as it ends, and the result
// JSON without rows (its summary; the rows are in the CSV files) to
// `out_path`. Returns the printed summary.
std::string simulate_streamed(const std::string& path, const std::string& model,
                              const py::object& policy, const std::string& policy_name,
                              std::optional<std::uint64_t> seed,
                              std::optional<std::uint32_t> max_transfers,
                              std::optional<std::uint32_t> max_per_origin,
                              std::optional<std::string> network_model,
                              const std::string& out_path, const std::string& demands_csv,
                              const std::string& tasks_csv) {
  const sim::SimOptions options = sim_options(model, policy, policy_name, seed, max_transfers,
                                              max_per_origin, network_model);
  if (!options.policy_object && !sim::streamable_policy(policy_name)) {
    throw py::value_error("policy: " + policy_name +
                          " reads the whole trace in advance: it cannot run streamed");
  }
  format::Result result;
  std::optional<format::TraceStream> stream;
  {
    py::gil_scoped_release release;
    stream.emplace(path);
    format::CsvRowWriter rows(demands_csv, tasks_csv, stream->trace(), policy_name);
    result = sim::simulate_streamed(*stream, options, rows);
    rows.finish();
    for (const std::string& warning : result.warnings)
      std::fprintf(stderr, "demandflight: warning: %s\n", warning.c_str());
    std::ofstream out(out_path);
    format::write_result_json(result, stream->trace(), out);
    if (!out) throw std::runtime_error("cannot write " + out_path);
  }
  return summary_text(result, stream->trace());
}

// The cost score's weights from a dict; ValueError "weights: ..." naming a bad one.
format::Weights weights_from(const py::dict& weights) {
  format::Weights w;
  for (const auto& [name, value] : weights) {
    try {
      format::set_weight(w, py::cast<std::string>(name), py::cast<double>(value));
    } catch (const std::invalid_argument& e) {
      throw py::value_error(std::string("weights: ") + e.what());
    } catch (const py::cast_error&) {
      throw py::type_error("weights: " + py::cast<std::string>(py::str(name)) +
                           " must be a number");
    }
  }
  return w;
}

// --- The engine ------------------------------------------------------------------

py::dict command_to_dict(const Command& command) {
  return dispatch(
      command, [](const auto& c) -> py::dict {
        using T = std::decay_t<decltype(c)>;
        if constexpr (std::is_same_v<T, StartTransfer>) {
          return py::dict("type"_a = "start_transfer", "task"_a = c.task.value,
                          "transfer"_a = c.transfer.value, "key"_a = *c.key, "origin"_a = c.origin,
                          "resume_offset_bytes"_a = c.resume_offset_bytes,
                          "size_bytes"_a = c.size_bytes, "attempt"_a = c.attempt,
                          "priority"_a = c.priority);
        } else if constexpr (std::is_same_v<T, AbortTransfer>) {
          return py::dict("type"_a = "abort_transfer", "task"_a = c.task.value,
                          "transfer"_a = c.transfer.value, "keep_partial"_a = c.keep_partial,
                          "kept_bytes"_a = c.kept_bytes);
        } else if constexpr (std::is_same_v<T, StartFinalize>) {
          return py::dict("type"_a = "start_finalize", "task"_a = c.task.value,
                          "finalize"_a = c.finalize.value, "key"_a = *c.key,
                          "size_bytes"_a = c.size_bytes);
        } else if constexpr (std::is_same_v<T, Deliver>) {
          return py::dict("type"_a = "deliver", "demand"_a = c.demand,
                          "outcome"_a = std::string(to_string(c.outcome)), "task"_a = c.task.value);
        } else if constexpr (std::is_same_v<T, EvictArtifact>) {
          return py::dict("type"_a = "evict_artifact", "key"_a = *c.key,
                          "size_bytes"_a = c.size_bytes);
        } else if constexpr (std::is_same_v<T, DropPartial>) {
          return py::dict("type"_a = "drop_partial", "key"_a = *c.key, "bytes"_a = c.bytes);
        } else if constexpr (std::is_same_v<T, TaskCreated>) {
          return py::dict("type"_a = "task_created", "task"_a = c.task.value);
        } else if constexpr (std::is_same_v<T, DemandAttached>) {
          return py::dict("type"_a = "demand_attached", "demand"_a = c.demand,
                          "task"_a = c.task.value, "priority"_a = c.priority);
        } else if constexpr (std::is_same_v<T, DemandPriorityChanged>) {
          return py::dict("type"_a = "demand_priority_changed", "demand"_a = c.demand,
                          "task"_a = c.task.value, "priority"_a = c.priority);
        } else if constexpr (std::is_same_v<T, TaskPriorityChanged>) {
          return py::dict("type"_a = "task_priority_changed", "task"_a = c.task.value,
                          "priority"_a = c.priority, "demanded"_a = c.demanded);
        } else if constexpr (std::is_same_v<T, OrphanDecided>) {
          return py::dict("type"_a = "orphan_decided", "task"_a = c.task.value,
                          "decision"_a = std::string(to_string(c.decision)),
                          "first_decision"_a = c.first_decision, "bytes_done"_a = c.bytes_done);
        } else {
          static_assert(std::is_same_v<T, TaskEnded>);
          return py::dict("type"_a = "task_ended", "task"_a = c.task.value,
                          "outcome"_a = std::string(to_string(c.outcome)),
                          "attempts"_a = c.attempts, "bytes_transferred"_a = c.bytes_transferred);
        }
      });
}

class Engine {
 public:
  static constexpr std::uint32_t kMaxOrigins = SchedulerConfig{}.max_origins;

  Engine(const std::string& model, std::uint32_t max_transfers, std::uint32_t max_per_origin,
         std::uint64_t cache_bytes, std::uint64_t seed, const py::object& policy)
      : scheduler_(config(model, max_transfers, max_per_origin, cache_bytes, seed),
                   policy_from(policy)) {}

  py::tuple subscribe(double now, const ArtifactKey& key, OwnerId owner, Priority priority,
                      std::optional<double> deadline_s, OwnerGeneration owner_generation,
                      OriginId origin, std::uint64_t size_bytes,
                      const std::vector<OriginId>& mirrors) {
    if (auto problem = origins_problem(origin, mirrors, kMaxOrigins))
      throw py::value_error(*problem);
    DemandOptions o;
    o.mirrors = mirrors;
    o.owner = owner;
    o.owner_generation = owner_generation;
    o.priority = priority;
    o.deadline_s = deadline_s.value_or(kNoDeadline);
    o.origin = origin;
    o.size_bytes = size_bytes;
    DemandHandle h;
    {
      py::gil_scoped_release release;  // A Python policy may be asked (it takes the GIL back).
      h = scheduler_.subscribe(now, key, o);
    }
    return py::make_tuple(h, commands());
  }
  py::list cancel(double now, DemandHandle h) {
    return call([&] { scheduler_.cancel(now, h); });
  }
  py::list set_priority(double now, DemandHandle h, Priority p) {
    return call([&] { scheduler_.set_priority(now, h, p); });
  }
  py::list end_owner(double now, OwnerId owner, std::optional<OwnerGeneration> generation) {
    return call([&] { scheduler_.end_owner(now, owner, generation); });
  }
  py::list transfer_progress(double now, std::uint64_t transfer, std::uint64_t bytes) {
    return call([&] { scheduler_.on_transfer_progress(now, TransferId{transfer}, bytes); });
  }
  py::list transfer_finished(double now, std::uint64_t transfer, const std::string& status,
                             std::uint64_t bytes, std::optional<double> retry_after_s) {
    const TransferStatus s =
        named<TransferStatus>("status", status,
                              {TransferStatus::ok, TransferStatus::retryable_error,
                               TransferStatus::permanent_error});
    return call([&] {
      scheduler_.on_transfer_finished(now, TransferId{transfer}, s, bytes, retry_after_s);
    });
  }
  py::list finalize_finished(double now, std::uint64_t finalize, const std::string& status) {
    const FinalizeStatus s =
        named<FinalizeStatus>("status", status,
                              {FinalizeStatus::installed, FinalizeStatus::verify_failed,
                               FinalizeStatus::error});
    return call([&] { scheduler_.on_finalize_finished(now, FinalizeId{finalize}, s); });
  }
  py::list timer(double now) {
    return call([&] { scheduler_.on_timer(now); });
  }
  std::optional<double> next_wakeup_s() const { return scheduler_.next_wakeup_s(); }
  py::list tasks() const {
    py::list out;
    for (const TaskInfo& t : scheduler_.tasks()) {
      out.append(py::dict(
          "task"_a = t.id.value, "key"_a = t.key, "state"_a = std::string(to_string(t.state)),
          "effective_priority"_a = t.effective_priority, "active_demands"_a = t.active_demands,
          "attempts"_a = t.attempts, "resume_offset_bytes"_a = t.resume_offset_bytes,
          "bytes_transferred"_a = t.bytes_transferred));
    }
    return out;
  }
  py::dict stats() const {
    const SchedulerStats& s = scheduler_.stats();
    return py::dict("demands_subscribed"_a = s.demands_subscribed,
                    "tasks_created"_a = s.tasks_created,
                    "transfers_started"_a = s.transfers_started, "installs"_a = s.installs,
                    "cache_hits"_a = s.cache_hits, "orphan_aborts"_a = s.orphan_aborts,
                    "orphan_completes"_a = s.orphan_completes, "partials_kept"_a = s.partials_kept,
                    "partials_resumed"_a = s.partials_resumed, "failovers"_a = s.failovers,
                    "breaker_opens"_a = s.breaker_opens);
  }
  double now_s() const { return scheduler_.now_s(); }

 private:
  static SchedulerConfig config(const std::string& model, std::uint32_t max_transfers,
                                std::uint32_t max_per_origin, std::uint64_t cache_bytes,
                                std::uint64_t seed) {
    SchedulerConfig c;
    c.model = model_of(model);
    if (max_transfers == 0 || max_per_origin == 0) {
      throw py::value_error("max_transfers and max_per_origin must be at least 1");
    }
    c.max_transfers = max_transfers;
    c.max_per_origin = max_per_origin;
    c.cache_bytes = cache_bytes;
    c.seed = seed;
    return c;
  }

  template <class F>
  py::list call(F&& f) {
    {
      py::gil_scoped_release release;
      f();
    }
    return commands();
  }

  py::list commands() {
    scheduler_.take_commands(buffer_);
    py::list out;
    for (const Command& c : buffer_)
      out.append(command_to_dict(c));
    return out;
  }

  Scheduler scheduler_;
  std::vector<Command> buffer_;
};

// --- The module ------------------------------------------------------------------

// TraceError, raised with the file, line and field of a bad trace.
void add_errors(py::module_& m) {
  static py::exception<format::TraceError> trace_error(m, "TraceError", PyExc_ValueError);
  trace_error.attr("__doc__") =
      "A trace that is not valid. str(e) is 'FILE:LINE: field: message', as the CLI prints "
      "it; e.file, e.line and e.field hold the parts.";
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const format::TraceError& e) {
      py::object error = py::reinterpret_borrow<py::object>(trace_error.ptr())(py::str(e.what()));
      error.attr("file") = e.file();
      error.attr("line") = e.line();
      error.attr("field") = e.field();
      PyErr_SetObject(trace_error.ptr(), error.ptr());
    }
  });
}

// The engine's value types, and a parsed trace.
void add_types(py::module_& m) {
  py::enum_<OrphanDecision>(m, "Decision",
                            "What to do with a transfer nobody waits for any more: ABORT (stop; "
                            "the bytes are lost), COMPLETE (finish below every real priority and "
                            "install), KEEP_PARTIAL (stop but keep the bytes for the next "
                            "request to resume).")
      .value("ABORT", OrphanDecision::abort)
      .value("COMPLETE", OrphanDecision::complete)
      .value("KEEP_PARTIAL", OrphanDecision::keep_partial);

  py::class_<ArtifactKey>(m, "ArtifactKey", "The identity of an immutable artifact.")
      .def(py::init<std::string, std::string, std::string, std::int64_t>(), "resource"_a,
           "revision"_a, "target"_a = "pc", "generation"_a = 0)
      .def_readonly("resource", &ArtifactKey::resource)
      .def_readonly("revision", &ArtifactKey::revision)
      .def_readonly("target", &ArtifactKey::target)
      .def_readonly("generation", &ArtifactKey::generation)
      .def("__eq__", [](const ArtifactKey& a, const ArtifactKey& b) { return a == b; })
      .def("__hash__", [](const ArtifactKey& a) { return std::hash<ArtifactKey>{}(a); })
      .def("__repr__", [](const ArtifactKey& k) {
        return "ArtifactKey(" + k.resource + "@" + k.revision + "/" + k.target + "#" +
               std::to_string(k.generation) + ")";
      });

  py::class_<DemandHandle>(m, "DemandHandle", "A demand, as the engine names it.")
      .def_readonly("slot", &DemandHandle::slot)
      .def_readonly("generation", &DemandHandle::generation)
      .def("__eq__", [](const DemandHandle& a, const DemandHandle& b) { return a == b; })
      .def("__hash__",
           [](const DemandHandle& h) { return (std::uint64_t{h.slot} << 32) | h.generation; })
      .def("__repr__", [](const DemandHandle& h) {
        return "DemandHandle(" + std::to_string(h.slot) + "/" + std::to_string(h.generation) + ")";
      });

  py::class_<OrphanView>(m, "OrphanView",
                         "What an orphan policy sees (a copy, valid after decide() returns).")
      .def_property_readonly("now_s", [](const OrphanView& v) { return v.now_s; })
      .def_property_readonly("key",
                             [](const OrphanView& v) -> std::optional<ArtifactKey> {
                               if (v.key == nullptr) return std::nullopt;
                               return *v.key;
                             })
      .def_property_readonly("task", [](const OrphanView& v) { return v.task.value; })
      .def_readonly("size_bytes", &OrphanView::size_bytes)
      .def_readonly("bytes_done", &OrphanView::bytes_done)
      .def_readonly("bytes_remaining", &OrphanView::bytes_remaining)
      .def_readonly("elapsed_s", &OrphanView::elapsed_s)
      .def_readonly("throughput_Bps", &OrphanView::throughput_Bps)
      .def_readonly("queued_tasks", &OrphanView::queued_tasks)
      .def_readonly("queued_bytes", &OrphanView::queued_bytes)
      .def_readonly("queued_top_priority", &OrphanView::queued_top_priority)
      .def_readonly("free_slots", &OrphanView::free_slots)
      .def_readonly("first_decision", &OrphanView::first_decision)
      .def_readonly("key_demands", &OrphanView::key_demands)
      .def_readonly("since_last_demand_s", &OrphanView::since_last_demand_s)
      .def_readonly("previous_gap_s", &OrphanView::previous_gap_s)
      .def_readonly("cache_capacity_bytes", &OrphanView::cache_capacity_bytes)
      .def_readonly("cache_used_bytes", &OrphanView::cache_used_bytes)
      .def_readonly("partial_capacity_bytes", &OrphanView::partial_capacity_bytes)
      .def_readonly("partial_used_bytes", &OrphanView::partial_used_bytes);

  py::class_<format::Trace, std::shared_ptr<format::Trace>>(m, "ParsedTrace", "A validated trace (C++).")
      .def_property_readonly("name", [](const format::Trace& t) { return t.name; })
      .def_property_readonly("seed", [](const format::Trace& t) { return t.seed; })
      .def_property_readonly("records", [](const format::Trace& t) { return t.records.size(); })
      .def_property_readonly("artifacts", [](const format::Trace& t) { return t.artifacts.size(); })
      .def_property_readonly("demands", [](const format::Trace& t) { return t.demand_ids.size(); })
      .def("to_dict", [](const format::Trace& t) { return trace_to_dict(t); });
}

// The names the simulator knows, its limits, and the score (format/score.h).
void add_scoring(py::module_& m) {
  m.attr("MODELS") = py::cast(model_names());
  m.attr("NETWORK_MODELS") = py::cast(format::network_model_names());
  m.attr("NS3_ATTRIBUTE_DEFAULTS") = sim::kNs3AttributeDefaults;
  {
    py::dict weights;
    for (const auto& [name, value] : format::weight_values(format::Weights{}))
      weights[py::str(name)] = value;
    m.attr("DEFAULT_WEIGHTS") = weights;
  }
  m.def(
      "metrics",
      [](const std::string& result_json, const py::dict& weights) {
        const format::Metrics scored = format::score_result_json(result_json, weights_from(weights));
        py::dict out;
        for (const format::MetricField& f : format::kMetricFields) {
          const std::string_view name = f.name;
          if (name != "regret" && name != "vs_oracle") out[f.name] = scored.*f.field;
        }
        return out;
      },
      "The figures compare reports for one result JSON text (format/score.h).",
      py::arg("result_json"), py::arg("weights"));
  m.def(
      "regret",
      [](double score, double oracle_score) {
        format::Metrics scored;
        scored.score = score;
        format::set_regret(scored, oracle_score);
        return py::make_tuple(scored.regret, scored.vs_oracle);
      },
      "(regret, vs_oracle) of a score against the oracle's (format/score.h).",
      py::arg("score"), py::arg("oracle_score"));
  m.attr("MAX_TRANSFERS_LIMIT") = format::defaults::max_transfers_limit;
  m.def("streamable_policy", &sim::streamable_policy, py::arg("spec"),
        "Whether a policy spec can run streamed (not one that reads the whole trace).");
  m.def(
      "check_weights", [](const py::dict& weights) { weights_from(weights); }, py::arg("weights"),
      "Raises ValueError naming a weight that format/score.h does not know or a bad value.");
}

// Traces: parsed, read, described, generated and imported.
void add_traces(py::module_& m) {
  m.def(
      "parse_trace",
      [](const std::string& text, const std::string& name) {
        return std::const_pointer_cast<format::Trace>(parse_trace(text, name));
      },
      "text"_a, "name"_a, "Parses and validates trace text; raises TraceError (file:line: field).");
  m.def(
      "load_trace",
      [](const std::string& path) { return std::const_pointer_cast<format::Trace>(load_trace(path)); },
      "path"_a, "Reads and validates a trace file; raises TraceError.");
  m.def(
      "merge_recording_parts",
      [](const std::vector<std::string>& parts) {
        std::ostringstream out;
        format::merge_recording_parts(parts, out);
        return out.str();
      },
      "parts"_a, "A rotated recording's parts as one trace's text; raises TraceError.");
  m.def(
      "describe_json",
      [](const std::shared_ptr<format::Trace>& trace, std::size_t top) {
        py::gil_scoped_release release;
        std::ostringstream out;
        format::write_description_json(format::describe(*trace), out, top);
        return out.str();
      },
      "trace"_a, "top"_a,
      "describe(trace) as JSON text (format/describe.h), the `top` most requested keys (0: all).");
  m.def(
      "generate_trace",
      [](const std::string& spec, std::uint64_t seed) {
        const format::GenSpec parsed = format::parse_gen_spec(spec);
        format::GenOptions options;
        options.seed = seed;
        if (parsed.demands) options.demands = *parsed.demands;
        std::ostringstream out;
        format::generate(parsed.kind, options, out);
        return out.str();
      },
      "spec"_a, "seed"_a,
      "The trace text of gen:KIND[:demands=N] with `seed`; ValueError naming a bad spec.");
  m.def(
      "import_trace",
      [](const std::string& format_name, const std::vector<std::string>& inputs,
         const std::string& out_path, const std::map<std::string, std::string>& options) {
        py::gil_scoped_release release;
        // The importer writes nothing before the whole input was read and found
        // good; the file appears under its name only then.
        const std::string partial = out_path + ".partial";
        {
          std::ofstream out(partial);
          if (!out) throw std::runtime_error("cannot write " + partial);
          try {
            format::import_trace(format_name, inputs, options, out);
          } catch (...) {
            out.close();
            std::remove(partial.c_str());
            throw;
          }
          out.close();
          if (!out) throw std::runtime_error("cannot write " + partial);
        }
        if (std::rename(partial.c_str(), out_path.c_str()) != 0) {
          throw std::runtime_error("cannot rename " + partial + " to " + out_path);
        }
      },
      "format"_a, "inputs"_a, "out"_a, "options"_a,
      "Imports a log or capture as a trace file (format/import.h).");
  m.def("import_formats", &format::import_formats);
  m.def("import_options", [](const std::string& format_name) {
    std::vector<std::tuple<std::string, std::string, bool, bool, std::string>> out;
    for (const format::ImportOption& o : format::import_options(format_name))
      out.emplace_back(o.name, o.help, o.required, o.flag, o.default_value);
    return out;
  });
}

// Simulation runs, and the policies they take.
void add_simulation(py::module_& m) {
  m.def(
      "simulate",
      [](const std::shared_ptr<format::Trace>& trace, const std::string& model,
         const py::object& policy, const std::string& policy_name,
         std::optional<std::uint64_t> seed, std::optional<std::uint32_t> mt,
         std::optional<std::uint32_t> mpo, std::optional<std::string> network,
         const std::string& out, const std::string& timeline, const std::string& decisions,
         double decision_horizon_s, const std::vector<std::string>& oracle_bases,
         const std::string& resample, const std::string& head_out,
         const std::string& rows_out) {
        return simulate(trace, model, policy, policy_name, seed, mt, mpo, network, out, timeline,
                        decisions, decision_horizon_s, oracle_bases, resample, head_out,
                        rows_out);
      },
      "trace"_a, "model"_a, "policy"_a, "policy_name"_a, "seed"_a, "max_transfers"_a,
      "max_per_origin"_a, "network_model"_a, "out"_a, "timeline"_a, "decisions"_a = "",
      "decision_horizon_s"_a = 60.0, "oracle_bases"_a = std::vector<std::string>{},
      "resample"_a = "none", "head_out"_a = "", "rows_out"_a = "",
      "Runs one simulation in this process (once per process) and writes the result JSON "
      "(where named: the whole, the result without its rows, the rows by column).");
  m.def("simulate_streamed", &simulate_streamed, "path"_a, "model"_a, "policy"_a,
        "policy_name"_a, "seed"_a, "max_transfers"_a, "max_per_origin"_a, "network_model"_a,
        "out"_a, "demands_csv"_a, "tasks_csv"_a,
        "A streamed run (sim --stream) in this process: rows to the CSV files as they end, "
        "the result JSON without rows to `out`.");
  m.def("split_policy_list", &policies::split_policy_list, "list"_a,
        "Splits a comma-separated list of policy specs (k=v items belong to the policy before).");
  m.def(
      "check_policy", [](const std::string& spec) { sim::check_sim_policy(spec); }, "spec"_a,
      "Raises ValueError for a policy spec the simulator does not know.");
  m.def("policy_names", [] {
    std::vector<std::pair<std::string, std::string>> out = policies::list_orphan_policies();
    return out;
  });
}

// The bare engine (Engine): calls in, commands out as dicts.
void add_engine(py::module_& m) {
  py::class_<Engine>(m, "Engine")
      .def(py::init<const std::string&, std::uint32_t, std::uint32_t, std::uint64_t, std::uint64_t,
                    const py::object&>(),
           "model"_a = "demand", "max_transfers"_a = 4, "max_per_origin"_a = 4,
           "cache_bytes"_a = 2'000'000'000, "seed"_a = 1, "policy"_a = py::none())
      .def("subscribe", &Engine::subscribe, "now"_a, "key"_a, "owner"_a, "priority"_a = 0,
           "deadline_s"_a = py::none(), "owner_generation"_a = 0, "origin"_a = 0,
           "size_bytes"_a = 0, "mirrors"_a = std::vector<OriginId>{})
      .def("cancel", &Engine::cancel, "now"_a, "demand"_a)
      .def("set_priority", &Engine::set_priority, "now"_a, "demand"_a, "priority"_a)
      .def("end_owner", &Engine::end_owner, "now"_a, "owner"_a, "owner_generation"_a = py::none())
      .def("transfer_progress", &Engine::transfer_progress, "now"_a, "transfer"_a, "bytes"_a)
      .def("transfer_finished", &Engine::transfer_finished, "now"_a, "transfer"_a, "status"_a,
           "bytes"_a, "retry_after_s"_a = py::none())
      .def("finalize_finished", &Engine::finalize_finished, "now"_a, "finalize"_a, "status"_a)
      .def("timer", &Engine::timer, "now"_a)
      .def_property_readonly("next_wakeup_s", &Engine::next_wakeup_s)
      .def_property_readonly("now_s", &Engine::now_s)
      .def("tasks", &Engine::tasks)
      .def("stats", &Engine::stats);
}

}  // namespace
}  // namespace dfl::python

PYBIND11_MODULE(_core, m) {
  m.doc() = "demandflight's C++ core (use the demandflight package, not this module)";
  dfl::python::add_errors(m);
  dfl::python::add_types(m);
  dfl::python::add_scoring(m);
  dfl::python::add_traces(m);
  dfl::python::add_simulation(m);
  dfl::python::add_engine(m);
  dfl::python::add_trace_writer(m);
}
