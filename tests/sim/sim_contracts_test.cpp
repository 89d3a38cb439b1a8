// The contracts of docs/design.md §3, end to end: a trace in, a result out, the
// engine driven by SimGrid.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "cli_runner.h"
#include "random_test_seed.h"

namespace dfl::testing {
namespace {

std::string sub(double t, const std::string& demand, const std::string& owner,
                const std::string& artifact_id, int priority, const std::string& extra = "") {
  return R"({"op": "subscribe", "t": )" + std::to_string(t) + R"(, "demand": ")" + demand +
         R"(", "owner": ")" + owner + R"(", "artifact": ")" + artifact_id + R"(", "priority": )" +
         std::to_string(priority) + extra + "}\n";
}
std::string cancel(double t, const std::string& demand) {
  return R"({"op": "cancel", "t": )" + std::to_string(t) + R"(, "demand": ")" + demand + "\"}\n";
}

// How many traces a randomized test draws: DFL_TRACES, or `fallback`. Its
// seed comes from random_test_seed (random_test_seed.h).
int random_test_count(int fallback) {
  const char* env = std::getenv("DFL_TRACES");
  return env != nullptr ? std::atoi(env) : fallback;
}

TEST(SimContracts, Contract1_OneArtifactKeyHasAtMostOneLivePhysicalTask) {
  // Two aliases of one key, as two subsystems may name one artifact.
  const std::string trace = header() + artifact("rock", 20'000'000, "props/rock") +
                            artifact("rock-alias", 20'000'000, "props/rock") +
                            sub(0, "d1", "a", "rock", 0) + sub(0.5, "d2", "b", "rock-alias", 3) +
                            sub(1.0, "d3", "c", "rock", 1);
  const CliRun run = simulate(trace);
  EXPECT_EQ(run.result["summary"]["transfers_started"], 1);
  EXPECT_EQ(run.result["summary"]["installs"], 1);
  EXPECT_EQ(run.result["tasks"].size(), 1u);
  EXPECT_EQ(run.result["summary"]["outcomes"]["succeeded"], 3);
}

TEST(SimContracts, Contract2_CancellingOneDemandLeavesOthersRunning) {
  const std::string trace = header() + artifact("rock", 20'000'000) + sub(0, "d1", "a", "rock", 0) +
                            sub(0, "d2", "b", "rock", 3) + cancel(0.5, "d2");
  const CliRun run = simulate(trace);
  EXPECT_EQ(demand_record(run.result, "d2")["outcome"], "cancelled");
  EXPECT_DOUBLE_EQ(demand_record(run.result, "d2")["t_end"].get<double>(), 0.5);
  EXPECT_EQ(demand_record(run.result, "d1")["outcome"], "succeeded");
  EXPECT_EQ(run.result["summary"]["bytes_wasted"], 0);
  EXPECT_EQ(run.result["summary"]["transfers_started"], 1);
}

TEST(SimContracts, Contract3_CancellingTopPriorityDemandLowersTheTask) {
  const std::string trace = header() + artifact("rock", 20'000'000) + sub(0, "d1", "a", "rock", 0) +
                            sub(0.5, "d2", "b", "rock", 3) + cancel(1.0, "d2");
  const CliRun run = simulate(trace);
  const auto& timeline = run.result["tasks"][0]["priority_timeline"];
  ASSERT_GE(timeline.size(), 3u) << timeline.dump();
  EXPECT_EQ(timeline[0], nlohmann::json::parse("[0.0, 0]"));
  EXPECT_EQ(timeline[1], nlohmann::json::parse("[0.5, 3]"));
  EXPECT_EQ(timeline[2], nlohmann::json::parse("[1.0, 0]"));
  EXPECT_EQ(run.result["summary"]["priority_pollution_s"], 0.0);
}

