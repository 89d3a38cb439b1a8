// The client's recording (ClientOptions::record): the callers' calls written
// as a trace, in the order and at the times the core saw them; parts with
// their own headers; names hashed under a key; a full buffer that makes
// callers wait instead of dropping. Against the loopback server.
// (That the simulator reads a recording: cli_test.cpp, FetchRecord*.)
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <future>
#include <thread>
#include <chrono>
#include <map>
#include <utility>
#include <set>
#include <memory>
#include <nlohmann/json.hpp>
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
using backend::MeasuredPlatform;
using nlohmann::json;

constexpr std::size_t kSize = 50'000;

std::vector<json> lines_of(const fs::path& path) {
  std::vector<json> out;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.find_first_not_of(' ') == std::string::npos) continue;  // A page's filler.
    out.push_back(json::parse(line));
  }
  return out;
}

// Whether some line of the file straddles a 4 KiB page (then a kill in
// write() could leave half of it), and how many blank fillers there are.
std::pair<bool, int> pages_of(const std::string& text) {
  bool straddles = false;
  int fillers = 0;
  std::size_t start = 0;
  while (start < text.size()) {
    const std::size_t end = text.find('\n', start);
    if (end == std::string::npos) return {true, fillers};  // Not even whole.
    straddles = straddles || start / 4096 != end / 4096;
    if (text.find_first_not_of(' ', start) == end) ++fillers;
    start = end + 1;
  }
  return {straddles, fillers};
}

// An outcome file's rows, each split into its fields (RFC 4180 quotes).
std::vector<std::vector<std::string>> csv_rows(const fs::path& path) {
  std::vector<std::vector<std::string>> out;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    std::vector<std::string> fields(1);
    bool quoted = false;
    for (std::size_t i = 0; i < line.size(); ++i) {
      const char c = line[i];
      if (c == '"' && quoted && i + 1 < line.size() && line[i + 1] == '"') {
        fields.back() += '"';  // A doubled quote inside a quoted field.
        ++i;
      } else if (c == '"') {
        quoted = !quoted;
      } else if (c == ',' && !quoted) {
        fields.emplace_back();
      } else {
        fields.back() += c;
      }
    }
    out.push_back(fields);
  }
  return out;
}

class RecordTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fresh_test_dir("record");
    for (const char* name : {"a.bin", "b.bin", "c.bin"})
      std::ofstream(dir_ / "www" / name) << content_of(name, kSize);
    server_ = std::make_unique<LoopbackServer>(dir_ / "www");
  }
  void TearDown() override {
    server_.reset();
    fs::remove_all(dir_);
  }

  ClientOptions options(backend::RecordOptions record) const {
    ClientOptions o;
    o.cache_dir = dir_ / "cache";
    o.resolver = backend::url_template(server_->base() + "/{resource}");
    o.record = std::move(record);
    return o;
  }
  backend::RecordOptions record(const std::string& name = "rec.jsonl") const {
    backend::RecordOptions r;
    r.path = dir_ / name;
    r.origin_names = {"cdn", "mirror"};
    return r;
  }
  static ArtifactRef ref(const std::string& name) {
    ArtifactRef r;
    r.key = ArtifactKey{name, "r1", "pc", 3};
    r.size_bytes = kSize;
    r.sha256 = backend::Sha256::hex_of(content_of(name, kSize));
    return r;
  }
  static DemandOptions demand(OwnerId owner, Priority priority = 0) {
    DemandOptions o;
    o.owner = owner;
    o.priority = priority;
    return o;
  }

  fs::path dir_;
  std::unique_ptr<LoopbackServer> server_;
};

