// --timeline writes Chrome/Perfetto trace-event JSON (JSON Object Format) that
// Perfetto imports without dropping anything: complete ("X") events carry
// whole-microsecond ts and dur and nest properly on each thread (Perfetto drops
// a slice that overlaps the previous one on its thread by even a nanosecond),
// instants ("i") mark demands that end within the microsecond they began,
// counters ("C") carry numeric args, and metadata ("M") names every process
// and every thread that holds slices.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

#include "cli_runner.h"

namespace dfl::testing {
namespace {

nlohmann::json timeline_of(const std::string& scenario, const char* model) {
  const std::string trace = read_file(std::string(DFL_SCENARIOS) + "/" + scenario);
  const CliRun run = run_cli(
      trace, {"sim", "TRACE", "--model", model, "--timeline", "DIR/timeline.json", "--quiet"});
  EXPECT_EQ(run.exit_code, 0) << run.err;
  return nlohmann::json::parse(read_file(run.dir + "/timeline.json"));
}

struct Checked {
  std::size_t slices = 0, instants = 0, transfer_slices = 0, owner_processes = 0;
  std::set<std::string> counters, slice_categories;
};

Checked check_timeline(const nlohmann::json& t) {
  Checked c;
  EXPECT_TRUE(t.is_object());
  EXPECT_FALSE(t.contains("displayTimeUnit")) << "older importers scale timestamps by it";
  std::map<std::pair<int, int>, std::vector<std::pair<std::int64_t, std::int64_t>>> slices;
  std::set<int> named_processes, pids;
  std::set<std::pair<int, int>> named_threads;
  for (const auto& e : t.at("traceEvents")) {
    const std::string ph = e.at("ph");
    EXPECT_TRUE(ph == "X" || ph == "C" || ph == "M" || ph == "i") << e.dump();
    EXPECT_TRUE(e.at("pid").is_number_integer());
    pids.insert(e["pid"].get<int>());
    if (ph == "M") {
      if (e["name"] == "process_name") named_processes.insert(e["pid"].get<int>());
      if (e["name"] == "thread_name") {
        named_threads.insert({e["pid"].get<int>(), e.at("tid").get<int>()});
      }
      EXPECT_TRUE(e.at("args").at("name").is_string());
    } else if (ph == "X") {
      EXPECT_TRUE(e.at("ts").is_number_integer() && e.at("dur").is_number_integer()) << e.dump();
      EXPECT_GT(e["dur"].get<std::int64_t>(), 0) << e.dump();
      c.slice_categories.insert(e.at("cat"));
      slices[{e["pid"].get<int>(), e.at("tid").get<int>()}].emplace_back(
          e["ts"].get<std::int64_t>(), e["dur"].get<std::int64_t>());
      ++c.slices;
    } else if (ph == "i") {
      EXPECT_TRUE(e.at("ts").is_number_integer());
      EXPECT_EQ(e.at("s"), "p");
      ++c.instants;
    } else {
      EXPECT_TRUE(e.at("ts").is_number_integer());
      EXPECT_TRUE(e.at("args").at("priority").is_number()) << e.dump();
      c.counters.insert(e.at("name"));
    }
  }
  // Perfetto's rule: sorted by start (longer first on ties), a slice must end
  // no later than every open slice it starts inside; touching is fine. Lanes
  // are exclusive, so here a slice may not even nest: it starts at or after
  // the previous one on its thread ends.
  for (auto& [track, list] : slices) {
    EXPECT_TRUE(named_threads.contains(track)) << "unnamed thread " << track.second;
    std::sort(list.begin(), list.end(), [](const auto& a, const auto& b) {
      return a.first != b.first ? a.first < b.first : a.second > b.second;
    });
    std::vector<std::int64_t> open_ends;
    for (const auto& [ts, dur] : list) {
      while (!open_ends.empty() && open_ends.back() <= ts)
        open_ends.pop_back();
      EXPECT_TRUE(open_ends.empty() || ts + dur <= open_ends.back())
          << "partial overlap on pid " << track.first << " tid " << track.second << " at " << ts;
      EXPECT_TRUE(open_ends.empty())
          << "nested slice on pid " << track.first << " tid " << track.second << " at " << ts;
      open_ends.push_back(ts + dur);
    }
    if (track.first == 1 && track.second < 10000) c.transfer_slices += list.size();
  }
  for (int pid : pids)
    EXPECT_TRUE(named_processes.contains(pid)) << "unnamed process " << pid;
  for (int pid : named_processes)
    c.owner_processes += pid >= 100;
  return c;
}

TEST(Timeline, FollowsTheTraceEventFormatAndNestsAsPerfettoRequires) {
  const Checked c = check_timeline(timeline_of("three_callers.jsonl", "demand"));
  EXPECT_EQ(c.slice_categories, (std::set<std::string>{"demand", "finalize", "transfer"}));
  EXPECT_EQ(c.counters.size(), 3u) << "a priority counter per task";
  EXPECT_EQ(c.transfer_slices, 3u) << "terrain, grass, rock on the one slot";
  EXPECT_EQ(c.owner_processes, 4u);
}

TEST(Timeline, ZeroLengthDemandsAreInstantsAndNothingOverlapsOnABusyTrace) {
  const Checked c = check_timeline(timeline_of("session_churn.jsonl", "demand"));
  EXPECT_GT(c.instants, 0u) << "cache hits end within the microsecond they begin";
  EXPECT_GT(c.slices, 1000u);
}

TEST(Timeline, TransfersAbortedAsTheyStartAreInstantsUnderTheLegacyModel) {
  // The callbacks model cancels whole tasks, sometimes in the instant their
  // transfer starts.
  const Checked c = check_timeline(timeline_of("open_world_streaming.jsonl", "callbacks"));
  EXPECT_GT(c.instants, 0u);
  EXPECT_GT(c.transfer_slices, 100u);
}

}  // namespace
}  // namespace dfl::testing