TEST(SimContracts, Contract4_RetryAndInstallOncePerOutcome_ExactlyOneTerminalEach) {
  const std::string trace =
      header() + artifact("rock", 20'000'000) +
      R"({"op": "fault", "t": 0, "kind": "transfer_error", "artifact": "rock", "after_fraction": 0.5})"
      "\n" +
      sub(0, "d1", "a", "rock", 0) + sub(0.1, "d2", "b", "rock", 2);
  const CliRun run = simulate(trace);
  ASSERT_EQ(run.result["tasks"].size(), 1u);
  const auto& task = run.result["tasks"][0];
  EXPECT_EQ(task["attempts"], 2);
  EXPECT_EQ(task["installs"], 1);
  EXPECT_EQ(task["bytes_transferred"], 20'000'000) << "the retry resumed: no byte fetched twice";
  for (const char* d : {"d1", "d2"})
    EXPECT_EQ(demand_record(run.result, d)["outcome"], "succeeded");
}

TEST(SimContracts, Contract4_ADemandThatTimesOutAsAnotherIsMadeHearsExactlyOnce) {
  // b's deadline is 1.0, but the simulator's wake-up timer for it is set only
  // at 0.75, when c's fires, after the timer for the records at 1.0 was set at
  // 0.5: SimGrid (3.32) runs d's subscribe first. b must end at 1.0 all the
  // same, heard before d is made, though d takes the engine slot b leaves (the
  // simulator threw "delivery to an unknown demand" here, and `replay` did when
  // its timer thread lost the race to a subscribe).
  const std::string trace = header() + artifact("rock", 20'000'000) + sub(0, "a", "o1", "rock", 1) +
                            sub(0.5, "c", "o2", "rock", 1, R"(, "timeout_s": 0.25)") +
                            sub(0.5, "b", "o3", "rock", 1, R"(, "timeout_s": 0.5)") +
                            sub(1.0, "d", "o4", "rock", 1);
  const CliRun run = simulate(trace);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(demand_record(run.result, "c")["outcome"], "timed_out");
  EXPECT_EQ(demand_record(run.result, "c")["t_end"], 0.75);
  EXPECT_EQ(demand_record(run.result, "b")["outcome"], "timed_out");
  EXPECT_EQ(demand_record(run.result, "b")["t_end"], 1.0);
  EXPECT_EQ(demand_record(run.result, "d")["outcome"], "succeeded");
  EXPECT_EQ(demand_record(run.result, "a")["outcome"], "succeeded");
  EXPECT_EQ(run.result["summary"]["outcomes"]["timed_out"], 2);
  EXPECT_EQ(run.result["summary"]["outcomes"]["succeeded"], 2);
}

