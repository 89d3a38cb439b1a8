// The simulator models the network and the machine honestly: under CM02 a lone
// transfer takes size / bandwidth + latency, concurrent transfers share the
// bottleneck fairly, finalize costs hashing plus a disk write, and timers fire
// at exact virtual times.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "cli_runner.h"

namespace dfl::testing {
namespace {

std::string sub(double t, const std::string& demand, const std::string& artifact_id,
                const std::string& extra = "") {
  return R"({"op": "subscribe", "t": )" + std::to_string(t) + R"(, "demand": ")" + demand +
         R"(", "owner": "o", "artifact": ")" + artifact_id + R"(", "priority": 1)" + extra + "}\n";
}

// client 10 MB/s + 10 ms, origin 40 MB/s + 40 ms: bottleneck 10 MB/s, latency 50 ms.
constexpr double kLatency_s = 0.05;
constexpr double kBottleneck_Bps = 10e6;

TEST(SimFidelity, ALoneTransferTakesSizeOverBandwidthPlusLatency) {
  const CliRun run = simulate(header() + artifact("rock", 20'000'000) + sub(0, "d1", "rock"));
  const double expected = 20e6 / kBottleneck_Bps + kLatency_s;
  const double got = demand_record(run.result, "d1")["t_end"].get<double>();
  EXPECT_NEAR(got, expected, expected * 0.01);
  EXPECT_NEAR(got, expected, 1e-6) << "CM02 is exact (to SimGrid's numeric precision)";
}

TEST(SimFidelity, TwoConcurrentTransfersShareTheLinkFairly) {
  const CliRun run = simulate(header() + artifact("a", 20'000'000) + artifact("b", 20'000'000) +
                              sub(0, "d1", "a") + sub(0, "d2", "b"));
  const double a = demand_record(run.result, "d1")["t_end"].get<double>();
  const double b = demand_record(run.result, "d2")["t_end"].get<double>();
  EXPECT_DOUBLE_EQ(a, b);
  EXPECT_NEAR(a, 40e6 / kBottleneck_Bps + kLatency_s, 1e-6);
}

TEST(SimFidelity, FinalizeCostsHashingThenADiskWrite) {
  const std::string h =
      R"({"format": "demandflight-trace", "version": 1, "platform": {"client_bandwidth_Bps": 10000000, "client_latency_s": 0.01, )"
      R"("origins": {"cdn": {"bandwidth_Bps": 40000000, "latency_s": 0.04}}, "hash_Bps": 10000000, "disk_write_Bps": 20000000}})"
      "\n";
  const CliRun run = simulate(h + artifact("rock", 20'000'000) + sub(0, "d1", "rock"));
  // Transfer 2.05 s, hash 20 MB at 10 MB/s = 2 s, write at 20 MB/s = 1 s.
  EXPECT_NEAR(demand_record(run.result, "d1")["t_end"].get<double>(), 2.05 + 2.0 + 1.0, 1e-6);
  // The install is the run's last event, though no SimGrid event marks it.
  EXPECT_NEAR(run.result["summary"]["makespan_s"].get<double>(), 2.05 + 2.0 + 1.0, 1e-6);
}

// A platform where transfers take ~nothing, so finalizes start when asked.
std::string finalize_header(const std::string& hash_Bps, const std::string& disk_Bps,
                            const std::string& scheduler = R"({"max_transfers": 8})") {
  return R"({"format": "demandflight-trace", "version": 1, "platform": {"client_bandwidth_Bps": 1e12, "client_latency_s": 0, )"
         R"("origins": {"cdn": {"bandwidth_Bps": 1e12, "latency_s": 0}}, "hash_Bps": )" +
         hash_Bps + R"(, "disk_write_Bps": )" + disk_Bps + R"(}, "scheduler": )" + scheduler +
         "}\n";
}

