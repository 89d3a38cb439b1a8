// The libcurl client end to end, against the loopback server: the contracts
// of design.md §3 with real transfers, resume after a dropped connection,
// corrupt bodies, HTTP errors, a server that ignores Range, and reuse of an
// installed artifact by a later process.
#include "demandflight/backend/client.h"

#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <future>
#include <sstream>

#include "demandflight/backend/sha256.h"
#include "loopback.h"

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

class ClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() /
           ("dfl-client-" + std::to_string(::getpid()) + "-" + info->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "www");
    for (char c : {'a', 'b'})
      std::ofstream(dir_ / "www" / (std::string(1, c) + ".bin")) << body(c);
    server_ = std::make_unique<LoopbackServer>(dir_ / "www");
  }
  void TearDown() override {
    server_.reset();
    fs::remove_all(dir_);
  }

  std::unique_ptr<Client> client(std::uint32_t max_attempts = 4) {
    ClientOptions o;
    o.cache_dir = dir_ / "cache";
    o.resolver = backend::url_template(server_->base() + "/{resource}");
    o.scheduler.max_transfers = 4;
    o.scheduler.max_per_origin = 4;
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
  server_->rate(2'000'000);
  auto c = client();
  std::promise<DemandOutcome> cancelled;
  auto kept = c->fetch(ref('a'), opts(1));
  const DemandHandle h =
      c->subscribe(ref('a'), opts(2), [&](DemandOutcome o) { cancelled.set_value(o); });
  c->cancel(h);
  c->cancel(h);  // Idempotent.
  EXPECT_EQ(cancelled.get_future().get(), DemandOutcome::cancelled);
  EXPECT_EQ(kept.get(), DemandOutcome::succeeded);
  EXPECT_EQ(server_->stats()["/a.bin"]["requests"], 1);
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
  EXPECT_EQ(c->fetch(ref('b'), opts(1)).get(), DemandOutcome::succeeded);
  EXPECT_EQ(server_->stats()["/b.bin"]["requests"], 2);
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
  server_->rate(200'000);  // Two seconds: still running when the client goes.
  std::future<DemandOutcome> waiting;
  {
    auto c = client();
    waiting = c->fetch(ref('a'), opts(1));
  }
  EXPECT_EQ(waiting.get(), DemandOutcome::cancelled);
}

}  // namespace
}  // namespace dfl::testing
