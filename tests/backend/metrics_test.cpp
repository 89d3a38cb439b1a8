// Client::metrics() after a scripted run against the loopback server: every
// counter equals what the test did, the gauges what it holds, and the
// Prometheus text follows the format's rules.
#include <gtest/gtest.h>

#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include "demandflight/backend/client.h"
#include "demandflight/backend/metrics.h"
#include "demandflight/backend/sha256.h"
#include "loopback.h"
#include "test_files.h"

namespace dfl::testing {
namespace {

namespace fs = std::filesystem;
using backend::ArtifactRef;
using backend::Client;
using backend::ClientMetrics;
using backend::ClientOptions;

constexpr std::size_t kSize = 400'000;

ArtifactRef ref(const std::string& name, std::optional<std::string> digest_of = std::nullopt) {
  ArtifactRef r;
  r.key = ArtifactKey{name, "r1", "pc", 0};
  r.size_bytes = kSize;
  r.sha256 = backend::Sha256::hex_of(content_of(digest_of.value_or(name), kSize));
  return r;
}

DemandOptions opts(OwnerId owner, Priority p) {
  DemandOptions o;
  o.owner = owner;
  o.priority = p;
  return o;
}

// A metric name at `at` (letters, digits, '_' and ':', not starting with a
// digit; label names also without ':'): its end, or npos.
std::size_t name_end(const std::string& s, std::size_t at, bool label) {
  std::size_t i = at;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    const bool ok = std::isalpha(c) || c == '_' || (!label && c == ':') ||
                    (i > at && std::isdigit(c));
    if (!ok) break;
    ++i;
  }
  return i == at ? std::string::npos : i;
}

// NAME[{k="v",...}] VALUE; false if the line breaks the format.
bool parse_sample(const std::string& line, std::string& name, std::string& labels,
                  double& value) {
  std::size_t i = name_end(line, 0, false);
  if (i == std::string::npos) return false;
  name = line.substr(0, i);
  const std::size_t labels_at = i;
  if (i < line.size() && line[i] == '{') {
    ++i;
    for (bool first = true;; first = false) {
      if (i < line.size() && line[i] == '}' && first) break;
      const std::size_t e = name_end(line, i, true);
      if (e == std::string::npos || line.compare(e, 2, "=\"") != 0) return false;
      i = e + 2;
      while (i < line.size() && line[i] != '"') {
        if (line[i] == '\\') {
          if (i + 1 >= line.size() || std::string("\\\"n").find(line[i + 1]) == std::string::npos)
            return false;
          ++i;
        }
        ++i;
      }
      if (i >= line.size()) return false;
      ++i;  // The closing quote.
      if (i < line.size() && line[i] == ',') {
        ++i;
        continue;
      }
      if (i < line.size() && line[i] == '}') break;
      return false;
    }
    ++i;  // '}'
  }
  labels = line.substr(labels_at, i - labels_at);
  if (i >= line.size() || line[i] != ' ') return false;
  const std::string text = line.substr(i + 1);
  if (text == "+Inf" || text == "-Inf" || text == "NaN") {
    value = text == "NaN" ? NAN : (text[0] == '+' ? INFINITY : -INFINITY);
    return true;
  }
  char* end = nullptr;
  value = std::strtod(text.c_str(), &end);
  return !text.empty() && end == text.c_str() + text.size();
}

// The rules of the Prometheus text format that a scraper depends on: each
// sample's family declared by a `# TYPE` line before it, names and labels
// well formed, values numbers; each histogram's buckets cumulative, ending
// at le="+Inf" with its _count. Returns what is wrong, or "".
std::string check_prometheus(const std::string& text,
                             std::map<std::string, double>* samples = nullptr) {
  std::map<std::string, std::string> types;
  std::map<std::string, double> last_bucket;  // Series (name + labels but le) -> count.
  std::istringstream in(text);
  int n = 0;
  for (std::string line; std::getline(in, line);) {
    ++n;
    if (line.rfind("# HELP ", 0) == 0) continue;
    if (line.rfind("#", 0) == 0) {
      const std::string prefix = "# TYPE ";
      const std::size_t e = line.rfind(prefix, 0) == 0 ? name_end(line, prefix.size(), false)
                                                       : std::string::npos;
      const std::string type = e == std::string::npos || e >= line.size() || line[e] != ' '
                                   ? std::string()
                                   : line.substr(e + 1);
      if (type != "counter" && type != "gauge" && type != "histogram")
        return "line " + std::to_string(n) + ": " + line;
      const std::string family = line.substr(prefix.size(), e - prefix.size());
      if (types.count(family)) return "family declared twice: " + family;
      types[family] = type;
      continue;
    }
    std::string name, labels;
    double value = 0;
    if (!parse_sample(line, name, labels, value)) return "line " + std::to_string(n) + ": " + line;
    if (samples != nullptr) (*samples)[name + labels] = value;
    std::string family = name;
    for (const char* suffix : {"_bucket", "_sum", "_count"}) {
      const std::string s = suffix;
      if (family.size() > s.size() && family.compare(family.size() - s.size(), s.size(), s) == 0 &&
          types.count(family.substr(0, family.size() - s.size())) &&
          types[family.substr(0, family.size() - s.size())] == "histogram") {
        family = family.substr(0, family.size() - s.size());
      }
    }
    if (!types.count(family)) return "no # TYPE before " + name;
    if (types[family] == "histogram" && name == family) return "histogram sample without suffix";
    if (name == family + "_bucket") {
      const auto le = labels.find("le=\"");
      if (le == std::string::npos) return "bucket without le: " + line;
      std::string series = labels.substr(0, le);
      const double before = last_bucket.count(family + series) ? last_bucket[family + series] : 0;
      if (value < before) return "buckets not cumulative: " + line;
      last_bucket[family + series] = value;
      if (labels.find("le=\"+Inf\"") != std::string::npos) last_bucket[family + series + "inf"] = value;
    }
    if (name == family + "_count" && types[family] == "histogram") {
      std::string series = labels.empty() ? "{" : labels.substr(0, labels.size() - 1) + ",";
      if (!last_bucket.count(family + series + "inf")) return "no +Inf bucket before " + line;
      if (last_bucket[family + series + "inf"] != value) return "_count is not the +Inf bucket: " + line;
    }
  }
  return "";
}

class MetricsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fresh_test_dir("metrics");
    for (const char* name : {"a.bin", "b.bin", "c.bin", "e.bin"})
      std::ofstream(dir_ / "www" / name, std::ios::binary) << content_of(name, kSize);
    server_ = std::make_unique<LoopbackServer>(dir_ / "www");
  }
  void TearDown() override {
    server_.reset();
    fs::remove_all(dir_);
  }
  fs::path dir_;
  std::unique_ptr<LoopbackServer> server_;
};

