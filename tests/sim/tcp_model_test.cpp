// The network models beyond the flow model: `tcp` (the default plus TCP state
// per kept-alive connection, a closed form per transfer) against hand
// calculation, and `ns3` (packet-level TCP) against the same closed form.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli_runner.h"
#include "demandflight/format/defaults.h"
#include "demandflight/format/trace.h"
#include "demandflight/sim/tcp_connections.h"

namespace dfl::testing {
namespace {

using sim::slow_start;
using sim::TcpConnections;
using sim::window_after_idle;

// The platform of header(): client 10 MB/s + 10 ms, origin 40 MB/s + 40 ms.
constexpr double kRtt_s = 2 * (0.01 + 0.04);
constexpr double kBottleneck_Bps = 10e6;
// Under the default model a transfer moves at 95.6% of the link and pays a
// round trip (latency factor 2).
const double kShare_Bps = kBottleneck_Bps * format::defaults::calibrated_bandwidth_factor;

std::string sub(double t, const std::string& demand, const std::string& artifact_id) {
  return R"({"op": "subscribe", "t": )" + std::to_string(t) + R"(, "demand": ")" + demand +
         R"(", "owner": "o", "artifact": ")" + artifact_id + R"(", "priority": 1})" + "\n";
}

double t_end(const CliRun& run, const std::string& demand) {
  return demand_record(run.result, demand)["t_end"].get<double>();
}

CliRun simulate_with(const std::string& trace, const std::string& model) {
  CliRun run = run_cli(trace, {"sim", "TRACE", "--out", "OUT", "--network-model", model, "--quiet"});
  EXPECT_EQ(run.exit_code, 0) << run.err;
  return run;
}

TEST(TcpModel, NetworkModelNamesParseOneWay) {
  for (const std::string& name : format::network_model_names()) {
    const auto model = format::parse_network_model(name);
    ASSERT_TRUE(model.has_value()) << name;
    if (name != "default") {
      EXPECT_EQ(format::to_string(*model), name);
    }
  }
  // "default" is the tcp model, and the header's default.
  EXPECT_EQ(format::parse_network_model("default"), format::NetworkModel::tcp);
  EXPECT_EQ(format::Platform{}.network_model, format::NetworkModel::tcp);
  EXPECT_EQ(format::parse_network_model("Calibrated"), format::NetworkModel::calibrated);
  EXPECT_EQ(format::parse_network_model("CM02"), format::NetworkModel::cm02);
  EXPECT_EQ(format::parse_network_model("ns-3"), format::NetworkModel::ns3);
  EXPECT_FALSE(format::parse_network_model("ns4").has_value());
}

