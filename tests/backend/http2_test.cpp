// The client over HTTP/2 against nginx (TLS with a certificate the test
// makes, and prior knowledge over http://): transfers are streams of one
// connection, an abort resets its stream only, resume and a corrupt body
// behave as on HTTP/1.1, and each request carries its task's priority as it
// leaves. nginx's access log is the witness (which connection, which
// protocol, which Priority and Range headers, whether the response ended).
#include <curl/curl.h>
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <limits>
#include <set>
#include <thread>

#include "demandflight/backend/client.h"
#include "demandflight/backend/sha256.h"
#include "nginx.h"
#include "test_files.h"

namespace dfl::testing {
namespace {

namespace fs = std::filesystem;
using backend::ArtifactRef;
using backend::Client;
using backend::ClientOptions;
using backend::HttpVersion;

constexpr std::size_t kSmall = 200'000;
constexpr std::size_t kSlow = 600'000;  // Served at 300 KB/s: about 2 s.

class Http2Test : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() /
           ("dfl-h2-" + std::to_string(::getpid()) + "-" + info->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "www" / "slow");
    // nginx's worker may run as another user: the files must be readable.
    fs::permissions(dir_, fs::perms::owner_all | fs::perms::group_exec | fs::perms::others_exec);
    for (int i = 0; i < 24; ++i) write("f" + std::to_string(i) + ".bin", kSmall);
    for (const char* name : {"slow/a.bin", "slow/b.bin", "slow/c.bin"}) write(name, kSlow);
    server_ = std::make_unique<Nginx>(dir_ / "www", dir_ / "nginx", 300'000);
  }
  void TearDown() override {
    server_.reset();
    fs::remove_all(dir_);
  }

  void write(const std::string& name, std::size_t size) {
    std::ofstream(dir_ / "www" / name, std::ios::binary) << content_of(name, size);
  }

  std::unique_ptr<Client> client(HttpVersion http = HttpVersion::negotiate,
                                 std::uint32_t slots = 8,
                                 const std::string& policy = "always-abort") {
    ClientOptions o;
    o.cache_dir = dir_ / "cache";
    const std::string base =
        http == HttpVersion::h2_prior_knowledge ? server_->plain_base() : server_->https_base();
    o.resolver = backend::url_template(base + "/{resource}");
    o.ca_file = server_->certificate();
    o.http = http;
    o.orphan_policy = policy;
    o.scheduler.max_transfers = slots;
    o.scheduler.max_per_origin = slots;
    o.scheduler.retry = RetryConfig{2, 0.05, 0.2, 0.2};
    o.pin_on_success = false;
    return std::make_unique<Client>(std::move(o));
  }

  static ArtifactRef ref(const std::string& name, std::size_t size) {
    ArtifactRef r;
    r.key = ArtifactKey{name, "r1", "pc", 0};
    r.size_bytes = size;
    r.sha256 = backend::Sha256::hex_of(content_of(name, size));
    return r;
  }
  static DemandOptions opts(OwnerId owner, Priority p = 0) {
    DemandOptions o;
    o.owner = owner;
    o.priority = p;
    return o;
  }

