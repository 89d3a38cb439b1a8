// Client::progress, owner_progress and ClientOptions::on_progress against the
// loopback server: a demand's stage and bytes as its task goes (queued,
// transferring, retrying, waiting for another fetch of the key), shared by
// the demands of one task, summed once per task for an owner, nothing once
// it has ended, and reports that come before their demand's terminal; and
// Client::pause / resume: a held transfer stops reading without a stall and
// goes on from the same byte of the same request, a held start sends no
// request, and a pause at a level holds only the tasks at or below it.
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "demandflight/backend/client.h"
#include "loopback.h"
#include "test_files.h"

namespace dfl::testing {
namespace {

namespace fs = std::filesystem;
using backend::ArtifactRef;
using backend::Client;
using backend::ClientOptions;
using backend::DemandProgress;
using backend::Stage;

constexpr std::size_t kSize = 200'000;
constexpr long kHeldAt = 100'000;

class ProgressTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fresh_test_dir("progress");
    for (const char* name : {"a.bin", "b.bin"})
      std::ofstream(dir_ / "www" / name) << content_of(name, kSize);
    server_ = std::make_unique<LoopbackServer>(dir_ / "www");
  }
  void TearDown() override {
    server_.reset();
    fs::remove_all(dir_);
  }

  ClientOptions options() const {
    ClientOptions o;
    o.cache_dir = dir_ / "cache";
    o.resolver = backend::url_template(server_->base() + "/{resource}");
    o.scheduler.max_transfers = 1;
    o.scheduler.retry = RetryConfig{3, 0.5, 0.5, 0};
    o.progress_interval_s = 0.02;
    return o;
  }

  static ArtifactRef ref(const std::string& name) {
    ArtifactRef r;
    r.key = ArtifactKey{name, "r1", "pc", 0};
    r.size_bytes = kSize;
    return r;
  }

  static DemandOptions owner(OwnerId id) {
    DemandOptions o;
    o.owner = id;
    return o;
  }

  // Polls `client` until `demand`'s progress satisfies `ok` (10 s at most).
  static std::optional<DemandProgress> wait_for(
      const Client& client, DemandHandle demand,
      const std::function<bool(const std::optional<DemandProgress>&)>& ok) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    std::optional<DemandProgress> p;
    while (std::chrono::steady_clock::now() < until) {
      p = client.progress(demand);
      if (ok(p)) return p;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    ADD_FAILURE() << "progress never got there; last stage "
                  << (p ? std::string(to_string(p->stage)) : "ended");
    return p;
  }

  // Terminals, as they come.
  struct Ends {
    std::mutex mutex;
    std::condition_variable cv;
    std::vector<DemandOutcome> outcomes;
    std::function<void(backend::DemandResult)> callback() {
      return [this](backend::DemandResult r) {
        std::lock_guard lock(mutex);
        outcomes.push_back(r.outcome);
        cv.notify_all();
      };
    }
    bool wait(std::size_t n) {
      std::unique_lock lock(mutex);
      return cv.wait_for(lock, std::chrono::seconds(30), [&] { return outcomes.size() >= n; });
    }
  };

  fs::path dir_;
  std::unique_ptr<LoopbackServer> server_;
};