// By hand: share 9.56 MB/s, round trip 0.1 s, so the bandwidth-delay product
// is 956,000 B. From 10 segments of 1,448 B (14,480 B) the window doubles:
// 14,480 28,960 57,920 115,840 231,680 463,360 926,720 are below it (7 rounds
// that send 14,480 x 127 = 1,838,960 B), 1,853,440 is above. Each of the 7
// rounds lasts 0.1 s but sends only window / share: the delay is
// 0.7 - 1,838,960 / 9,560,000 = 0.507640 s.
TEST(TcpModel, SlowStartDelayMatchesTheHandCalculation) {
  const sim::SlowStart big = slow_start(20e6, 14'480, kRtt_s, kShare_Bps);
  EXPECT_NEAR(big.delay_s, 0.7 - 1'838'960 / kShare_Bps, 1e-9);
  EXPECT_EQ(big.window_limited_rounds, 7);
  EXPECT_DOUBLE_EQ(big.window_bytes, 1'853'440);
  // 50,000 B: rounds of 14,480 and 28,960 (43,440 B) wait for their ACKs; the
  // third round (57,920) sends the last 6,560 B: no wait after it.
  const sim::SlowStart small = slow_start(50'000, 14'480, kRtt_s, kShare_Bps);
  EXPECT_NEAR(small.delay_s, 0.2 - 43'440 / kShare_Bps, 1e-9);
  EXPECT_EQ(small.window_limited_rounds, 2);
  // A window that covers the share already: no delay, whatever the size.
  EXPECT_EQ(slow_start(20e6, 1'000'000, kRtt_s, kShare_Bps).delay_s, 0);
  // A transfer that fits in the first window: none either. Linux grows the
  // window only while it is below twice what is in flight: 10,000 B leave it
  // at 20,000, 5,000 B as it was.
  const sim::SlowStart tiny = slow_start(10'000, 14'480, kRtt_s, kShare_Bps);
  EXPECT_EQ(tiny.delay_s, 0);
  EXPECT_DOUBLE_EQ(tiny.window_bytes, 20'000);
  EXPECT_DOUBLE_EQ(slow_start(5'000, 14'480, kRtt_s, kShare_Bps).window_bytes, 14'480);
  // 50,000 B: the third round sends 6,560 B, so the window ends at
  // max(57,920, 2 x 6,560) = 57,920; 100,000 B: the third round sends
  // 56,560 B, and the window ends at 113,120.
  EXPECT_DOUBLE_EQ(small.window_bytes, 57'920);
  EXPECT_DOUBLE_EQ(slow_start(100'000, 14'480, kRtt_s, kShare_Bps).window_bytes, 113'120);
}

// Linux's tcp_cwnd_restart(): idle for `idle`, with a timeout of 0.3 s, the
// window halves once per whole timeout after the first, never below 10 segments.
TEST(TcpModel, AnIdleConnectionHalvesItsWindowPerTimeout) {
  const double rto = 0.3, iw = 14'480;
  EXPECT_EQ(window_after_idle(1'853'440, 0.25, rto, iw), 1'853'440);  // Under one timeout.
  EXPECT_EQ(window_after_idle(1'853'440, 0.5, rto, iw), 926'720);     // 0.2 left: one halving.
  EXPECT_EQ(window_after_idle(1'853'440, 1.0, rto, iw), 231'680);     // 0.7, 0.4, 0.1: three.
  EXPECT_EQ(window_after_idle(1'853'440, 60, rto, iw), iw);           // Floored.
}

// The idle time that counts is the server's: the client's gap plus a round
// trip. A 20 MB transfer leaves the window at 1,853,440 B (above the share's
// 956,000); the next request 0.25 s after it ends is under the timeout (0.3 s)
// at the client but 0.35 s at the server: one halving, to 926,720 B, which
// is below 956,000 for one round: 0.1 - 926,720 / 9.56 MB/s.
TEST(TcpModel, TheIdleTimeIsTheServersOneRoundTripLongerThanTheClients) {
  TcpConnections pool(/*origins=*/1);
  pool.start(1, 0, 0, 20e6, kRtt_s, kShare_Bps, kShare_Bps);
  pool.finish(1, 0, 3.0, /*keep=*/true);
  const auto next = pool.start(2, 0, 3.25, 20e6, kRtt_s, kShare_Bps, kShare_Bps);
  EXPECT_FALSE(next.new_connection);
  EXPECT_NEAR(next.slow_start_s, kRtt_s - 926'720 / kShare_Bps, 1e-12);
  pool.finish(2, 0, 6.0, /*keep=*/true);
  // 0.15 s after: 0.25 s at the server, under the timeout: no slow start.
  EXPECT_EQ(pool.start(3, 0, 6.15, 20e6, kRtt_s, kShare_Bps, kShare_Bps).slow_start_s, 0);
}

// Two transfers at once: each has half the path (4.78 MB/s, a bandwidth-
// delay product of 478,000 B). The first 20 MB leaves slow start with a
// window of 926,720 B (the first above 478,000), and then holds at least the
// whole path's 956,000 B: a transfer alone on it right after needs no round
// trip of slow start. Without that rule its window would be 926,720 B, one
// round short: a delay of 0.1 - 926,720 / 9.56 MB/s.
TEST(TcpModel, AConnectionOutOfSlowStartHoldsThePathsWindow) {
  TcpConnections pool(/*origins=*/1);
  const auto first = pool.start(1, 0, 0, 20e6, kRtt_s, kShare_Bps / 2, kShare_Bps);
  EXPECT_NEAR(first.slow_start_s, 0.6 - (14'480 * 63) / (kShare_Bps / 2), 1e-12);  // 6 rounds.
  pool.finish(1, 0, 5.0, /*keep=*/true);
  EXPECT_EQ(pool.start(2, 0, 5.05, 20e6, kRtt_s, kShare_Bps, kShare_Bps).slow_start_s, 0);
  // A transfer that ends inside slow start keeps the window it reached.
  TcpConnections small(/*origins=*/1);
  small.start(1, 0, 0, 50'000, kRtt_s, kShare_Bps, kShare_Bps);
  small.finish(1, 0, 1.0, /*keep=*/true);
  const auto next = small.start(2, 0, 1.05, 20e6, kRtt_s, kShare_Bps, kShare_Bps);
  // From 57,920 B: 57,920 to 926,720 (5 rounds, 1,795,520 B) are below 956,000.
  EXPECT_NEAR(next.slow_start_s, 0.5 - 1'795'520 / kShare_Bps, 1e-12);
}

TEST(TcpModel, ThePoolReusesTheFirstIdleConnectionAndClosesAbortedOnes) {
  TcpConnections pool(/*origins=*/1);
  const auto a = pool.start(1, 0, 0, 1e6, kRtt_s, kShare_Bps, kShare_Bps);
  EXPECT_TRUE(a.new_connection);
  EXPECT_NEAR(a.handshake_s, kRtt_s, 1e-12);
  const auto b = pool.start(2, 0, 0, 1e6, kRtt_s, kShare_Bps, kShare_Bps);
  EXPECT_TRUE(b.new_connection);  // The first is busy.
  EXPECT_EQ(pool.busy(0), 2u);
  pool.finish(1, 0, 1.0, /*keep=*/true);
  pool.finish(2, 0, 1.0, /*keep=*/false);  // Aborted mid-body: closed.
  const auto c = pool.start(3, 0, 1.1, 1e6, kRtt_s, kShare_Bps, kShare_Bps);
  EXPECT_FALSE(c.new_connection);
  EXPECT_EQ(c.handshake_s, 0);
  const auto d = pool.start(4, 0, 1.1, 1e6, kRtt_s, kShare_Bps, kShare_Bps);
  EXPECT_TRUE(d.new_connection);  // The aborted one is gone.
  EXPECT_EQ(pool.opened(), 3u);
}

// libcurl's connection cache holds 4 connections per transfer in its multi
// handle (CURLMOPT_MAXCONNECTS unset): returning a fifth with one transfer
// running closes the one idle longest, of any origin.
TEST(TcpModel, TheConnectionCacheKeepsFourPerTransferAndClosesTheOldestIdle) {
  TcpConnections pool(/*origins=*/5);
  for (std::uint32_t origin = 0; origin < 5; ++origin) {  // One at a time.
    EXPECT_TRUE(pool.start(origin + 1, origin, origin, 1e6, kRtt_s, kShare_Bps, kShare_Bps)
                    .new_connection);
    pool.finish(origin + 1, origin, origin + 0.5, /*keep=*/true);
  }
  EXPECT_EQ(pool.evicted(), 1u);  // Origin 0's, idle since 0.5 s.
  EXPECT_TRUE(pool.start(10, 0, 6, 1e6, kRtt_s, kShare_Bps, kShare_Bps).new_connection);
  pool.finish(10, 0, 6.5, /*keep=*/true);  // Closes origin 1's, the oldest now.
  EXPECT_TRUE(pool.start(11, 1, 7, 1e6, kRtt_s, kShare_Bps, kShare_Bps).new_connection);
  pool.finish(11, 1, 7.5, /*keep=*/true);  // Closes origin 2's.
  const auto kept = pool.start(12, 4, 8, 1e6, kRtt_s, kShare_Bps, kShare_Bps);
  EXPECT_FALSE(kept.new_connection);  // Origin 4's survived.
  EXPECT_EQ(kept.connection, 5u);
  pool.finish(12, 4, 8.5, /*keep=*/true);  // Four now: none closed.
  EXPECT_EQ(pool.evicted(), 3u);

  // Two transfers in the multi handle: room for 8, nothing closed.
  TcpConnections two(/*origins=*/6);
  for (std::uint32_t origin = 0; origin < 6; ++origin) {
    two.start(2 * origin + 1, origin, origin, 1e6, kRtt_s, kShare_Bps, kShare_Bps);
    two.start(2 * origin + 2, origin, origin, 1e6, kRtt_s, kShare_Bps, kShare_Bps);
    two.finish(2 * origin + 1, origin, origin + 0.5, /*keep=*/true);
    two.finish(2 * origin + 2, origin, origin + 0.5, /*keep=*/true);
  }
  // Each pair's first return sees 2 in the multi (limit 8), its second 1
  // (limit 4); each return closes one at most: 2, 4, 6 -> 5, 7 -> 6, 8 -> 7,
  // 9 -> 8 -> 7.
  EXPECT_EQ(two.opened(), 12u);
  EXPECT_EQ(two.evicted(), 5u);
}

// One origin, one connection: a 20 MB transfer on a new connection, another
// right after it on the same (kept alive, window open), a third after 1 s idle.
TEST(TcpModel, FreshKeptAliveAndIdleConnectionsEndAtTheHandCalculatedTimes) {
  const std::string trace = header(R"({"max_transfers": 1, "max_per_origin": 1})") +
                            artifact("a", 20'000'000) + artifact("b", 20'000'000) +
                            artifact("c", 20'000'000) + sub(0, "d1", "a") + sub(2.8, "d2", "b") +
                            sub(6.0, "d3", "c");
  const CliRun run = run_cli(trace, {"sim", "TRACE", "--out", "OUT", "--network-model", "tcp",
                                     "--quiet", "--transfer-log", "DIR/transfers.log"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  // The default model: a round trip, then 20 MB at the share.
  const double flow = kRtt_s + 20e6 / kShare_Bps;  // 2.192050 s
  // d1: the handshake (0.1 s) and 7 window-limited rounds (0.507640 s).
  const double d1 = kRtt_s + (0.7 - 1'838'960 / kShare_Bps) + flow;  // 2.799690 s
  EXPECT_NEAR(t_end(run, "d1"), d1, d1 * 0.01);
  EXPECT_NEAR(t_end(run, "d1"), d1, 1e-6);
  // d2: idle 0.0003 s, under the timeout (0.3 s): the window (1,853,440 B) covers the share.
  EXPECT_NEAR(t_end(run, "d2"), 2.8 + flow, 1e-6);
  // d3: idle about 1.008 s (1.108 s at the server): three halvings to 231,680 B, then 231,680
  // 463,360 926,720 are below 956,000: 3 rounds, 0.3 - 1,621,760 / 9.56 MB/s.
  const double d3 = 6.0 + (0.3 - 1'621'760 / kShare_Bps) + flow;  // 8.322410 s
  EXPECT_NEAR(t_end(run, "d3"), d3, d3 * 0.01);
  EXPECT_NEAR(t_end(run, "d3"), d3, 1e-6);

  // The transfer log says which connection each transfer took and in what
  // state (C t id origin connection new|kept idle_s window_bytes delay_s artifact):
  // what bench/fidelity.py compares with the servers' TCP state.
  std::istringstream log(read_file(run.dir + "/transfers.log"));
  std::vector<std::vector<std::string>> c;
  for (std::string line; std::getline(log, line);) {
    std::istringstream fields(line);
    std::vector<std::string> f{std::istream_iterator<std::string>(fields), {}};
    if (!f.empty() && f[0] == "C") c.push_back(f);
  }
  ASSERT_EQ(c.size(), 3u);
  EXPECT_EQ(c[0][4], "1");
  EXPECT_EQ(c[0][5], "new");
  EXPECT_EQ(std::stod(c[0][7]), 14'480);
  EXPECT_NEAR(std::stod(c[0][8]), kRtt_s + (0.7 - 1'838'960 / kShare_Bps), 1e-9);
  EXPECT_EQ(c[0][9], "a");
  for (std::size_t i : {1u, 2u}) {
    EXPECT_EQ(c[i][4], "1");  // The same connection, kept alive.
    EXPECT_EQ(c[i][5], "kept");
  }
  // The server's idle time: the client's gap plus a round trip.
  EXPECT_NEAR(std::stod(c[1][6]), 2.8 - d1 + kRtt_s, 1e-6);
  EXPECT_EQ(std::stod(c[1][8]), 0);
  EXPECT_NEAR(std::stod(c[2][6]), 6.0 - (2.8 + flow) + kRtt_s, 1e-6);
  EXPECT_EQ(std::stod(c[2][7]), 231'680);  // Three halvings.
  EXPECT_EQ(c[2][9], "c");
}

// Two 20 MB transfers, from origins 40 and 200 ms of round trip away, behind a
// 10 MB/s client link.
std::string near_and_far_trace() {
  return R"({"format": "demandflight-trace", "version": 1, "name": "test", "seed": 3, )"
         R"("platform": {"client_bandwidth_Bps": 10000000, "client_latency_s": 0.01, )"
         R"("origins": {"near": {"bandwidth_Bps": 40000000, "latency_s": 0.01}, )"
         R"("far": {"bandwidth_Bps": 40000000, "latency_s": 0.09}}, )"
         R"("disk_write_Bps": 1e15, "hash_Bps": 1e15}, )"
         R"("scheduler": {"max_transfers": 2, "max_per_origin": 2}})"
         "\n"
         R"({"op": "artifact", "id": "a", "resource": "a", "revision": "r1", "target": "pc", )"
         R"("generation": 0, "size": 20000000, "origin": "near"})"
         "\n"
         R"({"op": "artifact", "id": "b", "resource": "b", "revision": "r1", "target": "pc", )"
         R"("generation": 0, "size": 20000000, "origin": "far"})"
         "\n" +
         sub(0, "d1", "a") + sub(0, "d2", "b");
}

// Two 20 MB transfers from origins 40 and 200 ms away share the client link
// (10 MB/s) as CM02 shares it: in inverse proportion to their routes' latencies
// (0.02 s against 0.1 s one way: the near one gets 5/6); the tcp model adds only
// the delays before each transfer's bytes flow. (Against real CUBIC flows:
// docs/validation.md, *The sharing rule, over three runs*.)
TEST(TcpModel, FlowsFromNearAndFarOriginsShareTheBottleneckByTheirRoundTrips) {
  const std::string trace = near_and_far_trace();
  const CliRun run = simulate_with(trace, "tcp");
  const double share = kShare_Bps;  // 10 MB/s at the default model's 95.6%.
  // d1 starts alone: the handshake (0.04 s), 5 window-limited rounds at the whole
  // share (14,480 to 231,680 B are below its 382,400 B product), then the round trip
  // before its first byte (0.04 s). d2 starts with half the share: 0.2 s of
  // handshake, 7 rounds (to 926,720 B, below 956,000), 0.2 s to its first byte.
  const double near_flows = 0.04 + (0.2 - 448'880 / share) + 0.04;
  const double far_flows = 0.2 + (1.4 - 1'838'960 / (share / 2)) + 0.2;
  const double alone = (far_flows - near_flows) * share;  // d1's bytes before d2's flow.
  // Then d1 at 5/6 of the share until its rest is in; d2 has 1/5 of that by then,
  // and moves the rest alone.
  const double d1 = far_flows + (20e6 - alone) / (share * 5 / 6);
  EXPECT_NEAR(t_end(run, "d1"), d1, 1e-6);
  EXPECT_NEAR(t_end(run, "d2"), d1 + (20e6 - (20e6 - alone) / 5) / share, 1e-6);
}

// --tcp-sharing equal: the same trace, the same start delays (the far origin's
// latency is waited for before its bytes flow instead of weighing its flow),
// then each at half the share until d1's rest is in, and d2's rest alone.
TEST(TcpModel, WithEqualSharingNearAndFarFlowsSplitTheBottleneckInHalves) {
  const CliRun run =
      run_cli(near_and_far_trace(), {"sim", "TRACE", "--out", "OUT", "--quiet", "--network-model",
                                     "tcp", "--tcp-sharing", "equal"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const double share = kShare_Bps;
  const double near_flows = 0.04 + (0.2 - 448'880 / share) + 0.04;
  const double far_flows = 0.2 + (1.4 - 1'838'960 / (share / 2)) + 0.2;
  const double alone = (far_flows - near_flows) * share;
  const double d1 = far_flows + (20e6 - alone) / (share / 2);
  EXPECT_NEAR(t_end(run, "d1"), d1, 1e-6);
  EXPECT_NEAR(t_end(run, "d2"), d1 + alone / share, 1e-6);
  // By round trips d1 would end sooner (5/6 of the share) and d2 later.
  const CliRun by_rtt = simulate_with(near_and_far_trace(), "tcp");
  EXPECT_LT(t_end(by_rtt, "d1"), d1 - 0.5);

  const CliRun bad = run_cli(near_and_far_trace(),
                             {"sim", "TRACE", "--out", "OUT", "--quiet", "--tcp-sharing", "fair"});
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("--tcp-sharing"), std::string::npos) << bad.err;
}

// CM02 bounds a flow by its window, TCP-gamma (4 MiB) over twice its route's
// latency; under equal shares the route carries no latency, and SimGrid 3.32
// ignores a rate set on a host-to-host comm, so the links alone bound it. A
// lone 100 MB transfer over a 0.5 s round trip and 100 MB/s links: by round
// trips it moves at 4,194,304 / 0.5 B/s (times the default model's 95.6%);
// with equal shares at the whole 95.6 MB/s. Both pay the handshake (0.5 s),
// the same slow start and one-way latencies of 0.25 s times the latency
// factor 2 (equal: the origin's 0.24 s as a delay, the client's 0.01 s on the
// link).
TEST(TcpModel, WithEqualSharingALongFatPathIsNotBoundByTheWindow) {
  const std::string trace =
      R"({"format": "demandflight-trace", "version": 1, "name": "test", "seed": 3, )"
      R"("platform": {"client_bandwidth_Bps": 100000000, "client_latency_s": 0.01, )"
      R"("origins": {"far": {"bandwidth_Bps": 100000000, "latency_s": 0.24}}, )"
      R"("disk_write_Bps": 1e15, "hash_Bps": 1e15}, )"
      R"("scheduler": {"max_transfers": 1, "max_per_origin": 1}})"
      "\n"
      R"({"op": "artifact", "id": "a", "resource": "a", "revision": "r1", "target": "pc", )"
      R"("generation": 0, "size": 100000000, "origin": "far"})"
      "\n" +
      sub(0, "d1", "a");
  const double factor = format::defaults::calibrated_bandwidth_factor;
  const double share = 100e6 * factor;
  const double before = 0.5 + slow_start(100e6, 14'480, 0.5, share).delay_s + 2 * 0.25;
  const CliRun by_rtt = simulate_with(trace, "tcp");
  EXPECT_NEAR(t_end(by_rtt, "d1"), before + 100e6 / (factor * 4'194'304 / 0.5), 1e-6);
  const CliRun equal = run_cli(trace, {"sim", "TRACE", "--out", "OUT", "--quiet",
                                       "--network-model", "tcp", "--tcp-sharing", "equal"});
  ASSERT_EQ(equal.exit_code, 0) << equal.err;
  EXPECT_NEAR(t_end(equal, "d1"), before + 100e6 / share, 1e-6);
}

// BBR servers do not restart slow start after idle (Linux skips
// tcp_slow_start_after_idle for a congestion control that sets its own
// rates): after the same 1 s idle as d3 above, the window still covers the
// share, and the transfer takes what it would right after the previous one.
TEST(TcpModel, BehindBbrServersAnIdleConnectionKeepsItsWindow) {
  sim::TcpSettings bbr;
  bbr.restart_after_idle = false;
  TcpConnections pool(/*origins=*/1, bbr);
  pool.start(1, 0, 0, 20e6, kRtt_s, kShare_Bps, kShare_Bps);
  pool.finish(1, 0, 3.0, /*keep=*/true);
  EXPECT_EQ(pool.start(2, 0, 60.0, 20e6, kRtt_s, kShare_Bps, kShare_Bps).slow_start_s, 0);

  // The trace header says so (platform.server_congestion_control), and
  // --server-cc overrides it; d3 then ends at 6.0 + flow instead of 8.322410 s.
  const std::string body = artifact("a", 20'000'000) + artifact("b", 20'000'000) +
                           artifact("c", 20'000'000) + sub(0, "d1", "a") + sub(2.8, "d2", "b") +
                           sub(6.0, "d3", "c");
  const std::string scheduler = R"({"max_transfers": 1, "max_per_origin": 1})";
  const double flow = kRtt_s + 20e6 / kShare_Bps;
  const double cubic_d3 = 6.0 + (0.3 - 1'621'760 / kShare_Bps) + flow;
  const CliRun by_header =
      simulate_with(header(scheduler, R"(, "server_congestion_control": "BBR")") + body, "tcp");
  EXPECT_NEAR(t_end(by_header, "d3"), 6.0 + flow, 1e-6);
  const CliRun by_flag = run_cli(
      header(scheduler) + body,
      {"sim", "TRACE", "--out", "OUT", "--quiet", "--network-model", "tcp", "--server-cc", "bbr"});
  ASSERT_EQ(by_flag.exit_code, 0) << by_flag.err;
  EXPECT_NEAR(t_end(by_flag, "d3"), 6.0 + flow, 1e-6);
  const CliRun overridden =
      run_cli(header(scheduler, R"(, "server_congestion_control": "bbr")") + body,
              {"sim", "TRACE", "--out", "OUT", "--quiet", "--network-model", "tcp", "--server-cc",
               "cubic"});
  ASSERT_EQ(overridden.exit_code, 0) << overridden.err;
  EXPECT_NEAR(t_end(overridden, "d3"), cubic_d3, 1e-6);

  const CliRun bad = run_cli(header(scheduler, R"(, "server_congestion_control": "vegas")") + body,
                             {"validate", "TRACE"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find(":1: platform.server_congestion_control: must be \"cubic\" or \"bbr\""),
            std::string::npos)
      << bad.err;
}

TEST(TcpModel, AnAbortedTransfersConnectionIsNotReused) {
  // d1 is cancelled mid-body: its connection closes, so d2 pays a handshake.
  const std::string trace = header(R"({"max_transfers": 1, "max_per_origin": 1})") +
                            artifact("a", 20'000'000) + artifact("b", 20'000'000) +
                            sub(0, "d1", "a") + R"({"op": "cancel", "t": 1.5, "demand": "d1"})" +
                            "\n" + sub(2.0, "d2", "b");
  const CliRun run = simulate_with(trace, "tcp");
  const double flow = kRtt_s + 20e6 / kShare_Bps;
  EXPECT_NEAR(t_end(run, "d2"), 2.0 + kRtt_s + (0.7 - 1'838'960 / kShare_Bps) + flow, 1e-6);
}

// ns-3 is the reference: a lone transfer on a new connection takes the
// handshake, one-way latency, size / bandwidth and the slow-start rounds of
// its 1000-byte segments (SimGrid's setting), plus the half round trip after
// the last byte in which the sender's close completes (SimGrid ends an ns-3
// flow there). The closed form of the tcp model agrees within 5% from 100 KB
// to 40 MB; the issue's bound for a 10 MB transfer is 10%.
TEST(SimNs3, ALoneTransferTakesSizeOverBandwidthPlusTheSlowStartRoundTrips) {
  for (const std::uint64_t size : {100'000ull, 1'000'000ull, 10'000'000ull, 40'000'000ull}) {
    SCOPED_TRACE(size);
    const CliRun run = simulate_with(header() + artifact("a", size) + sub(0, "d1", "a"), "ns3");
    const double bytes = static_cast<double>(size);
    const double expected = kRtt_s + kRtt_s / 2 + bytes / kBottleneck_Bps +
                            slow_start(bytes, 10 * 1000, kRtt_s, kBottleneck_Bps).delay_s +
                            kRtt_s / 2;
    EXPECT_NEAR(t_end(run, "d1"), expected, expected * (size == 10'000'000 ? 0.10 : 0.05));
  }
}

TEST(SimNs3, TransfersShareTheBottleneckAndCancelsWork) {
  // Two 10 MB transfers at once through the 10 MB/s client link take about
  // 2 s between them (a fair share, TCP's own); a third is cancelled midway.
  const std::string trace = header(R"({"max_transfers": 3, "max_per_origin": 3})") +
                            artifact("a", 10'000'000) + artifact("b", 10'000'000) +
                            artifact("c", 10'000'000) + sub(0, "d1", "a") + sub(0, "d2", "b") +
                            sub(0, "d3", "c") + R"({"op": "cancel", "t": 0.5, "demand": "d3"})" +
                            "\n";
  const CliRun run = simulate_with(trace, "ns3");
  EXPECT_EQ(demand_record(run.result, "d3")["outcome"], "cancelled");
  const double last = std::max(t_end(run, "d1"), t_end(run, "d2"));
  EXPECT_GT(last, 2.0);  // 20 MB through 10 MB/s, after the cancelled one's share.
  EXPECT_LT(last, 3.5);
}

// SimGrid 3.32's ns-3 glue aborts on session_churn's first second (a flow's
// connection closes before its bytes went out; docs/cli.md says so): `sim`
// says so in one line and exits 1, without SimGrid's backtrace. If SimGrid's
// glue is ever fixed this fails, and the docs' account of ns3 must change.
TEST(SimNs3, AnAbortInSimGridsNs3GlueIsOneClearLine) {
  std::istringstream in(read_file(std::string(DFL_SCENARIOS) + "/session_churn.jsonl"));
  std::string line, trace;
  std::getline(in, line);
  trace += line + "\n";
  while (std::getline(in, line)) {
    const auto record = nlohmann::json::parse(line);
    if (record["op"] == "artifact" || record["t"].get<double>() < 1.2) trace += line + "\n";
  }
  const CliRun run =
      run_cli(trace, {"sim", "TRACE", "--out", "OUT", "--network-model", "ns3", "--quiet"});
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_NE(run.err.find("demandflight sim: the ns3 network model failed inside SimGrid's ns-3 "
                         "glue: total_bytes"),
            std::string::npos)
      << run.err;
  EXPECT_NE(run.err.find("at simulated time 1.0"), std::string::npos) << run.err;
  EXPECT_EQ(run.err.find("Backtrace"), std::string::npos) << run.err;
  EXPECT_EQ(std::count(run.err.begin(), run.err.end(), '\n'), 1) << run.err;
}

}  // namespace
}  // namespace dfl::testing