TEST_F(RecordTest, EveryCallOfTheCallersIsARecordInTheOrderAndAtTheTimeTheCoreSawIt) {
  const fs::path path = dir_ / "rec.jsonl";
  std::vector<std::future<backend::DemandResult>> results;
  backend::RecordStatus status;
  {
    server_->rate(200'000);  // Slow enough that the cancel and the raise find them waiting.
    Client client(options(record()));
    ArtifactRef a = ref("a.bin");
    a.mirrors = {1};
    DemandOptions first = demand(7, 1);
    first.owner_generation = 2;
    first.deadline_s = client.clock_s() + 60;
    const DemandHandle d1 = client.subscribe(a, first, [](backend::DemandResult) {});
    const DemandHandle d2 = client.subscribe(a, demand(8), [](backend::DemandResult) {});
    const DemandHandle d3 = client.subscribe(ref("b.bin"), demand(8), [](backend::DemandResult) {});
    client.set_priority(d2, 3);
    client.cancel(d3);
    client.set_throttle(ThrottleConfig{0, 1000, 5e6});
    client.end_owner(7, 2);
    server_->rate(0);
    results.push_back(client.fetch(ref("c.bin"), demand(9)));
    EXPECT_EQ(results.back().get().outcome, DemandOutcome::succeeded);
    client.cancel(d2);
    (void)d1;
    status = client.end_recording();
    // Calls after the end are not recorded.
    results.push_back(client.fetch(ref("c.bin"), demand(9)));
    results.back().get();
  }
  EXPECT_EQ(status.error, "");
  EXPECT_EQ(status.parts, 1u);
  const std::string text = read_bytes(path);
  EXPECT_EQ(status.bytes_written, text.size());
  const std::vector<json> lines = lines_of(path);
  ASSERT_EQ(status.records, lines.size());
  ASSERT_EQ(lines.size(), 13u) << text;
  SCOPED_TRACE(text);

  const json& header = lines[0];
  EXPECT_EQ(header["format"], "demandflight-trace");
  EXPECT_EQ(header["version"], 1);
  EXPECT_EQ(header["scheduler"]["max_transfers"], 4);
  EXPECT_EQ(header["x-recording"]["part"], 0);
  EXPECT_EQ(header["x-recording"]["orphan_policy"], "always-abort");

  std::vector<std::string> ops;
  for (std::size_t i = 1; i < lines.size(); ++i)
    ops.push_back(lines[i].value("op", "?"));
  EXPECT_EQ(ops, (std::vector<std::string>{"artifact", "subscribe", "subscribe", "artifact",
                                           "subscribe", "set_priority", "cancel", "throttle",
                                           "end_owner", "artifact", "subscribe", "cancel"}));
  // The artifact as the caller named it, declared once for its two demands.
  EXPECT_EQ(lines[1]["resource"], "a.bin");
  EXPECT_EQ(lines[1]["generation"], 3);
  EXPECT_EQ(lines[1]["size"], kSize);
  EXPECT_EQ(lines[1]["origins"], json::array({"cdn", "mirror"}));
  EXPECT_EQ(lines[1]["sha256"], backend::Sha256::hex_of(content_of("a.bin", kSize)));
  EXPECT_EQ(lines[4]["origin"], "cdn");
  EXPECT_EQ(lines[2]["artifact"], lines[1]["id"]);
  EXPECT_EQ(lines[3]["artifact"], lines[1]["id"]);
  EXPECT_EQ(lines[5]["artifact"], lines[4]["id"]);
  EXPECT_NE(lines[1]["id"], lines[4]["id"]);
  // Demands, owners, priorities, generation, deadline.
  EXPECT_EQ(lines[2]["owner"], "o7");
  EXPECT_EQ(lines[2]["priority"], 1);
  EXPECT_EQ(lines[2]["owner_generation"], 2);
  EXPECT_NEAR(lines[2]["timeout_s"].get<double>(), 60.0, 0.01);
  EXPECT_FALSE(lines[3].contains("timeout_s"));
  EXPECT_EQ(lines[6]["demand"], lines[3]["demand"]);
  EXPECT_EQ(lines[6]["priority"], 3);
  EXPECT_EQ(lines[7]["demand"], lines[5]["demand"]);
  EXPECT_EQ(lines[8]["background_at_or_below"], 0);
  EXPECT_EQ(lines[8]["background_Bps"], 1000);
  EXPECT_EQ(lines[8]["overall_Bps"], 5e6);
  EXPECT_EQ(lines[9]["owner"], "o7");
  EXPECT_EQ(lines[9]["owner_generation"], 2);
  EXPECT_EQ(lines[12]["demand"], lines[3]["demand"]);
  std::map<std::string, int> demand_ids;
  for (const json& l : lines)
    if (l.value("op", "") == "subscribe") ++demand_ids[l["demand"]];
  EXPECT_EQ(demand_ids.size(), 4u);  // Unique.
  // Times on the client's clock, in the order of the calls.
  double last = 0;
  for (std::size_t i = 1; i < lines.size(); ++i) {
    if (!lines[i].contains("t")) continue;
    EXPECT_GE(lines[i]["t"].get<double>(), last) << lines[i].dump();
    last = lines[i]["t"];
  }
}

TEST_F(RecordTest, PartsBeginWithTheirHeaderAndDeclareTheArtifactsTheyUse) {
  backend::RecordOptions r = record();
  r.rotate_bytes = 5000;  // The header is a page (4096 bytes) of it.
  backend::RecordStatus status;
  {
    Client client(options(r));
    for (int i = 0; i < 12; ++i) {
      const std::string name = i % 2 ? "a.bin" : "b.bin";
      client.fetch(ref(name), demand(static_cast<OwnerId>(i))).get();
    }
    status = client.end_recording();
  }
  EXPECT_EQ(status.error, "");
  ASSERT_GE(status.parts, 3u);
  std::uint64_t bytes = 0;
  std::size_t subscribes = 0;
  for (std::uint32_t part = 0; part < status.parts; ++part) {
    const fs::path path = backend::record_part_path(r.path, part);
    ASSERT_TRUE(fs::exists(path)) << path;
    bytes += fs::file_size(path);
    const std::vector<json> lines = lines_of(path);
    ASSERT_FALSE(lines.empty());
    EXPECT_EQ(lines[0]["format"], "demandflight-trace") << path;
    EXPECT_EQ(lines[0]["x-recording"]["part"], part);
    // A part may overrun its size by one call's lines at most.
    EXPECT_LE(fs::file_size(path), r.rotate_bytes + 400) << path;
    std::set<std::string> declared;
    for (const json& l : lines) {
      if (l.contains("op") && l["op"] == "artifact") declared.insert(l["id"]);
      if (l.contains("op") && l["op"] == "subscribe") {
        ++subscribes;
        EXPECT_EQ(declared.count(l["artifact"]), 1u) << path << ": " << l.dump();
      }
    }
  }
  EXPECT_EQ(subscribes, 12u);
  EXPECT_EQ(bytes, status.bytes_written);
  EXPECT_EQ(backend::record_part_path(r.path, 2).filename(), "rec.2.jsonl");
}

TEST_F(RecordTest, HashedNamesAreStableUnderOneKeyAndNoNameOrDigestIsWritten) {
  auto run = [&](const std::string& file, const std::string& key) {
    backend::RecordOptions r = record(file);
    r.hash_key = key;
    Client client(options(r));
    client.fetch(ref("a.bin"), demand(1)).get();
    client.fetch(ref("b.bin"), demand(1)).get();
    return client.end_recording();
  };
  run("one.jsonl", "secret");
  run("two.jsonl", "secret");
  run("three.jsonl", "another");
  const std::vector<json> one = lines_of(dir_ / "one.jsonl");
  const std::vector<json> two = lines_of(dir_ / "two.jsonl");
  const std::vector<json> three = lines_of(dir_ / "three.jsonl");
  ASSERT_EQ(one.size(), 5u);
  EXPECT_EQ(one[0]["x-recording"]["hashed_names"], true);
  EXPECT_EQ(one[1]["resource"], two[1]["resource"]);
  EXPECT_EQ(one[3]["resource"], two[3]["resource"]);
  EXPECT_NE(one[1]["resource"], one[3]["resource"]);
  EXPECT_NE(one[1]["resource"], three[1]["resource"]);
  EXPECT_EQ(one[1]["resource"].get<std::string>().size(), 32u);
  EXPECT_EQ(one[1]["size"], kSize);  // Sizes kept.
  for (const char* file : {"one.jsonl", "two.jsonl", "three.jsonl"}) {
    const std::string text = read_bytes(dir_ / file);
    EXPECT_EQ(text.find("a.bin"), std::string::npos) << file;
    EXPECT_EQ(text.find("b.bin"), std::string::npos) << file;
    EXPECT_EQ(text.find("sha256"), std::string::npos) << file;
  }
}

TEST_F(RecordTest, AFullBufferMakesTheCallersWaitAndLosesNoRecord) {
  backend::RecordOptions r = record();
  r.buffer_bytes = 300;  // About two lines.
  r.flush_interval_s = 5;
  backend::RecordStatus status;
  {
    Client client(options(r));
    for (int i = 0; i < 200; ++i) {
      const DemandHandle h = client.subscribe(ref("a.bin"), demand(1), [](backend::DemandResult) {});
      client.set_priority(h, i % 4);
    }
    client.end_owner(1);
    status = client.end_recording();
  }
  EXPECT_GT(status.waits, 0u);
  const std::vector<json> lines = lines_of(r.path);
  EXPECT_EQ(lines.size(), status.records);
  EXPECT_EQ(lines.size(), 1u + 1u + 200u * 2u + 1u);  // Header, artifact, the calls, end_owner.
  EXPECT_EQ(lines.back()["op"], "end_owner");
  // 30 KB of lines, none across a page: blank lines fill each page's end.
  const auto [straddles, fillers] = pages_of(read_bytes(r.path));
  EXPECT_FALSE(straddles);
  EXPECT_GE(fillers, 5);
}

TEST_F(RecordTest, APathThatCannotBeCreatedIsRefusedWithThePathAndTheReason) {
  backend::RecordOptions r = record();
  r.path = dir_ / "no-such-dir" / "rec.jsonl";
  try {
    Client client(options(r));
    FAIL() << "a recording in a missing directory was accepted";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find((dir_ / "no-such-dir" / "rec.jsonl").string()),
              std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("No such file or directory"), std::string::npos)
        << e.what();
  }
}

