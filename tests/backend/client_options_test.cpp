// The client's options and reasons that no other suite reaches: terminal
// callbacks on the caller's executor, and a body whose size is not the one
// the caller gave (shorter, longer), against the loopback server.
#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <mutex>
#include <stdexcept>
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

constexpr std::size_t kSize = 200'000;

// Runs what it is given on one thread of its own, in order.
class OneThreadExecutor {
 public:
  OneThreadExecutor() : thread_([this] { run(); }) {}
  ~OneThreadExecutor() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  void post(std::function<void()> f) {
    {
      std::lock_guard lock(mutex_);
      queue_.push_back(std::move(f));
    }
    cv_.notify_all();
  }
  std::thread::id id() const { return thread_.get_id(); }

 private:
  void run() {
    std::unique_lock lock(mutex_);
    for (;;) {
      cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;
      auto f = std::move(queue_.front());
      queue_.pop_front();
      lock.unlock();
      f();
      lock.lock();
    }
  }
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  bool stopping_ = false;
  std::thread thread_;
};

class ClientOptionsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fresh_test_dir("client-options");
    for (const char* name : {"a.bin", "b.bin", "c.bin"})
      std::ofstream(dir_ / "www" / name) << content_of(name, kSize);
    server_ = std::make_unique<LoopbackServer>(dir_ / "www");
  }
  void TearDown() override {
    server_.reset();
    fs::remove_all(dir_);
  }

  ClientOptions options(std::uint32_t max_attempts = 1) const {
    ClientOptions o;
    o.cache_dir = dir_ / "cache";
    o.resolver = backend::url_template(server_->base() + "/{resource}");
    o.scheduler.retry = RetryConfig{max_attempts, 0.05, 0.2, 0.2};
    return o;
  }

  static ArtifactRef ref(const std::string& name, std::uint64_t size = kSize) {
    ArtifactRef r;
    r.key = ArtifactKey{name, "r1", "pc", 0};
    r.size_bytes = size;
    return r;
  }

  static DemandOptions opts() {
    DemandOptions o;
    o.owner = 1;
    return o;
  }

  fs::path dir_;
  std::unique_ptr<LoopbackServer> server_;
};

TEST_F(ClientOptionsTest, TerminalCallbacksRunOnTheExecutorGiven) {
  OneThreadExecutor executor;
  ClientOptions o = options();
  o.executor = [&](std::function<void()> f) { executor.post(std::move(f)); };
  Client client(std::move(o));
  std::mutex mutex;
  std::condition_variable cv;
  std::vector<std::thread::id> ran_on;
  std::vector<DemandOutcome> outcomes;
  for (const char* name : {"a.bin", "b.bin", "c.bin"}) {
    client.subscribe(ref(name), opts(), [&](backend::DemandResult r) {
      std::lock_guard lock(mutex);
      ran_on.push_back(std::this_thread::get_id());
      outcomes.push_back(r.outcome);
      cv.notify_all();
    });
  }
  std::unique_lock lock(mutex);
  ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(30), [&] { return ran_on.size() == 3; }));
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(ran_on[i], executor.id()) << "callback " << i << " ran elsewhere";
    EXPECT_EQ(outcomes[i], DemandOutcome::succeeded);
  }
}

// The server called it complete: the attempt fails with the counts and the
// URL; the next one resumes at the body's end and the server's 416 gives its
// size, which contradicts the caller's: failed with both; nothing installed.
TEST_F(ClientOptionsTest, ABodyShorterThanTheSizeGivenFailsWithTheCountsThenTheSizes) {
  const std::string url = server_->base() + "/a.bin";
  {
    Client client(options(1));
    const auto r = client.fetch(ref("a.bin", kSize + 100), opts()).get();
    EXPECT_EQ(r.outcome, DemandOutcome::failed);
    EXPECT_EQ(r.reason, "short body: " + std::to_string(kSize) + " of " +
                            std::to_string(kSize + 100) + " bytes from " + url);
  }
  Client client(options(3));
  const auto r = client.fetch(ref("b.bin", kSize + 100), opts()).get();
  EXPECT_EQ(r.outcome, DemandOutcome::failed);
  EXPECT_EQ(r.reason, "size " + std::to_string(kSize) + ", expected " +
                          std::to_string(kSize + 100) + " (HTTP 416 to a resume from byte " +
                          std::to_string(kSize) + ") from " + server_->base() + "/b.bin");
  EXPECT_EQ(server_->stats()["/b.bin"]["requests"], 2) << "the 416 is not tried again";
  EXPECT_FALSE(fs::exists(client.path_of(ref("b.bin").key)));
}

// No cache directory given: refused, naming the option, rather than a cache
// made in whatever the current directory is.
TEST_F(ClientOptionsTest, AnEmptyCacheDirIsRefusedNamingTheOption) {
  ClientOptions o = options();
  o.cache_dir.clear();
  try {
    Client client(std::move(o));
    FAIL() << "a client was made without a cache directory";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("ClientOptions.cache_dir"), std::string::npos)
        << e.what();
  }
  EXPECT_FALSE(fs::exists("objects")) << "a cache was made in the current directory";
}

