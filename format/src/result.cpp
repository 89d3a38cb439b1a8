#include "demandflight/format/result.h"

#include <algorithm>
#include <charconv>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <cstdio>
#include <string_view>
#include <type_traits>
#include <nlohmann/json.hpp>
#include <memory>
#include <ostream>
#include <sstream>
#include <stdexcept>

namespace dfl::format {
namespace {

using ojson = nlohmann::ordered_json;

ojson percentiles_json(const Percentiles& p) {
  auto value = [](const std::optional<double>& v) { return v ? ojson(*v) : ojson(nullptr); };
  return ojson{{"p50", value(p.p50)}, {"p95", value(p.p95)}, {"p99", value(p.p99)}};
}

}  // namespace

// Nearest rank: the value at rank ceil(q * n). Three selections in place,
// each on the part above the previous rank: O(n), not a full sort.
Percentiles percentiles(double* first, double* last) {
  Percentiles out;
  if (first == last) return out;
  const auto size = static_cast<std::size_t>(last - first);
  const auto n = static_cast<double>(size);
  double* lo = first;
  auto rank = [&](double q) {
    const auto index = static_cast<std::size_t>(std::max(1.0, std::ceil(q * n))) - 1;
    double* nth = first + std::min(index, size - 1);
    std::nth_element(lo, nth, last);
    lo = nth;
    return *nth;
  };
  out.p50 = rank(0.50);
  out.p95 = rank(0.95);
  out.p99 = rank(0.99);
  return out;
}

Percentiles percentiles(std::vector<double> values) {
  return percentiles(values.data(), values.data() + values.size());
}

void compute_latencies(Result& result) {
  std::size_t succeeded = 0;
  for (const DemandResult& d : result.demands)
    succeeded += d.ended && d.outcome == DemandOutcome::succeeded;
  std::vector<double> scratch(succeeded);
  compute_latencies(result, scratch.data());
}

void compute_latencies(Result& result, double* scratch) {
  // Two passes over the demands: count the succeeded ones by priority, then
  // place their latencies in `scratch`, grouped by priority. Each group's
  // percentiles are selected in place, then those of the whole buffer (a
  // selection needs no order): no vector per priority.
  auto counted = [](const DemandResult& d) {
    return d.ended && d.outcome == DemandOutcome::succeeded;
  };
  std::map<Priority, std::size_t> count_by_priority;
  std::size_t* run = nullptr;  // Runs of one priority skip the map.
  Priority run_priority = 0;
  for (const DemandResult& d : result.demands) {
    if (!counted(d)) continue;
    if (run == nullptr || d.priority != run_priority) {
      run = &count_by_priority[d.priority];
      run_priority = d.priority;
    }
    ++*run;
  }
  std::size_t total = 0;
  std::map<Priority, std::size_t> next_by_priority;  // Where the group's next value goes.
  for (const auto& [priority, count] : count_by_priority) {
    next_by_priority[priority] = total;
    total += count;
  }
  run = nullptr;
  for (const DemandResult& d : result.demands) {
    if (!counted(d)) continue;
    if (run == nullptr || d.priority != run_priority) {
      run = &next_by_priority[d.priority];
      run_priority = d.priority;
    }
    scratch[(*run)++] = d.t_end - d.t_subscribe;
  }
  result.summary.latency_s_by_priority.clear();
  std::size_t begin = 0;
  for (const auto& [priority, count] : count_by_priority) {
    result.summary.latency_s_by_priority[priority] =
        percentiles(scratch + begin, scratch + begin + count);
    begin += count;
  }
  result.summary.latency_s = percentiles(scratch, scratch + total);
}

namespace {

// Appends JSON text to a buffer that is written out in large pieces, with
// the exact formatting of nlohmann::json::dump(): a record is written directly
// instead of being built as a JSON object first (an allocation per field,
// for every row), and still reads back, and dumps, to the same bytes.
class JsonOut {
 public:
  explicit JsonOut(std::ostream& out) : out_(out) { text_.reserve(kFlushAt + 4096); }
  JsonOut(const JsonOut&) = delete;
  JsonOut& operator=(const JsonOut&) = delete;

