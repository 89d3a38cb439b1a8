#include "demandflight/sim/result.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <ostream>

namespace dfl::sim {
namespace {

using ojson = nlohmann::ordered_json;

ojson percentiles_json(const Percentiles& p) {
  auto value = [](const std::optional<double>& v) { return v ? ojson(*v) : ojson(nullptr); };
  return ojson{{"p50", value(p.p50)}, {"p95", value(p.p95)}, {"p99", value(p.p99)}};
}

}  // namespace

// Nearest rank: the value at rank ceil(q * n). Three selections in place,
// each on the part above the previous rank: O(n), not a full sort.
Percentiles percentiles(std::vector<double> values) {
  Percentiles out;
  if (values.empty()) return out;
  const auto n = static_cast<double>(values.size());
  auto lo = values.begin();
  auto rank = [&](double q) {
    const auto index = static_cast<std::size_t>(std::max(1.0, std::ceil(q * n))) - 1;
    auto nth = values.begin() + static_cast<std::ptrdiff_t>(std::min(index, values.size() - 1));
    std::nth_element(lo, nth, values.end());
    lo = nth;
    return *nth;
  };
  out.p50 = rank(0.50);
  out.p95 = rank(0.95);
  out.p99 = rank(0.99);
  return out;
}

void compute_latencies(Result& result) {
  std::vector<double> all;
  std::map<Priority, std::vector<double>> by_priority;
  for (const DemandResult& d : result.demands) {
    if (!d.ended || d.outcome != DemandOutcome::succeeded) continue;
    const double latency = d.t_end - d.t_subscribe;
    all.push_back(latency);
    by_priority[d.priority].push_back(latency);
  }
  result.summary.latency_s = percentiles(std::move(all));
  result.summary.latency_s_by_priority.clear();
  for (auto& [priority, values] : by_priority) {
    result.summary.latency_s_by_priority[priority] = percentiles(std::move(values));
  }
}

// Streams one record per line, so a run of a million demands never builds a
// million-element JSON tree in memory.
void write_result_json(const Result& result, const Trace& trace, std::ostream& out) {
  ojson head{{"format", "demandflight-result"}, {"version", 1},
             {"trace", result.trace_name},      {"model", result.model},
             {"policy", result.policy},         {"seed", result.seed}};
  std::string text = head.dump();
  text.pop_back();  // Reopen the object.
  out << text << ",\n\"demands\": [";
  bool first = true;
  for (const DemandResult& d : result.demands) {
    ojson record{{"demand", trace.demand_ids[d.demand]},
                 {"owner", trace.owners[d.owner]},
                 {"artifact", trace.artifacts[d.artifact].id},
                 {"priority", d.priority},
                 {"t_subscribe", d.t_subscribe},
                 {"t_end", d.ended ? ojson(d.t_end) : ojson(nullptr)},
                 {"outcome", d.ended ? ojson(std::string(to_string(d.outcome))) : ojson(nullptr)}};
    out << (first ? "\n " : ",\n ") << record.dump();
    first = false;
  }
  out << "],\n\"tasks\": [";
  first = true;
  for (const TaskResult& t : result.tasks) {
    ojson timeline = ojson::array();
    for (const auto& [at, priority] : t.priority_timeline) {
      timeline.push_back(ojson::array({at, priority ? ojson(*priority) : ojson(nullptr)}));
    }
    ojson record{{"artifact", trace.artifacts[t.artifact].id},
                 {"t_start", t.t_start},
                 {"t_end", t.t_end},
                 {"outcome", std::string(to_string(t.outcome))},
                 {"attempts", t.attempts},
                 {"bytes_transferred", t.bytes_transferred},
                 {"installs", t.installs},
                 {"priority_timeline", timeline}};
    out << (first ? "\n " : ",\n ") << record.dump();
    first = false;
  }
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
                {"makespan_s", s.makespan_s}};
  out << "],\n\"summary\": " << summary.dump() << "}\n";
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
  std::fprintf(out, "%s: model=%s policy=%s seed=%llu, %zu demands, %zu tasks, %.3f s %s\n",
               trace.name.c_str(), r.model.c_str(), r.policy.c_str(),
               static_cast<unsigned long long>(r.seed), r.demands.size(), r.tasks.size(),
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
}

}  // namespace dfl::sim
