// Mirrors against real servers (docs/backend.md, *Mirrors*): two loopback
// servers serve the same files; the first is down, answers 503, or breaks
// off mid-body, and the artifact arrives from the second, resumed where the
// digest or the ETag vouches for the staged bytes and from byte 0 where
// nothing does. The breaker keeps later tasks away from a dead mirror.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <future>
#include <string>
#include <vector>

#include "demandflight/backend/client.h"
#include "demandflight/backend/sha256.h"
#include "loopback.h"
#include "test_files.h"

namespace dfl::testing {
namespace {

namespace fs = std::filesystem;
using backend::ArtifactRef;
using backend::Client;
using backend::ClientOptions;

constexpr std::size_t kSize = 300'000;
constexpr OriginId kFirst = 0, kSecond = 1;

ArtifactRef ref(const std::string& name, bool with_digest) {
  ArtifactRef r;
  r.key = ArtifactKey{name, "r1", "pc", 0};
  r.origin = kFirst;
  r.mirrors = {kSecond};
  r.size_bytes = kSize;
  if (with_digest) r.sha256 = backend::Sha256::hex_of(content_of(name, kSize));
  return r;
}

class MirrorsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fresh_test_dir("mirrors");
    for (int i = 0; i < 6; ++i) {
      const std::string name = "f" + std::to_string(i) + ".bin";
      std::ofstream(dir_ / "www" / name, std::ios::binary) << content_of(name, kSize);
    }
  }
  void TearDown() override { fs::remove_all(dir_); }

  // A client whose origin 0 is `first` and origin 1 is `second` (base URLs).
  std::unique_ptr<Client> client(const std::string& first, const std::string& second,
                                 std::uint32_t breaker_failures = 3) {
    ClientOptions o;
    o.cache_dir = dir_ / "cache";
    o.scheduler.retry = RetryConfig{4, 0.05, 0.2, 0.0};
    o.scheduler.breaker = BreakerConfig{breaker_failures, 60.0};
    o.scheduler.max_transfers = 1;  // One at a time: the order of attempts is the test's.
    o.connect_timeout_ms = 2'000;
    o.resolver = [first, second](const ArtifactKey& key, OriginId origin) {
      return (origin == kFirst ? first : second) + "/" + key.resource;
    };
    return std::make_unique<Client>(std::move(o));
  }