// Random traces on a coarse clock (every time a multiple of 0.25 s, every
// timeout too), so that deadlines, subscribes, cancels, priority changes and
// owner ends keep meeting at the same instant in every order SimGrid's timers
// can put them, under each of the three models and every orphan policy, with
// faults, evictions and retries. Each run must end cleanly
// with one terminal per demand, and a demand that timed out did so exactly at
// its deadline.
TEST(SimContracts, Contract4_RandomTracesOnACoarseClockGiveEveryDemandExactlyOneTerminal) {
  const std::uint64_t seed = random_test_seed("coarse-clock traces");
  std::mt19937_64 rng(seed);
  const int traces = random_test_count(40);
  for (int n = 0; n < traces; ++n) {
    // Sometimes a cache smaller than two artifacts (evictions), sometimes retries.
    const std::string scheduler =
        std::string(R"({"max_transfers": 1, "max_per_origin": 1)") +
        (rng() % 2 == 0 ? R"(, "cache_bytes": 5000000)" : "") +
        (rng() % 2 == 0 ? R"(, "retry": {"max_attempts": 3, "base_s": 0.25, "jitter": 0})" : "") +
        "}";
    std::string trace = header(scheduler) + artifact("a", 2'000'000) + artifact("b", 3'000'000) +
                        artifact("c", 1'000'000) + artifact("e", 4'000'000);
    std::map<std::string, double> timeout_of;  // Demand -> timeout (0: none).
    std::map<std::string, double> subscribed_at;
    std::vector<std::string> demands;
    double t = 0;
    for (int op = 0; op < 100; ++op) {
      // Records come in bursts at one instant, with gaps in which only
      // deadlines fall; a deadline often falls on the next burst.
      if (rng() % 4 == 0) t += 0.25 * static_cast<double>(1 + rng() % 4);
      const std::string time = std::to_string(t);
      const std::string owner = "o" + std::to_string(rng() % 4);
      const auto what = rng() % 11;
      if (what < 6 || demands.empty()) {
        const std::string id = "d" + std::to_string(demands.size());
        const char* artifacts[] = {"a", "b", "c", "e"};
        std::string extra;
        double timeout = 0;
        if (rng() % 5 != 0) {
          timeout = 0.25 * static_cast<double>(1 + rng() % 4);
          extra += R"(, "timeout_s": )" + std::to_string(timeout);
        }
        if (rng() % 5 == 0) extra += R"(, "owner_generation": 1)";
        trace += sub(t, id, owner, artifacts[rng() % 4], static_cast<int>(rng() % 4), extra);
        demands.push_back(id);
        timeout_of[id] = timeout;
        subscribed_at[id] = t;
      } else if (what < 8) {
        trace += cancel(t, demands[rng() % demands.size()]);
      } else if (what < 9) {
        trace += R"({"op": "set_priority", "t": )" + time + R"(, "demand": ")" +
                 demands[rng() % demands.size()] + R"(", "priority": )" +
                 std::to_string(rng() % 4) + "}\n";
      } else if (what < 10) {
        trace += R"({"op": "end_owner", "t": )" + time + R"(, "owner": ")" + owner + "\"" +
                 (rng() % 2 == 0 ? std::string(R"(, "owner_generation": 0)") : "") + "}\n";
      } else {
        const char* faulted[] = {"a", "b", "c", "e"};
        const std::string on = faulted[rng() % 4];
        switch (rng() % 3) {
          case 0:
            trace += R"({"op": "fault", "t": )" + time +
                     R"(, "kind": "transfer_error", "artifact": ")" + on +
                     R"(", "after_fraction": 0.5, "retryable": )" +
                     (rng() % 3 == 0 ? "false" : "true") + "}\n";
            break;
          case 1:
            trace += R"({"op": "fault", "t": )" + time + R"(, "kind": "corrupt", "artifact": ")" +
                     on + "\"}\n";
            break;
          default:
            trace += R"({"op": "fault", "t": )" + time +
                     R"(, "kind": "origin_down", "origin": "cdn", "duration_s": 0.5})" + "\n";
        }
      }
    }
    const char* models[] = {"demand", "callbacks", "independent"};
    const char* policies[] = {"always-abort", "always-complete", "squid", "low-priority",
                              "keep-partial", "expected-value",  "oracle"};
    const std::string model = models[rng() % 3];
    const std::string policy = policies[rng() % 7];
    const CliRun run = simulate(trace, {"--model", model, "--policy", policy});
    ASSERT_EQ(run.exit_code, 0) << "trace " << n << " (" << model << ", " << policy
                                << ") of DFL_SEED=" << seed << ": " << run.err;
    ASSERT_EQ(run.result["demands"].size(), demands.size()) << "DFL_SEED=" << seed;
    std::set<std::string> seen;
    for (const auto& d : run.result["demands"]) {
      const std::string id = d["demand"];
      EXPECT_TRUE(seen.insert(id).second) << id << " twice; DFL_SEED=" << seed;
      ASSERT_TRUE(d["outcome"].is_string()) << id << " never ended; DFL_SEED=" << seed;
      const std::string outcome = d["outcome"];
      EXPECT_TRUE(outcome == "succeeded" || outcome == "failed" || outcome == "cancelled" ||
                  outcome == "timed_out" || outcome == "owner_ended")
          << id << ": " << outcome << "; DFL_SEED=" << seed;
      if (outcome == "timed_out") {
        EXPECT_GT(timeout_of[id], 0) << id << "; DFL_SEED=" << seed;
        EXPECT_DOUBLE_EQ(d["t_end"].get<double>(), subscribed_at[id] + timeout_of[id])
            << id << " timed out off its deadline; DFL_SEED=" << seed;
      }
    }
    if (HasFailure()) return;
  }
}