// A relative cache directory is the current directory's as the client is
// made: a chdir afterwards does not move where it installs.
TEST_F(ClientOptionsTest, ARelativeCacheDirStaysWhereItWasWhenTheClientWasMade) {
  const fs::path before = fs::current_path();
  fs::create_directories(dir_ / "here");
  fs::create_directories(dir_ / "elsewhere");
  fs::current_path(dir_ / "here");
  ClientOptions o = options();
  o.cache_dir = "cache";
  std::unique_ptr<Client> client;
  try {
    client = std::make_unique<Client>(std::move(o));
    fs::current_path(dir_ / "elsewhere");
  } catch (...) {
    fs::current_path(before);
    throw;
  }
  const auto r = client->fetch(ref("a.bin"), opts()).get();
  const fs::path installed = client->path_of(ref("a.bin").key);
  client.reset();
  fs::current_path(before);
  EXPECT_EQ(r.outcome, DemandOutcome::succeeded) << r.reason;
  EXPECT_TRUE(installed.is_absolute()) << installed;
  EXPECT_EQ(installed.string().rfind((dir_ / "here" / "cache").string(), 0), 0u) << installed;
  EXPECT_TRUE(fs::exists(installed));
  EXPECT_FALSE(fs::exists(dir_ / "elsewhere" / "cache"));
}

// The engine's DemandOptions has origin, mirrors and size_bytes too; the
// client takes them from ArtifactRef. Given there as well, they must agree:
// one that contradicts the artifact is refused, naming both (it was ignored).
TEST_F(ClientOptionsTest, DemandOptionsThatContradictTheArtifactAreRefusedNamingBoth) {
  Client client(options());
  ArtifactRef a = ref("a.bin");
  a.mirrors = {0};
  const std::vector<OriginId> other_mirrors{0, 0};
  auto refused = [&](DemandOptions o, const std::string& field) {
    try {
      client.subscribe(a, o, [](backend::DemandResult) {});
      ADD_FAILURE() << field << ": accepted";
    } catch (const std::invalid_argument& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("DemandOptions." + field), std::string::npos) << what;
      EXPECT_NE(what.find("ArtifactRef." + field), std::string::npos) << what;
    }
  };
  DemandOptions o = opts();
  o.size_bytes = kSize + 1;
  refused(o, "size_bytes");
  o = opts();
  o.origin = 1;
  refused(o, "origin");
  o = opts();
  o.mirrors = other_mirrors;
  refused(o, "mirrors");
  // The same values, or the defaults, are fine.
  o = opts();
  o.size_bytes = kSize;
  o.mirrors = a.mirrors;
  EXPECT_EQ(client.fetch(a, o).get().outcome, DemandOutcome::succeeded);
  EXPECT_EQ(server_->stats()["/a.bin"]["requests"], 1) << "a refused subscribe fetched";
}

// More bytes than the caller said the artifact has: the server serves
// something else, which another attempt would not change.
TEST_F(ClientOptionsTest, ABodyLongerThanTheSizeGivenFailsAtOnceNamingTheSize) {
  Client client(options(4));
  const auto r = client.fetch(ref("a.bin", kSize - 100), opts()).get();
  EXPECT_EQ(r.outcome, DemandOutcome::failed);
  EXPECT_EQ(r.reason, "body larger than the expected " + std::to_string(kSize - 100) +
                          " bytes from " + server_->base() + "/a.bin");
  EXPECT_EQ(server_->stats()["/a.bin"]["requests"], 1) << "permanent: not tried again";
  EXPECT_FALSE(fs::exists(client.path_of(ref("a.bin").key)));
}

// A team's own C++ policy decides the orphans: it is called (with the
// orphan's key and bytes) when the only demand of a transfer in flight is
// cancelled, and its answer is what happens: `complete` installs the body
// nobody waits for; `abort` ends the transfer and installs nothing.
class CountingPolicy final : public OrphanPolicy {
 public:
  explicit CountingPolicy(OrphanDecision answer) : answer_(answer) {}
  OrphanDecision decide(const OrphanView& view) override {
    ++calls;
    if (view.key != nullptr) last_resource = view.key->resource;
    last_bytes_done = view.bytes_done;
    return answer_;
  }
  std::string_view name() const override { return "team-counting"; }
  std::atomic<int> calls{0};
  std::string last_resource;
  std::uint64_t last_bytes_done = 0;

 private:
  OrphanDecision answer_;
};

TEST_F(ClientOptionsTest, ACppPolicyObjectPassedToTheClientDecidesItsOrphans) {
  // A released hold stays released: each answer has a file of its own.
  for (OrphanDecision answer : {OrphanDecision::complete, OrphanDecision::abort}) {
    const std::string name = answer == OrphanDecision::complete ? "b.bin" : "c.bin";
    SCOPED_TRACE(name);
    server_->hold("/" + name, 100'000);  // Half the body, then parked.
    auto policy = std::make_shared<CountingPolicy>(answer);
    ClientOptions o = options();
    o.orphan_policy = "no-such-policy";  // Not read: the object is used.
    o.orphan_policy_object = policy;
    Client client(std::move(o));
    std::promise<DemandOutcome> outcome;
    const DemandHandle h = client.subscribe(
        ref(name), opts(), [&](backend::DemandResult r) { outcome.set_value(r.outcome); });
    auto received = [&] {
      const auto in_flight = client.transfers();
      return in_flight.empty() ? std::uint64_t{0} : in_flight.front().received;
    };
    for (int i = 0; i < 3000 && received() < 50'000; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    ASSERT_GE(received(), 50'000u) << "the transfer never got going";
    client.cancel(h);
    EXPECT_EQ(outcome.get_future().get(), DemandOutcome::cancelled);
    EXPECT_EQ(policy->calls.load(), 1);
    EXPECT_EQ(policy->last_resource, name);
    EXPECT_GE(policy->last_bytes_done, 50'000u);
    server_->release("/" + name);
    for (int i = 0; i < 1000 && !client.idle(); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    ASSERT_TRUE(client.idle());
    EXPECT_EQ(fs::exists(client.path_of(ref(name).key)), answer == OrphanDecision::complete);
    EXPECT_EQ(client.metrics().installs, answer == OrphanDecision::complete ? 1u : 0u);
  }
}

}  // namespace
}  // namespace dfl::testing
