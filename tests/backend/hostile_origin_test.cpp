// The Client against an origin that drips, stalls, resets or sends a giant
// header (the loopback server's faults): each attempt ends within its bounds
// (transfer_bounds.h) with a reason naming the URL. These run under the
// sanitizers too (label backend); the same cases through `demandflight fetch`
// are in cli_promises_test.cpp.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <mutex>

#include "demandflight/backend/client.h"
#include "demandflight/backend/sha256.h"
#include "loopback.h"
#include "test_files.h"
#include "words.h"

namespace dfl::testing {
namespace {

namespace fs = std::filesystem;
using backend::ArtifactRef;
using backend::Client;
using backend::ClientOptions;
using backend::DemandResult;

class HostileOrigin : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fresh_test_dir("hostile");
    server_ = std::make_unique<LoopbackServer>(dir_ / "www");
  }
  void TearDown() override {
    server_.reset();
    fs::remove_all(dir_);
  }
  ArtifactRef serve(const std::string& name, std::size_t size) {
    std::ofstream(dir_ / "www" / name, std::ios::binary) << content_of(name, size);
    ArtifactRef r;
    r.key = ArtifactKey{name, "r1", "pc", 0};
    r.size_bytes = size;
    r.sha256 = backend::Sha256::hex_of(content_of(name, size));
    return r;
  }
  ClientOptions options() {
    ClientOptions o;
    o.cache_dir = dir_ / "cache";
    o.resolver = backend::url_template(server_->base() + "/{resource}");
    o.scheduler.retry = RetryConfig{1, 0.05, 0.2, 0.2};  // One attempt: its reason is the demand's.
    o.bounds.stall_window_s = 2;
    return o;
  }
  static DemandOptions owner(OwnerId o) {
    DemandOptions d;
    d.owner = o;
    return d;
  }
  std::string url(const std::string& name) const { return server_->base() + "/" + name; }

  fs::path dir_;
  std::unique_ptr<LoopbackServer> server_;
};