TEST_F(ProgressTest, ADemandShowsItsTasksStageAndBytesSharedAndSummedOncePerOwner) {
  server_->hold("/a.bin", kHeldAt);
  Client client(options());
  Ends ends;
  const DemandHandle a1 = client.subscribe(ref("a.bin"), owner(1), ends.callback());
  const DemandHandle b1 = client.subscribe(ref("b.bin"), owner(1), ends.callback());
  const DemandHandle a2 = client.subscribe(ref("a.bin"), owner(2), ends.callback());

  const auto p = wait_for(client, a1, [](const std::optional<DemandProgress>& now) {
    return now && now->stage == Stage::transferring && now->received >= kHeldAt;
  });
  ASSERT_TRUE(p);
  EXPECT_EQ(p->received, static_cast<std::uint64_t>(kHeldAt)) << "held there";
  EXPECT_EQ(p->expected, kSize);
  EXPECT_EQ(p->owner, 1u);
  const auto shared = client.progress(a2);
  ASSERT_TRUE(shared);
  EXPECT_EQ(shared->task, p->task) << "one transfer for both callers";
  EXPECT_EQ(shared->stage, Stage::transferring);
  EXPECT_EQ(shared->received, p->received);
  const auto queued = client.progress(b1);  // One transfer slot: b waits for it.
  ASSERT_TRUE(queued);
  EXPECT_EQ(queued->stage, Stage::queued);
  EXPECT_EQ(queued->received, 0u);
  EXPECT_NE(queued->task, p->task);

  const backend::OwnerProgress one = client.owner_progress(1);
  EXPECT_EQ(one.demands, 2u);
  EXPECT_EQ(one.by_stage[static_cast<std::size_t>(Stage::transferring)], 1u);
  EXPECT_EQ(one.by_stage[static_cast<std::size_t>(Stage::queued)], 1u);
  EXPECT_EQ(one.received, static_cast<std::uint64_t>(kHeldAt));
  EXPECT_EQ(one.expected, 2 * kSize);
  EXPECT_EQ(one.unknown_size, 0u);
  const backend::OwnerProgress two = client.owner_progress(2);
  EXPECT_EQ(two.demands, 1u);
  EXPECT_EQ(two.received, static_cast<std::uint64_t>(kHeldAt));
  EXPECT_EQ(client.owner_progress(3).demands, 0u);

  const std::vector<DemandProgress> all = client.progress();
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[0].demand, a1);
  EXPECT_EQ(all[1].demand, b1);
  EXPECT_EQ(all[2].demand, a2);

  server_->release("/a.bin");
  ASSERT_TRUE(ends.wait(3));
  EXPECT_FALSE(client.progress(a1).has_value()) << "ended: no progress";
  EXPECT_FALSE(client.progress(b1).has_value());
  EXPECT_EQ(client.owner_progress(1).demands, 0u);
  EXPECT_FALSE(client.progress(DemandHandle{}).has_value());
}

// A retryable failure: the demand shows its task between attempts.
TEST_F(ProgressTest, BetweenAttemptsTheDemandIsRetrying) {
  server_->faults({{{"path", "/a.bin"}, {"kind", "status"}, {"status", 503}}});
  Client client(options());
  Ends ends;
  const DemandHandle a = client.subscribe(ref("a.bin"), owner(1), ends.callback());
  wait_for(client, a, [](const std::optional<DemandProgress>& p) {
    return p && p->stage == Stage::retrying;
  });
  ASSERT_TRUE(ends.wait(1));
  EXPECT_EQ(ends.outcomes, std::vector<DemandOutcome>{DemandOutcome::succeeded});
}

// Another Client on the same cache fetches the key: this one's demand
// waits for that install, and says so.
TEST_F(ProgressTest, ADemandWhoseKeyAnotherFetchHoldsIsWaitingElsewhere) {
  server_->hold("/a.bin", kHeldAt);
  Client first(options());
  Client second(options());
  Ends ends;
  const DemandHandle theirs = first.subscribe(ref("a.bin"), owner(1), ends.callback());
  wait_for(first, theirs, [](const std::optional<DemandProgress>& p) {
    return p && p->stage == Stage::transferring && p->received >= kHeldAt;
  });
  const DemandHandle mine = second.subscribe(ref("a.bin"), owner(1), ends.callback());
  wait_for(second, mine, [](const std::optional<DemandProgress>& p) {
    return p && p->stage == Stage::waiting_elsewhere;
  });
  server_->release("/a.bin");
  ASSERT_TRUE(ends.wait(2));
  EXPECT_EQ(ends.outcomes, std::vector<DemandOutcome>(2, DemandOutcome::succeeded));
  EXPECT_EQ(server_->stats()["/a.bin"]["requests"], 1) << "fetched once";
}