TEST_F(MetricsTest, EveryCounterIsWhatTheRunDid) {
  ClientOptions o;
  o.cache_dir = dir_ / "cache";
  o.resolver = backend::url_template(server_->base() + "/{resource}");
  o.scheduler.retry = RetryConfig{2, 0.05, 0.2, 0.2};
  Client c(std::move(o));

  // a: a transfer and an install, then a cache hit (both at priority 1).
  auto a1 = c.fetch(ref("a.bin"), opts(1, 1)).get();
  ASSERT_EQ(a1.outcome, DemandOutcome::succeeded) << a1.reason;
  auto a2 = c.fetch(ref("a.bin"), opts(1, 1)).get();
  ASSERT_EQ(a2.outcome, DemandOutcome::succeeded);
  // nope: a 404, failed at once (priority 0).
  ASSERT_EQ(c.fetch(ref("nope.bin"), opts(2, 0)).get().outcome, DemandOutcome::failed);
  // b expected as other bytes: two attempts (one retry), never installed.
  ASSERT_EQ(c.fetch(ref("b.bin", "other"), opts(3, 2)).get().outcome, DemandOutcome::failed);
  // e: two callers on one transfer, one expecting other bytes: a conflict. The body is held
  // until both have subscribed, or a slow run (TSan) makes the second one a cache hit.
  server_->hold("/e.bin", 1'000);
  auto e_right = c.fetch(ref("e.bin"), opts(4, 0));
  auto e_wrong = c.fetch(ref("e.bin", "other"), opts(5, 0));
  server_->release("/e.bin");
  auto e1 = e_right.get();
  ASSERT_EQ(e1.outcome, DemandOutcome::succeeded);
  ASSERT_EQ(e_wrong.get().outcome, DemandOutcome::failed);
  // c: cancelled mid-body, nobody else waits: an orphan abort.
  server_->hold("/c.bin", 100'000);
  std::promise<DemandOutcome> c_done;
  const DemandHandle h =
      c.subscribe(ref("c.bin"), opts(6, -1), [&](backend::DemandResult r) { c_done.set_value(r); });
  auto received = [&] {
    const auto in_flight = c.transfers();
    return in_flight.empty() ? std::uint64_t{0} : in_flight.front().received;
  };
  for (int i = 0; i < 3000 && received() < 100'000; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_GE(received(), 100'000u);
  const ClientMetrics during = c.metrics();
  EXPECT_EQ(during.in_flight.at(-1), 1u) << "c transfers at priority -1";
  c.cancel(h);
  ASSERT_EQ(c_done.get_future().get(), DemandOutcome::cancelled);
  server_->release("/c.bin");
  for (int i = 0; i < 300 && !c.idle(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));

  const ClientMetrics m = c.metrics();
  const std::map<std::pair<std::string, Priority>, std::uint64_t> demands{
      {{"succeeded", 1}, 2}, {{"failed", 0}, 2},    {{"failed", 2}, 1},
      {{"succeeded", 0}, 1}, {{"cancelled", -1}, 1}};
  EXPECT_EQ(m.demands, demands);
  EXPECT_EQ(m.transfers_started, 6u);  // a, nope, b twice, e, c.
  EXPECT_EQ(m.retries, 1u);            // b's second attempt.
  EXPECT_EQ(m.transfers_failed, 1u);   // The 404 (b's bodies arrived; they failed verification).
  EXPECT_EQ(m.installs, 2u);           // a and e.
  EXPECT_EQ(m.cache_hits, 1u);
  EXPECT_EQ(m.conflicts_of_expectation, 1u);
  EXPECT_EQ(m.orphan_decisions.at("abort"), 1u);
  EXPECT_EQ(m.orphan_decisions.at("complete"), 0u);
  // a, b twice and e whole, and c's first 100,000 bytes or more.
  EXPECT_GE(m.bytes_received, 4 * kSize + 100'000);
  EXPECT_LT(m.bytes_received, 5 * kSize);
  EXPECT_TRUE(m.queued.empty() || m.queued.begin()->second == 0);
  EXPECT_TRUE(m.in_flight.empty());
  EXPECT_EQ(m.cache_bytes, 2 * kSize);
  EXPECT_EQ(m.pinned_bytes, 2 * kSize) << "a (two pins, one object) and e";
  std::uint64_t waits = 0;
  for (const auto& [key, histogram] : m.wait_s)
    waits += histogram.count;
  EXPECT_EQ(waits, 7u);
  EXPECT_EQ(m.wait_s.at({-1, "cancelled"}).count, 1u);
  EXPECT_EQ(m.time_to_first_byte_s.count, 5u);  // Every transfer with a body: not the 404.
  EXPECT_EQ(m.transfer_rate_Bps.count, 4u);      // The complete ones: not c.
  a1.pin.release();
  a2.pin.release();
  EXPECT_EQ(c.metrics().pinned_bytes, kSize) << "only e's pin is left";

  std::ostringstream text;
  backend::write_prometheus(m, text);
  std::map<std::string, double> samples;
  EXPECT_EQ(check_prometheus(text.str(), &samples), "") << text.str();
  EXPECT_EQ(samples.at("demandflight_demands_total{outcome=\"succeeded\",priority=\"1\"}"), 2);
  EXPECT_EQ(samples.at("demandflight_transfers_started_total"), 6);
  EXPECT_EQ(samples.at("demandflight_orphan_decisions_total{decision=\"abort\"}"), 1);
  EXPECT_EQ(samples.at("demandflight_wait_seconds_count{priority=\"-1\",outcome=\"cancelled\"}"), 1);
  EXPECT_EQ(samples.at("demandflight_time_to_first_byte_seconds_bucket{le=\"+Inf\"}"), 5);
}

TEST_F(MetricsTest, IdleMeansTheMetricsCountTheAbortsToo) {
  // A cancel ends the task in the engine at once; the I/O thread counts the
  // aborted transfer's bytes when it handles the abort. idle() waits for that,
  // so a caller that reads the metrics once idle sees every byte received
  // (a tight loop on idle() reads them as early as a caller can).
  ClientOptions o;
  o.cache_dir = dir_ / "cache";
  o.resolver = backend::url_template(server_->base() + "/{resource}");
  Client c(std::move(o));
  std::uint64_t aborted_bytes = 0;
  for (int round = 0; round < 10; ++round) {
    // A path of its own each round: a released path is never held again.
    const std::string name = "r" + std::to_string(round) + ".bin";
    std::ofstream(dir_ / "www" / name, std::ios::binary) << content_of(name, kSize);
    server_->hold("/" + name, 100'000);
    std::promise<DemandOutcome> done;
    const DemandHandle h = c.subscribe(ref(name), opts(1, 0), [&](backend::DemandResult r) {
      done.set_value(r.outcome);
    });
    // This round's transfer (the snapshot may still show the last round's).
    std::uint64_t received = 0;
    for (int i = 0; i < 3000 && received < 100'000; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      for (const backend::TransferSnapshot& t : c.transfers())
        if (t.key.resource == name) received = t.received;
    }
    ASSERT_GE(received, 100'000u) << "round " << round;
    c.cancel(h);
    ASSERT_EQ(done.get_future().get(), DemandOutcome::cancelled);
    while (!c.idle()) {
    }
    const ClientMetrics m = c.metrics();
    aborted_bytes += received;
    EXPECT_GE(m.bytes_received, aborted_bytes) << "round " << round;
    EXPECT_EQ(m.time_to_first_byte_s.count, static_cast<std::uint64_t>(round + 1))
        << "round " << round;
    server_->release("/" + name);
  }
}

TEST(Prometheus, TheCheckerCatchesBrokenText) {
  // The checker above must be able to fail.
  EXPECT_NE(check_prometheus("demandflight_x 1\n"), "");  // No # TYPE.
  EXPECT_NE(check_prometheus("# TYPE demandflight_h histogram\n"
                             "demandflight_h_bucket{le=\"1\"} 3\n"
                             "demandflight_h_bucket{le=\"+Inf\"} 2\n"
                             "demandflight_h_sum 1\ndemandflight_h_count 2\n"),
            "");  // Not cumulative.
  EXPECT_NE(check_prometheus("# TYPE demandflight_h histogram\n"
                             "demandflight_h_bucket{le=\"+Inf\"} 2\n"
                             "demandflight_h_sum 1\ndemandflight_h_count 3\n"),
            "");  // _count is not +Inf.
  EXPECT_NE(check_prometheus("# TYPE demandflight_x counter\ndemandflight_x{a=b} 1\n"), "");
  EXPECT_EQ(check_prometheus("# TYPE demandflight_x counter\ndemandflight_x{a=\"b\"} 1\n"), "");
}

TEST(Histogram, BucketsCountValuesAtOrBelowTheirBound) {
  backend::Histogram h({1, 2});
  for (double v : {0.5, 1.0, 1.5, 3.0})
    h.observe(v);
  EXPECT_EQ(h.counts, (std::vector<std::uint64_t>{2, 1, 1}));
  EXPECT_EQ(h.count, 4u);
  EXPECT_DOUBLE_EQ(h.sum, 6.0);
}

}  // namespace
}  // namespace dfl::testing
