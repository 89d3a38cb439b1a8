// The client when libcurl fails as a whole rather than a server: a handle it
// cannot make, a transfer its multi handle refuses, a failing transfer loop,
// an option it refuses (backend/src/curl_seam.h makes them fail). Each ends the
// attempt as a retryable failure whose reason says what failed and for which
// URL and resource; with attempts left the artifact still arrives, intact.
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "../../backend/src/curl_seam.h"
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
namespace seam = backend::curl_seam;

constexpr std::size_t kSize = 300'000;

std::string body() { return content_of("a.bin", kSize); }

// How many of the next calls of each kind fail.
std::atomic<int> g_init_failures{0};
std::atomic<int> g_add_failures{0};
std::atomic<int> g_perform_failures{0};
std::atomic<int> g_option_failures{0};
std::atomic<CURLcode> g_option_code{CURLE_OK};

CURL* flaky_easy_init() {
  if (g_init_failures.fetch_sub(1) > 0) return nullptr;
  return curl_easy_init();
}
CURLMcode flaky_add(CURLM* multi, CURL* easy) {
  if (g_add_failures.fetch_sub(1) > 0) return CURLM_OUT_OF_MEMORY;
  return curl_multi_add_handle(multi, easy);
}
// Fails only while a transfer is in the loop, after libcurl did its work.
CURLMcode flaky_perform(CURLM* multi, int* running) {
  const CURLMcode code = curl_multi_perform(multi, running);
  if (*running > 0 && g_perform_failures.fetch_sub(1) > 0) return CURLM_INTERNAL_ERROR;
  return code;
}

// Refuses CURLOPT_PROTOCOLS_STR (libcurl before 7.85 has none).
CURLcode flaky_setopt(CURLoption option) {
  if (option == CURLOPT_PROTOCOLS_STR && g_option_failures.fetch_sub(1) > 0) return g_option_code;
  return CURLE_OK;
}

class CurlFailureTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fresh_test_dir("curl-failure");
    std::ofstream(dir_ / "www" / "a.bin") << body();
    server_ = std::make_unique<LoopbackServer>(dir_ / "www");
    g_init_failures = g_add_failures = g_perform_failures = g_option_failures = 0;
    seam::calls() = seam::Calls{&flaky_easy_init, &flaky_add, &flaky_perform, &flaky_setopt};
  }
  void TearDown() override {
    seam::calls() = seam::Calls{};  // Every Client of the test is gone.
    server_.reset();
    fs::remove_all(dir_);
  }

  std::unique_ptr<Client> client(std::uint32_t max_attempts) {
    ClientOptions o;
    o.cache_dir = dir_ / "cache";
    o.resolver = backend::url_template(server_->base() + "/{resource}");
    o.scheduler.retry = RetryConfig{max_attempts, 0.05, 0.2, 0.2};
    return std::make_unique<Client>(std::move(o));
  }

  static ArtifactRef ref() {
    ArtifactRef r;
    r.key = ArtifactKey{"a.bin", "r1", "pc", 0};
    r.size_bytes = kSize;
    r.sha256 = backend::Sha256::hex_of(body());
    return r;
  }

  static DemandOptions opts() {
    DemandOptions o;
    o.owner = 1;
    return o;
  }

  // One attempt only: the demand fails with the attempt's reason, which
  // names what failed, the URL and the resource.
  void expect_one_attempt_fails_with(const std::string& what) {
    auto c = client(1);
    const auto r = c->fetch(ref(), opts()).get();
    EXPECT_EQ(r.outcome, DemandOutcome::failed);
    EXPECT_NE(r.reason.find(what), std::string::npos) << r.reason;
    EXPECT_NE(r.reason.find(server_->base() + "/a.bin"), std::string::npos) << r.reason;
    EXPECT_FALSE(fs::exists(c->path_of(ref().key)));
  }

  // Attempts left: the artifact arrives whole after the failed attempt.
  void expect_a_retry_installs_it() {
    auto c = client(4);
    const auto r = c->fetch(ref(), opts()).get();
    ASSERT_EQ(r.outcome, DemandOutcome::succeeded) << r.reason;
    EXPECT_EQ(read_bytes(c->path_of(ref().key)), body());
    EXPECT_GE(c->metrics().transfers_failed, 1u);
  }

  fs::path dir_;
  std::unique_ptr<LoopbackServer> server_;
};

TEST_F(CurlFailureTest, AHandleThatCannotBeMadeFailsTheAttemptWithItsReason) {
  g_init_failures = 1;
  expect_one_attempt_fails_with("libcurl could not make a transfer handle");
  g_init_failures = 1;
  expect_a_retry_installs_it();
}

TEST_F(CurlFailureTest, ATransferTheMultiHandleRefusesFailsTheAttemptWithItsReason) {
  g_add_failures = 1;
  expect_one_attempt_fails_with("libcurl refused the transfer (Out of memory)");
  g_add_failures = 1;
  expect_a_retry_installs_it();
}

TEST_F(CurlFailureTest, AFailingTransferLoopFailsTheTransfersInItWithItsReason) {
  g_perform_failures = 1;
  expect_one_attempt_fails_with("libcurl's transfer loop failed (Internal error)");
  g_perform_failures = 1;
  expect_a_retry_installs_it();
}

TEST_F(CurlFailureTest, AnOptionLibcurlLacksFailsTheTaskAtOnceNamingIt) {
  g_option_failures = 100;
  g_option_code = CURLE_UNKNOWN_OPTION;
  auto c = client(4);  // Attempts left, but another would meet the same libcurl.
  const auto r = c->fetch(ref(), opts()).get();
  EXPECT_EQ(r.outcome, DemandOutcome::failed);
  EXPECT_NE(r.reason.find("libcurl refused CURLOPT_PROTOCOLS_STR (An unknown option was passed "
                          "in to libcurl) for " + server_->base() + "/a.bin (a.bin)"),
            std::string::npos)
      << r.reason;
  EXPECT_EQ(c->metrics().transfers_failed, 1u);
  EXPECT_EQ(g_option_failures.load(), 99);  // One attempt.
}

TEST_F(CurlFailureTest, AnOptionRefusedForWantOfMemoryFailsTheAttemptOnly) {
  g_option_code = CURLE_OUT_OF_MEMORY;
  g_option_failures = 1;
  expect_one_attempt_fails_with("libcurl refused CURLOPT_PROTOCOLS_STR (Out of memory)");
  g_option_failures = 1;
  expect_a_retry_installs_it();
}

}  // namespace
}  // namespace dfl::testing
