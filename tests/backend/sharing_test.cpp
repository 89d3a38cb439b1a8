// Where users really share: callers that expect different bytes of one key,
// several Clients (and processes) on one cache directory, pins, hostile
// names and a full disk. Against the loopback server.
#include <gtest/gtest.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <sstream>
#include <thread>

#include "demandflight/backend/cache_dir.h"
#include "demandflight/backend/client.h"
#include "demandflight/backend/sha256.h"
#include "loopback.h"
#include "test_files.h"

namespace dfl::testing {
namespace {

namespace fs = std::filesystem;
using backend::ArtifactRef;
using backend::CacheDir;
using backend::Client;
using backend::ClientOptions;
using backend::DemandResult;

DemandOptions owner(OwnerId id) {
  DemandOptions o;
  o.owner = id;
  o.priority = 1;
  return o;
}

class SharingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() /
           ("dfl-sharing-" + std::to_string(::getpid()) + "-" + info->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "www");
    server_ = std::make_unique<LoopbackServer>(dir_ / "www");
  }
  void TearDown() override {
    server_.reset();
    if (mounted_) ::umount2((dir_ / "cache").c_str(), MNT_DETACH);
    fs::remove_all(dir_);
  }

  // Serves NAME (a path under the server's root) of `size` bytes; its ref
  // carries the right digest.
  ArtifactRef serve(const std::string& name, std::size_t size) {
    const fs::path file = dir_ / "www" / fs::u8path(name);
    fs::create_directories(file.parent_path());
    std::ofstream(file, std::ios::binary) << content_of(name, size);
    ArtifactRef r;
    r.key = ArtifactKey{name, "r1", "pc", 0};
    r.size_bytes = size;
    r.sha256 = backend::Sha256::hex_of(content_of(name, size));
    return r;
  }

  ClientOptions options(std::uint64_t cache_bytes = 2'000'000'000) {
    ClientOptions o;
    o.cache_dir = dir_ / "cache";
    o.resolver = backend::url_template(server_->base() + "/{resource}");
    o.scheduler.max_transfers = 4;
    o.scheduler.max_per_origin = 4;
    o.scheduler.cache_bytes = cache_bytes;
    o.scheduler.retry = RetryConfig{3, 0.05, 0.2, 0.2};
    return o;
  }

  int requests(const std::string& path) {
    const auto stats = server_->stats();
    return stats.contains(path) ? stats[path]["requests"].get<int>() : 0;
  }

  // Mounts a tmpfs of `bytes` as the cache directory; false where mounting
  // is not allowed.
  bool small_disk(std::size_t bytes) {
    fs::create_directories(dir_ / "cache");
    const std::string data = "size=" + std::to_string(bytes);
    if (::mount("tmpfs", (dir_ / "cache").c_str(), "tmpfs", 0, data.c_str()) != 0) return false;
    mounted_ = true;
    return true;
  }

  fs::path dir_;
  std::unique_ptr<LoopbackServer> server_;
  bool mounted_ = false;
};

// --- Expectations belong to the demand ---------------------------------------

