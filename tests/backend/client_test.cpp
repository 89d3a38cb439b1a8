// The libcurl client end to end, against the loopback server: the contracts
// of docs/design.md §3 with real transfers, resume after a dropped connection,
// corrupt bodies, HTTP errors, a server that ignores Range, and reuse of an
// installed artifact by a later process.
#include "demandflight/backend/client.h"

#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

#include "demandflight/backend/sha256.h"
#include "loopback.h"
#include "test_files.h"

namespace dfl::testing {
namespace {

namespace fs = std::filesystem;
using backend::ArtifactRef;
using backend::Client;
using backend::ClientOptions;

constexpr std::size_t kSize = 400'000;

std::string body(char seed) {
  std::string out(kSize, '\0');
  for (std::size_t i = 0; i < kSize; ++i)
    out[i] = static_cast<char>((i * 31 + seed) % 251);
  return out;
}

std::string read(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Records the order in which transfers start and end (called under the
// client's lock; read once the client is gone or idle).
class TransferLog : public backend::ClientObserver {
 public:
  void on_command(double, const Command& command) override {
    std::lock_guard lock(mutex_);
    if (const auto* s = std::get_if<StartTransfer>(&command)) {
      events_.push_back("start " + s->key->resource);
      ++running_;
      max_running_ = std::max(max_running_, running_);
    }
  }
  void on_transfer_ended(double, TaskId, TransferId, std::uint64_t, bool) override {
    std::lock_guard lock(mutex_);
    events_.push_back("end");
    --running_;
  }
  std::vector<std::string> starts() const {
    std::lock_guard lock(mutex_);
    std::vector<std::string> out;
    for (const auto& e : events_) {
      if (e.rfind("start ", 0) == 0) out.push_back(e.substr(6));
    }
    return out;
  }
  int max_running() const {
    std::lock_guard lock(mutex_);
    return max_running_;
  }

 private:
  mutable std::mutex mutex_;
  std::vector<std::string> events_;
  int running_ = 0, max_running_ = 0;
};

// Counts each demand's terminals, to prove there is exactly one.
struct Terminals {
  std::mutex mutex;
  std::condition_variable cv;
  std::map<int, std::vector<DemandOutcome>> by_demand;
  backend::Client::Callback callback(int demand) {
    return [this, demand](DemandOutcome o) {
      std::lock_guard lock(mutex);
      by_demand[demand].push_back(o);
      cv.notify_all();
    };
  }
  void wait_for(std::size_t demands) {
    std::unique_lock lock(mutex);
    ASSERT_TRUE(
        cv.wait_for(lock, std::chrono::seconds(30), [&] { return by_demand.size() >= demands; }));
  }
};

class ClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fresh_test_dir("client");
    for (char c : {'a', 'b', 'c'})
      std::ofstream(dir_ / "www" / (std::string(1, c) + ".bin")) << body(c);
    server_ = std::make_unique<LoopbackServer>(dir_ / "www");
  }
  void TearDown() override {
    server_.reset();
    fs::remove_all(dir_);
  }

  std::unique_ptr<Client> client(std::uint32_t max_attempts = 4, std::uint32_t max_transfers = 4,
                                 backend::ClientObserver* observer = nullptr) {
    ClientOptions o;
    o.observer = observer;
    o.cache_dir = dir_ / "cache";
    o.resolver = backend::url_template(server_->base() + "/{resource}");
    o.scheduler.max_transfers = max_transfers;
    o.scheduler.max_per_origin = max_transfers;
    o.scheduler.retry = RetryConfig{max_attempts, 0.05, 0.2, 0.2};
    return std::make_unique<Client>(std::move(o));
  }

  static ArtifactRef ref(char c, bool with_digest = true) {
    ArtifactRef r;
    r.key = ArtifactKey{std::string(1, c) + ".bin", "r1", "pc", 0};
    r.size_bytes = kSize;
    if (with_digest) r.sha256 = backend::Sha256::hex_of(body(c));
    return r;
  }

  static DemandOptions opts(OwnerId owner, Priority p = 1) {
    DemandOptions o;
    o.owner = owner;
    o.priority = p;
    return o;
  }

  fs::path dir_;
  std::unique_ptr<LoopbackServer> server_;
};

TEST_F(ClientTest, AFetchInstallsTheVerifiedBytes) {
  auto c = client();
  EXPECT_EQ(c->fetch(ref('a'), opts(1)).get(), DemandOutcome::succeeded);
  EXPECT_EQ(read(c->path_of(ref('a').key)), body('a'));
  EXPECT_EQ(server_->stats()["/a.bin"]["requests"], 1);
}

TEST_F(ClientTest, Contract1_CallersOfOneKeyShareOnePhysicalTransfer) {
  server_->rate(2'000'000);  // About 0.2 s: the three calls overlap it.
  auto c = client();
  auto f1 = c->fetch(ref('a'), opts(1, 0));
  auto f2 = c->fetch(ref('a'), opts(2, 3));
  auto f3 = c->fetch(ref('a'), opts(3, 1));
  EXPECT_EQ(f1.get(), DemandOutcome::succeeded);
  EXPECT_EQ(f2.get(), DemandOutcome::succeeded);
  EXPECT_EQ(f3.get(), DemandOutcome::succeeded);
  EXPECT_EQ(server_->stats()["/a.bin"]["requests"], 1);
  EXPECT_EQ(c->stats().installs, 1u);
}

TEST_F(ClientTest, Contract2_CancellingOneDemandLeavesTheOtherToSucceed) {
  server_->hold("/a.bin", 100'000);  // In flight until the cancel is done.
  auto c = client();
  std::promise<DemandOutcome> cancelled;
  auto kept = c->fetch(ref('a'), opts(1));
  const DemandHandle h =
      c->subscribe(ref('a'), opts(2), [&](DemandOutcome o) { cancelled.set_value(o); });
  c->cancel(h);
  c->cancel(h);  // Idempotent.
  EXPECT_EQ(cancelled.get_future().get(), DemandOutcome::cancelled);
  server_->release("/a.bin");
  EXPECT_EQ(kept.get(), DemandOutcome::succeeded);
  EXPECT_EQ(server_->stats()["/a.bin"]["requests"], 1);
}

TEST_F(ClientTest, Contract3_CancellingTheTopDemandReordersTheQueueAtOnce) {
  // One slot, held by b. Queued behind it: a (asked at 5 and at 0) and c (at
  // 2). Cancelling a's 5 drops a to 0 at once, so c goes first.
  server_->hold("/b.bin", 100'000);  // b holds the slot until the calls are made.
  TransferLog log;
  auto c = client(4, /*max_transfers=*/1, &log);
  auto blocker = c->fetch(ref('b'), opts(1, 9));
  std::promise<DemandOutcome> top;
  const DemandHandle urgent =
      c->subscribe(ref('a'), opts(2, 5), [&](DemandOutcome o) { top.set_value(o); });
  auto low = c->fetch(ref('a'), opts(3, 0));
  auto middle = c->fetch(ref('c'), opts(4, 2));
  c->cancel(urgent);
  EXPECT_EQ(top.get_future().get(), DemandOutcome::cancelled);
  server_->release("/b.bin");
  EXPECT_EQ(blocker.get(), DemandOutcome::succeeded);
  EXPECT_EQ(middle.get(), DemandOutcome::succeeded);
  EXPECT_EQ(low.get(), DemandOutcome::succeeded);
  EXPECT_EQ(log.starts(), (std::vector<std::string>{"b.bin", "c.bin", "a.bin"}));
}

TEST_F(ClientTest, Contract3_RaisingADemandReordersTheQueue) {
  server_->hold("/b.bin", 100'000);  // b holds the slot until the raise is made.
  TransferLog log;
  auto c = client(4, /*max_transfers=*/1, &log);
  auto blocker = c->fetch(ref('b'), opts(1, 9));
  auto first = c->fetch(ref('c'), opts(2, 2));
  std::promise<DemandOutcome> raised;
  const DemandHandle h =
      c->subscribe(ref('a'), opts(3, 0), [&](DemandOutcome o) { raised.set_value(o); });
  c->set_priority(h, 7);
  server_->release("/b.bin");
  EXPECT_EQ(raised.get_future().get(), DemandOutcome::succeeded);
  EXPECT_EQ(first.get(), DemandOutcome::succeeded);
  blocker.get();
  EXPECT_EQ(log.starts(), (std::vector<std::string>{"b.bin", "a.bin", "c.bin"}));
}

TEST_F(ClientTest, Contract4_OneRetryChainOneInstallAndOneTerminalPerDemand) {
  // Two failed attempts (a 503, then a dropped body), then success: three
  // callers share one task, one install, and each hears exactly once.
  server_->faults({{{"path", "/a.bin"}, {"kind", "status"}, {"status", 503}},
                   {{"path", "/a.bin"}, {"kind", "drop"}, {"after_bytes", 50'000}}});
  auto c = client();
  Terminals terminals;
  for (int d = 0; d < 3; ++d)
    c->subscribe(ref('a'), opts(static_cast<OwnerId>(d + 1), d), terminals.callback(d));
  terminals.wait_for(3);
  EXPECT_EQ(server_->stats()["/a.bin"]["requests"], 3);
  EXPECT_EQ(c->stats().installs, 1u);
  EXPECT_EQ(c->stats().transfers_started, 3u);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // Time for a stray second one.
  std::lock_guard lock(terminals.mutex);
  for (const auto& [demand, outcomes] : terminals.by_demand) {
    EXPECT_EQ(outcomes, std::vector<DemandOutcome>{DemandOutcome::succeeded}) << demand;
  }
  EXPECT_EQ(read(c->path_of(ref('a').key)), body('a'));
}

TEST_F(ClientTest, Contract5_AnEndedDemandIsNeverToldSuccess) {
  // The transfer runs to success; in the meantime one demand times out, one
  // owner ends, one demand is cancelled, and a demand of a stale owner
  // generation arrives. None of them hears success; the survivor does.
  server_->hold("/a.bin", 100'000);  // In flight until the five have ended.
  auto c = client();
  Terminals terminals;
  c->subscribe(ref('a'), opts(1, 1), terminals.callback(0));  // The survivor.
  DemandOptions short_deadline = opts(2, 1);
  short_deadline.deadline_s = c->clock_s() + 0.05;
  c->subscribe(ref('a'), short_deadline, terminals.callback(1));
  c->subscribe(ref('a'), opts(3, 4), terminals.callback(2));
  const DemandHandle cancelled = c->subscribe(ref('a'), opts(4, 2), terminals.callback(3));
  DemandOptions current = opts(5, 1);
  current.owner_generation = 1;
  c->subscribe(ref('a'), current, terminals.callback(4));
  c->end_owner(3);
  c->cancel(cancelled);
  c->end_owner(5, 1);  // Owner 5 moves to generation 2...
  DemandOptions stale = opts(5, 1);
  stale.owner_generation = 1;  // ...so a demand of generation 1 is refused.
  c->subscribe(ref('a'), stale, terminals.callback(5));
  terminals.wait_for(5);
  server_->release("/a.bin");
  terminals.wait_for(6);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  std::lock_guard lock(terminals.mutex);
  using O = DemandOutcome;
  const std::map<int, std::vector<O>> expected = {{0, {O::succeeded}},   {1, {O::timed_out}},
                                                  {2, {O::owner_ended}}, {3, {O::cancelled}},
                                                  {4, {O::owner_ended}}, {5, {O::owner_ended}}};
  EXPECT_EQ(terminals.by_demand, expected);
  EXPECT_EQ(server_->stats()["/a.bin"]["requests"], 1);
}

TEST_F(ClientTest, ThePerOriginLimitHoldsWithFreeGlobalSlots) {
  server_->rate(4'000'000);
  TransferLog log;
  ClientOptions o;
  o.cache_dir = dir_ / "cache";
  o.resolver = backend::url_template(server_->base() + "/{resource}");
  o.scheduler.max_transfers = 4;
  o.scheduler.max_per_origin = 1;
  o.observer = &log;
  Client c(std::move(o));
  std::vector<std::future<backend::DemandResult>> all;
  for (char name : {'a', 'b', 'c'})
    all.push_back(c.fetch(ref(name), opts(1)));
  for (auto& f : all)
    EXPECT_EQ(f.get(), DemandOutcome::succeeded);
  EXPECT_EQ(log.max_running(), 1);
}

TEST_F(ClientTest, ResumeAfterADroppedConnectionFetchesOnlyWhatWasMissing) {
  server_->faults({{{"path", "/a.bin"}, {"kind", "drop"}, {"after_bytes", 100'000}}});
  auto c = client();
  EXPECT_EQ(c->fetch(ref('a'), opts(1)).get(), DemandOutcome::succeeded);
  EXPECT_EQ(read(c->path_of(ref('a').key)), body('a'));
  const auto s = server_->stats()["/a.bin"];
  EXPECT_EQ(s["requests"], 2);
  EXPECT_EQ(s["bytes_sent"], kSize) << "no byte was sent twice";
  EXPECT_EQ(s["ranges"][1], nlohmann::json::parse("[100000, 399999]"));
}

TEST_F(ClientTest, KeepPartialResumesTheNextDemandFromTheKeptBytes) {
  server_->hold("/a.bin", 200'000);  // Half the body, then parked.
  ClientOptions o;
  o.cache_dir = dir_ / "cache";
  o.resolver = backend::url_template(server_->base() + "/{resource}");
  o.orphan_policy = "keep-partial";
  Client c(std::move(o));
  Terminals terminals;
  const DemandHandle first = c.subscribe(ref('a'), opts(1), terminals.callback(0));
  // Wait until the engine has heard of the bytes (snapshots are published
  // with the progress it is told), not for a time.
  auto received = [&] {
    const auto in_flight = c.transfers();
    return in_flight.empty() ? std::uint64_t{0} : in_flight.front().received;
  };
  for (int i = 0; i < 3000 && received() < 100'000; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_GE(received(), 100'000u) << "the transfer never got going";
  c.cancel(first);  // Half is in: kept, not thrown away.
  terminals.wait_for(1);
  server_->release("/a.bin");
  for (int i = 0; i < 200 && !c.transfers().empty(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(c.fetch(ref('a'), opts(2)).get(), DemandOutcome::succeeded);
  EXPECT_EQ(read(c.path_of(ref('a').key)), body('a'));
  const auto s = server_->stats()["/a.bin"];
  ASSERT_EQ(s["requests"], 2);
  ASSERT_EQ(s["ranges"].size(), 2u) << s.dump();
  ASSERT_TRUE(s["ranges"][1].is_array()) << "the second request asked for no range: " << s.dump();
  const auto resumed_from = s["ranges"][1][0].get<std::uint64_t>();
  EXPECT_GT(resumed_from, 50'000u) << "the second request starts after the kept bytes";
  EXPECT_EQ(s["ranges"][1][1], kSize - 1);
}

TEST_F(ClientTest, ACorruptBodyIsNeverInstalledAndIsFetchedAgain) {
  server_->faults({{{"path", "/a.bin"}, {"kind", "wrong_bytes"}, {"after_bytes", 5000}}});
  auto c = client();
  EXPECT_EQ(c->fetch(ref('a'), opts(1)).get(), DemandOutcome::succeeded);
  EXPECT_EQ(read(c->path_of(ref('a').key)), body('a'));
  EXPECT_EQ(server_->stats()["/a.bin"]["requests"], 2);
}

TEST_F(ClientTest, ABodyCorruptOnEveryAttemptFailsAndLeavesNoObject) {
  server_->faults(
      {{{"path", "/a.bin"}, {"kind", "wrong_bytes"}, {"after_bytes", 5000}, {"count", 2}}});
  auto c = client(/*max_attempts=*/2);
  EXPECT_EQ(c->fetch(ref('a'), opts(1)).get(), DemandOutcome::failed);
  EXPECT_FALSE(fs::exists(c->path_of(ref('a').key)));
  EXPECT_TRUE(fs::is_empty(dir_ / "cache" / "staging"));
}

TEST_F(ClientTest, A404FailsAtOnceAndA503IsRetried) {
  auto c = client();
  ArtifactRef missing = ref('a');
  missing.key.resource = "missing.bin";
  missing.sha256.reset();
  EXPECT_EQ(c->fetch(missing, opts(1)).get(), DemandOutcome::failed);
  EXPECT_EQ(server_->stats()["/missing.bin"]["requests"], 1) << "a 404 is not retried";

  server_->faults(
      {{{"path", "/b.bin"}, {"kind", "status"}, {"status", 503}, {"retry_after_s", 1}}});
  const auto asked = std::chrono::steady_clock::now();
  EXPECT_EQ(c->fetch(ref('b'), opts(1)).get(), DemandOutcome::succeeded);
  EXPECT_EQ(server_->stats()["/b.bin"]["requests"], 2);
  // The backoff alone is 0.05 s; the server asked for a second and got it.
  EXPECT_GE(std::chrono::steady_clock::now() - asked, std::chrono::milliseconds(950));
}

TEST_F(ClientTest, A429WithRetryAfterIsRetriedNoSoonerThanAsked) {
  server_->faults(
      {{{"path", "/a.bin"}, {"kind", "status"}, {"status", 429}, {"retry_after_s", 1}}});
  auto c = client();
  const auto asked = std::chrono::steady_clock::now();
  EXPECT_EQ(c->fetch(ref('a'), opts(1)).get(), DemandOutcome::succeeded);
  EXPECT_EQ(server_->stats()["/a.bin"]["statuses"], nlohmann::json::parse("[429, 200]"));
  EXPECT_GE(std::chrono::steady_clock::now() - asked, std::chrono::milliseconds(950));
}

TEST_F(ClientTest, AServerThatIgnoresRangeOnResumeGivesTheWholeBodyAgain) {
  server_->faults({{{"path", "/a.bin"}, {"kind", "drop"}, {"after_bytes", 100'000}},
                   {{"path", "/a.bin"}, {"kind", "ignore_range"}}});
  auto c = client();
  EXPECT_EQ(c->fetch(ref('a'), opts(1)).get(), DemandOutcome::succeeded);
  EXPECT_EQ(read(c->path_of(ref('a').key)), body('a')) << "the 200 replaced the staged bytes";
  EXPECT_EQ(server_->stats()["/a.bin"]["statuses"], nlohmann::json::parse("[200, 200]"));
}

TEST_F(ClientTest, ALaterProcessFindsTheInstalledArtifactWithoutATransfer) {
  client()->fetch(ref('a'), opts(1)).get();
  auto again = client();  // A new process over the same cache directory.
  EXPECT_EQ(again->fetch(ref('a'), opts(1)).get(), DemandOutcome::succeeded);
  EXPECT_EQ(server_->stats()["/a.bin"]["requests"], 1);
  EXPECT_EQ(again->stats().cache_hits, 1u);
}

TEST_F(ClientTest, ACallbackMayCallBackIntoTheClient) {
  auto c = client();
  std::promise<DemandOutcome> second;
  std::promise<DemandOutcome> first;
  c->subscribe(ref('a'), opts(1), [&](DemandOutcome o) {
    first.set_value(o);
    c->subscribe(ref('b'), opts(1), [&](DemandOutcome o2) { second.set_value(o2); });
  });
  EXPECT_EQ(first.get_future().get(), DemandOutcome::succeeded);
  EXPECT_EQ(second.get_future().get(), DemandOutcome::succeeded);
}

TEST_F(ClientTest, DestroyingTheClientCancelsWhatStillWaits) {
  server_->hold("/a.bin", 100'000);  // Still running when the client goes.
  std::future<backend::DemandResult> waiting;
  {
    auto c = client();
    waiting = c->fetch(ref('a'), opts(1));
  }
  EXPECT_EQ(waiting.get(), DemandOutcome::cancelled);
  server_->release("/a.bin");
}

}  // namespace
}  // namespace dfl::testing