TEST_F(HostileOrigin, ADripIsCutOffByTheStallRuleNamingTheUrl) {
  const ArtifactRef drip = serve("drip.bin", 5'000);
  server_->faults({{{"path", "/drip.bin"}, {"kind", "drip"}, {"drip_Bps", 2}}});
  Client client(options());
  const auto t0 = client.clock_s();
  const DemandResult r = client.fetch(drip, owner(1)).get();
  const double took = client.clock_s() - t0;
  EXPECT_EQ(r.outcome, DemandOutcome::failed);
  EXPECT_EQ(r.reason.rfind("stalled: ", 0), 0u) << r.reason;
  EXPECT_TRUE(says_in_order(r.reason, {" bytes in 2 s from " + url("drip.bin")})) << r.reason;
  EXPECT_GE(took, 2.0);
  EXPECT_LE(took, 6.0) << "the window is 2 s; a generous margin for sanitizers";
}

TEST_F(HostileOrigin, AServerThatStopsMidBodyStallsAndTheNextAttemptResumes) {
  const ArtifactRef held = serve("held.bin", 300'000);
  server_->hold("/held.bin", 100'000);
  ClientOptions o = options();
  o.scheduler.retry = RetryConfig{2, 0.05, 0.2, 0.2};
  Client client(o);
  const DemandResult r = client.fetch(held, owner(1)).get();
  server_->release("/held.bin");
  EXPECT_EQ(r.outcome, DemandOutcome::succeeded) << r.reason;
  const auto stats = server_->stats()["/held.bin"];
  ASSERT_EQ(stats["requests"], 2) << stats.dump();
  EXPECT_GE(stats["ranges"][1][0].get<std::uint64_t>(), 65'536u) << "resumed: " << stats.dump();
  EXPECT_EQ(read_bytes(client.path_of(held.key)), content_of("held.bin", 300'000));
}

TEST_F(HostileOrigin, AResetAndAGiantHeaderSayWhatHappenedAndWhere) {
  const ArtifactRef reset = serve("reset.bin", 600'000);
  const ArtifactRef header = serve("header.bin", 1'000);
  server_->faults({{{"path", "/reset.bin"}, {"kind", "reset"}, {"after_bytes", 200'000}},
                   {{"path", "/header.bin"}, {"kind", "big_header"}}});
  Client client(options());
  auto a = client.fetch(reset, owner(1));
  auto b = client.fetch(header, owner(1));
  const DemandResult ra = a.get(), rb = b.get();
  EXPECT_EQ(ra.reason.rfind("connection reset by peer after ", 0), 0u) << ra.reason;
  EXPECT_TRUE(says_in_order(ra.reason, {" kB of " + url("reset.bin")})) << ra.reason;
  EXPECT_EQ(rb.reason.rfind("response header too large", 0), 0u) << rb.reason;
  EXPECT_NE(rb.reason.find(" from " + url("header.bin")), std::string::npos) << rb.reason;
}

TEST_F(HostileOrigin, AnAttemptPastItsDeadlineEnds) {
  const ArtifactRef slow = serve("slow.bin", 300'000);
  server_->rate(50'000);
  ClientOptions o = options();
  o.bounds.attempt_base_s = 0.5;
  o.bounds.attempt_floor_Bps = 200'000;  // 0.5 s + 1.5 s, where the body needs 6 s.
  Client client(o);
  const DemandResult r = client.fetch(slow, owner(1)).get();
  EXPECT_EQ(r.outcome, DemandOutcome::failed);
  EXPECT_EQ(r.reason.rfind("deadline: ", 0), 0u) << r.reason;
  const auto seconds = number_after(r.reason, " of 300.0 kB in ");
  ASSERT_TRUE(seconds) << r.reason;
  EXPECT_GE(*seconds, 2);
  EXPECT_LE(*seconds, 3);
  EXPECT_NE(r.reason.find(url("slow.bin")), std::string::npos) << r.reason;
}

TEST_F(HostileOrigin, OurOwnThrottleHoldingATransferBackIsNoStall) {
  const ArtifactRef big = serve("capped.bin", 120'000);
  ClientOptions o = options();
  o.bounds.stall_floor_Bps = 30'000;  // Above the cap: without the rule's pause, a stall.
  o.throttle.overall_Bps = 20'000;
  Client client(o);
  const DemandResult r = client.fetch(big, owner(1)).get();
  EXPECT_EQ(r.outcome, DemandOutcome::succeeded) << r.reason;
}

// An observer hears each caller's own verdict: a success the caller's own
// digest contradicts is that caller's failure (what `replay` records).
TEST_F(HostileOrigin, AnObserverHearsTheCallersOwnVerdict) {
  class Outcomes : public backend::ClientObserver {
   public:
    void on_command(double, const Command& c) override {
      if (const auto* d = std::get_if<Deliver>(&c)) {
        std::lock_guard lock(mutex);
        by_slot[d->demand.slot] = d->outcome;
      }
    }
    std::mutex mutex;
    std::map<std::uint32_t, DemandOutcome> by_slot;
  } outcomes;
  const ArtifactRef right = serve("shared.bin", 100'000);
  ArtifactRef stale = right;
  stale.sha256 = backend::Sha256::hex_of("an older build");
  ClientOptions o = options();
  o.observer = &outcomes;
  {
    Client client(o);
    DemandHandle hs{}, hr{};
    std::promise<DemandResult> ps, pr;
    hs = client.subscribe(stale, owner(1), [&](DemandResult r) { ps.set_value(std::move(r)); });
    hr = client.subscribe(right, owner(2), [&](DemandResult r) { pr.set_value(std::move(r)); });
    EXPECT_EQ(ps.get_future().get().outcome, DemandOutcome::failed);
    EXPECT_EQ(pr.get_future().get().outcome, DemandOutcome::succeeded);
    std::lock_guard lock(outcomes.mutex);
    EXPECT_EQ(outcomes.by_slot.at(hs.slot), DemandOutcome::failed);
    EXPECT_EQ(outcomes.by_slot.at(hr.slot), DemandOutcome::succeeded);
  }
}

}  // namespace
}  // namespace dfl::testing