// The platform the recording's header holds: an origin that sends each body
// at 8 MB/s, two bodies of 8 MB one after the other (each alone): the lone
// rate and the client's busiest second within 15% of it, a connect time for
// the round trip, the finalize's cost; `platform` derived from them.
TEST_F(RecordTest, TheHeaderHoldsThePlatformMeasuredFromTheRunsOwnTransfers) {
  constexpr double kRate = 8e6;
  constexpr std::size_t kBig = 8'000'000;
  for (const char* name : {"big1.bin", "big2.bin"})
    std::ofstream(dir_ / "www" / name) << content_of(name, kBig);
  server_->rate(static_cast<long>(kRate));
  backend::RecordStatus status;
  MeasuredPlatform measured;
  {
    Client client(options(record()));
    for (const char* name : {"big1.bin", "big2.bin"}) {
      ArtifactRef r;
      r.key = ArtifactKey{name, "r1", "pc", 0};
      r.size_bytes = kBig;
      ASSERT_EQ(client.fetch(r, demand(1)).get().outcome, DemandOutcome::succeeded);
    }
    measured = client.measured_platform();
    status = client.end_recording();
  }
  EXPECT_EQ(status.error, "");
  ASSERT_EQ(measured.origins.size(), 1u);
  const auto& origin = measured.origins[0];
  // The first opened its connection (the second may have kept it): a fit.
  EXPECT_TRUE(origin.lone_fit);
  EXPECT_EQ(origin.lone_samples, origin.rtt_samples);
  EXPECT_NEAR(origin.lone_Bps, kRate, 0.15 * kRate);
  EXPECT_GE(origin.rtt_samples, 1u);
  EXPECT_GT(origin.rtt_s, 0);
  EXPECT_LT(origin.rtt_s, 0.05);  // Loopback.
  EXPECT_GE(measured.client_windows, 1u);
  EXPECT_NEAR(measured.client_Bps, kRate, 0.15 * kRate);
  EXPECT_EQ(measured.finalizes, 2u);
  EXPECT_EQ(measured.finalize_bytes, 2 * kBig);
  EXPECT_GT(measured.finalize_busy_s, 0);

  const std::string text = read_bytes(dir_ / "rec.jsonl");
  ASSERT_GT(text.size(), 4096u);
  EXPECT_EQ(text.find('\n'), 4095u) << "the header is one page";
  const json header = json::parse(text.substr(0, 4096));
  const json& x = header["x-measured"];
  EXPECT_EQ(x["origins"]["cdn"]["lone_samples"], origin.lone_samples);
  EXPECT_EQ(x["origins"]["cdn"]["lone_fit"], true);
  EXPECT_EQ(x["origins"]["cdn"]["rtt_samples"], origin.rtt_samples);
  EXPECT_EQ(x["finalize"]["count"], 2);
  const json& platform = header["platform"];
  EXPECT_NEAR(origin.busiest_Bps, kRate, 0.15 * kRate);  // The only origin: the client's.
  EXPECT_DOUBLE_EQ(platform["origins"]["cdn"]["bandwidth_Bps"].get<double>(),
                   std::max(origin.lone_Bps, origin.busiest_Bps));
  EXPECT_DOUBLE_EQ(platform["origins"]["cdn"]["latency_s"].get<double>(), origin.rtt_s / 2);
  EXPECT_EQ(platform["client_latency_s"], 0.0);
  EXPECT_DOUBLE_EQ(platform["client_bandwidth_Bps"].get<double>(),
                   std::max(measured.client_Bps, origin.bandwidth_Bps()));
  EXPECT_NEAR(platform["disk_write_Bps"].get<double>(),
              static_cast<double>(2 * kBig) / measured.finalize_busy_s, 1.0);
  EXPECT_EQ(lines_of(dir_ / "rec.jsonl").size(), status.records);
}

