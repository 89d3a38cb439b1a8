// Background throttling against the loopback server (docs/backend.md,
// *Throttling*): with a critical demand waiting, a prefetch runs at the
// background cap, measured by the bytes the client received; once the critical
// one is served, at full speed again. The overall cap holds every transfer,
// and both caps change at run time. Rates are measured over a second or
// more, with wide bounds: the point is a cap that holds, not its precision.
#include <gtest/gtest.h>
#include <unistd.h>

#include <limits>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <string>
#include <thread>

#include "demandflight/backend/client.h"
#include "loopback.h"
#include "test_files.h"

namespace dfl::testing {
namespace {

namespace fs = std::filesystem;
using backend::ArtifactRef;
using backend::Client;
using backend::ClientOptions;
using Clock = std::chrono::steady_clock;

constexpr double kCap = 2'000'000;  // Bytes per second.

ArtifactRef ref(const std::string& name, std::uint64_t size) {
  ArtifactRef r;
  r.key = ArtifactKey{name, "r1", "pc", 0};
  r.size_bytes = size;
  return r;
}

DemandOptions at(Priority p) {
  DemandOptions o;
  o.priority = p;
  return o;
}

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

class ThrottleTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fresh_test_dir("throttle");
    server_ = std::make_unique<LoopbackServer>(dir_ / "www");
  }
  void TearDown() override {
    server_.reset();
    fs::remove_all(dir_);
  }
  void serve(const std::string& name, std::size_t size) {
    std::ofstream(dir_ / "www" / name, std::ios::binary) << content_of(name, size);
  }
  std::unique_ptr<Client> client(ThrottleConfig throttle) {
    ClientOptions o;
    o.cache_dir = dir_ / "cache";
    o.resolver = backend::url_template(server_->base() + "/{resource}");
    o.throttle = throttle;
    o.pin_on_success = false;
    return std::make_unique<Client>(std::move(o));
  }
  // The rate at which `c` received bodies over `window_s`, summed over its
  // transfers in flight, from its progress snapshots. Not the server's count:
  // that includes what fills the socket buffers, which grow for seconds
  // (under ASan the server's count read 3.26 MB/s against a cap of 2).
  static double received_rate(const Client& c, double window_s) {
    const auto received = [&] {
      double sum = 0;
      for (const auto& t : c.transfers()) sum += static_cast<double>(t.received);
      return sum;
    };
    const double before = received();
    const auto t0 = Clock::now();
    std::this_thread::sleep_for(std::chrono::duration<double>(window_s));
    return (received() - before) / seconds_since(t0);
  }

  fs::path dir_;
  std::unique_ptr<LoopbackServer> server_;
};

