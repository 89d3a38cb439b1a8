// The simulator models the network and the machine honestly: under CM02 a lone
// transfer takes size / bandwidth + latency, concurrent transfers share the
// bottleneck fairly, finalize costs hashing plus a disk write, and timers fire
// at exact virtual times.
#include <gtest/gtest.h>

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
}

TEST(SimFidelity, TimersFireAtExactVirtualTimes) {
  const CliRun run = simulate(header() + artifact("rock", 20'000'000) +
                              sub(0.25, "d1", "rock", R"(, "timeout_s": 0.5)"));
  const auto& d = demand_record(run.result, "d1");
  EXPECT_EQ(d["outcome"], "timed_out");
  EXPECT_DOUBLE_EQ(d["t_end"].get<double>(), 0.75);
}

TEST(SimFidelity, TheDefaultNetworkModelIsSimGridsCalibratedOne) {
  // LV08 corrects for TCP (latency x13.01 for slow start, bandwidth x0.97):
  // slower than the CM02 ideal, by about 0.7 s here.
  const std::string trace = header() + artifact("rock", 20'000'000) + sub(0, "d1", "rock");
  const CliRun lv08 = run_cli(trace, {"sim", "TRACE", "--out", "OUT", "--quiet"});
  ASSERT_EQ(lv08.exit_code, 0) << lv08.err;
  const double t = demand_record(lv08.result, "d1")["t_end"].get<double>();
  EXPECT_GT(t, 20e6 / kBottleneck_Bps + kLatency_s);
  EXPECT_LT(t, 1.5 * (20e6 / kBottleneck_Bps + kLatency_s));
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
