// The result JSON writer streams records as text. Each record line must be
// exactly what nlohmann::json::dump() gives for it (so that output is the same
// bytes as when records were built as JSON objects), and must read back to the
// values written: strings with quotes, backslashes, control characters and
// UTF-8; doubles that need 17 digits, exponents or a ".0"; missing terminals.
#include <gtest/gtest.h>

#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "demandflight/format/result.h"

namespace dfl::format {
namespace {

using ojson = nlohmann::ordered_json;

Artifact artifact_named(const std::string& id) {
  Artifact a;
  a.id = id;
  return a;
}

struct Written {
  std::string text;
  std::vector<std::string> record_lines;  // Demand and task lines, without the separators.
};

Written write(const Result& result, const Trace& trace) {
  std::ostringstream out;
  write_result_json(result, trace, out);
  Written w{out.str(), {}};
  std::istringstream lines(w.text);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind(" {", 0) != 0) continue;
    line.erase(0, 1);
    if (line.back() == ',') line.pop_back();
    if (line.size() >= 2 && line.substr(line.size() - 2) == "],") line.resize(line.size() - 2);
    if (line.back() == ']') line.pop_back();  // The last record closes its array.
    w.record_lines.push_back(line);
  }
  return w;
}

TEST(ResultJson, EachRecordIsWhatNlohmannDumpGivesAndReadsBackExactly) {
  Trace trace;
  trace.name = "writer \"test\"";
  const std::vector<std::string> ids = {
      "plain", "quote\"d", "back\\slash", "new\nline", "tab\tand\rcr", "bell\x01\x1f",
      "caf\xc3\xa9 \xf0\x9f\x9a\x80",  // UTF-8 passes through unescaped.
      "/slash/", "\b\f", std::string("nul\0in", 6), "del\x7f"};
  trace.demand_ids = ids;
  trace.owners = ids;
  for (const std::string& id : ids)
    trace.artifacts.push_back(artifact_named(id));

  const std::vector<double> times = {0.0,   0.1,     2.0,     1e-7,    123456.789,
                                     1e21,  1.0 / 3, 5e-324,  1e308,   27889.611234567891,
                                     -0.0,  0.5,     1e-5,    42.0,    std::numeric_limits<double>::max()};
  Result result;
  result.trace_name = trace.name;
  result.model = "demand";
  result.policy = "always-abort";
  result.seed = 18446744073709551615ull;
  for (std::size_t i = 0; i < times.size(); ++i) {
    DemandResult d;
    d.demand = d.owner = d.artifact = static_cast<std::uint32_t>(i % ids.size());
    d.priority = static_cast<Priority>(i) - 3;
    d.t_subscribe = times[i];
    d.t_end = times[(i + 1) % times.size()];
    d.outcome = static_cast<DemandOutcome>(i % 5);
    d.ended = i % 4 != 3;  // Some without a terminal: null t_end and outcome.
    d.task = i % 3 == 0 ? 0 : i;  // Some served by no task: null.
    d.served_by = static_cast<ServedBy>(i % 5);
    result.demands.push_back(d);

    TaskResult t;
    t.artifact = static_cast<std::uint32_t>(i % ids.size());
    t.t_start = times[i];
    t.t_end = times[(i + 2) % times.size()];
    t.outcome = static_cast<TaskOutcome>(i % 4);
    t.attempts = static_cast<std::uint32_t>(i);
    t.bytes_transferred = 18446744073709551615ull - i;
    t.installs = static_cast<std::uint32_t>(i % 2);
    for (std::size_t k = 0; k < i % 4; ++k) {
      t.priority_timeline.emplace_back(times[(i + k) % times.size()],
                                       k % 2 ? std::optional<Priority>() : Priority(k));
    }
    if (i % 3 != 1) t.t_first_start = times[(i + 3) % times.size()];  // Some never started.
    if (i % 4 != 2) t.t_received = times[(i + 5) % times.size()];      // Some never received.
    for (std::size_t k = 0; k < i % 3; ++k) {
      t.orphan_decisions.push_back(OrphanDecisionResult{
          times[(i + k + 4) % times.size()], static_cast<OrphanDecision>((i + k) % 3),
          18446744073709551615ull - k});
    }
    result.tasks.push_back(t);
  }
  result.summary.makespan_s = 1.0 / 7;
  result.summary.latency_s.p95 = 0.25;
  result.summary.latency_s_by_priority[3].p50 = 1e-9;

  const Written w = write(result, trace);
  ASSERT_EQ(w.record_lines.size(), result.demands.size() + result.tasks.size()) << w.text;
  // Each line is the dump of the record built as a JSON object, field by field
  // in the format's order (what the writer did before it wrote text).
  for (std::size_t i = 0; i < result.demands.size(); ++i) {
    const DemandResult& d = result.demands[i];
    const ojson expected{{"demand", trace.demand_ids[d.demand]},
                         {"owner", trace.owners[d.owner]},
                         {"artifact", trace.artifacts[d.artifact].id},
                         {"priority", d.priority},
                         {"t_subscribe", d.t_subscribe},
                         {"t_end", d.ended ? ojson(d.t_end) : ojson(nullptr)},
                         {"latency_s", d.ended ? ojson(d.t_end - d.t_subscribe) : ojson(nullptr)},
                         {"outcome", d.ended ? ojson(std::string(to_string(d.outcome)))
                                             : ojson(nullptr)},
                         {"task", d.task != 0 ? ojson(d.task - 1) : ojson(nullptr)},
                         {"served_by", d.served_by != ServedBy::none
                                           ? ojson(std::string(to_string(d.served_by)))
                                           : ojson(nullptr)}};
    EXPECT_EQ(w.record_lines[i], expected.dump());
  }
  for (std::size_t i = 0; i < result.tasks.size(); ++i) {
    const TaskResult& t = result.tasks[i];
    ojson timeline = ojson::array();
    for (const auto& [at, priority] : t.priority_timeline)
      timeline.push_back(ojson::array({at, priority ? ojson(*priority) : ojson(nullptr)}));
    ojson decisions = ojson::array();
    for (const OrphanDecisionResult& o : t.orphan_decisions) {
      decisions.push_back(ojson{{"t", o.t},
                                {"decision", std::string(to_string(o.decision))},
                                {"bytes_done", o.bytes_done},
                                {"policy", result.policy}});
    }
    const ojson expected{{"artifact", trace.artifacts[t.artifact].id},
                         {"t_start", t.t_start},
                         {"t_first_start", t.t_first_start ? ojson(*t.t_first_start)
                                                           : ojson(nullptr)},
                         {"t_received", t.t_received ? ojson(*t.t_received) : ojson(nullptr)},
                         {"t_end", t.t_end},
                         {"outcome", std::string(to_string(t.outcome))},
                         {"attempts", t.attempts},
                         {"bytes_transferred", t.bytes_transferred},
                         {"installs", t.installs},
                         {"priority_timeline", timeline},
                         {"orphan_decisions", decisions}};
    EXPECT_EQ(w.record_lines[result.demands.size() + i], expected.dump());
  }

  const ojson doc = ojson::parse(w.text);
  ASSERT_EQ(doc["demands"].size(), result.demands.size());
  for (std::size_t i = 0; i < result.demands.size(); ++i) {
    const DemandResult& d = result.demands[i];
    const ojson& j = doc["demands"][i];
    EXPECT_EQ(j["demand"], ids[d.demand]);
    EXPECT_EQ(j["owner"], ids[d.owner]);
    EXPECT_EQ(j["artifact"], ids[d.artifact]);
    EXPECT_EQ(j["priority"], d.priority);
    EXPECT_EQ(j["t_subscribe"].get<double>(), d.t_subscribe);
    if (d.ended) {
      EXPECT_EQ(j["t_end"].get<double>(), d.t_end);
      EXPECT_EQ(j["outcome"], std::string(to_string(d.outcome)));
    } else {
      EXPECT_TRUE(j["t_end"].is_null());
      EXPECT_TRUE(j["outcome"].is_null());
    }
  }
  ASSERT_EQ(doc["tasks"].size(), result.tasks.size());
  for (std::size_t i = 0; i < result.tasks.size(); ++i) {
    const TaskResult& t = result.tasks[i];
    const ojson& j = doc["tasks"][i];
    EXPECT_EQ(j["artifact"], ids[t.artifact]);
    EXPECT_EQ(j["t_start"].get<double>(), t.t_start);
    EXPECT_EQ(j["t_end"].get<double>(), t.t_end);
    EXPECT_EQ(j["bytes_transferred"].get<std::uint64_t>(), t.bytes_transferred);
    ASSERT_EQ(j["priority_timeline"].size(), t.priority_timeline.size());
    for (std::size_t k = 0; k < t.priority_timeline.size(); ++k) {
      EXPECT_EQ(j["priority_timeline"][k][0].get<double>(), t.priority_timeline[k].first);
      if (t.priority_timeline[k].second) {
        EXPECT_EQ(j["priority_timeline"][k][1], *t.priority_timeline[k].second);
      } else {
        EXPECT_TRUE(j["priority_timeline"][k][1].is_null());
      }
    }
  }
  EXPECT_EQ(doc["seed"].get<std::uint64_t>(), result.seed);
  EXPECT_EQ(doc["trace"], trace.name);
  EXPECT_EQ(doc["summary"]["makespan_s"].get<double>(), 1.0 / 7);
}

TEST(ResultJson, AnEmptyRunIsValidJson) {
  Trace trace;
  Result result;
  const Written w = write(result, trace);
  const ojson doc = ojson::parse(w.text);
  EXPECT_TRUE(doc["demands"].empty());
  EXPECT_TRUE(doc["tasks"].empty());
  EXPECT_TRUE(w.record_lines.empty());
}

TEST(ResultJson, ALargeRunIsWrittenWhole) {
  // More than one buffer's worth (the writer flushes every 64 KiB).
  Trace trace;
  trace.demand_ids = {"d"};
  trace.owners = {"o"};
  trace.artifacts.push_back(artifact_named("a"));
  Result result;
  for (int i = 0; i < 20'000; ++i) {
    DemandResult d;
    d.t_subscribe = i * 0.001;
    d.t_end = i * 0.002;
    d.ended = true;
    d.outcome = DemandOutcome::succeeded;
    result.demands.push_back(d);
  }
  const Written w = write(result, trace);
  const ojson doc = ojson::parse(w.text);
  ASSERT_EQ(doc["demands"].size(), 20'000u);
  EXPECT_EQ(doc["demands"][19'999]["t_end"].get<double>(), 19'999 * 0.002);
}

}  // namespace
}  // namespace dfl::format