  std::string installed(Client& c, const std::string& name) {
    std::ifstream in(c.path_of(ArtifactKey{name, "r1", "pc", 0}), std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }

  static int requests(LoopbackServer& s, const std::string& path) {
    const auto stats = s.stats();
    return stats.contains(path) ? stats[path]["requests"].get<int>() : 0;
  }

  fs::path dir_;
};

TEST_F(MirrorsTest, TheFirstMirrorDownTheArtifactComesFromTheSecond) {
  LoopbackServer second(dir_ / "www");
  auto c = client("http://127.0.0.1:" + std::to_string(dead_port()), second.base());
  const backend::DemandResult r = c->fetch(ref("f0.bin", true), DemandOptions{}).get();
  ASSERT_EQ(r.outcome, DemandOutcome::succeeded) << r.reason;
  EXPECT_EQ(installed(*c, "f0.bin"), content_of("f0.bin", kSize));
  EXPECT_EQ(requests(second, "/f0.bin"), 1);
  EXPECT_EQ(c->metrics().failovers, 1u);
}

TEST_F(MirrorsTest, A503GoesToTheSecondMirrorAtOnce) {
  LoopbackServer first(dir_ / "www"), second(dir_ / "www");
  first.faults({{{"path", "/f0.bin"}, {"kind", "status"}, {"status", 503}, {"retry_after_s", 30}}});
  auto c = client(first.base(), second.base());
  const double t0 = c->clock_s();
  const backend::DemandResult r = c->fetch(ref("f0.bin", true), DemandOptions{}).get();
  ASSERT_EQ(r.outcome, DemandOutcome::succeeded) << r.reason;
  // The first mirror's Retry-After (30 s) holds back only a retry there.
  EXPECT_LT(c->clock_s() - t0, 20.0);
  EXPECT_EQ(first.stats()["/f0.bin"]["statuses"], nlohmann::json::array({503}));
  EXPECT_EQ(second.stats()["/f0.bin"]["statuses"], nlohmann::json::array({200}));
}

// The first mirror breaks off after 100,000 bytes; its ETags are not the second's.
class MirrorsResumeTest : public MirrorsTest {
 protected:
  nlohmann::json second_ranges(bool with_digest, const std::string& second_salt) {
    LoopbackServer first(dir_ / "www", "first"), second(dir_ / "www", second_salt);
    first.faults({{{"path", "/f1.bin"}, {"kind", "drop"}, {"after_bytes", 100'000}}});
    auto c = client(first.base(), second.base());
    const backend::DemandResult r = c->fetch(ref("f1.bin", with_digest), DemandOptions{}).get();
    EXPECT_EQ(r.outcome, DemandOutcome::succeeded) << r.reason;
    EXPECT_EQ(installed(*c, "f1.bin"), content_of("f1.bin", kSize));
    EXPECT_EQ(requests(first, "/f1.bin"), 1);
    return second.stats()["/f1.bin"]["ranges"];
  }
};

TEST_F(MirrorsResumeTest, WithADigestTheSecondMirrorResumesAfterTheStagedBytes) {
  const auto ranges = second_ranges(/*with_digest=*/true, "second");
  ASSERT_EQ(ranges.size(), 1u);
  EXPECT_EQ(ranges[0][0].get<long>(), 100'000) << ranges.dump();
}

TEST_F(MirrorsResumeTest, WithTheSameETagTheSecondMirrorResumes) {
  const auto ranges = second_ranges(/*with_digest=*/false, "first");
  ASSERT_EQ(ranges.size(), 1u);
  EXPECT_EQ(ranges[0][0].get<long>(), 100'000) << ranges.dump();
}

TEST_F(MirrorsResumeTest, WithNothingToVouchForTheBytesTheSecondMirrorSendsItAll) {
  const auto ranges = second_ranges(/*with_digest=*/false, "second");
  ASSERT_EQ(ranges.size(), 1u);
  EXPECT_TRUE(ranges[0].is_null()) << "a whole body: " << ranges.dump();
}

TEST_F(MirrorsTest, TheBreakerKeepsLaterTasksAwayFromAFailingMirror) {
  LoopbackServer first(dir_ / "www"), second(dir_ / "www");
  nlohmann::json faults = nlohmann::json::array();
  for (int i = 0; i < 6; ++i) {
    faults.push_back({{"path", "/f" + std::to_string(i) + ".bin"},
                      {"kind", "status"},
                      {"status", 503},
                      {"count", 10}});
  }
  first.faults(faults);
  auto c = client(first.base(), second.base(), /*breaker_failures=*/2);
  for (int i = 0; i < 6; ++i) {
    const std::string name = "f" + std::to_string(i) + ".bin";
    const backend::DemandResult r = c->fetch(ref(name, true), DemandOptions{}).get();
    ASSERT_EQ(r.outcome, DemandOutcome::succeeded) << name << ": " << r.reason;
    // Two 503s in a row open the first mirror's breaker: from then on
    // nothing is asked of it.
    EXPECT_EQ(requests(first, "/" + name), i < 2 ? 1 : 0) << name;
    EXPECT_EQ(requests(second, "/" + name), 1) << name;
  }
  EXPECT_EQ(c->metrics().breaker_opens, 1u);
  EXPECT_EQ(c->metrics().failovers, 2u);
}

TEST_F(MirrorsTest, ManyCallersOfAFailingOverTaskGetOneTerminalEach) {
  LoopbackServer second(dir_ / "www");
  auto c = client("http://127.0.0.1:" + std::to_string(dead_port()), second.base());
  std::vector<std::future<backend::DemandResult>> waits;
  for (OwnerId owner = 1; owner <= 5; ++owner) {
    DemandOptions o;
    o.owner = owner;
    waits.push_back(c->fetch(ref("f2.bin", true), o));
  }
  for (auto& w : waits) {
    const backend::DemandResult r = w.get();
    EXPECT_EQ(r.outcome, DemandOutcome::succeeded) << r.reason;
  }
  EXPECT_EQ(requests(second, "/f2.bin"), 1);
}

TEST_F(MirrorsTest, EveryMirrorFailingFailsTheDemandWithTheLastReason) {
  auto c = client("http://127.0.0.1:" + std::to_string(dead_port()),
                  "http://127.0.0.1:" + std::to_string(dead_port()));
  const backend::DemandResult r = c->fetch(ref("f3.bin", true), DemandOptions{}).get();
  EXPECT_EQ(r.outcome, DemandOutcome::failed);
  EXPECT_NE(r.reason.find("onnect"), std::string::npos) << "[" << r.reason << "]";
}

TEST_F(MirrorsTest, TooManyMirrorsIsRefusedNamingTheField) {
  auto c = client("http://127.0.0.1:1", "http://127.0.0.1:1");
  ArtifactRef r = ref("f4.bin", true);
  r.mirrors.assign(kMaxOriginsPerArtifact, kSecond);
  try {
    c->subscribe(r, DemandOptions{}, [](backend::DemandResult) {});
    FAIL() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("ArtifactRef.mirrors"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace dfl::testing