// The generators' traces (every scalable kind, thousands of demands, aliases,
// reused owners, stale generations, faults, evictions) under random models,
// policies and slot counts, checked from the result alone: one task per
// artifact at a time and at most one install each (contract 1, 4), exactly
// one terminal per demand (4), and no demand outlives its deadline, its own
// cancel or its owner's end (5). The callbacks model breaks 1 and 5 on
// purpose (docs/design.md §4), so it is held to contract 4 only.
TEST(SimContracts, Contract1_4_5_GeneratedTracesOfEveryKindKeepTheContracts) {
  const std::uint64_t seed = random_test_seed("generated traces");
  std::mt19937_64 rng(seed);
  const int traces = random_test_count(16);
  const char* kinds[] = {"open_world_streaming", "session_churn", "flaky_network",
                         "cache_pressure"};
  const char* models[] = {"demand", "independent", "callbacks"};
  const char* policies[] = {"always-abort", "always-complete", "squid", "low-priority",
                            "keep-partial", "expected-value",  "oracle"};
  constexpr double kEps = 1e-9;
  for (int n = 0; n < traces; ++n) {
    const std::string kind = kinds[rng() % 4];
    const std::string demands_n = std::to_string(std::vector<int>{50, 400, 2000}[rng() % 3]);
    const std::string gen_seed = std::to_string(rng() % 100000);
    const CliRun gen = run_cli("", {"gen", kind, "--seed", gen_seed, "--demands", demands_n});
    ASSERT_EQ(gen.exit_code, 0) << gen.err;
    const std::string model = models[rng() % 3];
    const std::string policy = policies[rng() % 7];
    std::vector<std::string> args = {"--model", model, "--policy", policy};
    if (rng() % 3 == 0) {
      args.push_back("--max-transfers");
      args.push_back(std::to_string(1 + rng() % 3));
    }
    const std::string what = "trace " + std::to_string(n) + " (gen " + kind + " --seed " +
                             gen_seed + " --demands " + demands_n + ", " + model + ", " + policy +
                             ") of DFL_SEED=" + std::to_string(seed);
    const CliRun run = simulate(gen.out, args);
    ASSERT_EQ(run.exit_code, 0) << what << ": " << run.err;

    // What the trace asked for.
    struct Asked {
      double t = 0, deadline = std::numeric_limits<double>::infinity();
      std::string owner;
      std::int64_t generation = 0;
      double first_cancel = std::numeric_limits<double>::infinity();
    };
    std::map<std::string, Asked> asked;
    std::vector<nlohmann::json> owner_ends;
    std::istringstream lines(gen.out);
    for (std::string line; std::getline(lines, line);) {
      const nlohmann::json r = nlohmann::json::parse(line);
      const std::string op = r.value("op", "");
      if (op == "subscribe") {
        Asked& a = asked[r["demand"].get<std::string>()];
        a.t = r["t"];
        a.owner = r["owner"];
        a.generation = r.value("owner_generation", 0);
        if (r.contains("timeout_s")) a.deadline = a.t + r["timeout_s"].get<double>();
      } else if (op == "cancel") {
        Asked& a = asked[r["demand"].get<std::string>()];
        if (r["t"].get<double>() >= a.t)
          a.first_cancel = std::min(a.first_cancel, r["t"].get<double>());
      } else if (op == "end_owner") {
        owner_ends.push_back(r);
      }
    }
    ASSERT_EQ(run.result["demands"].size(), asked.size()) << what;
    std::set<std::string> seen;
    for (const auto& d : run.result["demands"]) {
      const std::string id = d["demand"];
      ASSERT_TRUE(seen.insert(id).second) << id << " twice; " << what;
      ASSERT_TRUE(asked.contains(id)) << id << " was never asked for; " << what;
      ASSERT_TRUE(d["outcome"].is_string()) << id << " never ended; " << what;
      if (model == "callbacks") continue;
      const Asked& a = asked[id];
      const double end = d["t_end"];
      EXPECT_LE(end, a.deadline + 1e-7) << id << " outlived its deadline; " << what;
      EXPECT_LE(end, a.first_cancel + kEps) << id << " outlived its cancel; " << what;
      for (const auto& e : owner_ends) {
        const double t = e["t"];
        if (e["owner"] != a.owner || t < a.t) continue;
        if (e.contains("owner_generation") &&
            a.generation > e["owner_generation"].get<std::int64_t>())
          continue;
        EXPECT_LE(end, t + kEps) << id << " outlived its owner's end; " << what;
        break;
      }
      if (HasFailure()) return;
    }
    std::map<std::string, std::vector<std::pair<double, double>>> tasks_of;
    for (const auto& task : run.result["tasks"]) {
      EXPECT_LE(task["installs"].get<int>(), 1) << "a task installed twice; " << what;
      tasks_of[task["artifact"]].emplace_back(task["t_start"], task["t_end"]);
    }
    if (model == "demand") {
      for (auto& [artifact_id, spans] : tasks_of) {
        std::sort(spans.begin(), spans.end());
        for (std::size_t i = 1; i < spans.size(); ++i) {
          EXPECT_GE(spans[i].first, spans[i - 1].second - kEps)
              << "two live tasks for " << artifact_id << "; " << what;
        }
      }
    }
    if (HasFailure()) return;
  }
}