  JsonOut& raw(std::string_view text) {
    text_.append(text);
    if (text_.size() >= kFlushAt) flush();
    return *this;
  }
  JsonOut& string(std::string_view value) {
    text_.push_back('"');
    for (const char c : value) {
      switch (c) {
        case '"': text_.append("\\\""); break;
        case '\\': text_.append("\\\\"); break;
        case '\b': text_.append("\\b"); break;
        case '\f': text_.append("\\f"); break;
        case '\n': text_.append("\\n"); break;
        case '\r': text_.append("\\r"); break;
        case '\t': text_.append("\\t"); break;
        default:
          if (static_cast<unsigned char>(c) < 0x20) {
            char escaped[8];
            std::snprintf(escaped, sizeof escaped, "\\u%04x", static_cast<unsigned>(c));
            text_.append(escaped);
          } else {
            // UTF-8 as it came: every Trace comes from read_trace, whose parser
            // refuses invalid UTF-8 (dump() would throw on it; this would not).
            text_.push_back(c);
          }
      }
    }
    text_.push_back('"');
    return *this;
  }
  JsonOut& number(double value) {
    if (!std::isfinite(value)) return raw("null");
    char buffer[64];
    char* end = nlohmann::detail::to_chars(buffer, buffer + sizeof buffer, value);
    return raw(std::string_view(buffer, static_cast<std::size_t>(end - buffer)));
  }
  template <typename Int>
    requires std::is_integral_v<Int>
  JsonOut& number(Int value) {
    char buffer[24];
    const auto [end, error] = std::to_chars(buffer, buffer + sizeof buffer, value);
    return raw(std::string_view(buffer, static_cast<std::size_t>(end - buffer)));
  }
  // `"name":` (names are literals of this file: nothing to escape).
  JsonOut& key(std::string_view name) {
    text_.push_back('"');
    text_.append(name);
    return raw("\":");
  }

  void flush() {
    errno = 0;
    out_.write(text_.data(), static_cast<std::streamsize>(text_.size()));
    // At once, not after an hour of simulation (a full disk, a closed pipe).
    if (!out_) {
      throw std::runtime_error(std::string("writing the result failed: ") +
                               (errno != 0 ? std::strerror(errno) : "the stream failed"));
    }
    text_.clear();
  }