  // The log lines of `uri`, waiting a little for nginx to write them.
  std::vector<NginxLogLine> lines_of(const std::string& uri, std::size_t at_least = 1) {
    std::vector<NginxLogLine> out;
    for (int i = 0; i < 200; ++i) {
      out.clear();
      for (auto& l : server_->log())
        if (l.uri == uri) out.push_back(l);
      if (out.size() >= at_least) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return out;
  }

  static void wait_for_bytes(Client& c, const std::string& resource, std::uint64_t bytes) {
    auto received = [&] {
      for (const auto& t : c.transfers())
        if (t.key.resource == resource) return t.received;
      return std::uint64_t{0};
    };
    for (int i = 0; i < 3000 && received() < bytes; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    ASSERT_GE(received(), bytes) << resource << " never got going";
  }

  fs::path dir_;
  std::unique_ptr<Nginx> server_;
};

TEST_F(Http2Test, ManyTransfersAreStreamsOfOneConnection) {
  auto c = client();
  std::vector<std::future<backend::DemandResult>> results;
  for (int i = 0; i < 24; ++i)
    results.push_back(c->fetch(ref("f" + std::to_string(i) + ".bin", kSmall), opts(1)));
  for (int i = 0; i < 24; ++i) {
    const auto r = results[static_cast<std::size_t>(i)].get();
    ASSERT_EQ(r.outcome, DemandOutcome::succeeded) << r.reason;
    const std::string name = "f" + std::to_string(i) + ".bin";
    EXPECT_EQ(read_bytes(c->path_of(ref(name, kSmall).key)), content_of(name, kSmall));
  }
  std::set<std::string> connections;
  for (const auto& l : server_->log()) {
    EXPECT_EQ(l.protocol, "HTTP/2.0") << l.uri;
    EXPECT_EQ(l.status, 200);
    connections.insert(l.connection);
  }
  EXPECT_EQ(server_->log().size(), 24u);
  EXPECT_EQ(connections.size(), 1u) << "24 transfers, 8 at a time, one connection";
}

TEST_F(Http2Test, OverHttp11TheSameTransfersTakeAConnectionEach) {
  // The contrast that shows the test above can fail: HTTP/1.1 to the same
  // server opens a connection per busy slot. The three slow files (300 KB/s
  // each) keep their transfers busy together whatever the machine's speed
  // (fast files could each end before the next starts, under TSan, and then
  // share one kept-alive connection).
  auto c = client(HttpVersion::http1_1);
  std::vector<std::future<backend::DemandResult>> results;
  for (const char* name : {"slow/a.bin", "slow/b.bin", "slow/c.bin"})
    results.push_back(c->fetch(ref(name, kSlow), opts(1)));
  for (auto& r : results)
    ASSERT_EQ(r.get().outcome, DemandOutcome::succeeded);
  std::set<std::string> connections;
  for (const auto& l : server_->log()) {
    EXPECT_EQ(l.protocol, "HTTP/1.1");
    connections.insert(l.connection);
  }
  EXPECT_GT(connections.size(), 1u);
}

TEST_F(Http2Test, PriorKnowledgeSpeaksHttp2OverPlainHttp) {
  if (curl_version_info(CURLVERSION_NOW)->version_num < 0x080000) {
    // This libcurl fails every request that reuses a prior-knowledge
    // connection: the client refuses the setting, naming the version.
    try {
      client(HttpVersion::h2_prior_knowledge);
      FAIL() << "a client with HTTP/2 by prior knowledge on libcurl < 8";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("libcurl 8.0"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(curl_version_info(CURLVERSION_NOW)->version),
                std::string::npos)
          << e.what();
    }
    return;
  }
  auto c = client(HttpVersion::h2_prior_knowledge);
  for (const char* name : {"f1.bin", "f2.bin"}) {
    const auto r = c->fetch(ref(name, kSmall), opts(1)).get();
    ASSERT_EQ(r.outcome, DemandOutcome::succeeded) << name << ": " << r.reason;
  }
  const auto log = server_->log();
  ASSERT_EQ(log.size(), 2u);
  EXPECT_EQ(log[0].protocol, "HTTP/2.0");
  EXPECT_EQ(log[0].connection, log[1].connection);
}

TEST_F(Http2Test, AnAbortResetsItsStreamAndLeavesItsSiblingsRunning) {
  auto c = client();
  auto a = c->subscribe(ref("slow/a.bin", kSlow), opts(1), [](backend::DemandResult) {});
  auto b = c->fetch(ref("slow/b.bin", kSlow), opts(2));
  auto cc = c->fetch(ref("slow/c.bin", kSlow), opts(3));
  wait_for_bytes(*c, "slow/a.bin", 100'000);
  c->cancel(a);  // Nobody else waits for a: always-abort stops its transfer.
  const auto rb = b.get(), rc = cc.get();
  EXPECT_EQ(rb.outcome, DemandOutcome::succeeded) << rb.reason;
  EXPECT_EQ(rc.outcome, DemandOutcome::succeeded) << rc.reason;
  const auto la = lines_of("/slow/a.bin"), lb = lines_of("/slow/b.bin"), lc = lines_of("/slow/c.bin");
  ASSERT_EQ(la.size(), 1u);
  ASSERT_EQ(lb.size(), 1u);
  ASSERT_EQ(lc.size(), 1u);
  EXPECT_FALSE(la[0].complete) << "a's response was cut short";
  EXPECT_LT(la[0].bytes, static_cast<long>(kSlow));
  EXPECT_TRUE(lb[0].complete);
  EXPECT_TRUE(lc[0].complete);
  // One connection carried all three: the abort reset a's stream, not it.
  EXPECT_EQ(la[0].connection, lb[0].connection);
  EXPECT_EQ(lb[0].connection, lc[0].connection);
  // And the connection still serves.
  ASSERT_EQ(c->fetch(ref("f3.bin", kSmall), opts(4)).get().outcome, DemandOutcome::succeeded);
  EXPECT_EQ(lines_of("/f3.bin").at(0).connection, la[0].connection);
}

TEST_F(Http2Test, AKeptPartialResumesWithARangeRequestOnTheStream) {
  auto c = client(HttpVersion::negotiate, 8, "keep-partial");
  auto first = c->subscribe(ref("slow/a.bin", kSlow), opts(1), [](backend::DemandResult) {});
  wait_for_bytes(*c, "slow/a.bin", 150'000);
  c->cancel(first);
  for (int i = 0; i < 300 && !c->transfers().empty(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  const auto r = c->fetch(ref("slow/a.bin", kSlow), opts(2)).get();
  ASSERT_EQ(r.outcome, DemandOutcome::succeeded) << r.reason;
  EXPECT_EQ(read_bytes(c->path_of(ref("slow/a.bin", kSlow).key)), content_of("slow/a.bin", kSlow));
  const auto lines = lines_of("/slow/a.bin", 2);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_TRUE(lines[0].range.empty());
  ASSERT_FALSE(lines[1].range.empty()) << "the second request asked for everything";
  EXPECT_EQ(lines[1].status, 206);
  EXPECT_EQ(lines[1].protocol, "HTTP/2.0");
  // No byte twice: the first response's bytes and the second's make the body.
  const long kept = std::stol(lines[1].range.substr(lines[1].range.find('=') + 1));
  EXPECT_EQ(lines[1].bytes, static_cast<long>(kSlow) - kept);
  EXPECT_GE(lines[0].bytes, kept);
}

TEST_F(Http2Test, ACorruptBodyIsNeverInstalled) {
  auto c = client();
  ArtifactRef wrong = ref("f5.bin", kSmall);
  wrong.sha256 = backend::Sha256::hex_of(content_of("something else", kSmall));
  const auto r = c->fetch(wrong, opts(1)).get();
  EXPECT_EQ(r.outcome, DemandOutcome::failed);
  EXPECT_NE(r.reason.find("sha256 mismatch"), std::string::npos) << r.reason;
  EXPECT_FALSE(fs::exists(c->path_of(wrong.key)));
  // Fetched again once (the retry), as over HTTP/1.1; both over HTTP/2.
  const auto lines = lines_of("/f5.bin", 2);
  ASSERT_EQ(lines.size(), 2u);
  for (const auto& l : lines)
    EXPECT_EQ(l.protocol, "HTTP/2.0");
}

TEST_F(Http2Test, ThePriorityHeaderIsTheTasksPriorityWhenTheRequestLeaves) {
  // One slot: a holds it while b and c queue; b is raised to 3 while queued.
  auto c = client(HttpVersion::negotiate, 1);
  auto a = c->fetch(ref("slow/a.bin", kSlow), opts(1, 0));
  wait_for_bytes(*c, "slow/a.bin", 1);
  std::promise<DemandOutcome> b_done;
  DemandHandle b = c->subscribe(ref("f1.bin", kSmall), opts(2, 0),
                                [&](backend::DemandResult r) { b_done.set_value(r.outcome); });
  auto low = c->fetch(ref("f2.bin", kSmall), opts(3, -2));
  c->set_priority(b, 3);
  ASSERT_EQ(a.get().outcome, DemandOutcome::succeeded);
  ASSERT_EQ(b_done.get_future().get(), DemandOutcome::succeeded);
  ASSERT_EQ(low.get().outcome, DemandOutcome::succeeded);
  EXPECT_EQ(lines_of("/slow/a.bin").at(0).priority, "u=3");  // Priority 0: the RFC's default.
  EXPECT_EQ(lines_of("/f1.bin").at(0).priority, "u=0");      // Raised to 3 before it left.
  EXPECT_EQ(lines_of("/f2.bin").at(0).priority, "u=5");      // Priority -2.
}

TEST(Http2Urgency, TheMappingIsClampedAroundTheDefault) {
  EXPECT_EQ(backend::rfc9218_urgency(0), 3);
  EXPECT_EQ(backend::rfc9218_urgency(1), 2);
  EXPECT_EQ(backend::rfc9218_urgency(3), 0);
  EXPECT_EQ(backend::rfc9218_urgency(100), 0);
  EXPECT_EQ(backend::rfc9218_urgency(-4), 7);
  EXPECT_EQ(backend::rfc9218_urgency(std::numeric_limits<Priority>::min()), 7);
  EXPECT_EQ(backend::h2_stream_weight(3), 256);
  EXPECT_EQ(backend::h2_stream_weight(0), 32);
  EXPECT_EQ(backend::h2_stream_weight(-9), 2);
}

}  // namespace
}  // namespace dfl::testing