TEST(SimContracts, Contract5_AnEndedDemandIsNeverDeliveredSuccess) {
  const std::string trace =
      header() + artifact("rock", 20'000'000) +
      R"({"op": "end_owner", "t": 0, "owner": "stale", "owner_generation": 1})"
      "\n" +
      sub(0, "keeper", "a", "rock", 0) + sub(0, "cancelled", "b", "rock", 0) +
      sub(0, "timed", "c", "rock", 0, R"(, "timeout_s": 1.0)") + sub(0, "owned", "d", "rock", 0) +
      sub(0, "stale", "stale", "rock", 0, R"(, "owner_generation": 1)") + cancel(0.5, "cancelled") +
      R"({"op": "end_owner", "t": 0.7, "owner": "d"})"
      "\n";
  const CliRun run = simulate(trace);
  EXPECT_EQ(demand_record(run.result, "keeper")["outcome"], "succeeded");
  EXPECT_EQ(demand_record(run.result, "cancelled")["outcome"], "cancelled");
  EXPECT_EQ(demand_record(run.result, "timed")["outcome"], "timed_out");
  EXPECT_EQ(demand_record(run.result, "owned")["outcome"], "owner_ended");
  EXPECT_EQ(demand_record(run.result, "stale")["outcome"], "owner_ended");
  EXPECT_EQ(run.result["summary"]["installs"], 1);
}

TEST(SimContracts, ACompletedOrphanIsWastedUnlessSomeoneUsesIt) {
  const std::string base =
      header() + artifact("rock", 20'000'000) + sub(0, "d1", "a", "rock", 0) + cancel(0.5, "d1");
  const CliRun unused = simulate(base, {"--policy", "always-complete"});
  EXPECT_EQ(unused.result["tasks"][0]["outcome"], "installed");
  EXPECT_EQ(unused.result["summary"]["bytes_wasted"], 20'000'000);
  const CliRun used =
      simulate(base + sub(5, "d2", "b", "rock", 1), {"--policy", "always-complete"});
  EXPECT_EQ(used.result["summary"]["bytes_wasted"], 0);
  EXPECT_EQ(used.result["summary"]["cache_hits"], 1);
  const CliRun aborted = simulate(base);
  EXPECT_EQ(aborted.result["tasks"][0]["outcome"], "aborted");
  EXPECT_EQ(aborted.result["summary"]["bytes_wasted"], 4'500'000)
      << "(0.5 s - 0.05 s latency) at 10 MB/s, received then thrown away";
}

// Records that do nothing are counted, and settings that cannot take effect
// are said: on stderr and in the result's warnings.
TEST(SimContracts, IgnoredRecordsAreCountedAndUnreachableSettingsWarned) {
  const std::string trace =
      header(R"({"max_transfers": 8, "max_per_origin": 2})") + artifact("rock", 1'000'000) +
      sub(0, "d1", "a", "rock", 1) + cancel(5, "d1") +  // d1 succeeded long before.
      R"({"op": "set_priority", "t": 6, "demand": "d1", "priority": 3})" "\n" +
      sub(7, "d2", "b", "rock", 1) + cancel(7.5, "d2");  // A cache hit, ended at once.
  const CliRun run = simulate(trace);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(demand_record(run.result, "d1")["outcome"], "succeeded");
  EXPECT_EQ(run.result["summary"]["ignored_cancels"], 2);
  EXPECT_EQ(run.result["summary"]["ignored_set_priorities"], 1);
  ASSERT_EQ(run.result["warnings"].size(), 1u) << run.result["warnings"];
  const std::string warning = run.result["warnings"][0];
  EXPECT_NE(warning.find("max_transfers 8 cannot be reached: at most max_per_origin 2 x 1 "
                         "origin = 2 transfers"),
            std::string::npos)
      << warning;
  EXPECT_NE(run.err.find("demandflight sim: warning: max_transfers 8"), std::string::npos)
      << run.err;

  const CliRun fine = simulate(header() + artifact("rock", 1000) + sub(0, "d1", "a", "rock", 1));
  EXPECT_TRUE(fine.result["warnings"].empty());
  EXPECT_EQ(fine.result["summary"]["ignored_cancels"], 0);
}