TEST_F(SharingTest, RightAndWrongDigestAtOnceShareOneTransferAndOnlyTheWrongOneFails) {
  for (const bool wrong_first : {true, false}) {
    SCOPED_TRACE(wrong_first ? "the wrong digest subscribes first" : "the right one first");
    const std::string name = wrong_first ? "w1.bin" : "w2.bin";
    const ArtifactRef right = serve(name, 300'000);
    ArtifactRef wrong = right;
    wrong.sha256 = backend::Sha256::hex_of("a stale manifest's idea of " + name);
    server_->hold("/" + name, 100'000);  // Both join before the body is judged.
    Client client(options());
    std::future<DemandResult> first = client.fetch(wrong_first ? wrong : right, owner(1));
    std::future<DemandResult> second = client.fetch(wrong_first ? right : wrong, owner(2));
    server_->release("/" + name);
    DemandResult got_wrong = (wrong_first ? first : second).get();
    DemandResult got_right = (wrong_first ? second : first).get();
    EXPECT_EQ(got_right.outcome, DemandOutcome::succeeded) << got_right.reason;
    EXPECT_TRUE(got_right.pin);
    EXPECT_EQ(got_wrong.outcome, DemandOutcome::failed);
    EXPECT_EQ(got_wrong.reason,
              "sha256 mismatch: expected " + *wrong.sha256 + ", got " + *right.sha256);
    EXPECT_FALSE(got_wrong.pin);
    EXPECT_EQ(requests("/" + name), 1) << "one transfer for both, and no retry";
    EXPECT_EQ(read_bytes(client.path_of(right.key)), content_of(name, 300'000));
  }
}

TEST_F(SharingTest, OnlyWrongDigestsFailOnceTheSameBytesComeTwiceEachWithItsOwnMismatch) {
  const ArtifactRef right = serve("x.bin", 200'000);
  ArtifactRef wrong_a = right, wrong_b = right;
  wrong_a.sha256 = backend::Sha256::hex_of("a");
  wrong_b.sha256 = backend::Sha256::hex_of("b");
  server_->hold("/x.bin", 50'000);
  ClientOptions o = options();
  o.scheduler.retry.max_attempts = 5;
  Client client(o);
  auto a = client.fetch(wrong_a, owner(1));
  auto b = client.fetch(wrong_b, owner(2));
  server_->release("/x.bin");
  const DemandResult ra = a.get(), rb = b.get();
  const std::string where = " from " + server_->base() +
                            "/x.bin (the same bytes twice in a row: not fetched again)";
  EXPECT_EQ(ra.outcome, DemandOutcome::failed);
  EXPECT_EQ(ra.reason,
            "sha256 mismatch: expected " + *wrong_a.sha256 + ", got " + *right.sha256 + where);
  EXPECT_EQ(rb.reason,
            "sha256 mismatch: expected " + *wrong_b.sha256 + ", got " + *right.sha256 + where);
  // Two attempts for the task of five allowed, not five (nor five per
  // demand): the second brought the same bytes. Nothing installed.
  EXPECT_EQ(requests("/x.bin"), 2);
  EXPECT_FALSE(fs::exists(client.path_of(right.key)));
}

TEST_F(SharingTest, ADemandWithoutADigestIsNotHeldHostageByAStaleOne) {
  // The origin serves the same bytes twice: they are its artifact, and the
  // caller that expects nothing in particular gets them.
  const ArtifactRef right = serve("y.bin", 200'000);
  ArtifactRef stale = right, any = right;
  stale.sha256 = backend::Sha256::hex_of("stale");
  any.sha256.reset();
  server_->hold("/y.bin", 50'000);
  Client client(options());
  auto s = client.fetch(stale, owner(1));
  auto n = client.fetch(any, owner(2));
  server_->release("/y.bin");
  EXPECT_EQ(n.get().outcome, DemandOutcome::succeeded);
  const DemandResult rs = s.get();
  EXPECT_EQ(rs.outcome, DemandOutcome::failed);
  EXPECT_NE(rs.reason.find("sha256 mismatch"), std::string::npos) << rs.reason;
  EXPECT_EQ(requests("/y.bin"), 2) << "one retry to tell a transfer's accident from the origin";
}

TEST_F(SharingTest, ACacheHitIsJudgedAgainstEachDemandsOwnExpectation) {
  const ArtifactRef right = serve("h.bin", 100'000);
  Client client(options());
  ASSERT_EQ(client.fetch(right, owner(1)).get().outcome, DemandOutcome::succeeded);
  ArtifactRef wrong_size = right, wrong_digest = right;
  wrong_size.size_bytes = 99'999;
  wrong_digest.sha256 = backend::Sha256::hex_of("other");
  const DemandResult by_size = client.fetch(wrong_size, owner(2)).get();
  EXPECT_EQ(by_size.outcome, DemandOutcome::failed);
  EXPECT_EQ(by_size.reason, "size mismatch: expected 99999 bytes, got 100000");
  const DemandResult by_digest = client.fetch(wrong_digest, owner(3)).get();
  EXPECT_EQ(by_digest.outcome, DemandOutcome::failed);
  EXPECT_EQ(by_digest.reason,
            "sha256 mismatch: expected " + *wrong_digest.sha256 + ", got " + *right.sha256);
  EXPECT_EQ(client.fetch(right, owner(4)).get().outcome, DemandOutcome::succeeded);
  EXPECT_EQ(requests("/h.bin"), 1) << "hits, right or wrong, transfer nothing";
}

TEST_F(SharingTest, ConflictingSizesShareOneTransferAndEachIsJudged) {
  const ArtifactRef right = serve("s.bin", 300'000);
  ArtifactRef small = right, large = right;
  small.size_bytes = 250'000;  // Would cut the body short were it enforced for all.
  small.sha256.reset();
  large.size_bytes = 350'000;
  large.sha256.reset();
  server_->hold("/s.bin", 10'000);
  Client client(options());
  auto a = client.fetch(small, owner(1));
  auto b = client.fetch(right, owner(2));
  auto c = client.fetch(large, owner(3));
  server_->release("/s.bin");
  EXPECT_EQ(b.get().outcome, DemandOutcome::succeeded);
  EXPECT_EQ(a.get().reason, "size mismatch: expected 250000 bytes, got 300000");
  EXPECT_EQ(c.get().reason, "size mismatch: expected 350000 bytes, got 300000");
  EXPECT_EQ(requests("/s.bin"), 1);
}

TEST_F(SharingTest, AMalformedDigestIsRefusedNamingTheField) {
  ArtifactRef r = serve("m.bin", 10);
  r.sha256 = "not hex";
  Client client(options());
  try {
    client.subscribe(r, owner(1), [](DemandResult) {});
    FAIL() << "accepted a malformed digest";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("ArtifactRef.sha256"), std::string::npos) << e.what();
  }
}

// --- Several Clients on one cache directory -----------------------------------

TEST_F(SharingTest, TwoClientsOnOneCacheTransferEachArtifactOnceInTotal) {
  std::vector<ArtifactRef> refs;
  for (int i = 0; i < 6; ++i)
    refs.push_back(serve("o" + std::to_string(i) + ".bin", 300'000));
  server_->rate(1'500'000);  // ~0.2 s each: the two clients overlap.
  Client first(options());
  Client second(options());
  std::vector<std::future<DemandResult>> results;
  for (int i = 0; i < 4; ++i)
    results.push_back(first.fetch(refs[i], owner(1)));  // o0..o3
  for (int i = 2; i < 6; ++i)
    results.push_back(second.fetch(refs[i], owner(2)));  // o2..o5: two overlap
  for (auto& f : results) {
    const DemandResult r = f.get();
    EXPECT_EQ(r.outcome, DemandOutcome::succeeded) << r.reason;
  }
  for (const ArtifactRef& r : refs) {
    EXPECT_EQ(requests("/" + r.key.resource), 1) << r.key.resource;
    EXPECT_EQ(read_bytes(first.path_of(r.key)), content_of(r.key.resource, 300'000));
  }
}

// --- Pins ------------------------------------------------------------------------

TEST_F(SharingTest, APinnedObjectSurvivesPressureThatEvictsTheRestAndGoesOnceReleased) {
  std::vector<ArtifactRef> refs;
  for (int i = 0; i < 5; ++i)
    refs.push_back(serve("p" + std::to_string(i) + ".bin", 100'000));
  Client client(options(/*cache_bytes=*/250'000));  // Room for two.
  DemandResult pinned = client.fetch(refs[0], owner(1)).get();
  ASSERT_EQ(pinned.outcome, DemandOutcome::succeeded);
  ASSERT_TRUE(pinned.pin);
  EXPECT_EQ(pinned.pin.path(), client.path_of(refs[0].key));
  for (int i = 1; i < 5; ++i) {
    DemandResult r = client.fetch(refs[i], owner(2)).get();  // Released at once.
    ASSERT_EQ(r.outcome, DemandOutcome::succeeded) << r.reason;
  }
  EXPECT_EQ(read_bytes(client.path_of(refs[0].key)), content_of("p0.bin", 100'000))
      << "pinned: kept";
  EXPECT_FALSE(fs::exists(client.path_of(refs[1].key))) << "unpinned: evicted";
  EXPECT_FALSE(fs::exists(client.path_of(refs[2].key)));
  pinned.pin.release();
  EXPECT_FALSE(pinned.pin);
  ASSERT_EQ(client.fetch(refs[1], owner(2)).get().outcome, DemandOutcome::succeeded);
  EXPECT_FALSE(fs::exists(client.path_of(refs[0].key))) << "released: the oldest goes first";
}

TEST_F(SharingTest, WhenEverythingIsPinnedANewInstallFailsClearlyAndEvictsNothing) {
  const ArtifactRef a = serve("f0.bin", 100'000), b = serve("f1.bin", 100'000),
                    c = serve("f2.bin", 100'000);
  Client client(options(/*cache_bytes=*/250'000));
  DemandResult ra = client.fetch(a, owner(1)).get(), rb = client.fetch(b, owner(1)).get();
  ASSERT_TRUE(ra.pin);
  ASSERT_TRUE(rb.pin);
  const DemandResult rc = client.fetch(c, owner(2)).get();
  EXPECT_EQ(rc.outcome, DemandOutcome::failed);
  EXPECT_NE(rc.reason.find("cache full"), std::string::npos) << rc.reason;
  EXPECT_TRUE(fs::exists(client.path_of(a.key)));
  EXPECT_TRUE(fs::exists(client.path_of(b.key)));
  EXPECT_FALSE(fs::exists(client.path_of(c.key)));
  EXPECT_TRUE(fs::is_empty(dir_ / "cache" / "staging")) << "nothing partial left";
}

TEST_F(SharingTest, EndingTheOwnerReleasesItsPinsAndAPinOutlivesTheClient) {
  const ArtifactRef a = serve("e0.bin", 100'000), b = serve("e1.bin", 100'000);
  DemandResult kept;
  {
    Client client(options());
    DemandResult ra = client.fetch(a, owner(7)).get();
    kept = client.fetch(b, owner(8)).get();
    ASSERT_TRUE(ra.pin);
    client.end_owner(7);
    EXPECT_FALSE(ra.pin) << "owner 7 ended: its pin is released";
    EXPECT_TRUE(kept.pin);
  }
  EXPECT_TRUE(kept.pin) << "a pin is its holder's until released";
  CacheDir other(dir_ / "cache");
  EXPECT_FALSE(other.remove(b.key)) << "held by the pin";
  EXPECT_TRUE(other.remove(a.key)) << "nobody holds it";
  kept.pin.release();
  EXPECT_TRUE(other.remove(b.key));
}

// --- URLs ------------------------------------------------------------------------

TEST_F(SharingTest, NamesThatNeedPercentEncodingAreFetchedAndVerified) {
  const std::vector<std::string> names = {
      "a b.bin",  "rock #2.bin",           "what?.bin",
      "100%.bin", "dir/sub dir/x+y=z.bin", "\xc3\xa9t\xc3\xa9 \xe6\x97\xa5.bin"};
  Client client(options());
  for (const std::string& name : names) {
    const ArtifactRef r = serve(name, 20'000);
    const DemandResult got = client.fetch(r, owner(1)).get();
    EXPECT_EQ(got.outcome, DemandOutcome::succeeded) << name << ": " << got.reason;
    EXPECT_EQ(read_bytes(client.path_of(r.key)), content_of(name, 20'000)) << name;
    EXPECT_EQ(requests("/" + name), 1) << name;
  }
  EXPECT_EQ(backend::percent_encode_path("a b/#?%\xc3\xa9", true), "a%20b/%23%3F%25%C3%A9");
  EXPECT_EQ(backend::percent_encode_path("a/b", false), "a%2Fb");
}

// --- A full disk -----------------------------------------------------------------

TEST_F(SharingTest, AFullDiskFailsCleanlyNamingItAndOtherArtifactsStillInstall) {
  if (!small_disk(3 << 20)) GTEST_SKIP() << "mounting a tmpfs is not allowed here";
  const ArtifactRef big = serve("big.bin", 5 << 20), small = serve("small.bin", 200'000);
  ClientOptions o = options();
  o.pin_on_success = false;
  Client client(o);
  const DemandResult rb = client.fetch(big, owner(1)).get();
  EXPECT_EQ(rb.outcome, DemandOutcome::failed);
  EXPECT_NE(rb.reason.find("disk full"), std::string::npos) << rb.reason;
  EXPECT_FALSE(fs::exists(client.path_of(big.key)));
  EXPECT_TRUE(fs::is_empty(dir_ / "cache" / "staging")) << "nothing partial left";
  const DemandResult rs = client.fetch(small, owner(1)).get();
  EXPECT_EQ(rs.outcome, DemandOutcome::succeeded) << rs.reason;
  EXPECT_EQ(read_bytes(client.path_of(small.key)), content_of("small.bin", 200'000));
}

TEST_F(SharingTest, AFullDiskEvictsUnpinnedObjectsAndTheInstallSucceeds) {
  if (!small_disk(4 << 20)) GTEST_SKIP() << "mounting a tmpfs is not allowed here";
  std::vector<ArtifactRef> old;
  for (int i = 0; i < 3; ++i)
    old.push_back(serve("old" + std::to_string(i) + ".bin", 1 << 20));
  const ArtifactRef fresh = serve("fresh.bin", 5 << 19);  // 2.5 MiB: needs two of them gone.
  ClientOptions o = options();
  Client client(o);
  DemandResult pinned = client.fetch(old[2], owner(1)).get();
  ASSERT_TRUE(pinned.pin);
  for (int i = 0; i < 2; ++i) {
    DemandResult r = client.fetch(old[i], owner(2)).get();  // Unpinned once dropped.
    ASSERT_EQ(r.outcome, DemandOutcome::succeeded) << r.reason;
  }
  const DemandResult rf = client.fetch(fresh, owner(3)).get();
  ASSERT_EQ(rf.outcome, DemandOutcome::succeeded) << rf.reason;
  EXPECT_EQ(read_bytes(client.path_of(fresh.key)), content_of("fresh.bin", 5 << 19));
  EXPECT_EQ(read_bytes(client.path_of(old[2].key)), content_of("old2.bin", 1 << 20))
      << "pinned: kept";
  EXPECT_FALSE(fs::exists(client.path_of(old[0].key))) << "evicted to make room";
}

}  // namespace
}  // namespace dfl::testing