// RecordOptions::outcomes: a row per demand as it ends (its outcome, reason,
// latency and how it was served) and per task (its times, attempts, bytes),
// beside the recording, with the recording's ids.
TEST_F(RecordTest, OutcomeRowsSayWhatHappenedToEachDemandAndTask) {
  backend::RecordOptions r = record();
  r.outcomes = true;
  std::ofstream(dir_ / "www" / "held.bin") << content_of("held.bin", kSize);
  server_->hold("/held.bin", 10'000);
  {
    Client client(options(r));
    EXPECT_EQ(client.fetch(ref("a.bin"), demand(1)).get().outcome, DemandOutcome::succeeded);
    ArtifactRef missing = ref("missing.bin");
    missing.sha256.reset();
    EXPECT_EQ(client.fetch(missing, demand(2)).get().outcome, DemandOutcome::failed);
    std::promise<DemandOutcome> cancelled;
    const DemandHandle h = client.subscribe(ref("held.bin"), demand(3), [&](backend::DemandResult x) {
      cancelled.set_value(x.outcome);
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    client.cancel(h);
    EXPECT_EQ(cancelled.get_future().get(), DemandOutcome::cancelled);
    EXPECT_EQ(client.fetch(ref("a.bin"), demand(4)).get().outcome, DemandOutcome::succeeded);
    server_->release("/held.bin");
    client.end_recording();
  }
  const auto demands = csv_rows(backend::record_outcome_path(r.path, false));
  const auto tasks = csv_rows(backend::record_outcome_path(r.path, true));
  ASSERT_EQ(demands.size(), 5u);
  EXPECT_EQ(demands[0], (std::vector<std::string>{"demand", "owner", "artifact", "priority",
                                                  "t_subscribe", "t_end", "latency_s", "outcome",
                                                  "task", "served_by", "reason"}));
  // The recording's subscribes, in order, name the same demands and artifacts.
  std::vector<json> subscribes;
  for (const json& l : lines_of(r.path))
    if (l.value("op", "") == "subscribe") subscribes.push_back(l);
  ASSERT_EQ(subscribes.size(), 4u);
  std::map<std::string, std::vector<std::string>> by_demand;
  for (std::size_t i = 1; i < demands.size(); ++i)
    by_demand[demands[i][0]] = demands[i];
  const auto& ok = by_demand.at(subscribes[0]["demand"]);
  const auto& missing = by_demand.at(subscribes[1]["demand"]);
  const auto& cancelled = by_demand.at(subscribes[2]["demand"]);
  const auto& hit = by_demand.at(subscribes[3]["demand"]);
  EXPECT_EQ(ok[1], "o1");
  EXPECT_EQ(ok[2], subscribes[0]["artifact"]);
  EXPECT_EQ(ok[7], "succeeded");
  EXPECT_EQ(ok[9], "transfer");
  EXPECT_EQ(ok[10], "");
  EXPECT_NEAR(std::stod(ok[6]), std::stod(ok[5]) - std::stod(ok[4]), 2e-6);
  EXPECT_EQ(missing[7], "failed");
  EXPECT_NE(missing[10].find("HTTP 404"), std::string::npos) << missing[10];
  EXPECT_EQ(cancelled[7], "cancelled");
  EXPECT_EQ(cancelled[10], "cancelled");
  EXPECT_GE(std::stod(cancelled[6]), 0.09);
  EXPECT_EQ(hit[7], "succeeded");
  EXPECT_EQ(hit[9], "cache");
  EXPECT_EQ(hit[8], "");
  // Tasks: a.bin installed after one attempt with its bytes; missing.bin failed.
  ASSERT_GE(tasks.size(), 3u);
  EXPECT_EQ(tasks[0][0], "task");
  std::map<std::string, std::vector<std::string>> task_by_id;
  for (std::size_t i = 1; i < tasks.size(); ++i)
    task_by_id[tasks[i][0]] = tasks[i];
  const auto& a_task = task_by_id.at(ok[8]);
  EXPECT_EQ(a_task[1], ok[2]);
  EXPECT_EQ(a_task[6], "installed");
  EXPECT_EQ(a_task[7], "1");
  EXPECT_EQ(a_task[8], std::to_string(kSize));
  EXPECT_EQ(a_task[9], "1");
  EXPECT_LE(std::stod(a_task[3]), std::stod(a_task[4]));  // First start, then received.
  const auto& missing_task = task_by_id.at(missing[8]);
  EXPECT_EQ(missing_task[6], "failed");
  EXPECT_EQ(missing_task[4], "");  // No body was received.
}

// A task's row holds its effective priority's changes and the orphan
// policy's answers, as the simulator's rows do; a demand still waiting when
// the client is destroyed gets its cancel, and the recording has that cancel
// (else the simulator of the recording would wait for it).
TEST_F(RecordTest, TaskRowsHoldPriorityChangesAndOrphanAnswersAndTheDestructorsCancelsAreRecorded) {
  backend::RecordOptions r = record();
  r.outcomes = true;
  for (const char* name : {"held.bin", "left.bin"}) {
    std::ofstream(dir_ / "www" / name) << content_of(name, kSize);
    server_->hold(std::string("/") + name, 10'000);
  }
  std::promise<DemandOutcome> left;
  {
    Client client(options(r));
    std::promise<DemandOutcome> cancelled;
    const DemandHandle h = client.subscribe(ref("held.bin"), demand(1, 1),
                                            [&](backend::DemandResult x) {
                                              cancelled.set_value(x.outcome);
                                            });
    client.set_priority(h, 3);
    // Its first bytes have arrived and the progress (every 0.1 s) has told the core.
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    client.cancel(h);
    EXPECT_EQ(cancelled.get_future().get(), DemandOutcome::cancelled);
    client.subscribe(ref("left.bin"), demand(2, 2),
                     [&](backend::DemandResult x) { left.set_value(x.outcome); });
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }  // Destroyed while left.bin's demand waits.
  EXPECT_EQ(left.get_future().get(), DemandOutcome::cancelled);
  server_->release("/held.bin");
  server_->release("/left.bin");

  std::map<std::string, std::string> demand_of_artifact;  // Recording's ids.
  std::map<std::string, double> cancelled_at;
  for (const json& l : lines_of(r.path)) {
    if (l.value("op", "") == "subscribe") demand_of_artifact[l["artifact"]] = l["demand"];
    if (l.value("op", "") == "cancel") cancelled_at[l["demand"]] = l["t"].get<double>();
  }
  ASSERT_EQ(demand_of_artifact.size(), 2u);
  ASSERT_EQ(cancelled_at.size(), 2u);  // The caller's cancel and the destructor's.
  const auto demands = csv_rows(backend::record_outcome_path(r.path, false));
  const auto tasks = csv_rows(backend::record_outcome_path(r.path, true));
  ASSERT_EQ(demands.size(), 3u);
  ASSERT_EQ(tasks.size(), 3u);
  std::map<std::string, std::vector<std::string>> task_by_id;
  for (std::size_t i = 1; i < tasks.size(); ++i)
    task_by_id[tasks[i][0]] = tasks[i];
  for (std::size_t i = 1; i < demands.size(); ++i) {
    const auto& d = demands[i];
    EXPECT_EQ(d[7], "cancelled") << d[0];
    ASSERT_TRUE(cancelled_at.count(d[0])) << d[0];
    EXPECT_NEAR(cancelled_at[d[0]], std::stod(d[5]), 1e-3) << d[0];
    const auto& task = task_by_id.at(d[8]);
    EXPECT_EQ(task[6], "aborted") << d[0];
    const json timeline = json::parse(task[10]);
    const json decisions = json::parse(task[11]);
    ASSERT_EQ(decisions.size(), 1u) << task[11];
    EXPECT_EQ(decisions[0]["decision"], "abort");
    EXPECT_NEAR(decisions[0]["t"].get<double>(), std::stod(task[5]), 1e-3);
    if (d[3] == "1") {
      // Subscribed at 1, raised to 3, then the orphan's abort (the level it
      // went to as it ended is not listed).
      ASSERT_EQ(timeline.size(), 2u) << task[10];
      EXPECT_EQ(timeline[0][1], 1);
      EXPECT_EQ(timeline[1][1], 3);
      EXPECT_LE(timeline[0][0].get<double>(), timeline[1][0].get<double>());
      EXPECT_GE(decisions[0]["bytes_done"].get<std::uint64_t>(), 1u);
    } else {
      ASSERT_EQ(timeline.size(), 1u) << task[10];
      EXPECT_EQ(timeline[0][1], 2);
    }
  }
}

}  // namespace
}  // namespace dfl::testing