// d1 and d2 end at these times, with the stages' sharing computed by the
// simulator (the default) and with every finalize a SimGrid Exec.
void expect_ends(const std::string& trace, double d1, double d2) {
  for (const std::vector<std::string>& extra :
       {std::vector<std::string>{}, {std::string("--finalize-execs")}}) {
    SCOPED_TRACE(extra.empty() ? "computed sharing" : "--finalize-execs");
    const CliRun run = simulate(trace, extra);
    EXPECT_NEAR(demand_record(run.result, "d1")["t_end"].get<double>(), d1, 1e-4);
    EXPECT_NEAR(demand_record(run.result, "d2")["t_end"].get<double>(), d2, 1e-4);
  }
}

TEST(SimFidelity, ConcurrentFinalizesShareTheCpuAndTheDiskFairly) {
  // Hash and disk at 10 MB/s. a hashes alone until b arrives at 0.5 s, then at
  // half speed: a hashed at 1.5, b at 2.0. a writes alone until b joins at 2.0,
  // then both at half speed: a installed at 3.0, b alone again until 3.5.
  const std::string trace = finalize_header("1e7", "1e7") + artifact("a", 10'000'000) +
                            artifact("b", 10'000'000) + sub(0, "d1", "a") + sub(0.5, "d2", "b");
  expect_ends(trace, 3.0, 3.5);
}

TEST(SimFidelity, ConcurrentFinalizesShareTheDiskAfterALoneHash) {
  // Hash 10 MB/s, disk 1 MB/s. a alone: hashed at 1, writing until 11. b
  // hashes alone 2..3 and joins the disk at 3, when a has 8 MB left: both at
  // 0.5 MB/s until a is installed at 19; b's last 2 MB alone, until 21.
  const std::string trace = finalize_header("1e7", "1e6") + artifact("a", 10'000'000) +
                            artifact("b", 10'000'000) + sub(0, "d1", "a") + sub(2, "d2", "b");
  expect_ends(trace, 19.0, 21.0);
}

