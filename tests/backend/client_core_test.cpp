// ClientCore on the fake driver (core_driver.h): the client's own rules
// with no curl, no threads and no files. Expectations and verdicts, the
// install decision, pins and owner ends, another process's install.
#include <gtest/gtest.h>

#include "core_driver.h"
#include "../../backend/src/platform_meter.h"
#include "demandflight/format/defaults.h"
#include "demandflight/format/tcp.h"

namespace dfl::backend {
namespace {

using testing::CoreDriver;
using testing::digest;
using testing::key_of;

ArtifactRef ref(const std::string& resource, std::uint64_t size = 0,
                std::optional<std::string> sha256 = std::nullopt) {
  ArtifactRef a;
  a.key = key_of(resource);
  a.size_bytes = size;
  a.sha256 = std::move(sha256);
  return a;
}

DemandOptions owned(OwnerId owner, OwnerGeneration generation = 0) {
  DemandOptions o;
  o.owner = owner;
  o.owner_generation = generation;
  return o;
}

ClientCore::Options pinning() {
  ClientCore::Options o;
  o.pin_on_success = true;
  return o;
}

TEST(ClientCoreTest, OneTransferServesDemandsThatExpectDifferentBytesEachJudgedForItself) {
  CoreDriver d;
  const auto a = d.subscribe(ref("k", 100, digest('a')));
  const auto b = d.subscribe(ref("k", 100, digest('b')));
  const auto plain = d.subscribe(ref("k"));
  ASSERT_EQ(d.running.size(), 1u);  // Shared: one transfer.
  d.end_transfer(d.running.begin()->first, TransferStatus::ok);
  d.finalize("k", 100, digest('a'));  // Meets a's digest: installed.
  ASSERT_EQ(d.results[a].size(), 1u);
  EXPECT_EQ(d.results[a][0].outcome, DemandOutcome::succeeded);
  ASSERT_EQ(d.results[b].size(), 1u);
  EXPECT_EQ(d.results[b][0].outcome, DemandOutcome::failed);
  EXPECT_EQ(d.results[b][0].reason,
            "sha256 mismatch: expected " + digest('b') + ", got " + digest('a'));
  ASSERT_EQ(d.results[plain].size(), 1u);
  EXPECT_EQ(d.results[plain][0].outcome, DemandOutcome::succeeded);
  EXPECT_EQ(d.core.metrics().conflicts_of_expectation, 1u);
}

TEST(ClientCoreTest, DemandsThatDisagreeOnTheSizeCapTheTransferAndTellTheRunningOne) {
  CoreDriver d;
  d.subscribe(ref("k", 100));
  ASSERT_EQ(d.running.size(), 1u);
  EXPECT_EQ(d.running.begin()->second.job.limits.exact, 100u);
  d.subscribe(ref("k", 120));
  ASSERT_EQ(d.other_jobs.size(), 1u);
  const auto* limits = std::get_if<LimitsJob>(&d.other_jobs[0]);
  ASSERT_NE(limits, nullptr);
  EXPECT_FALSE(limits->limits.exact);
  EXPECT_EQ(limits->limits.cap, 120u);
}

TEST(ClientCoreTest, ABodyThatFailsItsCheckIsFetchedAgainOnceThenTheSameBytesEndTheTask) {
  CoreDriver d;
  const auto a = d.subscribe(ref("k", 100, digest('a')));
  d.end_transfer(d.running.begin()->first, TransferStatus::ok);
  d.finalize("k", 100, digest('x'));  // Refused: fetched again.
  EXPECT_TRUE(d.results[a].empty());
  EXPECT_TRUE(d.objects.installed.empty());
  for (int i = 0; i < 100 && d.running.empty(); ++i)
    d.advance(1);  // The retry's backoff.
  ASSERT_EQ(d.running.size(), 1u);
  EXPECT_EQ(d.running.begin()->second.job.start.attempt, 2u);
  d.end_transfer(d.running.begin()->first, TransferStatus::ok);
  d.finalize("k", 100, digest('x'));  // The same bytes: the origin's; not fetched again.
  ASSERT_EQ(d.results[a].size(), 1u);
  EXPECT_EQ(d.results[a][0].outcome, DemandOutcome::failed);
  EXPECT_EQ(d.results[a][0].reason,
            "sha256 mismatch: expected " + digest('a') + ", got " + digest('x') +
                " from http://origin/k (the same bytes twice in a row: not fetched again)");
  EXPECT_TRUE(d.running.empty());
}

TEST(ClientCoreTest, ACacheHitIsJudgedAgainstTheCallersOwnExpectation) {
  CoreDriver d;
  d.objects.installed["k"] = {100, digest('a')};
  const auto good = d.subscribe(ref("k", 100, digest('a')));
  const auto bad = d.subscribe(ref("k", 0, digest('b')));
  const auto small = d.subscribe(ref("k", 99));
  EXPECT_TRUE(d.running.empty());  // Hits: no transfer.
  EXPECT_EQ(d.results[good].at(0).outcome, DemandOutcome::succeeded);
  EXPECT_EQ(d.results[bad].at(0).outcome, DemandOutcome::failed);
  EXPECT_EQ(d.results[bad].at(0).reason,
            "sha256 mismatch: expected " + digest('b') + ", got " + digest('a'));
  EXPECT_EQ(d.results[small].at(0).reason, "size mismatch: expected 99 bytes, got 100");
}

TEST(ClientCoreTest, AFailedTransferGivesEachDemandItsReason) {
  SchedulerConfig config;
  config.retry.max_attempts = 1;
  ClientCore::Options options;
  options.scheduler = config;
  CoreDriver d(options);
  const auto a = d.subscribe(ref("k"));
  d.end_transfer(d.running.begin()->first, TransferStatus::permanent_error, 0,
                 "HTTP 404 from http://origin/k");
  ASSERT_EQ(d.results[a].size(), 1u);
  EXPECT_EQ(d.results[a][0].outcome, DemandOutcome::failed);
  EXPECT_EQ(d.results[a][0].reason, "HTTP 404 from http://origin/k");
  EXPECT_EQ(d.core.metrics().transfers_failed, 1u);
}

TEST(ClientCoreTest, PinsGoWithTheirOwnersGenerationAndAreReleasedOnce) {
  CoreDriver d(pinning());
  const auto old_gen = d.subscribe(ref("k"), owned(7, 1));
  const auto new_gen = d.subscribe(ref("k"), owned(7, 2));
  const auto other = d.subscribe(ref("k"), owned(8, 1));
  d.end_transfer(d.running.begin()->first, TransferStatus::ok);
  d.finalize("k", 100, digest('a'));
  for (auto n : {old_gen, new_gen, other}) {
    ASSERT_EQ(d.results[n].size(), 1u);
    ASSERT_TRUE(d.results[n][0].pin) << n;
    EXPECT_EQ(d.results[n][0].pin.path(), "/objects/k");
  }
  EXPECT_EQ(d.objects.held(), 3);
  EXPECT_EQ(d.core.metrics().pinned_bytes, 100u);  // One object, however many pins.
  d.core.end_owner(d.now, 7, 1);  // Generation 1 and older.
  EXPECT_FALSE(d.results[old_gen][0].pin);
  EXPECT_TRUE(d.results[new_gen][0].pin);
  EXPECT_EQ(d.objects.held(), 2);
  d.results[new_gen][0].pin.release();  // The caller's own release...
  d.core.end_owner(d.now, 7, std::nullopt);  // ...then its owner's end: released once.
  d.results[old_gen][0].pin.release();
  EXPECT_EQ(d.objects.held(), 1);
  EXPECT_TRUE(d.results[other][0].pin);
  d.results.clear();
  EXPECT_EQ(d.objects.held(), 0);
  EXPECT_TRUE(d.objects.ledger->errors.empty()) << d.objects.ledger->errors.front();
}

TEST(ClientCoreTest, AnObjectInstalledByAnotherProcessIsAHitWhileATaskOfItRuns) {
  CoreDriver d(pinning());
  const auto first = d.subscribe(ref("k"));
  d.objects.installed["k"] = {100, digest('a')};  // Another process, meanwhile.
  const auto joiner = d.subscribe(ref("k"));      // Served by the object, pinned at once.
  ASSERT_EQ(d.results[joiner].size(), 1u);
  EXPECT_TRUE(d.results[joiner][0].pin);
  EXPECT_TRUE(d.results[first].empty());
  EXPECT_EQ(d.objects.held(), 1);
  d.end_transfer(d.running.begin()->first, TransferStatus::ok);
  d.finalize("k", 100, digest('a'));
  EXPECT_TRUE(d.results[first].at(0).pin);
  EXPECT_TRUE(d.results[joiner].at(0).pin);
  EXPECT_EQ(d.objects.held(), 2);
  d.results.clear();
  EXPECT_EQ(d.objects.held(), 0);
  EXPECT_TRUE(d.objects.ledger->errors.empty()) << d.objects.ledger->errors.front();
}

TEST(ClientCoreTest, AnObjectEvictedBeforeItsPinFailsTheDemandWithThatReason) {
  CoreDriver d(pinning());
  const auto a = d.subscribe(ref("k"));
  d.end_transfer(d.running.begin()->first, TransferStatus::ok);
  const FinalizeJob job = d.finalizing.at(0);
  d.finalizing.clear();
  ASSERT_FALSE(d.core.decide_install(job.task, 100, digest('a')));
  // Installed, and gone (another process evicted it) before the verdict.
  d.core.finalize_ended(d.now, job, 100, FinalizeStatus::installed, {});
  d.run_jobs();
  ASSERT_EQ(d.results[a].size(), 1u);
  EXPECT_EQ(d.results[a][0].outcome, DemandOutcome::failed);
  EXPECT_EQ(d.results[a][0].reason, "evicted before it could be pinned");
}

TEST(ClientCoreTest, AnotherProcesssInstallIsJudgedHeldUntilTheVerdictsAndReleased) {
  CoreDriver d(pinning());
  const auto good = d.subscribe(ref("k", 0, digest('a')));
  const auto bad = d.subscribe(ref("k", 0, digest('b')));
  d.end_transfer(d.running.begin()->first, TransferStatus::ok, 0);  // Installed elsewhere.
  d.adopt("k", 100, digest('a'));
  EXPECT_EQ(d.results[good].at(0).outcome, DemandOutcome::succeeded);
  EXPECT_TRUE(d.results[good][0].pin);
  EXPECT_EQ(d.results[bad].at(0).outcome, DemandOutcome::failed);
  EXPECT_EQ(d.objects.held(), 1);  // The task's own hold went with the task.
  d.results.clear();
  EXPECT_EQ(d.objects.held(), 0);
  EXPECT_TRUE(d.objects.ledger->errors.empty()) << d.objects.ledger->errors.front();
}

TEST(ClientCoreTest, AnEndedDemandNeverSucceedsAndGetsOneTerminal) {
  CoreDriver d;
  DemandHandle h;
  const auto a = d.subscribe(ref("k"), owned(1, 1), &h);
  const auto b = d.subscribe(ref("k"), owned(2, 1));
  d.core.cancel(d.now, h);
  d.run_jobs();
  d.core.end_owner(d.now, 2, 1);
  d.run_jobs();
  ASSERT_EQ(d.results[a].size(), 1u);
  EXPECT_EQ(d.results[a][0].outcome, DemandOutcome::cancelled);
  EXPECT_EQ(d.results[a][0].reason, "cancelled");
  ASSERT_EQ(d.results[b].size(), 1u);
  EXPECT_EQ(d.results[b][0].outcome, DemandOutcome::owner_ended);
  d.core.cancel(d.now, h);  // Stale: nothing more.
  d.run_jobs();
  EXPECT_EQ(d.results[a].size(), 1u);
}

TEST(ClientCoreTest, StartsCarryTheTasksEffectivePriority) {
  CoreDriver d;
  DemandOptions low;
  low.priority = -2;
  DemandHandle h;
  d.subscribe(ref("k"), low, &h);
  ASSERT_EQ(d.running.size(), 1u);
  EXPECT_EQ(d.running.begin()->second.job.start.priority, -2);
}

// The engine's rule for origins (origins_problem), refused before the engine
// sees it and named as the caller's field.
TEST(ClientCoreTest, OriginsTheEngineCannotTakeAreRefusedNamingTheArtifactsField) {
  CoreDriver d;
  auto refused = [&](ArtifactRef r) -> std::string {
    try {
      d.subscribe(r);
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
    return "accepted";
  };
  ArtifactRef r = ref("k");
  r.mirrors.assign(kMaxOriginsPerArtifact, 1);
  EXPECT_EQ(refused(r), "ArtifactRef.mirrors: at most 31, got 32");
  r = ref("k");
  r.origin = SchedulerConfig{}.max_origins;
  EXPECT_EQ(refused(r), "ArtifactRef.origin: 4096 is not below max_origins (4096)");
  r = ref("k");
  r.mirrors = {1, 5000};
  EXPECT_EQ(refused(r), "ArtifactRef.mirrors: origin 5000 is not below max_origins (4096)");
  EXPECT_TRUE(d.running.empty()) << "nothing started";
  r.mirrors = {1, 2};
  EXPECT_EQ(refused(r), "accepted");
}

TEST(ClientCoreTest, ASetThrottleThatChangesNothingMakesNoJob) {
  CoreDriver d;
  ThrottleConfig t;
  t.overall_Bps = 1000;
  EXPECT_TRUE(d.core.set_throttle(t));
  EXPECT_FALSE(d.core.set_throttle(t));
  std::vector<Job> jobs;
  d.core.take_jobs(jobs);
  ASSERT_EQ(jobs.size(), 1u);
  EXPECT_TRUE(std::holds_alternative<ThrottleJob>(jobs[0]));
  t.overall_Bps = -1;
  EXPECT_THROW(d.core.set_throttle(t), std::invalid_argument);
}

// The measured path rate: the link rate at which the simulator's tcp model
// takes a lone transfer's time on a new connection. A transfer over 90 ms of
// round trip spends much of its time in slow start: its plain rate is far
// below the link's, and the fit gives the link back.
TEST(PlatformMeterTest, APathRateIsTheLinkRateTheTcpModelFitsToALoneTransfer) {
  const double window = format::defaults::tcp_segment_bytes *
                        format::defaults::tcp_initial_window_segments;
  for (const double bytes : {1.2e6, 4e6, 8e6}) {
    const double link = 25e6, rtt = 0.09;
    const double body_s = bytes / link + format::slow_start(bytes, window, rtt, link).delay_s;
    EXPECT_LT(bytes / body_s, 0.85 * link) << bytes;  // Slow start cost more than 15%.
    const std::optional<double> fit = PlatformMeter::path_rate(bytes, body_s, rtt);
    ASSERT_TRUE(fit) << bytes;
    EXPECT_NEAR(*fit, link, 1e-3 * link) << bytes;
  }
  // On loopback the fit is the plain rate.
  EXPECT_NEAR(*PlatformMeter::path_rate(8e6, 1.0, 5e-5), 8e6, 0.01 * 8e6);
  // Faster than slow start from ten segments allows: no fit.
  EXPECT_FALSE(PlatformMeter::path_rate(8e6, 0.05, 0.09));
}

// The meter's figure is the median fit of the lone attempts on new
// connections; attempts that shared the link, or that were short, say
// nothing; with no lone attempt on a new connection, the best plain rate.
TEST(PlatformMeterTest, TheLoneFigureIsTheMedianFitOfLoneAttemptsOnNewConnections) {
  const double window = format::defaults::tcp_segment_bytes *
                        format::defaults::tcp_initial_window_segments;
  const double rtt = 0.05, bytes = 4e6;
  auto plain_rate = [&](double link) {
    return bytes / (bytes / link + format::slow_start(bytes, window, rtt, link).delay_s);
  };
  PlatformMeter meter;
  std::uint64_t id = 0;
  // Kept connections only: the best plain rate, not a fit.
  for (const double rate : {5e6, 7e6}) {
    meter.transfer_started(++id, 0);
    meter.transfer_ended(id, 4'000'000, rate, std::nullopt);
  }
  MeasuredPlatform m = meter.measured();
  ASSERT_EQ(m.origins.size(), 1u);
  EXPECT_FALSE(m.origins[0].lone_fit);
  EXPECT_DOUBLE_EQ(m.origins[0].lone_Bps, 7e6);
  EXPECT_EQ(m.origins[0].lone_samples, 2u);
  // Three on new connections, of links 10, 12 and 30 MB/s: the median, 12.
  for (const double link : {10e6, 30e6, 12e6}) {
    meter.transfer_started(++id, 0);
    meter.transfer_ended(id, 4'000'000, plain_rate(link), rtt);
  }
  // Two that overlapped, and a short one: not lone figures.
  meter.transfer_started(++id, 0);
  meter.transfer_started(++id, 0);
  meter.transfer_ended(id - 1, 4'000'000, 1e9, rtt);
  meter.transfer_ended(id, 4'000'000, 1e9, rtt);
  meter.transfer_started(++id, 0);
  meter.transfer_ended(id, 100'000, 1e9, rtt);
  m = meter.measured();
  EXPECT_TRUE(m.origins[0].lone_fit);
  EXPECT_NEAR(m.origins[0].lone_Bps, 12e6, 1e-3 * 12e6);
  EXPECT_EQ(m.origins[0].lone_samples, 3u);
  EXPECT_EQ(m.origins[0].rtt_samples, 6u);
  EXPECT_DOUBLE_EQ(m.origins[0].rtt_s, rtt);
}

// Each origin's busiest window: the bytes its own transfers received
// together, in flight or ended, a lower bound of its path; the platform's
// bandwidth is the larger of that and the lone figure.
TEST(PlatformMeterTest, EachOriginsBusiestWindowCountsItsOwnTransfersTogether) {
  PlatformMeter meter;
  meter.transfer_started(1, 0);
  meter.transfer_started(2, 0);
  meter.transfer_started(3, 1);
  auto snapshot = [](std::uint64_t id, std::uint64_t received) {
    TransferSnapshot s;
    s.transfer = TransferId{id};
    s.received = received;
    return s;
  };
  // Origin 0: two transfers at 4 MB/s each; origin 1: one at 1 MB/s; for a
  // second, ticks every 0.1 s. Transfer 2 ends half-way: its bytes still count.
  for (int tick = 0; tick <= 10; ++tick) {
    const double t = 0.1 * tick;
    const auto at = [t](double rate) { return static_cast<std::uint64_t>(rate * t); };
    std::vector<TransferSnapshot> in_flight = {snapshot(1, at(4e6)), snapshot(3, at(1e6))};
    std::uint64_t ended = 0;
    if (tick < 5) {
      in_flight.push_back(snapshot(2, at(4e6)));
    } else {
      ended = 2'000'000;
      if (tick == 5) meter.transfer_ended(2, ended, 4e6, std::nullopt);
      in_flight.push_back(snapshot(4, 0));  // Not started here: no origin.
    }
    std::uint64_t total = ended;
    for (const auto& s : in_flight)
      total += s.received;
    meter.received(t, total, in_flight);
  }
  const MeasuredPlatform m = meter.measured();
  ASSERT_EQ(m.origins.size(), 2u);
  // Origin 0 ran at 8 MB/s for the first half, then 4 MB/s.
  EXPECT_NEAR(m.origins[0].busiest_Bps, 8e6, 1e3);
  EXPECT_NEAR(m.origins[1].busiest_Bps, 1e6, 1e3);
  EXPECT_EQ(m.origins[0].windows, 2u);
  EXPECT_NEAR(m.client_Bps, 9e6, 1e3);
  // Transfer 2 shared the link: no lone figure; the bandwidth is the window's.
  EXPECT_EQ(m.origins[0].lone_samples, 0u);
  EXPECT_DOUBLE_EQ(m.origins[0].bandwidth_Bps(), m.origins[0].busiest_Bps);
}

}  // namespace
}  // namespace dfl::backend