TEST_F(ThrottleTest, APrefetchRunsAtTheCapWhileACriticalDemandWaitsAndAtFullSpeedAfter) {
  constexpr std::size_t kBig = 40'000'000;
  serve("prefetch.bin", kBig);
  serve("critical.bin", 200'000);
  auto c = client(ThrottleConfig{0, kCap, 0});
  server_->hold("/critical.bin", 1'000);  // The critical demand waits until released.
  auto critical = c->fetch(ref("critical.bin", 200'000), at(3));
  auto prefetch = c->fetch(ref("prefetch.bin", kBig), at(0));
  std::this_thread::sleep_for(std::chrono::milliseconds(700));
  const double capped = received_rate(*c, 2.0);
  std::printf("prefetch while the critical demand waits: %.2f MB/s (cap %.2f)\n", capped / 1e6,
              kCap / 1e6);
  EXPECT_GT(capped, 0.5 * kCap);
  EXPECT_LT(capped, 1.5 * kCap);
  server_->release("/critical.bin");
  ASSERT_EQ(critical.get().outcome, DemandOutcome::succeeded);
  // Nothing above the background level waits: the cap is off.
  const auto t0 = Clock::now();
  ASSERT_EQ(prefetch.get().outcome, DemandOutcome::succeeded);
  const double rest_s = seconds_since(t0);
  // At the cap, what was left (30 MB or more) would take 15 s or more.
  std::printf("the rest after the critical demand: %.2f s\n", rest_s);
  EXPECT_LT(rest_s, 7.0);
}

TEST_F(ThrottleTest, WithNothingAboveTheLevelWaitingABackgroundTransferIsNotCapped) {
  constexpr std::size_t kSize = 30'000'000;
  serve("alone.bin", kSize);
  auto c = client(ThrottleConfig{0, kCap, 0});
  const auto t0 = Clock::now();
  ASSERT_EQ(c->fetch(ref("alone.bin", kSize), at(0)).get().outcome, DemandOutcome::succeeded);
  // At the cap it would take 15 s.
  EXPECT_LT(seconds_since(t0), 7.0);
}

TEST_F(ThrottleTest, TheOverallCapHoldsEveryTransferAndChangesAtRunTime) {
  constexpr std::size_t kSize = 30'000'000;
  serve("one.bin", kSize);
  serve("two.bin", kSize);
  auto c = client(ThrottleConfig{std::nullopt, 0, kCap});
  auto one = c->fetch(ref("one.bin", kSize), at(3));
  auto two = c->fetch(ref("two.bin", kSize), at(3));
  std::this_thread::sleep_for(std::chrono::milliseconds(700));
  const double together = received_rate(*c, 2.0);
  std::printf("two transfers under an overall cap: %.2f MB/s together (cap %.2f)\n",
              together / 1e6, kCap / 1e6);
  EXPECT_GT(together, 0.5 * kCap);
  EXPECT_LT(together, 1.5 * kCap);
  c->set_throttle(ThrottleConfig{});  // Lifted: both finish at full speed.
  EXPECT_EQ(c->throttle(), ThrottleConfig{});
  const auto t1 = Clock::now();
  ASSERT_EQ(one.get().outcome, DemandOutcome::succeeded);
  ASSERT_EQ(two.get().outcome, DemandOutcome::succeeded);
  EXPECT_LT(seconds_since(t1), 10.0) << "50 MB or more at the cap would take 25 s";
}

TEST_F(ThrottleTest, ACapSetAtRunTimeSlowsATransferInFlight) {
  constexpr std::size_t kSize = 60'000'000;
  serve("big.bin", kSize);
  auto c = client(ThrottleConfig{});
  server_->rate(20'000'000);  // Slow enough to be in flight when the cap comes.
  auto big = c->fetch(ref("big.bin", kSize), at(1));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  c->set_throttle(ThrottleConfig{std::nullopt, 0, kCap});
  std::this_thread::sleep_for(std::chrono::milliseconds(700));
  const double capped = received_rate(*c, 2.0);
  std::printf("after set_throttle: %.2f MB/s received (cap %.2f)\n", capped / 1e6, kCap / 1e6);
  EXPECT_GT(capped, 0.5 * kCap);
  EXPECT_LT(capped, 1.5 * kCap);
  c->set_throttle(ThrottleConfig{});
  server_->rate(0);
  ASSERT_EQ(big.get().outcome, DemandOutcome::succeeded);
}

// Over http:// nothing multiplexes: a transfer must not wait for another to
// the same origin to free its connection (with CURLOPT_PIPEWAIT it did).
TEST_F(ThrottleTest, OverHttp11ATransferDoesNotQueueBehindABusyConnection) {
  serve("held.bin", 200'000);
  serve("free.bin", 200'000);
  auto c = client(ThrottleConfig{});
  server_->hold("/held.bin", 1'000);
  auto held = c->fetch(ref("held.bin", 200'000), at(1));
  EXPECT_EQ(c->fetch(ref("free.bin", 200'000), at(1)).get().outcome, DemandOutcome::succeeded);
  EXPECT_EQ(held.wait_for(std::chrono::seconds(0)), std::future_status::timeout)
      << "the held one is still held";
  server_->release("/held.bin");
  EXPECT_EQ(held.get().outcome, DemandOutcome::succeeded);
}

TEST_F(ThrottleTest, ANegativeOrNonFiniteRateIsRefusedNamingTheField) {
  auto c = client(ThrottleConfig{});
  try {
    c->set_throttle(ThrottleConfig{0, -1, 0});
    FAIL() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("background_Bps"), std::string::npos) << e.what();
  }
  EXPECT_THROW(c->set_throttle(ThrottleConfig{0, 0, std::numeric_limits<double>::infinity()}),
               std::invalid_argument);
  ClientOptions o;
  o.cache_dir = dir_ / "cache2";
  o.resolver = backend::url_template(server_->base() + "/{resource}");
  o.throttle.overall_Bps = -5;
  try {
    Client bad(std::move(o));
    FAIL() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("ClientOptions.throttle.overall_Bps"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace dfl::testing