TEST(SimFidelity, SharedStagesGiveTheSameResultsAsExecs) {
  // Randomized: many finalizes on a slow CPU and disk, so that they queue,
  // overlap in every combination and come and go alone; the simulator's own
  // processor sharing, whose finalizes are finished when the next SimGrid
  // event comes (or at once, for a corrupt body), must give every demand the
  // outcome and time SimGrid's Execs give it.
  const unsigned base = ::testing::UnitTest::GetInstance()->random_seed();
  for (unsigned round = 0; round < 8; ++round) {
    const unsigned seed = base + round;
    SCOPED_TRACE("seed " + std::to_string(seed) + " (rerun: --gtest_random_seed=" +
                 std::to_string(base) + ")");
    std::mt19937 rng(seed);
    // Either stage may be the bottleneck, or neither. Corrupt bodies fail
    // their verification at the end of the disk stage; in odd rounds their
    // retry starts at that very instant (no backoff).
    const std::string scheduler =
        round % 2 == 0
            ? R"({"max_transfers": 4})"
            : R"({"max_transfers": 4, "retry": {"max_attempts": 3, "base_s": 0, "cap_s": 0, "jitter": 0}})";
    std::string trace = finalize_header(std::to_string(2 + rng() % 20) + "e6",
                                        std::to_string(2 + rng() % 20) + "e6", scheduler);
    for (int i = 0; i < 40; ++i)
      trace += artifact("a" + std::to_string(i), 1'000'000 + rng() % 19'000'000);
    std::vector<std::pair<double, std::string>> records;
    for (int i = 0; i < 120; ++i) {
      const double t = static_cast<double>(rng() % 60'000) / 1000.0;
      const std::string d = "d" + std::to_string(i);
      records.emplace_back(t, sub(t, d, "a" + std::to_string(rng() % 40)));
      if (rng() % 4 == 0) {
        const double end = t + static_cast<double>(rng() % 5'000) / 1000.0;
        records.emplace_back(end, R"({"op": "cancel", "t": )" + std::to_string(end) +
                                      R"(, "demand": ")" + d + "\"}\n");
      }
    }
    for (int i = 0; i < 10; ++i) {
      const double t = static_cast<double>(rng() % 60'000) / 1000.0;
      records.emplace_back(t, R"({"op": "fault", "t": )" + std::to_string(t) +
                                  R"(, "kind": "corrupt", "artifact": "a)" +
                                  std::to_string(rng() % 40) + "\"}\n");
    }
    std::stable_sort(records.begin(), records.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    for (const auto& [t, line] : records) trace += line;
    const CliRun timers = simulate(trace);
    const CliRun execs = simulate(trace, {"--finalize-execs"});
    ASSERT_EQ(timers.result["demands"].size(), 120u);
    ASSERT_EQ(execs.result["demands"].size(), 120u);
    for (std::size_t i = 0; i < 120; ++i) {
      const auto& a = timers.result["demands"][i];
      const auto& b = execs.result["demands"][i];
      EXPECT_EQ(a["outcome"], b["outcome"]) << a["demand"];
      EXPECT_NEAR(a["t_end"].get<double>(), b["t_end"].get<double>(), 1e-6) << a["demand"];
    }
    for (const char* field : {"outcomes", "bytes_transferred", "bytes_wasted", "installs"}) {
      EXPECT_EQ(timers.result["summary"][field], execs.result["summary"][field]) << field;
    }
  }
}

TEST(SimFidelity, TimersFireAtExactVirtualTimes) {
  const CliRun run = simulate(header() + artifact("rock", 20'000'000) +
                              sub(0.25, "d1", "rock", R"(, "timeout_s": 0.5)"));
  const auto& d = demand_record(run.result, "d1");
  EXPECT_EQ(d["outcome"], "timed_out");
  EXPECT_DOUBLE_EQ(d["t_end"].get<double>(), 0.75);
}

// The default is the tcp model (docs/validation.md, *The fidelity table*: it beats the
// calibrated flow model on every bundled scenario): a lone transfer on a new
// connection pays the handshake and slow start on top of the flow model's time.
TEST(SimFidelity, TheDefaultNetworkModelIsTheTcpModel) {
  const std::string trace = header() + artifact("rock", 20'000'000) + sub(0, "d1", "rock");
  auto end_under = [&](const std::vector<std::string>& model) {
    std::vector<std::string> args{"sim", "TRACE", "--out", "OUT", "--quiet"};
    args.insert(args.end(), model.begin(), model.end());
    const CliRun run = run_cli(trace, args);
    EXPECT_EQ(run.exit_code, 0) << run.err;
    return run.exit_code == 0 ? demand_record(run.result, "d1")["t_end"].get<double>() : -1.0;
  };
  const double by_default = end_under({});
  EXPECT_EQ(by_default, end_under({"--network-model", "tcp"}));
  EXPECT_EQ(by_default, end_under({"--network-model", "default"}));
  const double calibrated = end_under({"--network-model", "calibrated"});
  EXPECT_GT(by_default, calibrated + 2 * kLatency_s);  // At least the handshake's round trip.
  EXPECT_GT(calibrated, 20e6 / kBottleneck_Bps + kLatency_s);
}

TEST(SimFidelity, ThePlatformCanAskForCm02AndTheFlagOverridesIt) {
  const std::string cm02_platform =
      header(R"({"max_transfers": 2})", R"(, "network_model": "CM02")") +
      artifact("rock", 20'000'000) + sub(0, "d1", "rock");
  const CliRun exact = run_cli(cm02_platform, {"sim", "TRACE", "--out", "OUT", "--quiet"});
  ASSERT_EQ(exact.exit_code, 0) << exact.err;
  EXPECT_NEAR(demand_record(exact.result, "d1")["t_end"].get<double>(),
              20e6 / kBottleneck_Bps + kLatency_s, 1e-6);
  const CliRun overridden = run_cli(
      cm02_platform, {"sim", "TRACE", "--out", "OUT", "--quiet", "--network-model", "default"});
  ASSERT_EQ(overridden.exit_code, 0) << overridden.err;
  EXPECT_GT(demand_record(overridden.result, "d1")["t_end"].get<double>(),
            20e6 / kBottleneck_Bps + kLatency_s + 0.1);
  const CliRun bad = run_cli(header(R"({})", R"(, "network_model": "cm2")"), {"validate", "TRACE"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find(":1: platform.network_model: "), std::string::npos) << bad.err;
}

}  // namespace
}  // namespace dfl::testing