// ClientOptions::on_progress: every interval, every live demand, on the
// delivery thread in order with the terminals: no report of a demand after
// its terminal, and the bytes never go back.
TEST_F(ProgressTest, ProgressReportsComeBeforeTheirDemandsTerminalAndNeverGoBack) {
  server_->hold("/a.bin", kHeldAt);
  std::mutex mutex;
  std::vector<std::pair<std::string, DemandProgress>> log;  // ("report" | "end", ...)
  ClientOptions o = options();
  o.on_progress = [&](const std::vector<DemandProgress>& all) {
    std::lock_guard lock(mutex);
    for (const DemandProgress& p : all) log.emplace_back("report", p);
  };
  Client client(std::move(o));
  std::promise<void> ended;
  DemandHandle a = client.subscribe(ref("a.bin"), owner(1), [&](backend::DemandResult) {
    {
      std::lock_guard lock(mutex);
      DemandProgress end;
      log.emplace_back("end", end);
    }
    ended.set_value();
  });
  wait_for(client, a, [](const std::optional<DemandProgress>& p) {
    return p && p->received >= kHeldAt;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // Some reports while held.
  server_->release("/a.bin");
  ASSERT_EQ(ended.get_future().wait_for(std::chrono::seconds(30)), std::future_status::ready);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // Reports after it, if any.
  std::lock_guard lock(mutex);
  ASSERT_FALSE(log.empty());
  EXPECT_EQ(log.back().first, "end") << "a report came after the terminal";
  std::uint64_t last = 0;
  std::size_t held_reports = 0;
  for (const auto& [what, p] : log) {
    if (what != "report") continue;
    EXPECT_EQ(p.demand, a);
    EXPECT_GE(p.received, last) << "bytes went back";
    last = p.received;
    if (p.stage == Stage::transferring && p.received == static_cast<std::uint64_t>(kHeldAt))
      ++held_reports;
  }
  EXPECT_GE(held_reports, 2u) << "reports every interval while it waited";
}

// Paused in flight: no byte for a while (a stall rule of 0.3 s would have
// cut it off), shown as paused; resumed, the same request goes on.
TEST_F(ProgressTest, APausedTransferStopsReadingWithoutAStallAndResumesWhereItWas) {
  constexpr std::size_t kBig = 1'000'000;
  std::ofstream(dir_ / "www" / "big.bin") << content_of("big.bin", kBig);
  server_->rate(1'000'000);  // About a second for the whole body.
  ClientOptions o = options();
  o.bounds.stall_window_s = 0.3;
  o.bounds.stall_floor_Bps = 1000;
  Client client(std::move(o));
  ArtifactRef big = ref("big.bin");
  big.size_bytes = kBig;
  std::promise<backend::DemandResult> done;
  const DemandHandle h = client.subscribe(
      big, owner(1), [&](backend::DemandResult r) { done.set_value(std::move(r)); });
  wait_for(client, h, [](const std::optional<DemandProgress>& p) {
    return p && p->stage == Stage::transferring && p->received >= 100'000;
  });
  client.pause();
  EXPECT_EQ(client.progress(h)->stage, Stage::paused);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // The hold reaches libcurl.
  const std::uint64_t at_pause = client.progress(h)->received;
  std::this_thread::sleep_for(std::chrono::seconds(1));
  const auto still = client.progress(h);
  ASSERT_TRUE(still) << "ended while paused";
  EXPECT_EQ(still->received, at_pause) << "bytes came while paused";
  EXPECT_LT(at_pause, kBig);
  client.resume();
  auto result = done.get_future();
  ASSERT_EQ(result.wait_for(std::chrono::seconds(30)), std::future_status::ready);
  const backend::DemandResult r = result.get();
  EXPECT_EQ(r.outcome, DemandOutcome::succeeded) << r.reason;
  const auto stats = server_->stats()["/big.bin"];
  EXPECT_EQ(stats["requests"], 1) << "no stall, no second request: " << stats.dump();
}

// Paused before its start: no request until the resume.
TEST_F(ProgressTest, APausedStartSendsNoRequestUntilTheResume) {
  Client client(options());
  client.pause();
  Ends ends;
  const DemandHandle h = client.subscribe(ref("a.bin"), owner(1), ends.callback());
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_FALSE(server_->stats().contains("/a.bin")) << "a request went out while paused";
  ASSERT_TRUE(client.progress(h));
  EXPECT_EQ(client.progress(h)->stage, Stage::paused);
  client.resume();
  ASSERT_TRUE(ends.wait(1));
  EXPECT_EQ(ends.outcomes, std::vector<DemandOutcome>{DemandOutcome::succeeded});
}

// A pause at a level: the tasks at or below it wait, one above goes on, and
// a held one raised above the level goes on too.
TEST_F(ProgressTest, APauseAtALevelHoldsOnlyTasksAtOrBelowIt) {
  ClientOptions o = options();
  o.scheduler.max_transfers = 2;
  Client client(std::move(o));
  client.pause(Priority{0});
  Ends ends;
  DemandOptions low = owner(1);
  DemandOptions high = owner(1);
  high.priority = 5;
  const DemandHandle prefetch = client.subscribe(ref("a.bin"), low, ends.callback());
  client.subscribe(ref("b.bin"), high, ends.callback());
  ASSERT_TRUE(ends.wait(1));
  EXPECT_EQ(ends.outcomes, std::vector<DemandOutcome>{DemandOutcome::succeeded});
  EXPECT_FALSE(server_->stats().contains("/a.bin")) << "the held prefetch was requested";
  EXPECT_EQ(client.progress(prefetch)->stage, Stage::paused);
  client.set_priority(prefetch, 1);  // Above the level: it goes on.
  ASSERT_TRUE(ends.wait(2));
  EXPECT_EQ(ends.outcomes[1], DemandOutcome::succeeded);
}

}  // namespace
}  // namespace dfl::testing
