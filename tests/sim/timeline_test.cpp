// --timeline writes Chrome/Perfetto trace-event JSON (JSON Object Format) that
// follows the format's rules: complete ("X") events carry ts and dur in
// microseconds and nest properly on each thread, counters ("C") carry numeric
// args, and metadata ("M") names every process.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "cli_runner.h"

namespace dfl::testing {
namespace {

nlohmann::json timeline_of(const char* model) {
  const std::string trace = read_file(std::string(DFL_SCENARIOS) + "/three_callers.jsonl");
  const CliRun run = run_cli(
      trace, {"sim", "TRACE", "--model", model, "--timeline", "DIR/timeline.json", "--quiet"});
  EXPECT_EQ(run.exit_code, 0) << run.err;
  return nlohmann::json::parse(read_file(run.dir + "/timeline.json"));
}

TEST(Timeline, FollowsTheTraceEventFormat) {
  const nlohmann::json t = timeline_of("demand");
  ASSERT_TRUE(t.is_object());
  ASSERT_TRUE(t.contains("traceEvents"));
  std::map<std::pair<int, int>, std::vector<std::pair<double, double>>> slices;
  std::set<int> named_processes, pids;
  std::set<std::string> counters, slice_categories;
  for (const auto& e : t["traceEvents"]) {
    const std::string ph = e.at("ph");
    ASSERT_TRUE(ph == "X" || ph == "C" || ph == "M") << e.dump();
    ASSERT_TRUE(e.at("pid").is_number_integer());
    pids.insert(e["pid"].get<int>());
    if (ph == "M") {
      if (e["name"] == "process_name") named_processes.insert(e["pid"].get<int>());
      ASSERT_TRUE(e.at("args").at("name").is_string());
    } else if (ph == "X") {
      ASSERT_TRUE(e.at("ts").is_number() && e.at("dur").is_number()) << e.dump();
      ASSERT_GE(e["dur"].get<double>(), 0.0);
      ASSERT_TRUE(e.at("tid").is_number_integer());
      slice_categories.insert(e.at("cat"));
      const double start = e["ts"], end = start + e["dur"].get<double>();
      slices[{e["pid"], e["tid"]}].emplace_back(start, end);
    } else {
      ASSERT_TRUE(e.at("ts").is_number());
      ASSERT_TRUE(e.at("args").at("priority").is_number()) << e.dump();
      counters.insert(e.at("name"));
    }
  }
  // Slices on one thread never overlap partially (they would not nest).
  for (auto& [track, list] : slices) {
    std::sort(list.begin(), list.end());
    for (std::size_t i = 1; i < list.size(); ++i) {
      EXPECT_LE(list[i - 1].second, list[i].first + 1e-3)
          << "overlap on pid " << track.first << " tid " << track.second;
    }
  }
  for (int pid : pids)
    EXPECT_TRUE(named_processes.contains(pid)) << "unnamed process " << pid;
  EXPECT_EQ(slice_categories, (std::set<std::string>{"demand", "finalize", "transfer"}));
  EXPECT_EQ(counters.size(), 3u) << "a priority counter per task";
  // Transfers: terrain, grass, rock, one slot; demands: five, on four owners.
  std::size_t transfer_slices = 0, owner_processes = 0;
  for (const auto& [track, list] : slices) {
    if (track.first == 1 && track.second < 10000) transfer_slices += list.size();
  }
  for (int pid : named_processes)
    owner_processes += pid >= 100;
  EXPECT_EQ(transfer_slices, 3u);
  EXPECT_EQ(owner_processes, 4u);
}

}  // namespace
}  // namespace dfl::testing