 private:
  static constexpr std::size_t kFlushAt = 1 << 16;
  std::ostream& out_;
  std::string text_;
};

}  // namespace

std::string_view to_string(ServedBy served_by) {
  switch (served_by) {
    case ServedBy::none:
      return "none";
    case ServedBy::transfer:
      return "transfer";
    case ServedBy::join:
      return "join";
    case ServedBy::reattach:
      return "reattach";
    case ServedBy::cache:
      return "cache";
  }
  return "none";
}

namespace {

void write_demand_row(JsonOut& json, const DemandResult& d, std::string_view demand_id,
                      const Trace& trace) {
  json.key("demand").string(demand_id);
  json.raw(",").key("owner").string(trace.owners[d.owner]);
  json.raw(",").key("artifact").string(trace.artifacts[d.artifact].id);
  json.raw(",").key("priority").number(d.priority);
  json.raw(",").key("t_subscribe").number(d.t_subscribe);
  json.raw(",").key("t_end");
  if (d.ended) {
    json.number(d.t_end);
  } else {
    json.raw("null");
  }
  json.raw(",").key("latency_s");
  if (d.ended) {
    json.number(d.t_end - d.t_subscribe);
  } else {
    json.raw("null");
  }
  json.raw(",").key("outcome");
  if (d.ended) {
    json.string(to_string(d.outcome));
  } else {
    json.raw("null");
  }
  json.raw(",").key("task");
  if (d.task != 0) {
    json.number(d.task - 1);
  } else {
    json.raw("null");
  }
  json.raw(",").key("served_by");
  if (d.served_by != ServedBy::none) {
    json.string(to_string(d.served_by));
  } else {
    json.raw("null");
  }
  json.raw("}");
}

void write_task_row(JsonOut& json, const TaskResult& t, std::string_view policy,
                    const Trace& trace) {
  json.key("artifact").string(trace.artifacts[t.artifact].id);
  json.raw(",").key("t_start").number(t.t_start);
  json.raw(",").key("t_first_start");
  if (t.t_first_start) {
    json.number(*t.t_first_start);
  } else {
    json.raw("null");
  }
  json.raw(",").key("t_received");
  if (t.t_received) {
    json.number(*t.t_received);
  } else {
    json.raw("null");
  }
  json.raw(",").key("t_end").number(t.t_end);
  json.raw(",").key("outcome").string(to_string(t.outcome));
  json.raw(",").key("attempts").number(t.attempts);
  json.raw(",").key("bytes_transferred").number(t.bytes_transferred);
  json.raw(",").key("installs").number(t.installs);
  json.raw(",").key("priority_timeline").raw("[");
  bool first_change = true;
  for (const auto& [at, priority] : t.priority_timeline) {
    json.raw(first_change ? "[" : ",[").number(at).raw(",");
    if (priority) {
      json.number(*priority);
    } else {
      json.raw("null");
    }
    json.raw("]");
    first_change = false;
  }
  json.raw("],").key("orphan_decisions").raw("[");
  bool first_decision = true;
  for (const OrphanDecisionResult& o : t.orphan_decisions) {
    json.raw(first_decision ? "{" : ",{").key("t").number(o.t);
    json.raw(",").key("decision").string(to_string(o.decision));
    json.raw(",").key("bytes_done").number(o.bytes_done);
    json.raw(",").key("policy").string(policy).raw("}");
    first_decision = false;
  }
  json.raw("]}");
}

void write_head(JsonOut& json, const Result& result) {
  ojson head{{"format", "demandflight-result"}, {"version", 1},
             {"trace", result.trace_name},      {"model", result.model},
             {"policy", result.policy},         {"seed", result.seed}};
  std::string text = head.dump();
  text.pop_back();  // Reopen the object.
  json.raw(text).raw(",\n\"demands\": [");
}

void write_tail(JsonOut& json, const Result& result) {
  const Summary& s = result.summary;
  ojson outcomes;
  for (DemandOutcome o : {DemandOutcome::succeeded, DemandOutcome::failed, DemandOutcome::cancelled,
                          DemandOutcome::timed_out, DemandOutcome::owner_ended}) {
    outcomes[std::string(to_string(o))] = s.outcomes[static_cast<std::size_t>(o)];
  }
  ojson by_priority = ojson::object();
  for (const auto& [priority, p] : s.latency_s_by_priority) {
    by_priority[std::to_string(priority)] = percentiles_json(p);
  }
  ojson summary{{"bytes_transferred", s.bytes_transferred},
                {"bytes_wasted", s.bytes_wasted},
                {"installs", s.installs},
                {"transfers_started", s.transfers_started},
                {"cache_hits", s.cache_hits},
                {"outcomes", outcomes},
                {"latency_s", percentiles_json(s.latency_s)},
                {"latency_s_by_priority", by_priority},
                {"priority_pollution_s", s.priority_pollution_s},
                {"makespan_s", s.makespan_s},
                {"ignored_cancels", s.ignored_cancels},
                {"ignored_set_priorities", s.ignored_set_priorities}};
  json.raw("],\n\"summary\": ").raw(summary.dump());
  json.raw(",\n\"warnings\": ").raw(ojson(result.warnings).dump());
  if (!result.policy_report_json.empty()) {
    json.raw(",\n\"policy_report\": ").raw(result.policy_report_json);
  }
  json.raw("}\n");
  json.flush();
}

}  // namespace

// Streams one record per line, so a run of a million demands never builds a
// million-element JSON tree in memory; each line is what nlohmann's dump()
// gives for that record (ResultJson.* checks it).
void write_result_json(const Result& result, const Trace& trace, std::ostream& out) {
  JsonOut json(out);
  write_head(json, result);
  bool first = true;
  for (const DemandResult& d : result.demands) {
    json.raw(first ? "\n {" : ",\n {");
    write_demand_row(json, d, trace.demand_ids[d.demand], trace);
    first = false;
  }
  json.raw("],\n\"tasks\": [");
  first = true;
  for (const TaskResult& t : result.tasks) {
    json.raw(first ? "\n {" : ",\n {");
    write_task_row(json, t, result.policy, trace);
    first = false;
  }
  write_tail(json, result);
}

// --- ResultJsonWriter -----------------------------------------------------------------

struct ResultJsonWriter::Impl {
  Impl(std::ostream& out, std::string policy_name, const Trace& names)
      : json(out), tasks_out(tasks_buffer), policy(std::move(policy_name)), trace(names) {}
  JsonOut json;
  // Task rows wait in a temporary file (they follow every demand row).
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> tasks{std::tmpfile(), &std::fclose};
  std::ostringstream tasks_buffer;
  JsonOut tasks_out;
  std::string policy;
  const Trace& trace;
  bool first_demand = true;
  bool first_task = true;

