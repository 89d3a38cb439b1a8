// The library's promises through the command line, and against hostile
// origins: `demandflight fetch` and `replay` (the real binary) against the
// loopback server (docs/sharing.md, docs/cli.md "Bounds").
#include <gtest/gtest.h>
#include <sys/mount.h>

#include <string>
#include <vector>

#include "cli_fixture.h"
#include "cli_runner.h"
#include "words.h"

namespace dfl::testing {
namespace {

// The seconds on fetch's plain line for `id` ("failed    a.bin (...) at 30.031 s").
double seconds_on_line(const std::string& out, const std::string& id) {
  const std::size_t line = out.find(" " + id + " (");
  const auto seconds =
      line == std::string::npos ? std::nullopt : number_after(out.substr(line), ") at ");
  if (!seconds) {
    ADD_FAILURE() << "no line for " << id << " in\n" << out;
    return -1;
  }
  return *seconds;
}

std::string replay_header() {
  return R"({"format": "demandflight-trace", "version": 1, "name": "promises", "seed": 5, )"
         R"("platform": {"client_bandwidth_Bps": 2000000, "client_latency_s": 0.001, )"
         R"("origins": {"cdn": {"bandwidth_Bps": 1e9, "latency_s": 0.001}}, )"
         R"("disk_write_Bps": 1e9, "hash_Bps": 1e9}, )"
         R"("scheduler": {"max_transfers": 4, "max_per_origin": 4}})"
         "\n";
}

std::string subscribe(double t, const std::string& demand, const std::string& artifact) {
  return json{{"op", "subscribe"}, {"t", t},          {"demand", demand},
              {"owner", demand},   {"artifact", artifact}, {"priority", 0}}
             .dump() +
         "\n";
}

// --- A hostile origin ---------------------------------------------------------

// The documented defaults (docs/cli.md): a server dripping 1 or 2 bytes a
// second is cut off 30 s into the attempt (the stall rule looks every 0.25 s,
// its window moves a second at a time), and the reason names the URL.
TEST_F(CliTest, ADrippingServerIsCutOffWithinTheStallWindowByDefault) {
  const std::string manifest = serve("drip1.bin", 5'000) + serve("drip2.bin", 5'000);
  server().faults({{{"path", "/drip1.bin"}, {"kind", "drip"}, {"drip_Bps", 1}},
                   {{"path", "/drip2.bin"}, {"kind", "drip"}, {"drip_Bps", 2}}});
  const CliRun run = run_cli(manifest, {"fetch", "--base-url", server().base(), "--cache", cache(),
                                        "--progress", "lines", "--retries", "1", "TRACE"});
  EXPECT_EQ(run.exit_code, 1) << run.out << run.err;
  for (const std::string id : {"drip1.bin", "drip2.bin"}) {
    const double at = seconds_on_line(run.out, id);
    EXPECT_GE(at, 29.0) << id << ": not before the window is full";
    EXPECT_LE(at, 33.0) << id << ": the documented bound is 30 s, plus 1.25 s of granularity";
    const auto window = number_after(run.err, id + ": stalled: ");
    ASSERT_TRUE(window) << run.err;
    EXPECT_TRUE(says_in_order(run.err, {id + ": stalled: ", " bytes in ",
                                        " s from " + server().base() + "/" + id}))
        << run.err;
    const auto seconds = number_after(run.err.substr(run.err.find(id + ": stalled: ")), " bytes in ");
    ASSERT_TRUE(seconds);
    EXPECT_GE(*seconds, 30);
    EXPECT_LE(*seconds, 31);
  }
  EXPECT_FALSE(fs::exists(object("drip1.bin")));
}

// A transfer held back by the client's own throttle is not stalled; the
// same rate from the server is.
TEST_F(CliTest, OurOwnThrottleIsNoStallButTheSameRateFromTheServerIs) {
  const std::string manifest = serve("slow.bin", 160'000);
  const std::vector<std::string> bounds = {"--stall-window", "2", "--stall-floor", "30000"};
  std::vector<std::string> capped = {"fetch", "--base-url", server().base(), "--cache", cache(),
                                     "--max-rate", "20000", "--retries", "1", "--quiet", "TRACE"};
  capped.insert(capped.end() - 1, bounds.begin(), bounds.end());
  const CliRun ours = run_cli(manifest, capped);
  EXPECT_EQ(ours.exit_code, 0) << ours.out << ours.err;
  EXPECT_EQ(read(object("slow.bin")), content("slow.bin", 160'000));

  fs::remove_all(dir_ / "cache");
  server().rate(20'000);
  std::vector<std::string> slow = {"fetch",   "--base-url", server().base(), "--cache", cache(),
                                   "--retries", "1",        "--quiet",       "TRACE"};
  slow.insert(slow.end() - 1, bounds.begin(), bounds.end());
  const CliRun theirs = run_cli(manifest, slow);
  EXPECT_EQ(theirs.exit_code, 1) << theirs.out;
  EXPECT_NE(theirs.err.find("slow.bin: stalled: "), std::string::npos) << theirs.err;
}

// A server that keeps above the stall floor still meets the attempt's
// deadline: base + size / floor (here 1 s + 300 kB at 100 kB/s).
TEST_F(CliTest, AnAttemptThatOutlivesItsDeadlineEndsNamingIt) {
  const std::string manifest = serve("long.bin", 300'000);
  server().rate(50'000);  // 6 s for the body.
  const CliRun run = run_cli(manifest, {"fetch", "--base-url", server().base(), "--cache", cache(),
                                        "--attempt-base", "1", "--attempt-floor", "100000",
                                        "--retries", "1", "--progress", "lines", "TRACE"});
  EXPECT_EQ(run.exit_code, 1) << run.out;
  EXPECT_TRUE(says_in_order(run.err, {"long.bin: deadline: ", " kB of 300.0 kB in ",
                                      " s from " + server().base() + "/long.bin"}))
      << run.err;
  const auto took = number_after(run.err, " kB of 300.0 kB in ");
  ASSERT_TRUE(took) << run.err;
  EXPECT_GE(*took, 4);
  EXPECT_LE(*took, 5);
  const double at = seconds_on_line(run.out, "long.bin");
  EXPECT_GE(at, 3.9);
  EXPECT_LE(at, 5.5);
}

// Each way a server can break a transfer, in words, with its URL.
TEST_F(CliTest, AResetAnOverLongHeaderAndAStallEachGiveTheirReasonWithTheUrl) {
  const std::string manifest =
      serve("reset.bin", 600'000) + serve("header.bin", 1'000) + serve("stall.bin", 300'000);
  server().faults({{{"path", "/reset.bin"}, {"kind", "reset"}, {"after_bytes", 200'000}},
                   {{"path", "/header.bin"}, {"kind", "big_header"}, {"header_bytes", 200'000}},
                   {{"path", "/stall.bin"}, {"kind", "hold"}, {"after_bytes", 100'000}}});
  const CliRun run =
      run_cli(manifest, {"fetch", "--base-url", server().base(), "--cache", cache(),
                         "--stall-window", "2", "--retries", "1", "--quiet", "TRACE"});
  server().release("/stall.bin");
  EXPECT_EQ(run.exit_code, 1);
  const std::string url = server().base();
  EXPECT_TRUE(says_in_order(run.err, {"reset.bin: connection reset by peer after ",
                                      " kB of " + url + "/reset.bin"}))
      << run.err;
  EXPECT_NE(run.err.find("header.bin: response header too large"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("from " + url + "/header.bin"), std::string::npos) << run.err;
  EXPECT_TRUE(says_in_order(run.err, {"stall.bin: stalled: 0 bytes in ",
                                      " s from " + url + "/stall.bin"}))
      << run.err;
  const auto window = number_after(run.err, "stall.bin: stalled: 0 bytes in ");
  ASSERT_TRUE(window) << run.err;
  EXPECT_GE(*window, 2);
  EXPECT_LE(*window, 3);
}

// The same wrong bytes twice are not fetched a third and fourth time.
TEST_F(CliTest, ABodyThatFailsItsDigestTheSameWayTwiceIsNotFetchedAgain) {
  const std::string manifest = serve("bad.bin", 100'000, /*right_digest=*/false);
  const CliRun run = run_cli(manifest, {"fetch", "--base-url", server().base(), "--cache", cache(),
                                        "--retries", "4", "--quiet", "TRACE"});
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_NE(run.err.find("bad.bin: sha256 mismatch: expected "), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("from " + server().base() + "/bad.bin"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("the same bytes twice in a row"), std::string::npos) << run.err;
  EXPECT_EQ(server().stats()["/bad.bin"]["requests"], 2) << "not four";
}

// Bytes that differ from attempt to attempt are an accident of transfer:
// fetched again, and the right ones installed.
TEST_F(CliTest, ABodyCorruptedOnceIsFetchedAgainAndInstalled) {
  const std::string manifest = serve("flaky.bin", 100'000);
  server().faults({{{"path", "/flaky.bin"}, {"kind", "wrong_bytes"}, {"after_bytes", 5'000}}});
  const CliRun run = run_cli(manifest, {"fetch", "--base-url", server().base(), "--cache", cache(),
                                        "--retries", "4", "--quiet", "TRACE"});
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(server().stats()["/flaky.bin"]["requests"], 2);
  EXPECT_EQ(read(object("flaky.bin")), content("flaky.bin", 100'000));
}

// --- Every entry point keeps the promises -------------------------------------

// Two subsystems declare one key, one with a stale manifest's digest: each
// demand is judged by its own record, whoever subscribes first; one transfer.
TEST_F(CliTest, ReplayJudgesEachDemandByItsOwnArtifactRecordInEitherOrder) {
  const std::string bytes = content("shared.bin", 200'000);
  std::ofstream(dir_ / "www" / "shared.bin", std::ios::binary) << bytes;
  const std::string good = backend::Sha256::hex_of(bytes);
  const std::string stale = backend::Sha256::hex_of(bytes + "old");
  const std::string artifacts = artifact_line("right", "shared.bin", 200'000, good) +
                                artifact_line("stale", "shared.bin", 200'000, stale);
  for (const bool stale_first : {true, false}) {
    SCOPED_TRACE(stale_first ? "the stale one subscribes first" : "the right one first");
    fs::remove_all(dir_ / "cache");
    const std::string trace =
        replay_header() + artifacts +
        (stale_first ? subscribe(0, "d_stale", "stale") + subscribe(0, "d_right", "right")
                     : subscribe(0, "d_right", "right") + subscribe(0, "d_stale", "stale"));
    const std::int64_t before = server().stats().value("/shared.bin", json::object()).value("requests", 0);
    const CliRun run = run_cli(trace, {"replay", "TRACE", "--base-url", server().base(), "--cache",
                                       cache(), "--out", "OUT", "--quiet"});
    ASSERT_EQ(run.exit_code, 0) << run.err;
    EXPECT_EQ(demand_record(run.result, "d_right")["outcome"], "succeeded");
    EXPECT_EQ(demand_record(run.result, "d_stale")["outcome"], "failed");
    EXPECT_EQ(server().stats()["/shared.bin"]["requests"].get<std::int64_t>() - before, 1)
        << "one transfer for both";
  }
}

TEST_F(CliTest, FetchJudgesEachArtifactRecordByItsOwnDigestInEitherOrder) {
  const std::string bytes = content("shared.bin", 200'000);
  std::ofstream(dir_ / "www" / "shared.bin", std::ios::binary) << bytes;
  const std::string good = backend::Sha256::hex_of(bytes);
  const std::string stale = backend::Sha256::hex_of(bytes + "old");
  const std::string right_line = artifact_line("right", "shared.bin", 200'000, good);
  const std::string stale_line = artifact_line("stale", "shared.bin", 200'000, stale);
  for (const bool stale_first : {true, false}) {
    SCOPED_TRACE(stale_first ? "the stale record first" : "the right record first");
    fs::remove_all(dir_ / "cache");
    const CliRun run = run_cli(stale_first ? stale_line + right_line : right_line + stale_line,
                               {"fetch", "--base-url", server().base(), "--cache", cache(),
                                "--progress", "lines", "TRACE"});
    EXPECT_EQ(run.exit_code, 1) << run.out;
    EXPECT_NE(run.out.find("succeeded right"), std::string::npos) << run.out;
    EXPECT_NE(run.err.find("1 artifacts failed: stale"), std::string::npos) << run.err;
    EXPECT_NE(run.err.find("stale: sha256 mismatch: expected " + stale + ", got " + good),
              std::string::npos)
        << run.err;
    EXPECT_EQ(read(object("shared.bin")), bytes);
  }
}

// docs/sharing.md "URLs": the names url_template encodes, through --base-url
// as a plain URL (fetch) and as a template (replay).
TEST_F(CliTest, NamesThatNeedPercentEncodingAreFetchedThroughBothCommands) {
  const std::vector<std::string> names = {"a b.bin", "rock #2.bin", "what?.bin", "100%.bin",
                                          "été 日.bin"};
  std::string manifest;
  for (const std::string& name : names)
    manifest += serve(name, 10'000 + manifest.size());
  const CliRun run = run_cli(manifest, {"fetch", "--base-url", server().base() + "/", "--cache",
                                        cache(), "--progress", "lines", "TRACE"});
  EXPECT_EQ(run.exit_code, 0) << run.out << run.err;
  for (const std::string& name : names) {
    EXPECT_TRUE(fs::exists(object(name))) << name;
    EXPECT_EQ(server().stats()["/" + name]["requests"], 1) << name;
  }

  fs::remove_all(dir_ / "cache");
  std::string trace = replay_header() + manifest;
  for (std::size_t i = 0; i < names.size(); ++i)
    trace += subscribe(0.01 * static_cast<double>(i), "d" + std::to_string(i), names[i]);
  const CliRun replay = run_cli(trace, {"replay", "TRACE", "--base-url",
                                        server().base() + "/{resource}", "--cache", cache(),
                                        "--out", "OUT", "--quiet"});
  ASSERT_EQ(replay.exit_code, 0) << replay.err;
  for (std::size_t i = 0; i < names.size(); ++i) {
    EXPECT_EQ(demand_record(replay.result, "d" + std::to_string(i))["outcome"], "succeeded")
        << names[i];
  }
}

// fetch keeps what it fetched for the length of the run: a manifest larger
// than the cache's capacity fails the artifacts that find no room, and
// those that succeeded are all still there.
TEST_F(CliTest, FetchOfAManifestLargerThanTheCacheKeepsWhatItFetchedAndSaysSo) {
  constexpr std::size_t kMiB = std::size_t{1} << 20;
  const std::string manifest =
      serve("one.bin", 2 * kMiB) + serve("two.bin", 2 * kMiB) + serve("three.bin", 2 * kMiB);
  const CliRun run = run_cli(manifest, {"fetch", "--base-url", server().base(), "--cache", cache(),
                                        "--cache-bytes", "3145728", "--max-transfers", "1",
                                        "--retries", "2", "--progress", "lines", "TRACE"});
  EXPECT_EQ(run.exit_code, 1) << run.out << run.err;
  int present = 0;
  for (const std::string name : {"one.bin", "two.bin", "three.bin"}) {
    const bool succeeded = run.out.find("succeeded " + name) != std::string::npos;
    EXPECT_EQ(fs::exists(object(name)), succeeded) << name << ": succeeded means still there";
    present += succeeded ? 1 : 0;
  }
  EXPECT_EQ(present, 1) << run.out;
  EXPECT_NE(run.err.find("cache full: "), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("does not fit in the cache"), std::string::npos) << run.err;
}

// The same on a file system too small for the manifest (a 3 MiB tmpfs).
TEST_F(CliTest, FetchOfAManifestLargerThanItsFileSystemKeepsWhatItFetched) {
  fs::create_directories(dir_ / "cache");
  if (::mount("tmpfs", (dir_ / "cache").c_str(), "tmpfs", 0, "size=3m") != 0)
    GTEST_SKIP() << "mounting a tmpfs is not allowed here";
  constexpr std::size_t kMiB = std::size_t{1} << 20;
  const std::string manifest =
      serve("one.bin", 2 * kMiB) + serve("two.bin", 2 * kMiB) + serve("three.bin", 2 * kMiB);
  const CliRun run = run_cli(manifest, {"fetch", "--base-url", server().base(), "--cache", cache(),
                                        "--max-transfers", "1", "--retries", "2", "--progress",
                                        "lines", "TRACE"});
  int present = 0;
  for (const std::string name : {"one.bin", "two.bin", "three.bin"}) {
    const bool succeeded = run.out.find("succeeded " + name) != std::string::npos;
    EXPECT_EQ(fs::exists(object(name)), succeeded) << name << ": succeeded means still there";
    present += succeeded ? 1 : 0;
  }
  ::umount2((dir_ / "cache").c_str(), MNT_DETACH);
  EXPECT_EQ(run.exit_code, 1) << run.out << run.err;
  EXPECT_EQ(present, 1) << run.out;
  EXPECT_NE(run.err.find("disk full: "), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("does not fit in the cache"), std::string::npos) << run.err;
}

}  // namespace
}  // namespace dfl::testing