// Each demand's record says which task served it and how: it made the task,
// joined it, re-attached to it as an orphan, or hit the cache.
TEST(SimContracts, EachDemandSaysWhichTaskServedItAndHow) {
  const std::string trace = header() + artifact("rock", 20'000'000) +
                            sub(0, "maker", "a", "rock", 1) + sub(0.1, "joiner", "b", "rock", 2) +
                            cancel(0.5, "maker") + cancel(0.5, "joiner") +  // An orphan now.
                            sub(0.6, "back", "c", "rock", 1) + sub(9, "late", "d", "rock", 1);
  const CliRun run = simulate(trace, {"--policy", "always-complete"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(demand_record(run.result, "maker")["served_by"], "transfer");
  EXPECT_EQ(demand_record(run.result, "joiner")["served_by"], "join");
  EXPECT_EQ(demand_record(run.result, "back")["served_by"], "reattach");
  EXPECT_EQ(demand_record(run.result, "back")["outcome"], "succeeded");
  EXPECT_EQ(demand_record(run.result, "late")["served_by"], "cache");
  EXPECT_TRUE(demand_record(run.result, "late")["task"].is_null());
  ASSERT_EQ(run.result["tasks"].size(), 1u);
  for (const char* d : {"maker", "joiner", "back"})
    EXPECT_EQ(demand_record(run.result, d)["task"], 0) << d;
  // A demand refused at once is served by nothing.
  const CliRun refused =
      simulate(header() + artifact("rock", 1000) + sub(0, "d1", "a", "rock", 1, R"(, "timeout_s": 0)"));
  ASSERT_EQ(refused.exit_code, 0) << refused.err;
  EXPECT_TRUE(demand_record(refused.result, "d1")["served_by"].is_null());
}

// The fields a researcher reads per demand and per task, on a hand-built
// trace with a join, an orphan and its decision, a re-attach, a queued task
// and a cache hit: one slot, a 20 MB rock (2 s at 10 MB/s) and a 1 MB grass.
TEST(SimContracts, EachDemandAndTaskCarriesItsLatencyFirstStartAndOrphanDecisions) {
  const std::string trace =
      header(R"({"max_transfers": 1, "max_per_origin": 1})") + artifact("rock", 20'000'000) +
      artifact("grass", 1'000'000) + sub(0, "maker", "a", "rock", 1) +
      sub(0.1, "joiner", "b", "rock", 2) + sub(0.2, "queued", "c", "grass", 0) +
      cancel(0.5, "maker") + cancel(0.5, "joiner") +  // The rock is an orphan now.
      sub(0.6, "back", "d", "rock", 1) + sub(9, "late", "e", "rock", 1);
  const CliRun run = simulate(trace, {"--policy", "always-complete"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const nlohmann::json& r = run.result;
  for (const nlohmann::json& d : r["demands"]) {
    EXPECT_DOUBLE_EQ(d["latency_s"].get<double>(),
                     d["t_end"].get<double>() - d["t_subscribe"].get<double>())
        << d;
  }
  EXPECT_DOUBLE_EQ(demand_record(r, "maker")["latency_s"].get<double>(), 0.5);  // Cancelled.
  EXPECT_EQ(demand_record(r, "late")["served_by"], "cache");
  EXPECT_DOUBLE_EQ(demand_record(r, "late")["latency_s"].get<double>(), 0.0);
  EXPECT_EQ(demand_record(r, "back")["served_by"], "reattach");
  EXPECT_GT(demand_record(r, "back")["latency_s"].get<double>(), 1.0);

  ASSERT_EQ(r["tasks"].size(), 2u) << r["tasks"];
  const nlohmann::json& rock = r["tasks"][0];
  const nlohmann::json& grass = r["tasks"][1];
  EXPECT_EQ(rock["outcome"], "installed");
  EXPECT_DOUBLE_EQ(rock["t_first_start"].get<double>(), 0.0);
  // The grass waited for the rock's slot: asked at 0.2, started when the
  // rock's transfer ended (its finalize, hashing and writing, takes 40 ns here).
  EXPECT_DOUBLE_EQ(grass["t_start"].get<double>(), 0.2);
  EXPECT_NEAR(grass["t_first_start"].get<double>(), rock["t_end"].get<double>(), 1e-6);
  EXPECT_GT(grass["t_first_start"].get<double>(), 2.0);
  // The rock's bytes were all in when its transfer ended, which freed the slot.
  EXPECT_DOUBLE_EQ(rock["t_received"].get<double>(), grass["t_first_start"].get<double>());
  EXPECT_GT(rock["t_end"].get<double>(), rock["t_received"].get<double>());
  EXPECT_NEAR(rock["t_end"].get<double>(), rock["t_received"].get<double>(), 1e-6);
  EXPECT_GT(grass["t_received"].get<double>(), grass["t_first_start"].get<double>());
  EXPECT_LT(grass["t_received"].get<double>(), grass["t_end"].get<double>());
  EXPECT_TRUE(grass["orphan_decisions"].empty());
  ASSERT_EQ(rock["orphan_decisions"].size(), 1u) << rock;
  const nlohmann::json& decision = rock["orphan_decisions"][0];
  EXPECT_DOUBLE_EQ(decision["t"].get<double>(), 0.5);
  EXPECT_EQ(decision["decision"], "complete");
  EXPECT_EQ(decision["policy"], "always-complete");
  // About 0.45 s of 10 MB/s after the round trip.
  EXPECT_GT(decision["bytes_done"].get<std::uint64_t>(), 3'000'000u);
  EXPECT_LT(decision["bytes_done"].get<std::uint64_t>(), 5'000'000u);
  // 1, raised to 2, the orphan level from 0.5 to 0.6, 1 again; no entry for
  // the end (its last demand's success).
  EXPECT_EQ(rock["priority_timeline"], nlohmann::json::parse("[[0.0, 1], [0.1, 2], [0.5, null], "
                                                             "[0.6, 1]]"));
  EXPECT_EQ(grass["priority_timeline"], nlohmann::json::parse("[[0.2, 0]]"));

  // Kept instead: the first task ends at the decision with what it had; the
  // second, made by the demand that came back, fetches only the rest.
  const CliRun kept = simulate(trace, {"--policy", "keep-partial"});
  ASSERT_EQ(kept.exit_code, 0) << kept.err;
  const nlohmann::json& tasks = kept.result["tasks"];
  ASSERT_EQ(tasks.size(), 3u) << tasks;
  ASSERT_EQ(tasks[0]["orphan_decisions"].size(), 1u);
  EXPECT_EQ(tasks[0]["orphan_decisions"][0]["decision"], "keep_partial");
  EXPECT_EQ(tasks[0]["outcome"], "aborted");
  EXPECT_DOUBLE_EQ(tasks[0]["t_end"].get<double>(), 0.5);
  EXPECT_EQ(demand_record(kept.result, "back")["served_by"], "transfer");
  const nlohmann::json& again = tasks[demand_record(kept.result, "back")["task"].get<int>()];
  EXPECT_EQ(again["bytes_transferred"].get<std::uint64_t>() +
                tasks[0]["orphan_decisions"][0]["bytes_done"].get<std::uint64_t>(),
            20'000'000u);
  EXPECT_TRUE(again["orphan_decisions"].empty());
}

// --decisions: every answer of the policy with the view it answered and
// whether its key came back within the horizon.
TEST(SimContracts, TheDecisionLogHasEveryAnswerItsViewAndWhetherTheKeyCameBack) {
  const std::string trace =
      header(R"({"max_transfers": 2, "max_per_origin": 2})") + artifact("rock", 20'000'000) +
      artifact("grass", 20'000'000) + sub(0, "r1", "a", "rock", 1) +
      sub(0, "g1", "b", "grass", 1) + cancel(0.5, "r1") + cancel(0.7, "g1") +
      sub(3.5, "r2", "c", "rock", 1);  // Only the rock comes back, 3 s after.
  for (const auto& [horizon, rock_back] :
       std::vector<std::pair<std::string, bool>>{{"60", true}, {"2.5", false}}) {
    const CliRun run = simulate(trace, {"--policy", "keep-partial", "--decisions",
                                        "DIR/decisions.jsonl", "--decision-horizon", horizon});
    ASSERT_EQ(run.exit_code, 0) << run.err;
    std::istringstream lines(read_file(run.dir + "/decisions.jsonl"));
    std::vector<nlohmann::json> log;
    for (std::string line; std::getline(lines, line);)
      log.push_back(nlohmann::json::parse(line));
    ASSERT_EQ(log.size(), 2u);
    const nlohmann::json& rock = log[0];
    const nlohmann::json& grass = log[1];
    EXPECT_EQ(rock["artifact"], "rock");
    EXPECT_DOUBLE_EQ(rock["t"].get<double>(), 0.5);
    EXPECT_EQ(rock["decision"], "keep_partial");
    EXPECT_EQ(rock["policy"], "keep-partial");
    EXPECT_TRUE(rock["first_decision"].get<bool>());
    EXPECT_EQ(rock["size_bytes"], 20'000'000);
    EXPECT_EQ(rock["bytes_done"].get<std::uint64_t>() + rock["bytes_remaining"].get<std::uint64_t>(),
              20'000'000u);
    // The same bytes as the task's own record of the decision.
    const nlohmann::json& task = run.result["tasks"][rock["task"].get<int>()];
    EXPECT_EQ(task["artifact"], "rock");
    EXPECT_EQ(task["orphan_decisions"][0]["bytes_done"], rock["bytes_done"]);
    EXPECT_EQ(rock["task_outcome"], "aborted");
    EXPECT_EQ(rock["free_slots"], 0);  // The grass held the other slot.
    EXPECT_DOUBLE_EQ(rock["next_demand_in_s"].get<double>(), 3.0);
    EXPECT_EQ(rock["came_back"].get<bool>(), rock_back) << horizon;
    EXPECT_DOUBLE_EQ(rock["horizon_s"].get<double>(), std::stod(horizon));
    EXPECT_EQ(grass["artifact"], "grass");
    EXPECT_DOUBLE_EQ(grass["t"].get<double>(), 0.7);
    EXPECT_EQ(grass["free_slots"], 1);  // The rock's slot is free by then.
    EXPECT_TRUE(grass["next_demand_in_s"].is_null());
    EXPECT_FALSE(grass["came_back"].get<bool>());
  }
  // A linger ends at 1.1 exactly when the key is asked for again: its decision
  // comes first, and the key came back 0 s after it.
  const std::string again = header() + artifact("rock", 20'000'000) +
                            sub(0.5, "r1", "a", "rock", 1) + cancel(1.0, "r1") +
                            sub(1.1, "r2", "b", "rock", 1);
  const CliRun linger = simulate(again, {"--policy", "linger:delay_s=0.1", "--decisions",
                                         "DIR/decisions.jsonl"});
  ASSERT_EQ(linger.exit_code, 0) << linger.err;
  std::istringstream linger_lines(read_file(linger.dir + "/decisions.jsonl"));
  std::vector<nlohmann::json> linger_log;
  for (std::string line; std::getline(linger_lines, line);)
    linger_log.push_back(nlohmann::json::parse(line));
  ASSERT_EQ(linger_log.size(), 2u) << "first: complete; then, at its end: abort";
  EXPECT_EQ(linger_log[1]["decision"], "abort");
  EXPECT_DOUBLE_EQ(linger_log[1]["t"].get<double>(), 1.1);
  EXPECT_DOUBLE_EQ(linger_log[1]["next_demand_in_s"].get<double>(), 0.0) << linger_log[1];
  EXPECT_TRUE(linger_log[1]["came_back"].get<bool>());

  const CliRun bad = run_cli(trace, {"sim", "TRACE", "--decisions", "DIR/d.jsonl",
                                     "--decision-horizon", "0"});
  EXPECT_EQ(bad.exit_code, 2) << bad.err;
  EXPECT_NE(bad.err.find("--decision-horizon"), std::string::npos) << bad.err;
}

}  // namespace
}  // namespace dfl::testing
