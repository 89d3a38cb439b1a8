// `demandflight fetch` and `demandflight replay` end to end: the real binary
// against the loopback server.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <cstdio>
#include <set>
#include <sstream>
#include <thread>

#include "cli_fixture.h"
#include "cli_runner.h"
#include "demandflight/backend/cache_dir.h"
#include "demandflight/backend/client.h"
#include "demandflight/backend/sha256.h"
#include "loopback.h"
#include "page_cache.h"
#include "test_files.h"

namespace dfl::testing {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

TEST_F(CliTest, FetchInstallsEveryArtifactVerifiedAndPrintsALinePerArtifact) {
  const std::string manifest = serve("a.bin", 300'000) + serve("b.bin", 1'200'000);
  const CliRun run =
      run_cli(manifest, {"fetch", "--base-url", server().base(), "--cache", cache(), "TRACE"});
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  EXPECT_EQ(read(object("a.bin")), content("a.bin", 300'000));
  EXPECT_EQ(read(object("b.bin")), content("b.bin", 1'200'000));
  // Not a terminal: plain lines, one per artifact, then the summary.
  EXPECT_NE(run.out.find("succeeded a.bin"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("succeeded b.bin"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("succeeded 2, failed 0"), std::string::npos) << run.out;
  EXPECT_EQ(run.out.find("\x1b["), std::string::npos) << "no terminal escapes in plain output";
}

TEST_F(CliTest, FetchWithProgressBarsRedrawsInPlaceAFileAndItsStage) {
  const std::string manifest = serve("a.bin", 400'000) + serve("b.bin", 400'000);
  // A second's pause mid-body: several frames, however slow the machine;
  // one transfer at a time, so the other file waits meanwhile.
  server().faults(
      {{{"path", "/a.bin"}, {"kind", "stall"}, {"after_bytes", 100'000}, {"stall_s", 1.0}}});
  const CliRun run = run_cli(manifest, {"fetch", "--base-url", server().base(), "--cache", cache(),
                                        "--max-transfers", "1", "--progress", "bars", "TRACE"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.out.find("\x1b[1A\x1b[2K"), std::string::npos) << "frames are redrawn";
  EXPECT_NE(run.out.find("total"), std::string::npos);
  // a.bin's line while it stalls: 100,000 of 400,000 bytes, transferring.
  EXPECT_NE(run.out.find("a.bin"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find(" 25.0% 97.7 KiB   transferring"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("0 more in flight, 1 queued"), std::string::npos) << run.out;
}

TEST_F(CliTest, FetchDuplicateCallersShareOneTransferPerArtifact) {
  const std::string manifest =
      serve("a.bin", 200'000) + serve("b.bin", 200'000) + serve("c.bin", 200'000);
  const CliRun run = run_cli(manifest, {"fetch", "--base-url", server().base(), "--cache", cache(),
                                        "--copies", "3", "--quiet", "TRACE"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.out.find("succeeded 9"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("transfers 3, installs 3"), std::string::npos) << run.out;
  json stats = server().stats();
  for (const char* path : {"/a.bin", "/b.bin", "/c.bin"})
    EXPECT_EQ(stats[path]["requests"], 1) << path;
}

TEST_F(CliTest, FetchWritesItsMetricsAndItsSummaryUsesTheSameNumbers) {
  const std::string manifest =
      serve("a.bin", 200'000) + serve("b.bin", 200'000) + serve("c.bin", 200'000);
  const std::string metrics = (dir_ / "metrics.prom").string();
  const CliRun run = run_cli(manifest, {"fetch", "--base-url", server().base(), "--cache", cache(),
                                        "--copies", "2", "--quiet", "--metrics", metrics, "TRACE"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.out.find("transfers 3, installs 3, received 585.9 KiB"), std::string::npos)
      << run.out;
  const std::string text = read(metrics);
  EXPECT_NE(text.find("# TYPE demandflight_demands_total counter"), std::string::npos) << text;
  EXPECT_NE(text.find("demandflight_demands_total{outcome=\"succeeded\",priority=\"0\"} 6\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("demandflight_transfers_started_total 3\n"), std::string::npos) << text;
  EXPECT_NE(text.find("demandflight_received_bytes_total 600000\n"), std::string::npos) << text;
  EXPECT_NE(text.find("demandflight_installs_total 3\n"), std::string::npos) << text;
}

TEST_F(CliTest, FetchDropBehindLeavesALargeArtifactsPagesBehindItsEnd) {
  constexpr std::size_t kMiB = std::size_t{1} << 20;
  const std::string manifest = serve("big.bin", 12 * kMiB);
  if (on_tmpfs(dir_)) GTEST_SKIP() << "tmpfs has no disk to leave the page cache for";
  // Through the page cache (direct writes never put the bytes there: below).
  const CliRun run =
      run_cli(manifest, {"fetch", "--base-url", server().base(), "--cache", cache(),
                         "--drop-behind", "2MiB", "--direct-io", "false", "--quiet", "TRACE"});
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  EXPECT_EQ(run.out.find("O_DIRECT"), std::string::npos) << run.out;
  // With the default window (16 MiB) all 12 MiB would stay; with 2 MiB,
  // the first 8 MiB (at least) left as they were written.
  EXPECT_EQ(testing::resident_pages(object("big.bin"), 0, 8 * kMiB), 0u);
  EXPECT_EQ(read(object("big.bin")), content("big.bin", 12 * kMiB));

  const CliRun bad = run_cli(manifest, {"fetch", "--base-url", server().base(), "--cache", cache(),
                                        "--drop-behind", "lots", "TRACE"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("--drop-behind"), std::string::npos) << bad.err;
}

TEST_F(CliTest, FetchWritesALargeArtifactsFullBuffersAroundThePageCache) {
  constexpr std::size_t kMiB = std::size_t{1} << 20;
  const std::string manifest = serve("big.bin", 6 * kMiB + 100);
  if (on_tmpfs(dir_)) GTEST_SKIP() << "tmpfs keeps every page";
  if (!testing::direct_writes_possible(dir_ / "probe")) GTEST_SKIP() << "no io_uring or O_DIRECT";
  const CliRun run = run_cli(
      manifest, {"fetch", "--base-url", server().base(), "--cache", cache(), "--quiet", "TRACE"});
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  EXPECT_NE(run.out.find("6.0 MiB written around the page cache (O_DIRECT)"), std::string::npos)
      << run.out;
  EXPECT_EQ(testing::resident_pages(object("big.bin"), 0, 6 * kMiB), 0u);
  EXPECT_EQ(read(object("big.bin")), content("big.bin", 6 * kMiB + 100));
}

TEST_F(CliTest, FetchExitsNonZeroAndNamesWhatFailed) {
  const std::string manifest =
      serve("good.bin", 100'000) + serve("bad.bin", 100'000, /*right_digest=*/false);
  const CliRun run = run_cli(manifest, {"fetch", "--base-url", server().base(), "--cache", cache(),
                                        "--retries", "2", "TRACE"});
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_NE(run.err.find("1 artifacts failed: bad.bin"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("bad.bin: sha256 mismatch"), std::string::npos) << "and why" << run.err;
  EXPECT_TRUE(fs::exists(object("good.bin")));
  EXPECT_FALSE(fs::exists(object("bad.bin"))) << "a body that fails its digest is never installed";
  EXPECT_EQ(server().stats()["/bad.bin"]["requests"], 2) << "fetched again, as the retries say";
}

TEST_F(CliTest, FetchSaysAMissingArtifactWasA404) {
  std::string manifest = serve("here.bin", 1'000);
  fs::remove(dir_ / "www" / "here.bin");
  const CliRun run = run_cli(
      manifest, {"fetch", "--base-url", server().base(), "--cache", cache(), "--quiet", "TRACE"});
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_NE(run.err.find("here.bin: HTTP 404"), std::string::npos) << run.err;
}

TEST_F(CliTest, FetchRefusesABadManifestWithFileLineAndField) {
  const std::string manifest = serve("a.bin", 10) + R"({"op": "artifact", "id": "x"})" + "\n";
  const CliRun run =
      run_cli(manifest, {"fetch", "--base-url", "http://127.0.0.1:9", "--cache", cache(), "TRACE"});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_NE(run.err.find("trace.jsonl:2: resource:"), std::string::npos) << run.err;
  EXPECT_FALSE(fs::exists(dir_ / "cache")) << "nothing runs on bad input";
}

TEST_F(CliTest, AfterAKillDuringAFetchTheNextFetchCompletes) {
  // Staged bytes reach the file a full buffer at a time.
  const std::size_t buffer = backend::CacheDir::kBufferBytes;
  const std::size_t size = 4 * buffer + 12'345;
  const std::string manifest = serve("big.bin", size) + serve("small.bin", 50'000);
  const fs::path manifest_path = dir_ / "manifest.jsonl";
  std::ofstream(manifest_path) << manifest;
  server().hold("/big.bin", 2 * buffer + 1'000);  // Half in, then parked: killed in the middle.
  const std::string base = server().base();
  const pid_t child = ::fork();
  if (child == 0) {
    const int null = ::open("/dev/null", O_WRONLY);
    ::dup2(null, 1);
    ::execl(DFL_CLI, DFL_CLI, "fetch", "--base-url", base.c_str(), "--cache", cache().c_str(),
            manifest_path.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  // Wait until part of big.bin is staged, then kill -9.
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  bool staged = false;
  while (!staged && std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir_ / "cache" / "staging", ec)) {
      // A file may be renamed away between listing and stat: no size then.
      const auto staged_bytes = fs::file_size(e.path(), ec);
      staged = staged || (!ec && staged_bytes >= buffer);
    }
  }
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  server().release("/big.bin");
  ASSERT_TRUE(staged) << "the fetch never got going";
  EXPECT_FALSE(fs::exists(object("big.bin"))) << "nothing partial is visible";

  const CliRun run =
      run_cli(manifest, {"fetch", "--base-url", base, "--cache", cache(), "--quiet", "TRACE"});
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  EXPECT_EQ(read(object("big.bin")), content("big.bin", size));
  EXPECT_EQ(read(object("small.bin")), content("small.bin", 50'000));
  EXPECT_TRUE(fs::is_empty(dir_ / "cache" / "staging"));
}

// A trace whose outcomes do not depend on timing noise: a shared artifact
// both callers get, a cancel, a deadline that passes long before the bytes
// could arrive, an owner that goes away, and a later cache hit.
std::string replay_trace(const std::string& artifacts) {
  return std::string(R"({"format": "demandflight-trace", "version": 1, "name": "replay", )"
                     R"("seed": 5, "platform": {"client_bandwidth_Bps": 2000000, )"
                     R"("client_latency_s": 0.001, "origins": {"cdn": {"bandwidth_Bps": )"
                     R"(1e9, "latency_s": 0.001}}, "disk_write_Bps": 1e9, "hash_Bps": 1e9}, )"
                     R"("scheduler": {"max_transfers": 4, "max_per_origin": 4}})") +
         "\n" + artifacts +
         R"({"op": "subscribe", "t": 0.0, "demand": "d1", "owner": "ui", "artifact": "x.bin", "priority": 1}
{"op": "subscribe", "t": 0.0, "demand": "d3", "owner": "prefetch", "artifact": "y.bin", "priority": 0}
{"op": "subscribe", "t": 0.0, "demand": "d4", "owner": "hud", "artifact": "y.bin", "priority": 1, "timeout_s": 0.05}
{"op": "subscribe", "t": 0.05, "demand": "d2", "owner": "game", "artifact": "x.bin", "priority": 3}
{"op": "cancel", "t": 0.1, "demand": "d3"}
{"op": "subscribe", "t": 0.1, "demand": "d5", "owner": "level", "artifact": "z.bin", "priority": 2}
{"op": "end_owner", "t": 0.2, "owner": "level"}
{"op": "subscribe", "t": 2.5, "demand": "d6", "owner": "ui", "artifact": "x.bin", "priority": 1}
)";
}

// Serves replay_trace's artifacts so that its outcomes do not depend on the
// machine's speed; returns the trace.
std::string serve_replay_world(CliTest& test) {
  const std::string artifacts = test.serve("x.bin", 500'000) + test.serve("y.bin", 1'000'000) +
                                test.serve("z.bin", 1'000'000);
  test.server().rate(2'000'000);  // Per connection, like the trace's client link for one transfer.
  // y and z are still in flight when their demands end, however slow the machine;
  // x pauses half a second, so that d2 (at 0.05 s) joins it with room to spare
  // and it is still installed long before d6 (at 2.5 s), a cache hit.
  test.server().hold("/y.bin", 65'536);
  test.server().hold("/z.bin", 65'536);
  test.server().faults(
      {{{"path", "/x.bin"}, {"kind", "stall"}, {"after_bytes", 65'536}, {"stall_s", 0.5}}});
  return replay_trace(artifacts);
}

TEST_F(CliTest, ReplayWritesTheSimResultFormatWithTheSameOutcomes) {
  const std::string trace = serve_replay_world(*this);
  const CliRun real = run_cli(trace, {"replay", "TRACE", "--base-url", server().base(), "--cache",
                                      cache(), "--out", "OUT"});
  ASSERT_EQ(real.exit_code, 0) << real.out << real.err;
  const CliRun simulated = simulate(trace);

  // The same format: the same fields everywhere.
  auto keys = [](const json& object) {
    std::set<std::string> out;
    for (const auto& [k, v] : object.items())
      out.insert(k);
    return out;
  };
  EXPECT_EQ(keys(real.result), keys(simulated.result));
  EXPECT_EQ(keys(real.result["summary"]), keys(simulated.result["summary"]));
  EXPECT_EQ(keys(real.result["demands"][0]), keys(simulated.result["demands"][0]));
  EXPECT_EQ(keys(real.result["tasks"][0]), keys(simulated.result["tasks"][0]));
  // The same outcomes, demand by demand.
  const std::map<std::string, std::string> expected = {{"d1", "succeeded"},   {"d2", "succeeded"},
                                                       {"d3", "cancelled"},   {"d4", "timed_out"},
                                                       {"d5", "owner_ended"}, {"d6", "succeeded"}};
  for (const auto& [demand, outcome] : expected) {
    EXPECT_EQ(demand_record(real.result, demand)["outcome"], outcome) << demand;
    EXPECT_EQ(demand_record(simulated.result, demand)["outcome"], outcome) << demand;
  }
  EXPECT_EQ(real.result["summary"]["cache_hits"], 1);
  EXPECT_EQ(real.result["summary"]["installs"], simulated.result["summary"]["installs"]);
  EXPECT_EQ(real.result["tasks"].size(), simulated.result["tasks"].size());
  // y and z were aborted part-way, in both worlds. The simulator's bytes are
  // exact, so they are wasted; a real transfer may not have had its first
  // bytes yet when its 0.1 s ended, so only its abort is certain.
  for (const json* result : {&real.result, &simulated.result}) {
    for (const auto& task : (*result)["tasks"]) {
      if (task["artifact"] != "x.bin") {
        EXPECT_EQ(task["outcome"], "aborted") << task.dump();
      }
    }
  }
  EXPECT_GT(simulated.result["summary"]["bytes_wasted"].get<double>(), 0);
  server().release("/y.bin");
  server().release("/z.bin");
  // Real time, in the trace's clock: x cannot end before its half-second pause
  // has passed (the server sends the rest at once after it).
  const double x_latency = demand_record(real.result, "d1")["t_end"].get<double>();
  EXPECT_GT(x_latency, 0.5);
  EXPECT_LT(x_latency, 2.0);
}

// `replay --record`: the client writes the demand stream it was given, and
// it is the trace's: the same records in the same order, each at its trace
// time (the client's clock, from the first record) within 50 ms, the bound of
// the replay's scheduling here (it sleeps until each record's time and then
// calls into the client). Under the trace's header the simulator gives the
// recording's demands the trace's outcomes, one by one.
TEST_F(CliTest, ReplayRecordGivesBackTheTracesDemandStreamAndTheSimulatorReadsIt) {
  const std::string artifacts =
      serve("x.bin", 500'000) + serve("y.bin", 1'000'000) + serve("z.bin", 1'000'000);
  server().rate(2'000'000);
  const std::string trace = replay_trace(artifacts);
  const CliRun real = run_cli(trace, {"replay", "TRACE", "--base-url", server().base(), "--cache",
                                      cache(), "--record", "DIR/rec.jsonl", "--quiet"});
  ASSERT_EQ(real.exit_code, 0) << real.out << real.err;
  EXPECT_NE(real.err.find("replay: recorded 12 lines"), std::string::npos) << real.err;

  auto timed = [](const std::string& text) {
    std::vector<json> out;
    std::istringstream in(text);
    std::string line;
    std::getline(in, line);  // The header.
    while (std::getline(in, line)) {
      if (line.find_first_not_of(' ') == std::string::npos) continue;  // A page's filler.
      json j = json::parse(line);
      if (j["op"] != "artifact") out.push_back(std::move(j));
    }
    return out;
  };
  const std::string recorded_text = read(fs::path(real.dir) / "rec.jsonl");
  const std::vector<json> given = timed(trace);
  const std::vector<json> recorded = timed(recorded_text);
  ASSERT_EQ(recorded.size(), given.size()) << recorded_text;
  std::map<std::string, std::string> demand_of;  // Recorded id -> the trace's.
  std::map<std::string, std::string> owner_of;
  const double offset = recorded[0]["t"].get<double>() - given[0]["t"].get<double>();
  for (std::size_t i = 0; i < given.size(); ++i) {
    const json& g = given[i];
    const json& r = recorded[i];
    ASSERT_EQ(r["op"], g["op"]) << i;
    EXPECT_NEAR(r["t"].get<double>() - offset, g["t"].get<double>(), 0.05) << r.dump();
    if (g["op"] == "subscribe") {
      demand_of[r["demand"]] = g["demand"];
      owner_of[r["owner"]] = g["owner"];
      EXPECT_EQ(r["priority"], g["priority"]) << i;
      EXPECT_EQ(r.contains("timeout_s"), g.contains("timeout_s")) << i;
      if (g.contains("timeout_s")) {
        EXPECT_NEAR(r["timeout_s"].get<double>(), g["timeout_s"].get<double>(), 0.001);
      }
    }
    if (g.contains("demand")) {
      EXPECT_EQ(demand_of[r["demand"]], g["demand"]) << i;
    }
    if (g["op"] == "end_owner") {
      EXPECT_EQ(owner_of[r["owner"]], g["owner"]) << i;
    }
  }
  // The recording under the trace's header (its platform) simulates to the
  // trace's outcomes.
  const std::string header = trace.substr(0, trace.find('\n') + 1);
  const std::string body = recorded_text.substr(recorded_text.find('\n') + 1);
  const CliRun from_trace = simulate(trace);
  const CliRun from_recording = simulate(header + body);
  ASSERT_EQ(from_trace.exit_code, 0) << from_trace.err;
  ASSERT_EQ(from_recording.exit_code, 0) << from_recording.err;
  ASSERT_EQ(from_recording.result["demands"].size(), 6u);
  for (const auto& [recorded_id, trace_id] : demand_of) {
    EXPECT_EQ(demand_record(from_recording.result, recorded_id)["outcome"],
              demand_record(from_trace.result, trace_id)["outcome"])
        << recorded_id << " is " << trace_id;
  }
}

// `fetch --record` with parts and hashed names: each part is a trace the
// simulator runs on its own (a fetch only subscribes), together they hold
// every demand, and no resource name is in them; `fidelity` simulates them
// joined, each demand beside its row.
TEST_F(CliTest, FetchRecordWritesPartsTheSimulatorRunsWithoutTheNames) {
  std::string manifest;
  for (int i = 0; i < 6; ++i)
    manifest += serve("asset-" + std::to_string(i) + ".bin", 10'000);
  std::ofstream(dir_ / "key") << "team secret";
  const CliRun run = run_cli(
      manifest, {"fetch", "--base-url", server().base(), "--cache", cache(), "--copies", "2",
                 "--progress", "none", "--record", "DIR/rec.jsonl", "--record-rotate", "5000",
                 "--record-hash-key", (dir_ / "key").string(), "--record-outcomes", "TRACE"});
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  std::size_t demands = 0;
  int parts = 0;
  for (; parts < 20; ++parts) {
    const fs::path part =
        backend::record_part_path(fs::path(run.dir) / "rec.jsonl", static_cast<std::uint32_t>(parts));
    if (!fs::exists(part)) break;
    const std::string text = read(part);
    EXPECT_EQ(text.find("asset-"), std::string::npos) << part;
    const CliRun sim = run_cli(text, {"sim", "TRACE", "--out", "OUT", "--quiet"});
    ASSERT_EQ(sim.exit_code, 0) << part << ": " << sim.err;
    for (const auto& d : sim.result["demands"]) {
      EXPECT_EQ(d["outcome"], "succeeded") << d.dump();
      ++demands;
    }
  }
  EXPECT_GE(parts, 2);
  EXPECT_EQ(demands, 12u);
  // fidelity simulates the parts joined: every demand beside its row.
  const CliRun fidelity = run_cli("", {"fidelity", (fs::path(run.dir) / "rec.jsonl").string()});
  ASSERT_EQ(fidelity.exit_code, 0) << fidelity.out << fidelity.err;
  EXPECT_NE(fidelity.out.find("(" + std::to_string(parts) + " parts)"), std::string::npos)
      << fidelity.out;
  EXPECT_NE(fidelity.out.find("outcomes identical  12 of 12"), std::string::npos) << fidelity.out;
  // A key file that cannot be read is named.
  const CliRun bad = run_cli(manifest, {"fetch", "--base-url", server().base(), "--cache", cache(),
                                        "--record", "DIR/r2.jsonl", "--record-hash-key",
                                        (dir_ / "no-such-key").string(), "TRACE"});
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("no-such-key"), std::string::npos) << bad.err;
}

// A recording cut by SIGKILL at a random moment (the seed is printed) while
// its writer is busy is a trace: whole lines, which the simulator runs.
TEST_F(CliTest, ARecordingCutBySigkillIsATraceTheSimulatorRuns) {
  const unsigned seed = std::random_device{}();
  std::mt19937 random(seed);
  std::printf("seed %u\n", seed);
  const int port = dead_port();  // Every attempt refused: the run is all calls.
  std::string trace = std::string(R"({"format": "demandflight-trace", "version": 1, )") +
                      R"("name": "many", "scheduler": {"retry": {"max_attempts": 1}}})" + "\n";
  for (int a = 0; a < 200; ++a)
    trace += artifact_line("a" + std::to_string(a), "asset-" + std::to_string(a) + ".bin", 1000,
                           std::string(64, 'a'));
  for (int d = 0; d < 40'000; ++d) {
    trace += json{{"op", "subscribe"}, {"t", d * 0.00005}, {"demand", "d" + std::to_string(d)},
                  {"owner", "o" + std::to_string(d % 50)}, {"artifact", "a" + std::to_string(d % 200)},
                  {"priority", d % 4}}
                 .dump() +
             "\n";
  }
  const fs::path trace_path = dir_ / "many.jsonl";
  std::ofstream(trace_path) << trace;
  const fs::path recording = dir_ / "cut.jsonl";
  const std::string base = "http://127.0.0.1:" + std::to_string(port);
  const pid_t child = ::fork();
  if (child == 0) {
    const int null = ::open("/dev/null", O_WRONLY);
    ::dup2(null, 1);
    ::dup2(null, 2);
    ::execl(DFL_CLI, DFL_CLI, "replay", trace_path.c_str(), "--base-url", base.c_str(), "--cache",
            cache().c_str(), "--record", recording.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  // Once the recording has its first 64 KiB, a random moment later.
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  std::error_code ec;
  while (std::chrono::steady_clock::now() < give_up &&
         (!fs::exists(recording, ec) || fs::file_size(recording, ec) < 65'536)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  std::this_thread::sleep_for(std::chrono::microseconds(random() % 400'000));
  ::kill(child, SIGKILL);
  int status = 0;
  ::waitpid(child, &status, 0);
  ASSERT_TRUE(WIFSIGNALED(status)) << "the replay ended before the kill: make it longer";
  const std::string text = read(recording);
  ASSERT_GE(text.size(), 65'536u);
  EXPECT_EQ(text.back(), '\n') << "the last line is cut";
  const CliRun sim = run_cli(text, {"sim", "TRACE", "--out", "OUT", "--quiet"});
  ASSERT_EQ(sim.exit_code, 0) << sim.err;
  EXPECT_GT(sim.result["demands"].size(), 100u);
}

// Two `fetch --record` processes on one cache directory at once: each
// recording holds its own process's demands (its manifest's artifacts, each
// subscribed once), whichever process transferred a shared artifact.
TEST_F(CliTest, TwoFetchesOnOneCacheEachRecordTheirOwnStream) {
  const std::string x = serve("x.bin", 300'000), y = serve("y.bin", 300'000),
                    z = serve("z.bin", 300'000);
  server().rate(3'000'000);
  std::ofstream(dir_ / "one.jsonl") << x + y;
  std::ofstream(dir_ / "two.jsonl") << y + z;
  const std::string base = server().base();
  auto start = [&](const std::string& manifest, const std::string& recording) {
    const pid_t child = ::fork();
    if (child == 0) {
      const int null = ::open("/dev/null", O_WRONLY);
      ::dup2(null, 1);
      ::dup2(null, 2);
      ::execl(DFL_CLI, DFL_CLI, "fetch", "--base-url", base.c_str(), "--cache", cache().c_str(),
              "--progress", "none", "--record", (dir_ / recording).c_str(),
              (dir_ / manifest).c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    return child;
  };
  const pid_t one = start("one.jsonl", "rec-one.jsonl");
  const pid_t two = start("two.jsonl", "rec-two.jsonl");
  int status_one = 0, status_two = 0;
  ::waitpid(one, &status_one, 0);
  ::waitpid(two, &status_two, 0);
  ASSERT_TRUE(WIFEXITED(status_one) && WEXITSTATUS(status_one) == 0);
  ASSERT_TRUE(WIFEXITED(status_two) && WEXITSTATUS(status_two) == 0);
  EXPECT_EQ(server().stats()["/y.bin"]["requests"], 1) << "y was transferred once for both";
  auto subscribed = [&](const std::string& recording) {
    std::multiset<std::string> resources;
    std::map<std::string, std::string> resource_of;
    std::istringstream in(read(dir_ / recording));
    std::string line;
    while (std::getline(in, line)) {
      if (line.find_first_not_of(' ') == std::string::npos) continue;
      const json j = json::parse(line);
      if (j.value("op", "") == "artifact") resource_of[j["id"]] = j["resource"];
      if (j.value("op", "") == "subscribe") resources.insert(resource_of.at(j["artifact"]));
    }
    return resources;
  };
  EXPECT_EQ(subscribed("rec-one.jsonl"), (std::multiset<std::string>{"x.bin", "y.bin"}));
  EXPECT_EQ(subscribed("rec-two.jsonl"), (std::multiset<std::string>{"y.bin", "z.bin"}));
}

// `demandflight fidelity`: a recorded replay with its outcome rows, simulated
// on the platform the recording measured, ends as the real run did, demand
// by demand; the figures name what they compared. Without the rows it says
// which file is missing.
TEST_F(CliTest, FidelitySimulatesARecordingOnItsMeasuredPlatformBesideWhatHappened) {
  const std::string trace = serve_replay_world(*this);
  const CliRun real = run_cli(trace, {"replay", "TRACE", "--base-url", server().base(), "--cache",
                                      cache(), "--record", "DIR/rec.jsonl", "--record-outcomes",
                                      "--quiet"});
  ASSERT_EQ(real.exit_code, 0) << real.out << real.err;
  server().release("/y.bin");
  server().release("/z.bin");
  const fs::path rec = fs::path(real.dir) / "rec.jsonl";
  const CliRun fidelity =
      run_cli("", {"fidelity", rec.string(), "--out", (fs::path(real.dir) / "f.json").string()});
  ASSERT_EQ(fidelity.exit_code, 0) << fidelity.out << fidelity.err;
  EXPECT_NE(fidelity.out.find("outcomes identical  6 of 6"), std::string::npos) << fidelity.out;
  const json figures = json::parse(read(fs::path(real.dir) / "f.json"));
  EXPECT_EQ(figures["demands"], 6);
  EXPECT_EQ(figures["outcomes_identical"], 6);
  EXPECT_EQ(figures["policy"], "always-abort");
  EXPECT_GE(figures["latency_demands"].get<int>(), 1);  // d1 and d2 waited for x.
  EXPECT_GT(figures["real_p50_s"].get<double>(), 0.5);  // x's half-second pause.

  fs::remove(fs::path(real.dir) / "rec.demands.csv");
  const CliRun missing = run_cli("", {"fidelity", rec.string()});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.err.find("rec.demands.csv"), std::string::npos) << missing.err;
  EXPECT_NE(missing.err.find("--record-outcomes"), std::string::npos) << missing.err;
}

// Policies both ways: a learned policy trained on a recording runs in the
// client by its spec string and model file, answers the orphans of the next
// recorded run (its task rows hold the answers), and the simulation of that
// recording, under the policy it names, gives back its outcomes.
TEST_F(CliTest, ALearnedPolicyTrainedOnARecordingRunsInTheClientByItsModelFile) {
  const std::string trace = serve_replay_world(*this);
  const CliRun first = run_cli(trace, {"replay", "TRACE", "--base-url", server().base(), "--cache",
                                       cache(), "--record", "DIR/rec.jsonl", "--quiet"});
  ASSERT_EQ(first.exit_code, 0) << first.err;
  server().release("/y.bin");
  server().release("/z.bin");
  const fs::path model = dir_ / "model.json";
  const CliRun train = run_cli("", {"train", (fs::path(first.dir) / "rec.jsonl").string(), "--out",
                                    model.string(), "--jobs", "1"});
  ASSERT_EQ(train.exit_code, 0) << train.out << train.err;

  serve_replay_world(*this);
  const std::string policy = "learned:model=" + model.string();
  const CliRun second = run_cli(
      trace, {"replay", "TRACE", "--base-url", server().base(), "--cache",
              (dir_ / "cache2").string(), "--policy", policy, "--record", "DIR/rec.jsonl",
              "--record-outcomes", "--quiet"});
  ASSERT_EQ(second.exit_code, 0) << second.err;
  server().release("/y.bin");
  server().release("/z.bin");
  const fs::path rec = fs::path(second.dir) / "rec.jsonl";
  std::ifstream in(rec);
  std::string header;
  std::getline(in, header);
  EXPECT_EQ(json::parse(header)["x-recording"]["orphan_policy"], policy);
  // y's and z's demands ended while they were in flight: the policy answered.
  int answered = 0;
  std::ifstream tasks(backend::record_outcome_path(rec, true));
  for (std::string line; std::getline(tasks, line);) {
    if (line.find("\"decision\"") != std::string::npos) ++answered;
  }
  EXPECT_EQ(answered, 2);
  const CliRun fidelity = run_cli("", {"fidelity", rec.string()});
  ASSERT_EQ(fidelity.exit_code, 0) << fidelity.out << fidelity.err;
  EXPECT_NE(fidelity.out.find("--policy " + policy), std::string::npos) << fidelity.out;
  EXPECT_NE(fidelity.out.find("outcomes identical  6 of 6"), std::string::npos) << fidelity.out;
}

// Mirrors in both worlds: the first origin is down (a fault in the
// simulator, a port nothing listens on for replay); every artifact arrives
// from the second, and the breaker (2 failures) sends the later tasks there
// at once: the same outcomes and the same attempts per task.
TEST_F(CliTest, MirrorsFailOverAlikeInTheSimulatorAndInReplay) {
  const std::string down = "127.0.0.1:" + std::to_string(dead_port());
  const std::string good = "127.0.0.1:" + std::to_string(server().port());
  std::string trace =
      json{{"format", "demandflight-trace"},
           {"version", 1},
           {"name", "mirrors"},
           {"platform",
            {{"client_bandwidth_Bps", 1e8},
             {"client_latency_s", 0.001},
             {"origins",
              {{down, {{"bandwidth_Bps", 1e8}, {"latency_s", 0.001}}},
               {good, {{"bandwidth_Bps", 1e8}, {"latency_s", 0.001}}}}},
             {"disk_write_Bps", 1e9},
             {"hash_Bps", 1e9}}},
           {"scheduler",
            {{"max_transfers", 1},
             {"max_per_origin", 1},
             {"retry", {{"max_attempts", 4}, {"base_s", 0.05}, {"cap_s", 0.2}, {"jitter", 0}}},
             {"breaker", {{"failures", 2}, {"open_s", 600}}}}}}
          .dump() +
      "\n";
  for (int i = 0; i < 5; ++i) {
    const std::string name = "m" + std::to_string(i) + ".bin";
    const std::string bytes = content(name, 50'000);
    std::ofstream(dir_ / "www" / name, std::ios::binary) << bytes;
    trace += json{{"op", "artifact"},    {"id", name},
                  {"resource", name},    {"revision", "r1"},
                  {"target", "pc"},      {"generation", 0},
                  {"size", 50'000},      {"origins", {down, good}},
                  {"sha256", backend::Sha256::hex_of(bytes)}}
                 .dump() +
             "\n";
  }
  trace += json{{"op", "fault"}, {"t", 0}, {"kind", "origin_down"}, {"origin", down},
                {"duration_s", 600}}
               .dump() +
           "\n";
  for (int i = 0; i < 5; ++i) {
    trace += json{{"op", "subscribe"}, {"t", 0.5 * i},  {"demand", "d" + std::to_string(i)},
                  {"owner", "game"},   {"priority", 1}, {"artifact", "m" + std::to_string(i) + ".bin"}}
                 .dump() +
             "\n";
  }
  const CliRun real = run_cli(trace, {"replay", "TRACE", "--base-url", "http://{origin}/{resource}",
                                      "--cache", cache(), "--out", "OUT"});
  ASSERT_EQ(real.exit_code, 0) << real.out << real.err;
  const CliRun simulated = simulate(trace);
  ASSERT_EQ(simulated.exit_code, 0) << simulated.err;
  for (int i = 0; i < 5; ++i) {
    const std::string d = "d" + std::to_string(i);
    EXPECT_EQ(demand_record(real.result, d)["outcome"], "succeeded") << d;
    EXPECT_EQ(demand_record(simulated.result, d)["outcome"], "succeeded") << d;
  }
  std::map<std::string, int> real_attempts, sim_attempts;
  for (const auto& task : real.result["tasks"])
    real_attempts[task["artifact"]] = task["attempts"].get<int>();
  for (const auto& task : simulated.result["tasks"])
    sim_attempts[task["artifact"]] = task["attempts"].get<int>();
  const std::map<std::string, int> expected{
      {"m0.bin", 2}, {"m1.bin", 2}, {"m2.bin", 1}, {"m3.bin", 1}, {"m4.bin", 1}};
  EXPECT_EQ(real_attempts, expected);
  EXPECT_EQ(sim_attempts, expected);
  EXPECT_EQ(server().stats()["/m2.bin"]["requests"], 1);
}

TEST_F(CliTest, FetchTakesAnArtifactFromItsSecondOriginWhenTheFirstIsDown) {
  const std::string down = "127.0.0.1:" + std::to_string(dead_port());
  const std::string good = "127.0.0.1:" + std::to_string(server().port());
  const std::string bytes = content("m.bin", 300'000);
  std::ofstream(dir_ / "www" / "m.bin", std::ios::binary) << bytes;
  const std::string manifest =
      json{{"op", "artifact"},  {"id", "m.bin"}, {"resource", "m.bin"}, {"revision", "r1"},
           {"target", "pc"},    {"generation", 0}, {"size", 300'000},
           {"origins", {down, good}}, {"sha256", backend::Sha256::hex_of(bytes)}}
          .dump() +
      "\n";
  const CliRun run = run_cli(manifest, {"fetch", "--base-url", "http://{origin}/{resource}",
                                        "--cache", cache(), "--metrics", "DIR/metrics.prom",
                                        "TRACE"});
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  EXPECT_EQ(read(object("m.bin")), bytes);
  EXPECT_NE(read_file(run.dir + "/metrics.prom").find("demandflight_failovers_total 1"),
            std::string::npos);
}

TEST_F(CliTest, ReplayFasterThanRealTimeReportsTimesInTheTracesClock) {
  const std::string artifacts =
      serve("x.bin", 500'000) + serve("y.bin", 1'000'000) + serve("z.bin", 1'000'000);
  const std::string base = server().base();  // The server is up before the clock starts.
  const auto t0 = std::chrono::steady_clock::now();
  const CliRun real = run_cli(
      replay_trace(artifacts),
      {"replay", "TRACE", "--base-url", base, "--cache", cache(), "--speed", "4", "--out", "OUT"});
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_EQ(real.exit_code, 0) << real.err;
  EXPECT_EQ(demand_record(real.result, "d6")["outcome"], "succeeded");
  // d6 is due at 2.5 s of trace time: 0.625 s of wall time at speed 4. A
  // replay can be late (0.1 s of wall time is 0.4 s of trace time), never early.
  const double t_subscribe = demand_record(real.result, "d6")["t_subscribe"].get<double>();
  EXPECT_GE(t_subscribe, 2.5 - 1e-6);
  EXPECT_LT(t_subscribe, 3.5);
  EXPECT_GE(wall, 2.5 / 4);
  EXPECT_LT(wall, 2.5) << "not replayed faster than the trace's own clock";
}

TEST_F(CliTest, ReplayRefusesABadTrace) {
  const CliRun run =
      run_cli("{\"format\": \"nope\"}\n",
              {"replay", "TRACE", "--base-url", "http://127.0.0.1:9", "--cache", cache()});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_NE(run.err.find("trace.jsonl:1: format:"), std::string::npos) << run.err;
}

// `demandflight fetch ARGS...` started in the background, its output in files.
struct Background {
  pid_t pid = -1;
  std::string out_path, err_path;
  int wait() {
    int status = 0;
    ::waitpid(pid, &status, 0);
    pid = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  ~Background() {
    if (pid > 0) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
  }
};

Background start_fetch(const fs::path& dir, const std::string& tag, const std::string& manifest,
                       std::vector<std::string> args) {
  Background b;
  const fs::path manifest_path = dir / (tag + ".jsonl");
  std::ofstream(manifest_path) << manifest;
  b.out_path = (dir / (tag + ".out")).string();
  b.err_path = (dir / (tag + ".err")).string();
  args.insert(args.begin(), {DFL_CLI, "fetch"});
  args.push_back(manifest_path.string());
  b.pid = ::fork();
  if (b.pid == 0) {
    const int out = ::open(b.out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int err = ::open(b.err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(out, 1);
    ::dup2(err, 2);
    std::vector<char*> argv;
    for (std::string& a : args)
      argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(DFL_CLI, argv.data());
    ::_exit(127);
  }
  return b;
}

TEST_F(CliTest, TwoFetchProcessesOnOneCacheTransferEachArtifactOnceInTotal) {
  std::string all;
  std::vector<std::string> lines;
  for (int i = 0; i < 6; ++i) {
    lines.push_back(serve("m" + std::to_string(i) + ".bin", 400'000));
  }
  server().rate(2'000'000);  // 0.2 s each: the two runs overlap all along.
  const std::string first = lines[0] + lines[1] + lines[2] + lines[3];
  const std::string second = lines[2] + lines[3] + lines[4] + lines[5];
  const std::vector<std::string> args = {"--base-url", server().base(),   "--cache",
                                         cache(),      "--max-transfers", "2"};
  Background a = start_fetch(dir_, "a", first, args);
  Background b = start_fetch(dir_, "b", second, args);
  EXPECT_EQ(a.wait(), 0) << read(a.err_path);
  EXPECT_EQ(b.wait(), 0) << read(b.err_path);
  EXPECT_NE(read(a.out_path).find("succeeded 4, failed 0"), std::string::npos) << read(a.out_path);
  EXPECT_NE(read(b.out_path).find("succeeded 4, failed 0"), std::string::npos) << read(b.out_path);
  json stats = server().stats();
  for (int i = 0; i < 6; ++i) {
    const std::string name = "m" + std::to_string(i) + ".bin";
    EXPECT_EQ(stats["/" + name]["requests"], 1) << name << ": transferred once in total";
    EXPECT_EQ(read(object(name)), content(name, 400'000)) << name;
  }
  EXPECT_TRUE(fs::is_empty(dir_ / "cache" / "staging"));
}

TEST_F(CliTest, AFetchKilledMidTransferIsTakenOverByTheOtherFromWhatItStaged) {
  constexpr std::size_t kMiB = std::size_t{1} << 20;
  const std::string manifest = serve("big.bin", 6 * kMiB);
  server().hold("/big.bin", 4 * kMiB);  // The first run parks after 4 MiB.
  const std::vector<std::string> args = {"--base-url", server().base(), "--cache",
                                         cache(),      "--direct-io",   "false"};
  Background a = start_fetch(dir_, "a", manifest, args);
  // Wait until the first run's staging file holds whole buffers.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  std::uintmax_t staged = 0;
  while (staged < 3 * kMiB && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(dir_ / "cache" / "staging", ec))
      staged = std::max(staged, entry.file_size(ec));
  }
  ASSERT_GE(staged, 3 * kMiB) << "the first run never staged its bytes";
  Background b = start_fetch(dir_, "b", manifest, args);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // b waits on a's key lock.
  EXPECT_EQ(server().stats()["/big.bin"]["requests"], 1) << "b waits instead of fetching too";
  ::kill(a.pid, SIGKILL);
  a.wait();
  server().release("/big.bin");
  EXPECT_EQ(b.wait(), 0) << read(b.err_path);
  EXPECT_EQ(read(object("big.bin")), content("big.bin", 6 * kMiB));
  json stats = server().stats()["/big.bin"];
  EXPECT_EQ(stats["requests"], 2);
  ASSERT_EQ(stats["ranges"].size(), 2u) << stats.dump();
  EXPECT_TRUE(stats["ranges"][0].is_null()) << "the first run asked for it all";
  EXPECT_GE(stats["ranges"][1][0].get<std::uint64_t>(), 3 * kMiB)
      << "resumed from what the dead run staged: " << stats.dump();
  EXPECT_TRUE(fs::is_empty(dir_ / "cache" / "staging"));
}

TEST_F(CliTest, FetchNamesAFullDiskInItsFailureLines) {
  fs::create_directories(dir_ / "cache");
  if (::mount("tmpfs", (dir_ / "cache").c_str(), "tmpfs", 0, "size=2m") != 0)
    GTEST_SKIP() << "mounting a tmpfs is not allowed here";
  const std::string huge = serve("huge.bin", 4 << 20);
  const std::string tiny = serve("tiny.bin", 1000);
  // One transfer at a time. tiny's bytes reach the disk when its body is
  // sealed, after its transfer: if huge's next attempt is filling the disk
  // by then, tiny fails too (the retries of both come at about the same
  // times), so tiny's outcome in this run depends on the timing.
  const CliRun run =
      run_cli(huge + tiny, {"fetch", "--base-url", server().base(), "--cache", cache(), "--progress",
                            "lines", "--max-transfers", "1", "--retries", "2", "TRACE"});
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_NE(run.out.find("failed    huge.bin"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("disk full"), std::string::npos) << run.out;
  EXPECT_NE(run.err.find("huge.bin: disk full"), std::string::npos) << run.err;
  if (run.out.find("succeeded tiny.bin") == std::string::npos) {
    EXPECT_NE(run.err.find("tiny.bin: disk full"), std::string::npos) << run.err;
  }
  // What huge staged was given back, and the disk has room for tiny now.
  std::uintmax_t staged = 0;
  for (const auto& entry : fs::recursive_directory_iterator(dir_ / "cache" / "staging"))
    if (entry.is_regular_file()) staged += entry.file_size();
  EXPECT_LT(staged, 4096u);
  const CliRun again =
      run_cli(tiny, {"fetch", "--base-url", server().base(), "--cache", cache(), "--progress",
                     "lines", "TRACE"});
  ::umount2((dir_ / "cache").c_str(), MNT_DETACH);
  EXPECT_EQ(again.exit_code, 0) << again.out << again.err;
  EXPECT_NE(again.out.find("tiny.bin"), std::string::npos) << again.out;
}

}  // namespace
}  // namespace dfl::testing