  void spill_tasks() {
    const std::string text = tasks_buffer.str();
    if (text.empty()) return;
    if (std::fwrite(text.data(), 1, text.size(), tasks.get()) != text.size())
      throw std::runtime_error("writing the task rows to a temporary file failed");
    tasks_buffer.str({});
  }
};

ResultJsonWriter::ResultJsonWriter(std::ostream& out, const Result& head, const Trace& trace)
    : impl_(std::make_unique<Impl>(out, head.policy, trace)) {
  if (!impl_->tasks) throw std::runtime_error("cannot create a temporary file for the task rows");
  write_head(impl_->json, head);
}

ResultJsonWriter::~ResultJsonWriter() = default;

void ResultJsonWriter::demand(const DemandResult& d, std::string_view demand_id) {
  impl_->json.raw(impl_->first_demand ? "\n {" : ",\n {");
  write_demand_row(impl_->json, d, demand_id, impl_->trace);
  impl_->first_demand = false;
}

void ResultJsonWriter::task(const TaskResult& t) {
  impl_->tasks_out.raw(impl_->first_task ? "\n {" : ",\n {");
  write_task_row(impl_->tasks_out, t, impl_->policy, impl_->trace);
  impl_->first_task = false;
  if (impl_->tasks_buffer.tellp() >= (1 << 20)) {
    impl_->tasks_out.flush();
    impl_->spill_tasks();
  }
}

void ResultJsonWriter::finish(const Result& result) {
  impl_->tasks_out.flush();
  impl_->spill_tasks();
  JsonOut& json = impl_->json;
  json.raw("],\n\"tasks\": [");
  json.flush();
  std::FILE* tasks = impl_->tasks.get();
  std::rewind(tasks);
  std::string buffer(1 << 20, '\0');
  for (;;) {
    const std::size_t n = std::fread(buffer.data(), 1, buffer.size(), tasks);
    if (n == 0) break;
    json.raw(std::string_view(buffer.data(), n));
  }
  if (std::ferror(tasks)) throw std::runtime_error("reading the task rows back failed");
  write_tail(json, result);
}

namespace {

std::string bytes_text(std::uint64_t bytes) {
  char buffer[32];
  const double b = static_cast<double>(bytes);
  if (b >= 1e9) {
    std::snprintf(buffer, sizeof buffer, "%.2f GB", b / 1e9);
  } else if (b >= 1e6) {
    std::snprintf(buffer, sizeof buffer, "%.2f MB", b / 1e6);
  } else if (b >= 1e3) {
    std::snprintf(buffer, sizeof buffer, "%.1f kB", b / 1e3);
  } else {
    std::snprintf(buffer, sizeof buffer, "%llu B", static_cast<unsigned long long>(bytes));
  }
  return buffer;
}

std::string seconds_text(const std::optional<double>& s) {
  if (!s) return "-";
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.3f s", *s);
  return buffer;
}

}  // namespace

void print_summary(const Result& r, const Trace& trace, const char* clock, std::FILE* out) {
  const Summary& s = r.summary;
  std::fprintf(out, "%s: model=%s policy=%s seed=%llu, %llu demands, %llu tasks, %.3f s %s\n",
               trace.name.c_str(), r.model.c_str(), r.policy.c_str(),
               static_cast<unsigned long long>(r.seed), static_cast<unsigned long long>(r.demand_count()), static_cast<unsigned long long>(r.task_count()),
               s.makespan_s, clock);
  std::fprintf(out,
               "  outcomes   succeeded %llu  failed %llu  cancelled %llu  timed_out %llu  "
               "owner_ended %llu\n",
               static_cast<unsigned long long>(s.outcomes[0]),
               static_cast<unsigned long long>(s.outcomes[1]),
               static_cast<unsigned long long>(s.outcomes[2]),
               static_cast<unsigned long long>(s.outcomes[3]),
               static_cast<unsigned long long>(s.outcomes[4]));
  std::fprintf(out,
               "  bytes      transferred %s  wasted %s  (%llu transfers, %llu installs, %llu cache "
               "hits)\n",
               bytes_text(s.bytes_transferred).c_str(), bytes_text(s.bytes_wasted).c_str(),
               static_cast<unsigned long long>(s.transfers_started),
               static_cast<unsigned long long>(s.installs),
               static_cast<unsigned long long>(s.cache_hits));
  std::fprintf(out, "  latency    all  p50 %s  p95 %s  p99 %s  (succeeded demands)\n",
               seconds_text(s.latency_s.p50).c_str(), seconds_text(s.latency_s.p95).c_str(),
               seconds_text(s.latency_s.p99).c_str());
  for (auto it = s.latency_s_by_priority.rbegin(); it != s.latency_s_by_priority.rend(); ++it) {
    std::fprintf(out, "             p%-3d p50 %s  p95 %s  p99 %s\n", it->first,
                 seconds_text(it->second.p50).c_str(), seconds_text(it->second.p95).c_str(),
                 seconds_text(it->second.p99).c_str());
  }
  std::fprintf(out, "  pollution  %.3f task-seconds above the highest active demand\n",
               s.priority_pollution_s);
  if (s.ignored_cancels + s.ignored_set_priorities > 0) {
    std::fprintf(out, "  ignored    %llu cancels, %llu set_priority of demands already ended\n",
                 static_cast<unsigned long long>(s.ignored_cancels),
                 static_cast<unsigned long long>(s.ignored_set_priorities));
  }
  for (const std::string& w : r.warnings)
    std::fprintf(out, "  warning    %s\n", w.c_str());
}

}  // namespace dfl::format
