// `demandflight compare`: every combination run in its own process, scored
// as documented (checked field by field against `sim` runs of the same
// trace), the oracle as the bound, and bad input refused before any run.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "cli_runner.h"
#include "demandflight/sim/oracle.h"

namespace dfl::testing {
namespace {

using CsvRow = std::map<std::string, std::string>;

// The CSV compare writes: a header, then one row per trace x model x policy.
// Fields hold no commas (policy specs use ';' between parameters).
std::vector<CsvRow> read_csv(const std::string& path) {
  std::istringstream in(read_file(path));
  std::vector<std::string> header;
  std::vector<CsvRow> rows;
  std::string line;
  while (std::getline(in, line)) {
    std::vector<std::string> fields;
    std::stringstream s(line);
    std::string field;
    while (std::getline(s, field, ',')) {
      if (field.size() >= 2 && field.front() == '"') field = field.substr(1, field.size() - 2);
      fields.push_back(field);
    }
    if (header.empty()) {
      header = fields;
      continue;
    }
    EXPECT_EQ(fields.size(), header.size()) << line;
    CsvRow row;
    for (std::size_t i = 0; i < header.size() && i < fields.size(); ++i)
      row[header[i]] = fields[i];
    rows.push_back(row);
  }
  return rows;
}

const CsvRow& row_of(const std::vector<CsvRow>& rows, const std::string& trace,
                     const std::string& model, const std::string& policy) {
  for (const CsvRow& r : rows) {
    if (r.at("trace") == trace && r.at("model") == model && r.at("policy") == policy) return r;
  }
  ADD_FAILURE() << "no row for " << trace << " " << model << " " << policy;
  static const CsvRow empty;
  return empty;
}

double number(const CsvRow& row, const std::string& field) {
  auto it = row.find(field);
  if (it == row.end()) {
    ADD_FAILURE() << "no field " << field;
    return std::nan("");
  }
  return it->second == "-" ? std::nan("") : std::stod(it->second);
}

// a is orphaned at 0.1 s (a quarter in) and asked for again at 1 s; b is
// wanted by a critical demand; a low demand for b times out at once.
std::string small_trace() {
  return header(R"({"max_transfers": 2, "max_per_origin": 2})", R"(, "network_model": "CM02")") +
         artifact("a", 1'000'000) + artifact("b", 2'000'000) +
         R"({"op": "subscribe", "t": 0, "demand": "d1", "owner": "o1", "artifact": "a", "priority": 0})"
         "\n"
         R"({"op": "subscribe", "t": 0, "demand": "d2", "owner": "o2", "artifact": "b", "priority": 3})"
         "\n"
         R"({"op": "subscribe", "t": 0, "demand": "d4", "owner": "o2", "artifact": "b", "priority": 0, "timeout_s": 0.01})"
         "\n"
         R"({"op": "cancel", "t": 0.1, "demand": "d1"})"
         "\n"
         R"({"op": "subscribe", "t": 1, "demand": "d3", "owner": "o1", "artifact": "a", "priority": 3})"
         "\n";
}

TEST(Compare, ItsFiguresForASmallTraceMatchTheSimulatorsResultFieldByField) {
  const std::string weights =
      "gb=2,p95_critical_s=3,deadline_miss=0.5,pollution_s=0.25,wasted_gb=7,unserved=0.2";
  const CliRun run = run_cli(small_trace(), {"compare", "TRACE", "--policies",
                                             "always-abort,always-complete,lookahead", "--weights",
                                             weights,
                                             "--csv", "DIR/c.csv", "--jobs", "2"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const auto rows = read_csv(run.dir + "/c.csv");
  ASSERT_EQ(rows.size(), 4u) << "three policies and the oracle, which always runs";
  std::map<std::string, double> score;
  for (const std::string policy : {"always-abort", "always-complete", "lookahead", "oracle"}) {
    SCOPED_TRACE(policy);
    // The oracle optimises the comparison's weights.
    const std::string spec = policy == "oracle" ? "oracle:" + weights : policy;
    const CliRun sim = run_cli(small_trace(), {"sim", "TRACE", "--policy", spec, "--seed", "1",
                                               "--out", "OUT", "--quiet"});
    ASSERT_EQ(sim.exit_code, 0) << sim.err;
    const auto& s = sim.result["summary"];
    const CsvRow& row = row_of(rows, "trace", "demand", policy);
    EXPECT_EQ(row.at("seeds"), "1");
    const double gb = s["bytes_transferred"].get<double>() / 1e9;
    const double wasted = s["bytes_wasted"].get<double>() / 1e9;
    EXPECT_NEAR(number(row, "gb"), gb, 1e-9);
    EXPECT_NEAR(number(row, "wasted_gb"), wasted, 1e-9);
    EXPECT_NEAR(number(row, "p50_s"), s["latency_s"]["p50"].get<double>(), 1e-9);
    EXPECT_NEAR(number(row, "p95_s"), s["latency_s"]["p95"].get<double>(), 1e-9);
    EXPECT_NEAR(number(row, "p99_s"), s["latency_s"]["p99"].get<double>(), 1e-9);
    // The critical class is the highest priority subscribed: 3.
    const auto& critical = s["latency_s_by_priority"]["3"];
    EXPECT_NEAR(number(row, "critical_p50_s"), critical["p50"].get<double>(), 1e-9);
    EXPECT_NEAR(number(row, "critical_p95_s"), critical["p95"].get<double>(), 1e-9);
    EXPECT_NEAR(number(row, "critical_p99_s"), critical["p99"].get<double>(), 1e-9);
    const double misses = s["outcomes"]["timed_out"].get<double>();
    EXPECT_EQ(misses, 1) << "d4 timed out";
    EXPECT_EQ(number(row, "deadline_misses"), misses);
    const double failed = s["outcomes"]["failed"].get<double>();
    const double succeeded = s["outcomes"]["succeeded"].get<double>();
    EXPECT_EQ(number(row, "unserved"), misses + failed);
    EXPECT_NEAR(number(row, "service_rate"), succeeded / (succeeded + misses + failed), 1e-9);
    EXPECT_EQ(number(row, "critical_priority"), 3);
    EXPECT_EQ(number(row, "critical_service_rate"), 1) << "d2 and d3 were served";
    EXPECT_EQ(number(row, "cache_hits"), s["cache_hits"].get<double>());
    const double pollution = s["priority_pollution_s"].get<double>();
    EXPECT_NEAR(number(row, "pollution_s"), pollution, 1e-9);
    score[policy] = 2 * gb + 7 * wasted + 3 * critical["p95"].get<double>() + 0.5 * misses +
                    0.2 * (misses + failed) + 0.25 * pollution;
    EXPECT_NEAR(number(row, "score"), score[policy], 1e-8);
    EXPECT_EQ(number(row, "score_sd"), 0) << "one seed: no spread";
  }
  for (const std::string policy : {"always-abort", "always-complete", "lookahead", "oracle"}) {
    EXPECT_NEAR(number(row_of(rows, "trace", "demand", policy), "regret"),
                score[policy] - score["oracle"], 1e-8)
        << policy;
    EXPECT_NEAR(number(row_of(rows, "trace", "demand", policy), "vs_oracle"),
                score[policy] / score["oracle"], 1e-8)
        << policy;
  }
  // a is asked for again, so lookahead completes it (d3 is a cache hit).
  EXPECT_EQ(number(row_of(rows, "trace", "demand", "lookahead"), "cache_hits"), 1);
  EXPECT_EQ(number(row_of(rows, "trace", "demand", "always-abort"), "cache_hits"), 0);
  // The table went to stdout, one line per row plus the header and the legend.
  EXPECT_NE(run.out.find("always-complete"), std::string::npos);
  EXPECT_NE(run.out.find("regret"), std::string::npos);
}

// The oracle's bound holds for every policy compare runs: none scores below
// it, on the bundled scenarios and on generated traces of random seeds.
void expect_no_policy_below_the_oracle(const std::vector<CsvRow>& rows) {
  std::size_t oracles = 0;
  for (const CsvRow& oracle : rows) {
    if (oracle.at("policy") != "oracle") continue;
    ++oracles;
    EXPECT_EQ(number(oracle, "vs_oracle"), 1.0);
    for (const CsvRow& r : rows) {
      if (r.at("trace") != oracle.at("trace") || r.at("model") != oracle.at("model")) continue;
      SCOPED_TRACE(r.at("trace") + " " + r.at("model") + ": " + r.at("policy"));
      EXPECT_LE(number(oracle, "score"), number(r, "score") + 1e-12);
      EXPECT_GE(number(r, "regret"), -1e-12);
      EXPECT_GE(number(r, "vs_oracle"), 1.0 - 1e-12);
    }
  }
  EXPECT_GT(oracles, 0u);
}

TEST(Compare, NoPolicyScoresBelowTheOracleOnAnyBundledScenario) {
  const std::string dir = DFL_SCENARIOS;
  std::vector<std::string> args = {"compare"};
  for (const char* name : {"three_callers", "open_world_streaming", "session_churn",
                           "flaky_network", "cache_pressure"})
    args.push_back(dir + "/" + name + ".jsonl");
  for (const char* a : {"--policies", "all", "--csv", "DIR/c.csv"})
    args.emplace_back(a);
  const CliRun run = run_cli("", args);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const auto rows = read_csv(run.dir + "/c.csv");
  ASSERT_EQ(rows.size() % 5, 0u);
  ASSERT_GE(rows.size(), 5u * 8u);
  expect_no_policy_below_the_oracle(rows);
}

TEST(Compare, NoPolicyScoresBelowTheOracleOnTwentyGeneratedTraces) {
  // Four kinds x five seeds from a random first seed: replay a failure with
  // DFL_TEST_SEED=<the printed seed>.
  std::uint64_t first = std::random_device{}() % 1'000'000;
  if (const char* env = std::getenv("DFL_TEST_SEED")) first = std::strtoull(env, nullptr, 10);
  std::printf("first seed %llu (DFL_TEST_SEED=%llu replays it)\n",
              static_cast<unsigned long long>(first), static_cast<unsigned long long>(first));
  SCOPED_TRACE("first seed " + std::to_string(first));
  // One compare per seed: a mean over seeds would hide a seed where the
  // oracle lost.
  for (std::uint64_t k = 0; k < 5; ++k) {
    std::vector<std::string> args = {"compare"};
    for (const char* kind :
         {"open_world_streaming", "session_churn", "flaky_network", "cache_pressure"})
      args.push_back(std::string("gen:") + kind + ":demands=400");
    for (const std::string a : {"--policies", "all", "--seeds", "1", "--csv", "DIR/c.csv"})
      args.push_back(a);
    args.emplace_back("--first-seed");
    args.push_back(std::to_string(first + k));
    SCOPED_TRACE("seed " + args.back());
    const CliRun run = run_cli("", args);
    ASSERT_EQ(run.exit_code, 0) << run.err;
    expect_no_policy_below_the_oracle(read_csv(run.dir + "/c.csv"));
  }
}

TEST(Compare, TheOraclesReportSaysWhatItSearchedAndItsRunReproducesItsBestChild) {
  const std::string trace = std::string(DFL_SCENARIOS) + "/session_churn.jsonl";
  const CliRun run = run_cli("", {"sim", trace, "--policy", "oracle", "--out", "DIR/r.json",
                                  "--quiet"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const nlohmann::json result = nlohmann::json::parse(read_file(run.dir + "/r.json"));
  const nlohmann::json& report = result.at("policy_report");
  const auto count = [&](const char* name) { return report.at(name).get<std::size_t>(); };
  EXPECT_GT(count("decisions"), 0u);
  // A bounded search (sim/oracle.h): its bases, the scout and the verified
  // changes run to the end, not a run per decision; two probes per decision
  // probed.
  EXPECT_EQ(count("runs"), dfl::sim::default_oracle_bases().size() + 1 + count("verified"));
  EXPECT_LT(count("runs"), count("decisions"));
  EXPECT_LE(count("verified"), dfl::sim::kOracleVerifiedChanges);
  EXPECT_LE(count("verified"), count("suggested"));
  EXPECT_GT(count("probed"), 0u);
  EXPECT_LE(count("probed"), std::min(count("decisions"), dfl::sim::kOracleProbedDecisions));
  EXPECT_EQ(count("probes"), 2 * count("probed"));
  EXPECT_GT(count("changed"), 0u) << "it improved on its base somewhere";
  EXPECT_LT(result.at("policy_report").at("score").get<double>(),
            report.at("base_score").get<double>());
  EXPECT_TRUE(result.at("warnings").empty()) << result.at("warnings").dump();
  // Its bases name the policies it starts from; a bad one is refused.
  const CliRun bad = run_cli("", {"sim", trace, "--policy", "oracle", "--oracle-base", "sometimes"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("--oracle-base"), std::string::npos) << bad.err;
  const CliRun bad_weight = run_cli("", {"sim", trace, "--policy", "oracle:speed=1"});
  EXPECT_EQ(bad_weight.exit_code, 2);
  EXPECT_NE(bad_weight.err.find("speed"), std::string::npos) << bad_weight.err;
}

TEST(Compare, PairsEveryPolicyWithTheBaselineSeedBySeedAndWritesTheRunsLongTable) {
  const CliRun run = run_cli("", {"compare", "gen:session_churn:demands=300", "--policies",
                                  "keep-partial,always-complete", "--baseline", "always-complete",
                                  "--seeds", "4", "--csv", "DIR/c.csv", "--runs-csv",
                                  "DIR/runs.csv"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.out.find("vs always-complete"), std::string::npos) << run.out;
  const auto rows = read_csv(run.dir + "/c.csv");
  const auto long_rows = read_csv(run.dir + "/runs.csv");
  ASSERT_EQ(long_rows.size(), 3u * 4u) << "two policies and the oracle, four seeds each";
  auto scores = [&](const std::string& policy) {
    std::map<std::string, double> by_seed;
    for (const CsvRow& r : long_rows)
      if (r.at("policy") == policy) by_seed[r.at("seed")] = number(r, "score");
    return by_seed;
  };
  const auto base = scores("always-complete");
  for (const std::string policy : {"keep-partial", "oracle"}) {
    const auto mine = scores(policy);
    ASSERT_EQ(mine.size(), 4u);
    double sum = 0;
    int wins = 0;
    for (const auto& [seed, score] : mine) {
      sum += score - base.at(seed);
      wins += score < base.at(seed);
    }
    const CsvRow& row = row_of(rows, "gen:session_churn:demands=300", "demand", policy);
    EXPECT_NEAR(number(row, "score_diff"), sum / 4, 1e-8) << policy;
    EXPECT_EQ(number(row, "wins"), wins) << policy;
    EXPECT_LE(number(row, "score_diff_lo"), number(row, "score_diff"));
    EXPECT_GE(number(row, "score_diff_hi"), number(row, "score_diff"));
  }
  const CsvRow& own = row_of(rows, "gen:session_churn:demands=300", "demand", "always-complete");
  EXPECT_EQ(number(own, "score_diff"), 0);
  EXPECT_EQ(number(own, "significant"), 0);
  const CliRun bad = run_cli("", {"compare", "gen:session_churn:demands=300", "--baseline",
                                  "sometimes"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("--baseline"), std::string::npos) << bad.err;
}

TEST(Compare, TheCriticalClassIsTheOneAskedForAndItsServiceRateCountsItsTimeouts) {
  const CliRun run = run_cli(small_trace(), {"compare", "TRACE", "--policies", "always-abort",
                                             "--critical-priority", "0", "--csv", "DIR/c.csv"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.out.find("critical = priority 0"), std::string::npos) << run.out;
  const auto rows = read_csv(run.dir + "/c.csv");
  const CsvRow& row = row_of(rows, "trace", "demand", "always-abort");
  EXPECT_EQ(number(row, "critical_priority"), 0);
  // d1 was cancelled (its caller left: neither served nor unserved), d4 timed out.
  EXPECT_EQ(number(row, "critical_service_rate"), 0);
  EXPECT_EQ(number(row, "unserved"), 1);
}

TEST(Compare, SeedsThatCannotDifferAreSaidToBeIdentical) {
  // three_callers has no retry: its seeds vary nothing; generated traces differ.
  const CliRun run =
      run_cli("", {"compare", std::string(DFL_SCENARIOS) + "/three_callers.jsonl",
                   "gen:session_churn:demands=300", "--policies", "always-abort", "--seeds", "10"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  // Ten: the mean of ten equal values may round, which once hid the note.
  EXPECT_NE(run.err.find("warning: three_callers: its 10 seeds gave identical runs"),
            std::string::npos)
      << run.err;
  EXPECT_EQ(run.err.find("warning: gen:"), std::string::npos) << run.err;

  // Resampled, the file's seeds are replications: a bootstrap of its owners each.
  const CliRun resampled =
      run_cli("", {"compare", std::string(DFL_SCENARIOS) + "/session_churn.jsonl", "--policies",
                   "always-abort,keep-partial", "--seeds", "4", "--resample", "owners", "--csv",
                   "DIR/c.csv"});
  ASSERT_EQ(resampled.exit_code, 0) << resampled.err;
  EXPECT_EQ(resampled.err.find("warning:"), std::string::npos) << resampled.err;
  const auto rows = read_csv(resampled.dir + "/c.csv");
  const CsvRow& keep = row_of(rows, "session_churn", "demand", "keep-partial");
  EXPECT_GT(number(keep, "gb_sd"), 0.01) << "the workload varies with the seed";
  EXPECT_LT(number(keep, "score_diff_lo") + 1e-3, number(keep, "score_diff_hi"))
      << "an interval that describes a spread";
}

TEST(Compare, GeneratedTracesVaryWithTheSeedAndShowTheirSpread) {
  const CliRun run =
      run_cli("", {"compare", "gen:session_churn:demands=300", "--policies", "always-abort",
                   "--seeds", "3", "--csv", "DIR/c.csv", "--markdown", "DIR/c.md"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const auto rows = read_csv(run.dir + "/c.csv");
  ASSERT_EQ(rows.size(), 2u);
  const CsvRow& r = row_of(rows, "gen:session_churn:demands=300", "demand", "always-abort");
  EXPECT_EQ(r.at("seeds"), "3");
  EXPECT_GT(number(r, "gb_sd"), 0) << "three different workloads";
  const std::string md = read_file(run.dir + "/c.md");
  EXPECT_NE(md.find("| gen:session_churn:demands=300 | demand | always-abort |"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("±"), std::string::npos) << "mean±sd across seeds";
}

TEST(Compare, BadInputIsRefusedBeforeAnyRunWithExitCode2) {
  const CliRun bad_trace = run_cli(header() + "{\"op\": \"subscribe\"}\n", {"compare", "TRACE"});
  EXPECT_EQ(bad_trace.exit_code, 2);
  EXPECT_NE(bad_trace.err.find("trace.jsonl:2:"), std::string::npos) << bad_trace.err;
  const CliRun bad_policy =
      run_cli(small_trace(), {"compare", "TRACE", "--policies", "always-abort,sometimes"});
  EXPECT_EQ(bad_policy.exit_code, 2);
  EXPECT_NE(bad_policy.err.find("unknown policy \"sometimes\""), std::string::npos)
      << bad_policy.err;
  const CliRun bad_weight = run_cli(small_trace(), {"compare", "TRACE", "--weights", "speed=1"});
  EXPECT_EQ(bad_weight.exit_code, 2);
  EXPECT_NE(bad_weight.err.find("unknown weight \"speed\""), std::string::npos) << bad_weight.err;
  const CliRun bad_model = run_cli(small_trace(), {"compare", "TRACE", "--models", "magic"});
  EXPECT_EQ(bad_model.exit_code, 2);
}

// --- train and learned ---------------------------------------------------------

TEST(Train, FitsTheLearnedPolicyOnTracesAndTheSimulatorRunsIt) {
  // Two generated training traces (seeds 1 and 2)...
  const CliRun gen1 = run_cli("", {"gen", "session_churn", "--seed", "1", "--demands", "1500"});
  const CliRun gen2 = run_cli("", {"gen", "session_churn", "--seed", "2", "--demands", "1500"});
  ASSERT_EQ(gen1.exit_code, 0);
  ASSERT_EQ(gen2.exit_code, 0);
  const std::string train1 = gen1.dir + "/stdout", train2 = gen2.dir + "/stdout";
  const CliRun train = run_cli("", {"train", train1, train2, "--out", "DIR/model.json"});
  ASSERT_EQ(train.exit_code, 0) << train.err;
  EXPECT_NE(train.out.find("orphanings"), std::string::npos) << train.out;
  const auto model = nlohmann::json::parse(read_file(train.dir + "/model.json"));
  EXPECT_EQ(model["format"], "demandflight-learned-policy");
  EXPECT_GT(model["examples"].get<int>(), 20) << "session churn orphans many transfers";
  EXPECT_GT(model["positives"].get<int>(), 0);
  EXPECT_LT(model["positives"].get<int>(), model["examples"].get<int>());
  EXPECT_EQ(model["weights"].size(), 10u);
  // ...and a trace of another seed (3) to run it on, against always-abort.
  const CliRun eval = run_cli("", {"gen", "session_churn", "--seed", "3", "--demands", "1500"});
  const std::string spec = "learned:model=" + train.dir + "/model.json";
  const CliRun learned = run_cli(read_file(eval.dir + "/stdout"),
                                 {"sim", "TRACE", "--policy", spec, "--out", "OUT", "--quiet"});
  ASSERT_EQ(learned.exit_code, 0) << learned.err;
  EXPECT_EQ(learned.result["policy"], spec);
  const CliRun complete = run_cli(read_file(eval.dir + "/stdout"),
                                  {"sim", "TRACE", "--policy", "always-complete", "--out", "OUT",
                                   "--quiet"});
  // It completes only what it expects back: less waste than completing everything.
  EXPECT_LT(learned.result["summary"]["bytes_wasted"].get<double>(),
            complete.result["summary"]["bytes_wasted"].get<double>());
}

TEST(Train, ALearnedPolicyWithoutAModelOrWithABadOneIsRefused) {
  const CliRun none = run_cli(small_trace(), {"sim", "TRACE", "--policy", "learned"});
  EXPECT_EQ(none.exit_code, 2);
  EXPECT_NE(none.err.find("model=FILE"), std::string::npos) << none.err;
  const CliRun missing =
      run_cli(small_trace(), {"sim", "TRACE", "--policy", "learned:model=DIR/nothing.json"});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.err.find("nothing.json: cannot read"), std::string::npos) << missing.err;
  const CliRun bad_trace = run_cli(header() + "{\"op\": \"subscribe\"}\n",
                                   {"train", "TRACE", "--out", "DIR/m.json"});
  EXPECT_EQ(bad_trace.exit_code, 2);
  EXPECT_NE(bad_trace.err.find("trace.jsonl:2:"), std::string::npos) << bad_trace.err;
}

// One owner cannot be resampled: the warning says so, and does not advise
// the --resample that was given.
TEST(Compare, ResamplingAOneOwnerTraceWarnsThatNothingVaries) {
  const std::string trace =
      header() + artifact("a", 1'000'000) + artifact("b", 2'000'000) +
      R"({"op": "subscribe", "t": 0, "demand": "d1", "owner": "solo", "artifact": "a", "priority": 1}
{"op": "subscribe", "t": 0.1, "demand": "d2", "owner": "solo", "artifact": "b", "priority": 0}
{"op": "cancel", "t": 0.2, "demand": "d2"}
)";
  const CliRun run = run_cli(trace, {"compare", "TRACE", "--policies", "always-abort,always-complete",
                                     "--seeds", "3", "--resample", "owners"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.err.find("gave identical runs under every policy even with --resample owners"),
            std::string::npos)
      << run.err;
  EXPECT_EQ(run.err.find("--resample owners varies"), std::string::npos) << run.err;
}

// Seeds that cannot differ give a constant difference: no interval, no
// marker, the least p the signed-rank test can give, and a nonzero
// difference never printed as 0.
TEST(Compare, AConstantDifferenceHasNoIntervalNorMarkerAndShowsItsDigits) {
  const CliRun run = run_cli("", {"compare", std::string(DFL_SCENARIOS) + "/three_callers.jsonl",
                                  "--policies", "always-abort,always-complete", "--seeds", "5",
                                  "--csv", "DIR/c.csv"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const auto rows = read_csv(run.dir + "/c.csv");
  const CsvRow& row = row_of(rows, "three_callers", "demand", "always-complete");
  EXPECT_EQ(number(row, "constant"), 1);
  EXPECT_EQ(number(row, "significant"), 0);
  EXPECT_EQ(row.at("score_diff_lo"), "-");
  std::string line;
  for (std::istringstream in(run.out); std::getline(in, line);)
    if (line.find("always-complete") != std::string::npos) break;
  EXPECT_NE(line.find("constant"), std::string::npos) << line;
  EXPECT_EQ(line.find("]*"), std::string::npos) << line;
  if (number(row, "score_diff") != 0) {
    EXPECT_EQ(line.find(" 0.000 "), std::string::npos) << line;
    EXPECT_EQ(line.find(" -0.000 "), std::string::npos) << line;
    EXPECT_NEAR(number(row, "score_p_wilcoxon"), 2.0 / 32, 1e-9);
  }
}

// The printed table fits a terminal of 100 columns, every policy, several
// traces; --wide prints every figure as before.
TEST(Compare, ItsDefaultTableFitsAHundredColumnsAndWideHasEveryFigure) {
  const std::string scenarios(DFL_SCENARIOS);
  const CliRun run = run_cli("", {"compare", scenarios + "/three_callers.jsonl",
                                  scenarios + "/flaky_network.jsonl", "--policies", "all",
                                  "--seeds", "2", "--jobs", "2"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  auto widest = [](const std::string& text) {
    std::size_t most = 0;
    std::string line;
    for (std::istringstream in(text); std::getline(in, line);) {
      std::size_t n = 0;
      for (unsigned char c : line)
        n += (c & 0xC0) != 0x80;
      most = std::max(most, n);
    }
    return most;
  };
  EXPECT_LE(widest(run.out), 100u) << run.out;
  for (const char* shown : {"three_callers (model demand)", "flaky_network (model demand)",
                            "d_score [95% t]", "vs_oracle", "crit_p95_s", "served",
                            "wasted_gb", "keep-partial", "baseline"})
    EXPECT_NE(run.out.find(shown), std::string::npos) << shown << "\n" << run.out;
  const CliRun wide = run_cli("", {"compare", scenarios + "/three_callers.jsonl", "--policies",
                                   "always-abort,keep-partial", "--wide"});
  ASSERT_EQ(wide.exit_code, 0) << wide.err;
  EXPECT_GT(widest(wide.out), 200u);
  for (const char* column : {"p50_s", "p99_s", "pollution_s", "d_score_95ci", "cache_hits"})
    EXPECT_NE(wide.out.find(column), std::string::npos) << column;
}

}  // namespace
}  // namespace dfl::testing
