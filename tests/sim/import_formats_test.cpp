// `demandflight import oracle-general|har|cdp`, and the demand model every
// format shares: records field by field, the header's x-import, bad input by
// file and line (or record), and traces that simulate.
#include <gtest/gtest.h>
#include <zstd.h>

#include <cmath>
#include <cstdint>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "cli_runner.h"

namespace dfl::testing {
namespace {

using nlohmann::json;

std::vector<json> records_with(const std::vector<json>& t, const std::string& op) {
  std::vector<json> out;
  for (std::size_t i = 1; i < t.size(); ++i) {
    if (t[i]["op"] == op) out.push_back(t[i]);
  }
  return out;
}

// --- oracle-general --------------------------------------------------------------------

template <typename T>
void put(std::string& out, T v) {
  for (std::size_t i = 0; i < sizeof(T); ++i)
    out.push_back(static_cast<char>((static_cast<std::uint64_t>(v) >> (8 * i)) & 0xff));
}

std::string oracle_record(std::uint32_t time, std::uint64_t id, std::uint32_t size,
                          std::int64_t next = -1) {
  std::string r;
  put(r, time);
  put(r, id);
  put(r, size);
  put(r, next);
  return r;
}

std::string zstd(const std::string& data) {
  std::string out(ZSTD_compressBound(data.size()), '\0');
  const std::size_t n = ZSTD_compress(out.data(), out.size(), data.data(), data.size(), 3);
  EXPECT_FALSE(ZSTD_isError(n));
  out.resize(n);
  return out;
}

const std::string kOracle =
    oracle_record(1000, 7, 4096, 2) + oracle_record(1000, 0xFFFFFFFFFFFFFFFFull, 100, -1) +
    oracle_record(1002, 7, 4096, -1) + oracle_record(1003, 9, 0, -1) +  // Size 0: skipped.
    oracle_record(1005, 7, 8192, -1);  // A new size: a new revision.

TEST(ImportOracleGeneral, EachRecordIsADemandReadLittleEndianAndZstdReadsTheSame) {
  const CliRun run = run_cli(kOracle, {"import", "oracle-general", "TRACE", "--origin", "cdn"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const std::vector<json> t = lines_of(run.out);
  ASSERT_EQ(t.size(), 8u) << run.out;
  const json& x = t[0]["x-import"];
  EXPECT_EQ(x["format"], "oracle-general");
  EXPECT_EQ(x["records"], 5);
  EXPECT_EQ(x["demands"], 4);
  EXPECT_EQ(x["artifacts"], 3);
  EXPECT_EQ(x["size_changes"], 1);
  EXPECT_EQ(x["skipped"], json::parse(R"({"size 0": 1})"));
  EXPECT_EQ(x["options"]["start"], 1000.0);
  EXPECT_EQ(x["options"]["zstd_inputs"], 0);
  EXPECT_EQ(t[1], json::parse(R"({"op":"artifact","id":"7","resource":"7","revision":"r1",)"
                              R"("target":"import","generation":0,"size":4096,"origin":"cdn"})"));
  EXPECT_EQ(t[2], json::parse(R"({"op":"subscribe","t":0.0,"demand":"r1","owner":"log",)"
                              R"("artifact":"7","priority":1})"));
  EXPECT_EQ(t[3]["id"], "18446744073709551615") << "all 64 bits of the id";
  EXPECT_EQ(t[3]["size"], 100);
  EXPECT_EQ(t[5]["t"], 2.0);
  EXPECT_EQ(t[5]["demand"], "r3");
  EXPECT_EQ(t[6]["id"], "7@2");
  EXPECT_EQ(t[6]["size"], 8192);
  EXPECT_EQ(t[7]["t"], 5.0);
  EXPECT_EQ(t[7]["demand"], "r5");

  const CliRun packed =
      run_cli(zstd(kOracle), {"import", "oracle-general", "TRACE", "--origin", "cdn"});
  ASSERT_EQ(packed.exit_code, 0) << packed.err;
  const std::vector<json> z = lines_of(packed.out);
  ASSERT_EQ(z.size(), t.size());
  EXPECT_EQ(z[0]["x-import"]["options"]["zstd_inputs"], 1);
  for (std::size_t i = 1; i < t.size(); ++i)
    EXPECT_EQ(z[i], t[i]);

  const CliRun sim = run_cli(run.out, {"sim", "TRACE", "--out", "OUT", "--quiet"});
  ASSERT_EQ(sim.exit_code, 0) << sim.err;
  EXPECT_EQ(sim.result["demands"].size(), 4u);
}

TEST(ImportOracleGeneral, BadInputNamesTheRecord) {
  struct Case {
    std::string bytes, message;
  };
  const std::vector<Case> cases = {
      {kOracle.substr(0, 24 + 10), ": record 2: -: truncated: 10 of its 24 bytes"},
      {oracle_record(5, 1, 10) + oracle_record(7, 1, 10) + oracle_record(6, 2, 10),
       ": record 3: clock_time: 6 goes backwards"},
      {zstd(kOracle).substr(0, 20), "zstd"},
  };
  for (const Case& c : cases) {
    const CliRun run = run_cli(c.bytes, {"import", "oracle-general", "TRACE"});
    EXPECT_EQ(run.exit_code, 2);
    EXPECT_NE(run.err.find(c.message), std::string::npos) << run.err;
    EXPECT_TRUE(run.out.empty()) << "nothing written: " << run.out;
  }
  const CliRun before = run_cli(kOracle, {"import", "oracle-general", "TRACE", "--start", "1001"});
  EXPECT_EQ(before.exit_code, 2);
  EXPECT_NE(before.err.find(": record 1: clock_time: 1000 is before the start"), std::string::npos)
      << before.err;
}

// --- har ---------------------------------------------------------------------------------

// Two pages; entries out of order, a cached one, an aborted one whose URL
// arrived in another entry, a POST, a data: URL.
const std::string kHar = R"({"log": {
  "version": "1.2", "creator": {"name": "test", "version": "1"},
  "pages": [{"id": "page_1", "startedDateTime": "2026-03-01T10:00:00.000Z", "title": "a"},
            {"id": "page_2", "startedDateTime": "2026-03-01T10:00:02.000Z", "title": "b"}],
  "entries": [
    {"pageref": "page_1", "startedDateTime": "2026-03-01T10:00:00.250Z", "time": 40,
     "_priority": "High", "_resourceType": "script",
     "request": {"method": "GET", "url": "https://cdn.example.com/app.js#x"},
     "response": {"status": 200, "bodySize": 900, "content": {"size": 3000, "mimeType": "text/javascript"}}},
    {"pageref": "page_1", "startedDateTime": "2026-03-01T10:00:00.000Z", "time": 120,
     "_priority": "VeryHigh", "_resourceType": "document",
     "request": {"method": "GET", "url": "https://example.com/"},
     "response": {"status": 200, "bodySize": 5000, "content": {"size": 15000, "mimeType": "text/html; charset=utf-8"}}},
    {"pageref": "page_1", "startedDateTime": "2026-03-01T10:00:00.500Z", "time": 1,
     "_fromCache": "memory", "request": {"method": "GET", "url": "https://cdn.example.com/logo.png"},
     "response": {"status": 200, "bodySize": 0, "content": {"size": 7000}}},
    {"pageref": "page_2", "startedDateTime": "2026-03-01T11:00:02.100+01:00", "time": 50,
     "_priority": "Low", "_resourceType": "script",
     "request": {"method": "GET", "url": "https://cdn.example.com/app.js"},
     "response": {"status": 0, "bodySize": -1, "_error": "net::ERR_ABORTED", "content": {"size": 0}}},
    {"pageref": "page_2", "startedDateTime": "2026-03-01T10:00:02.200Z", "time": 10,
     "request": {"method": "POST", "url": "https://example.com/api"},
     "response": {"status": 200, "bodySize": 20, "content": {"size": 20}}},
    {"pageref": "page_2", "startedDateTime": "2026-03-01T10:00:02.300Z", "time": 0,
     "request": {"method": "GET", "url": "data:image/png;base64,AAAA"},
     "response": {"status": 200, "bodySize": 4, "content": {"size": 4}}},
    {"startedDateTime": "2026-03-01T10:00:03.000Z", "time": 30,
     "request": {"method": "GET", "url": "http://other.example.org:8080/big.bin"},
     "response": {"status": 200, "bodySize": 2000000, "content": {"size": -1}}},
    {"startedDateTime": "2026-03-01T10:00:04.000Z", "time": -1,
     "request": {"method": "GET", "url": "http://other.example.org:8080/big.bin"},
     "response": {"status": -1, "bodySize": -1, "content": {"size": -1}}},
    {"startedDateTime": "2026-03-01T10:00:04.500Z", "time": 20,
     "request": {"method": "GET", "url": "https://cdn.example.com/late.css"},
     "response": {"status": 200, "bodySize": -1, "_failureText": "net::ERR_ABORTED",
                  "headers": [{"name": "Content-Length", "value": "4321"}], "content": {"size": -1}}}
  ]}})";

TEST(ImportHar, EntriesAreDemandsByPageInTimeOrderAndAnAbortIsACancel) {
  const CliRun run = run_cli(kHar, {"import", "har", "TRACE", "--name", "web"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const std::vector<json> t = lines_of(run.out);
  const json& x = t[0]["x-import"];
  EXPECT_EQ(t[0]["name"], "web");
  EXPECT_EQ(x["format"], "har");
  EXPECT_EQ(x["entries"], 9);
  EXPECT_EQ(x["pages"], 2);
  EXPECT_EQ(x["demands"], 6);
  EXPECT_EQ(x["cancels"], 2);
  EXPECT_EQ(x["failed_entries"], 2);
  EXPECT_EQ(x["unfinished_entries"], 1);
  EXPECT_EQ(x["skipped"], json::parse(R"({"method POST": 1, "not an http(s) URL": 1,
                                          "served from the browser's cache": 1})"));
  EXPECT_EQ(x["options"]["start"], "2026-03-01T10:00:00+00:00");
  const std::vector<json> subs = records_with(t, "subscribe");
  ASSERT_EQ(subs.size(), 6u) << run.out;
  // In start order: the document (listed second) first.
  EXPECT_EQ(subs[0], json::parse(R"({"op":"subscribe","t":0.0,"demand":"e2","owner":"page_1",)"
                                 R"("artifact":"https://example.com/","priority":4})"));
  EXPECT_EQ(subs[1]["artifact"], "https://cdn.example.com/app.js") << "the fragment is not sent";
  EXPECT_DOUBLE_EQ(subs[1]["t"].get<double>(), 0.25);
  EXPECT_EQ(subs[1]["priority"], 3);
  // 11:00:02.100+01:00 is 10:00:02.100Z; its size from the entry that arrived.
  EXPECT_EQ(subs[2]["demand"], "e4");
  EXPECT_EQ(subs[2]["owner"], "page_2");
  EXPECT_EQ(subs[2]["artifact"], "https://cdn.example.com/app.js");
  EXPECT_DOUBLE_EQ(subs[2]["t"].get<double>(), 2.1);
  EXPECT_EQ(subs[2]["priority"], 1);
  EXPECT_EQ(subs[3]["owner"], "no-page");
  EXPECT_EQ(subs[3]["priority"], 2) << "no _priority: Medium";
  // Still running when the capture ended (time -1): a demand never withdrawn,
  // its size from its URL's entry that arrived.
  EXPECT_EQ(subs[4]["demand"], "e8");
  EXPECT_EQ(subs[4]["artifact"], "http://other.example.org:8080/big.bin");
  // Playwright's failure: a cancel at its end, its size from Content-Length.
  EXPECT_EQ(subs[5]["demand"], "e9");
  const std::vector<json> artifacts = records_with(t, "artifact");
  ASSERT_EQ(artifacts.size(), 4u);
  EXPECT_EQ(artifacts[3]["size"], 4321);
  EXPECT_EQ(artifacts[0]["size"], 15000) << "content.size by default";
  EXPECT_EQ(artifacts[0]["origin"], "https://example.com");
  EXPECT_EQ(artifacts[1]["size"], 3000);
  EXPECT_EQ(artifacts[2]["size"], 2000000) << "bodySize when content.size is unknown";
  EXPECT_EQ(artifacts[2]["origin"], "http://other.example.org:8080");
  const std::vector<json> cancels = records_with(t, "cancel");
  ASSERT_EQ(cancels.size(), 2u);
  EXPECT_EQ(cancels[0]["demand"], "e4");
  EXPECT_NEAR(cancels[0]["t"].get<double>(), 2.15, 1e-9) << "start + time (50 ms)";
  EXPECT_EQ(cancels[1]["demand"], "e9");
  EXPECT_NEAR(cancels[1]["t"].get<double>(), 4.52, 1e-9);

  // Options: body sizes, cached entries kept, priorities by resource type.
  const CliRun body =
      run_cli(kHar, {"import", "har", "TRACE", "--size-from", "body", "--cached", "demand",
                     "--priority-by", "type", "--priority-map", "document=3,script=2,*=0"});
  ASSERT_EQ(body.exit_code, 0) << body.err;
  const std::vector<json> b = lines_of(body.out);
  const std::vector<json> b_artifacts = records_with(b, "artifact");
  EXPECT_EQ(b_artifacts[0]["size"], 5000);
  EXPECT_EQ(b_artifacts[1]["size"], 900);
  EXPECT_EQ(b_artifacts[2]["size"], 7000) << "the cached logo: bodySize 0, so content.size";
  std::map<std::string, std::int64_t> priority_of;
  for (const json& s : records_with(b, "subscribe"))
    priority_of[s["demand"]] = s["priority"];
  EXPECT_EQ(priority_of,
            (std::map<std::string, std::int64_t>{
                {"e1", 2}, {"e2", 3}, {"e3", 0}, {"e4", 2}, {"e7", 0}, {"e8", 0}, {"e9", 0}}));
  EXPECT_EQ(b[0]["x-import"]["demand_model"]["priority_by"]["field"], "type");

  const CliRun sim = run_cli(run.out, {"sim", "TRACE", "--out", "OUT", "--quiet"});
  ASSERT_EQ(sim.exit_code, 0) << sim.err;
  EXPECT_EQ(sim.result["summary"]["outcomes"]["succeeded"].get<int>() +
                sim.result["summary"]["outcomes"]["cancelled"].get<int>(),
            6);
}

TEST(ImportHar, BadInputIsNamedByLineAndField) {
  struct Case {
    std::string har, message;
  };
  const std::vector<Case> cases = {
      {"{\"log\": {\"entries\": [\n{\"startedDateTime\": \"yesterday\", \"request\": {\"url\": "
       "\"https://a/\"}, \"response\": {\"status\": 200, \"bodySize\": 5}}]}}",
       ":2: log.entries[0].startedDateTime: \"yesterday\" is not an ISO 8601 date"},
      {"{\"log\": {\"entries\": [\n{},\n{\"startedDateTime\": \"2026-01-01T00:00:00Z\"}]}}",
       ":2: log.entries[0].request: missing, or not an object"},
      {"{\"log\": {\"entries\": [\n{\"startedDateTime\": \"2026-01-01T00:00:00Z\", \"_priority\": "
       "\"Urgent\", \"request\": {\"url\": \"https://a/\"}, \"response\": {\"status\": 200, "
       "\"bodySize\": 5}}]}}",
       ":2: log.entries[0]._priority: \"Urgent\" is not VeryLow"},
      {"{\"log\": {\"entries\": [\n\n{\"startedDateTime\": tru}]}}", ":3: -: not valid JSON"},
      {"{\"entries\": []}", ":1: log.entries: missing or empty"},
      {"{\"log\": {\"entries\": [\n{\"startedDateTime\": \"2026-01-01T00:00:00Z\", \"request\": "
       "{\"url\": \"https://a/\"}, \"response\": {\"status\": 200, \"bodySize\": 1e999}}]}}",
       ":2: -: not valid JSON"},
      {"{\"log\": {\"entries\": [\n{\"startedDateTime\": \"2026-01-01T00:00:00Z\", \"request\": "
       "{\"url\": \"https://a/\"}, \"response\": {\"status\": 200, \"bodySize\": 1e300}}]}}",
       ":2: log.entries[0].response: a size above 2^53 bytes"},
  };
  for (const Case& c : cases) {
    const CliRun run = run_cli(c.har, {"import", "har", "TRACE"});
    EXPECT_EQ(run.exit_code, 2) << c.har;
    EXPECT_NE(run.err.find(c.message), std::string::npos) << c.har << "\n" << run.err;
    EXPECT_EQ(run.err.find("json.exception"), std::string::npos) << run.err;
    EXPECT_TRUE(run.out.empty()) << "nothing written: " << run.out;
  }
}

// --- cdp ---------------------------------------------------------------------------------

// Four requests of frame F1 and one of F2: a priority raised then lowered, a
// cancel, a cache hit, a redirect, a failure, one unfinished with a
// Content-Length, and an event for a request sent before the capture.
const std::vector<std::string> kCdp = {
    R"({"method":"Network.requestWillBeSent","params":{"requestId":"1","loaderId":"L1","frameId":"F1","timestamp":100.0,"type":"Document","request":{"url":"https://example.com/","method":"GET","initialPriority":"VeryHigh"}}})",
    R"({"method":"Network.requestWillBeSent","params":{"requestId":"2","loaderId":"L1","frameId":"F1","timestamp":100.5,"type":"Image","request":{"url":"https://cdn.example.com/hero.jpg","method":"GET","initialPriority":"Low"}}})",
    R"({"method":"Network.resourceChangedPriority","params":{"requestId":"2","newPriority":"High","timestamp":100.7}})",
    R"({"method":"Network.responseReceived","params":{"requestId":"2","timestamp":100.75,"type":"Image","response":{"status":200,"mimeType":"image/jpeg","headers":{"content-length":"50000"}}}})",
    R"({"method":"Network.dataReceived","params":{"requestId":"2","timestamp":100.8,"dataLength":10,"encodedDataLength":10}})",
    R"({"method":"Network.responseReceived","params":{"requestId":"1","timestamp":100.85,"type":"Document","response":{"status":200,"mimeType":"text/html","encodedDataLength":300,"headers":{}}}})",
    R"({"method":"Network.loadingFinished","params":{"requestId":"1","timestamp":100.9,"encodedDataLength":25300}})",
    R"({"method":"Network.requestWillBeSent","params":{"requestId":"3","loaderId":"L2","frameId":"F2","timestamp":101.0,"type":"Script","request":{"url":"https://cdn.example.com/old.js","method":"GET","initialPriority":"Medium"}}})",
    R"({"method":"Network.requestWillBeSent","params":{"requestId":"3","loaderId":"L2","frameId":"F2","timestamp":101.2,"type":"Script","redirectResponse":{"status":301},"request":{"url":"https://cdn.example.com/new.js","method":"GET","initialPriority":"Medium"}}})",
    R"({"method":"Network.resourceChangedPriority","params":{"requestId":"2","newPriority":"Low","timestamp":101.3}})",
    R"({"method":"Network.loadingFailed","params":{"requestId":"2","timestamp":101.5,"type":"Image","errorText":"net::ERR_ABORTED","canceled":true}})",
    R"({"method":"Network.loadingFinished","params":{"requestId":"3","timestamp":101.6,"encodedDataLength":4000}})",
    R"({"method":"Network.requestWillBeSent","params":{"requestId":"4","loaderId":"L1","frameId":"F1","timestamp":102.0,"type":"Image","request":{"url":"https://cdn.example.com/logo.png","method":"GET","initialPriority":"Low"}}})",
    R"({"method":"Network.requestServedFromCache","params":{"requestId":"4"}})",
    R"({"method":"Network.loadingFinished","params":{"requestId":"4","timestamp":102.1,"encodedDataLength":0}})",
    R"({"method":"Network.requestWillBeSent","params":{"requestId":"5","loaderId":"L1","frameId":"F1","timestamp":102.5,"type":"Fetch","request":{"url":"https://api.example.com/x","method":"GET","initialPriority":"High"}}})",
    R"({"method":"Network.loadingFailed","params":{"requestId":"5","timestamp":102.6,"errorText":"net::ERR_CONNECTION_REFUSED","canceled":false}})",
    R"({"method":"Network.requestWillBeSent","params":{"requestId":"6","loaderId":"L1","frameId":"F1","timestamp":103.0,"type":"Media","request":{"url":"https://cdn.example.com/clip.mp4","method":"GET","initialPriority":"Low"}}})",
    R"({"method":"Network.responseReceived","params":{"requestId":"6","timestamp":103.1,"type":"Media","response":{"status":200,"mimeType":"video/mp4","headers":{"Content-Length":"900000"}}}})",
    R"({"method":"Network.loadingFinished","params":{"requestId":"99","timestamp":103.2,"encodedDataLength":5}})",
    R"({"method":"Page.frameNavigated","params":{"frame":{"id":"F1"}}})",
};

std::string as_array(const std::vector<std::string>& events) {
  std::string out = "[\n";
  for (std::size_t i = 0; i < events.size(); ++i)
    out += events[i] + (i + 1 < events.size() ? ",\n" : "\n");
  return out + "]\n";
}

TEST(ImportCdp, RequestsPriorityChangesAndCancelsFromTheEventsInEveryShape) {
  const CliRun run = run_cli(as_array(kCdp), {"import", "cdp", "TRACE"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const std::vector<json> t = lines_of(run.out);
  const json& x = t[0]["x-import"];
  EXPECT_EQ(x["format"], "cdp");
  EXPECT_EQ(x["events"], 21);
  EXPECT_EQ(x["events_ignored"], 1) << "Page.frameNavigated (dataReceived counts bytes)";
  EXPECT_EQ(x["events_of_requests_sent_before_the_capture"], 1);
  EXPECT_EQ(x["demands"], 4);
  EXPECT_EQ(x["set_priorities"], 2);
  EXPECT_EQ(x["cancels"], 1);
  EXPECT_EQ(x["skipped"], json::parse(R"({"failed: net::ERR_CONNECTION_REFUSED": 1,
      "redirect hop": 1, "served from the browser's cache": 1})"));
  EXPECT_EQ(x["options"]["start_timestamp"], 100.0);
  const std::vector<json> subs = records_with(t, "subscribe");
  ASSERT_EQ(subs.size(), 4u) << run.out;
  EXPECT_EQ(subs[0], json::parse(R"({"op":"subscribe","t":0.0,"demand":"q1","owner":"F1",)"
                                 R"("artifact":"https://example.com/","priority":4})"));
  EXPECT_EQ(subs[1]["artifact"], "https://cdn.example.com/hero.jpg");
  EXPECT_EQ(subs[1]["priority"], 1);
  EXPECT_EQ(subs[2]["artifact"], "https://cdn.example.com/new.js") << "the redirect's target";
  EXPECT_EQ(subs[2]["owner"], "F2");
  EXPECT_NEAR(subs[2]["t"].get<double>(), 1.2, 1e-9);
  EXPECT_EQ(subs[3]["artifact"], "https://cdn.example.com/clip.mp4");
  const std::vector<json> changes = records_with(t, "set_priority");
  ASSERT_EQ(changes.size(), 2u);
  EXPECT_EQ(changes[0]["demand"], subs[1]["demand"]);
  EXPECT_EQ(changes[0]["priority"], 3);
  EXPECT_NEAR(changes[0]["t"].get<double>(), 0.7, 1e-9);
  EXPECT_EQ(changes[1]["priority"], 1);
  const std::vector<json> cancels = records_with(t, "cancel");
  ASSERT_EQ(cancels.size(), 1u);
  EXPECT_EQ(cancels[0]["demand"], subs[1]["demand"]);
  EXPECT_NEAR(cancels[0]["t"].get<double>(), 1.5, 1e-9);
  std::map<std::string, std::uint64_t> sizes;
  for (const json& a : records_with(t, "artifact"))
    sizes[a["id"]] = a["size"];
  EXPECT_EQ(sizes,
            (std::map<std::string, std::uint64_t>{{"https://example.com/", 25000},
                                                  {"https://cdn.example.com/hero.jpg", 50000},
                                                  {"https://cdn.example.com/new.js", 4000},
                                                  {"https://cdn.example.com/clip.mp4", 900000}}))
      << "a cancelled or unfinished request's size from its Content-Length";

  // ChromeDriver's performance log and JSON Lines give the same trace.
  std::string perf = "[";
  std::string lines;
  for (std::size_t i = 0; i < kCdp.size(); ++i) {
    const json inner = {{"message", json::parse(kCdp[i])}, {"webview", "W"}};
    perf += json{{"level", "INFO"}, {"message", inner.dump()}, {"timestamp", 1}}.dump();
    perf += i + 1 < kCdp.size() ? "," : "]";
    lines += kCdp[i] + "\n";
  }
  for (const std::string& shape : {perf, lines}) {
    const CliRun other = run_cli(shape, {"import", "cdp", "TRACE"});
    ASSERT_EQ(other.exit_code, 0) << other.err;
    EXPECT_EQ(lines_of(other.out).size(), t.size());
    EXPECT_EQ(other.out.substr(other.out.find('\n')), run.out.substr(run.out.find('\n')));
  }

  const CliRun sim = run_cli(run.out, {"sim", "TRACE", "--out", "OUT", "--quiet"});
  ASSERT_EQ(sim.exit_code, 0) << sim.err;
  EXPECT_EQ(sim.result["demands"].size(), 4u);
}

TEST(ImportCdp, ACancelledRequestTakesItsSizeFromAnotherOfItsUrlAndOwnersByLoader) {
  std::vector<std::string> events = kCdp;
  events.push_back(
      R"({"method":"Network.requestWillBeSent","params":{"requestId":"7","loaderId":"L9","frameId":"F1","timestamp":104.0,"request":{"url":"https://cdn.example.com/hero.jpg","initialPriority":"Low"}}})");
  events.push_back(
      R"({"method":"Network.loadingFinished","params":{"requestId":"7","timestamp":104.5,"encodedDataLength":77000}})");
  const CliRun run = run_cli(as_array(events), {"import", "cdp", "TRACE", "--owner-by", "loader"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const std::vector<json> t = lines_of(run.out);
  const std::vector<json> subs = records_with(t, "subscribe");
  ASSERT_EQ(subs.size(), 5u);
  EXPECT_EQ(subs[1]["artifact"], "https://cdn.example.com/hero.jpg");
  EXPECT_EQ(subs[1]["owner"], "L1");
  EXPECT_EQ(subs[4]["owner"], "L9");
  EXPECT_EQ(records_with(t, "artifact")[1]["size"], 77000)
      << "the size that arrived for its URL, before its own Content-Length";
}

// Chrome writes encodedDataLength -1 for "unknown" (25 of 325 loadingFinished
// events in one news site's log): the size comes from the response's
// Content-Length, else from the bytes its dataReceived events counted, else the
// request is skipped with its reason; x-import counts each case.
TEST(ImportCdp, AnUnknownSizeOfMinusOneIsTakenFromTheHeadersOrTheBytesThatArrived) {
  const std::vector<std::string> events = {
      R"({"method":"Network.requestWillBeSent","params":{"requestId":"1","frameId":"F1","timestamp":10.0,"request":{"url":"https://a.example/with-length.js","initialPriority":"High"}}})",
      R"({"method":"Network.responseReceived","params":{"requestId":"1","timestamp":10.1,"response":{"status":200,"headers":{"Content-Length":"12345"}}}})",
      R"({"method":"Network.loadingFinished","params":{"requestId":"1","timestamp":10.2,"encodedDataLength":-1}})",
      R"({"method":"Network.requestWillBeSent","params":{"requestId":"2","frameId":"F1","timestamp":10.3,"request":{"url":"https://a.example/chunked.css","initialPriority":"High"}}})",
      R"({"method":"Network.responseReceived","params":{"requestId":"2","timestamp":10.4,"response":{"status":200,"headers":{}}}})",
      R"({"method":"Network.dataReceived","params":{"requestId":"2","timestamp":10.5,"dataLength":4000,"encodedDataLength":1500}})",
      R"({"method":"Network.dataReceived","params":{"requestId":"2","timestamp":10.6,"dataLength":3000,"encodedDataLength":1000}})",
      R"({"method":"Network.loadingFinished","params":{"requestId":"2","timestamp":10.7,"encodedDataLength":-1}})",
      R"({"method":"Network.requestWillBeSent","params":{"requestId":"3","frameId":"F1","timestamp":10.8,"request":{"url":"https://a.example/nothing.gif","initialPriority":"Low"}}})",
      R"({"method":"Network.loadingFinished","params":{"requestId":"3","timestamp":10.9,"encodedDataLength":-1}})",
  };
  const CliRun run = run_cli(as_array(events), {"import", "cdp", "TRACE"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const std::vector<json> t = lines_of(run.out);
  const json& x = t[0]["x-import"];
  EXPECT_EQ(x["demands"], 2);
  EXPECT_EQ(x["sizes_unknown_taken_from_content_length"], 1);
  EXPECT_EQ(x["sizes_unknown_taken_from_data_received"], 1);
  EXPECT_EQ(x["skipped"].size(), 1u) << x.dump();
  EXPECT_EQ(x["skipped"].begin().value(), 1) << x.dump();
  EXPECT_NE(x["skipped"].begin().key().find("size unknown"), std::string::npos) << x.dump();
  std::map<std::string, std::uint64_t> sizes;
  for (const json& a : records_with(t, "artifact"))
    sizes[a["id"]] = a["size"];
  EXPECT_EQ(sizes, (std::map<std::string, std::uint64_t>{
                       {"https://a.example/with-length.js", 12345},
                       {"https://a.example/chunked.css", 2500}}));
}

TEST(ImportCdp, ANavigationCancelsTheOldDocumentsOpenRequestsAtItsCommit) {
  // Frame F1 loads a page (loader L1) with an image that never finishes; at 101
  // the frame navigates (loader L2), and its response commits the new document at
  // 101.2. Chromium sent no loadingFailed for the image: it is cancelled then, and
  // a priority change after that end is dropped.
  const std::vector<std::string> events = {
      R"({"method":"Network.requestWillBeSent","params":{"requestId":"1","loaderId":"L1","frameId":"F1","timestamp":100.0,"type":"Document","request":{"url":"https://a.example/","initialPriority":"VeryHigh"}}})",
      R"({"method":"Network.loadingFinished","params":{"requestId":"1","timestamp":100.2,"encodedDataLength":900}})",
      R"({"method":"Network.requestWillBeSent","params":{"requestId":"2","loaderId":"L1","frameId":"F1","timestamp":100.5,"type":"Image","request":{"url":"https://a.example/big.jpg","initialPriority":"Low"}}})",
      R"({"method":"Network.responseReceived","params":{"requestId":"2","timestamp":100.6,"type":"Image","response":{"status":200,"headers":{"Content-Length":"800000"}}}})",
      R"({"method":"Network.requestWillBeSent","params":{"requestId":"9","loaderId":"L2","frameId":"F1","timestamp":101.0,"type":"Document","request":{"url":"https://a.example/next","initialPriority":"VeryHigh"}}})",
      R"({"method":"Network.responseReceived","params":{"requestId":"9","timestamp":101.2,"type":"Document","response":{"status":200,"headers":{}}}})",
      R"({"method":"Network.resourceChangedPriority","params":{"requestId":"2","newPriority":"High","timestamp":101.5}})",
      R"({"method":"Network.loadingFinished","params":{"requestId":"9","timestamp":101.3,"encodedDataLength":700}})",
  };
  const CliRun run = run_cli(as_array(events), {"import", "cdp", "TRACE"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const std::vector<json> t = lines_of(run.out);
  EXPECT_EQ(t[0]["x-import"]["cancelled_by_navigation"], 1);
  EXPECT_EQ(t[0]["x-import"]["priority_changes_after_the_end"], 1);
  EXPECT_EQ(records_with(t, "set_priority").size(), 0u);
  const std::vector<json> cancels = records_with(t, "cancel");
  ASSERT_EQ(cancels.size(), 1u);
  EXPECT_EQ(cancels[0]["demand"], "q2");
  EXPECT_NEAR(cancels[0]["t"].get<double>(), 1.2, 1e-9) << "at the new document's commit";
  EXPECT_EQ(records_with(t, "subscribe").size(), 3u) << "both documents and the image";
}

TEST(ImportCdp, BadInputIsNamedByLineAndEvent) {
  std::vector<std::string> bad = kCdp;
  bad[2] =
      R"({"method":"Network.resourceChangedPriority","params":{"requestId":"2","newPriority":"Highest","timestamp":100.7}})";
  CliRun run = run_cli(as_array(bad), {"import", "cdp", "TRACE"});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_NE(run.err.find(":4: event 2.params.newPriority: \"Highest\" is not VeryLow"),
            std::string::npos)
      << run.err;
  EXPECT_TRUE(run.out.empty());
  run = run_cli("{\"method\": \"Network.requestWillBeSent\"}\nnot json\n",
                {"import", "cdp", "TRACE"});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_NE(run.err.find(":1: event 0.params: missing"), std::string::npos) << run.err;
  run = run_cli("{\"method\": \"Page.x\"}\nnot json\n", {"import", "cdp", "TRACE"});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_NE(run.err.find(":2: -: not valid JSON"), std::string::npos) << run.err;
}

// --- The demand model ----------------------------------------------------------------------

std::string plain_log(int rows, int objects, double gap_s) {
  std::string log = "ts,obj,bytes,user,kind\n";
  for (int i = 0; i < rows; ++i) {
    log += std::to_string(i * gap_s) + ",o" + std::to_string(i % objects) + "," +
           std::to_string(1000 + 10 * (i % objects)) + ",u" + std::to_string(i % 3) + "," +
           (i % 2 == 0 ? "img" : "js") + "\n";
  }
  return log;
}

TEST(ImportDemandModel, AbandonmentIsSeededAndItsRateAndPatienceMatchTheParameters) {
  const int rows = 20000;
  const std::string log = plain_log(rows, 50, 0.01);
  const std::vector<std::string> args = {"import",
                                         "csv",
                                         "TRACE",
                                         "--time",
                                         "ts",
                                         "--key",
                                         "obj",
                                         "--size",
                                         "bytes",
                                         "--abandon",
                                         "p=0.3,dist=exponential,mean_s=2"};
  const CliRun a = run_cli(log, args);
  ASSERT_EQ(a.exit_code, 0) << a.err;
  const CliRun again = run_cli(log, args);
  // The same seed, the same trace (but for the input's path in the header).
  EXPECT_TRUE(again.out.substr(again.out.find('\n')) == a.out.substr(a.out.find('\n')));
  std::vector<std::string> other = args;
  other.insert(other.end(), {"--seed", "2"});
  const CliRun b = run_cli(log, other);
  ASSERT_EQ(b.exit_code, 0) << b.err;
  EXPECT_FALSE(b.out.substr(b.out.find('\n')) == a.out.substr(a.out.find('\n')));

  const std::vector<json> t = lines_of(a.out);
  std::map<std::string, double> subscribed;
  for (const json& s : records_with(t, "subscribe"))
    subscribed[s["demand"]] = s["t"];
  const std::vector<json> cancels = records_with(t, "cancel");
  // Binomial(20000, 0.3): sd 64.8; 5 sd.
  EXPECT_NEAR(static_cast<double>(cancels.size()), 0.3 * rows, 5 * 64.8);
  EXPECT_EQ(t[0]["x-import"]["abandoned_by_model"], cancels.size());
  double sum = 0, sum_sq = 0, last = 0;
  for (const json& c : cancels) {
    const double after = c["t"].get<double>() - subscribed.at(c["demand"]);
    EXPECT_GE(after, 0);
    EXPECT_GE(c["t"].get<double>(), last) << "cancels in time order";
    last = c["t"];
    sum += after;
    sum_sq += after * after;
  }
  const double n = static_cast<double>(cancels.size());
  const double mean = sum / n;
  // Exponential with mean 2: sd of the mean 2 / sqrt(n) ~ 0.026; 5 sd. Its sd is its mean.
  EXPECT_NEAR(mean, 2.0, 5 * 2.0 / std::sqrt(n));
  EXPECT_NEAR(std::sqrt(sum_sq / n - mean * mean), 2.0, 0.15);
  EXPECT_EQ(t[0]["x-import"]["demand_model"]["abandon"],
            json::parse(R"({"p": 0.3, "dist": "exponential", "mean_s": 2.0})"));

  // Lognormal: the median of the patience times is median_s.
  std::vector<std::string> lognormal = args;
  lognormal.back() = "p=1,dist=lognormal,median_s=0.5,sigma=1";
  const CliRun l = run_cli(log, lognormal);
  ASSERT_EQ(l.exit_code, 0) << l.err;
  std::vector<double> afters;
  for (const json& c : records_with(lines_of(l.out), "cancel"))
    afters.push_back(c["t"].get<double>() - subscribed.at(c["demand"]));
  ASSERT_EQ(afters.size(), static_cast<std::size_t>(rows));
  std::nth_element(afters.begin(), afters.begin() + rows / 2, afters.end());
  EXPECT_NEAR(afters[rows / 2], 0.5, 0.03);
}

TEST(ImportDemandModel, SessionsPrioritiesByAFieldAndDeadlines) {
  // u1 at 0, 1, 10 (a gap of 9 > 5: a second session); u2 at 2.
  const std::string log =
      "ts,obj,bytes,user,kind\n0,a,1000,u1,img\n1,b,2000000,u1,js\n2,c,10,u2,css\n10,a,1000,u1,"
      "js\n";
  const CliRun run =
      run_cli(log, {"import", "csv", "TRACE", "--time", "ts", "--key", "obj", "--size", "bytes",
                    "--owner", "user", "--sessions", "5", "--priority-by", "kind", "--priority-map",
                    "js=3,img=1,*=0", "--deadline", "3=2.5,*=30"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const std::vector<json> t = lines_of(run.out);
  const std::vector<json> subs = records_with(t, "subscribe");
  ASSERT_EQ(subs.size(), 4u);
  EXPECT_EQ(subs[0]["owner"], "u1#1");
  EXPECT_EQ(subs[1]["owner"], "u1#1");
  EXPECT_EQ(subs[2]["owner"], "u2#1");
  EXPECT_EQ(subs[3]["owner"], "u1#2");
  EXPECT_EQ(subs[0]["priority"], 1);
  EXPECT_EQ(subs[1]["priority"], 3);
  EXPECT_EQ(subs[2]["priority"], 0);
  EXPECT_EQ(subs[1]["timeout_s"], 2.5);
  EXPECT_EQ(subs[2]["timeout_s"], 30.0);
  const std::vector<json> ends = records_with(t, "end_owner");
  ASSERT_EQ(ends.size(), 3u);
  EXPECT_EQ(ends[0], json::parse(R"({"op":"end_owner","t":6.0,"owner":"u1#1"})"))
      << "once idle for the gap after its last request (at 1)";
  EXPECT_EQ(ends[1], json::parse(R"({"op":"end_owner","t":7.0,"owner":"u2#1"})"));
  EXPECT_EQ(ends[2], json::parse(R"({"op":"end_owner","t":15.0,"owner":"u1#2"})"));
  const json& x = t[0]["x-import"];
  EXPECT_EQ(x["sessions"], 3);
  EXPECT_EQ(x["owner_ends"], 3);
  EXPECT_EQ(x["deadlines"], 4);
  EXPECT_EQ(x["demands_by_priority"], json::parse(R"({"0": 1, "1": 1, "3": 2})"));

  // By size class: at most 1 KB 3, at most 1 MB 2, larger 0.
  const CliRun sized =
      run_cli(log, {"import", "csv", "TRACE", "--time", "ts", "--key", "obj", "--size", "bytes",
                    "--priority-by", "size", "--priority-map", "1000=3,1000000=2,*=0"});
  ASSERT_EQ(sized.exit_code, 0) << sized.err;
  std::vector<std::int64_t> priorities;
  for (const json& s : records_with(lines_of(sized.out), "subscribe"))
    priorities.push_back(s["priority"]);
  EXPECT_EQ(priorities, (std::vector<std::int64_t>{3, 0, 3, 3}));
}

TEST(ImportDemandModel, AModelMakesOrphansOfALogWithNone) {
  // Large objects asked for by three users in turn: plain, nothing is
  // cancelled and the policy is never asked.
  std::string log = "ts,obj,bytes,user\n";
  for (int i = 0; i < 60; ++i) {
    log += std::to_string(i * 4) + ",o" + std::to_string(i) + ",20000000,u" +
           std::to_string(i % 3) + "\n";
  }
  const std::vector<std::string> base = {"import", "csv",    "TRACE", "--time",  "ts",  "--key",
                                         "obj",    "--size", "bytes", "--owner", "user"};
  const CliRun plain = run_cli(log, base);
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  const CliRun plain_sim = run_cli(plain.out, {"sim", "TRACE", "--out", "OUT", "--quiet"});
  ASSERT_EQ(plain_sim.exit_code, 0) << plain_sim.err;
  auto decisions = [](const json& result) {
    std::size_t n = 0;
    for (const json& task : result["tasks"])
      n += task["orphan_decisions"].size();
    return n;
  };
  EXPECT_EQ(decisions(plain_sim.result), 0u);
  EXPECT_EQ(plain_sim.result["summary"]["outcomes"]["cancelled"], 0);

  std::vector<std::string> modelled = base;
  modelled.insert(modelled.end(),
                  {"--abandon", "p=0.5,dist=exponential,mean_s=1", "--sessions", "3"});
  const CliRun run = run_cli(log, modelled);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const CliRun sim = run_cli(run.out, {"sim", "TRACE", "--out", "OUT", "--quiet"});
  ASSERT_EQ(sim.exit_code, 0) << sim.err;
  EXPECT_GT(sim.result["summary"]["outcomes"]["cancelled"], 0);
  EXPECT_GT(decisions(sim.result), 0u) << "orphans arose, and the policy was asked";
}

TEST(ImportCdp, PushedResourcesAreDemandsOfTheirPageAndEveryDroppedEventIsCounted) {
  // A document; a script the server pushed (served "from cache" by the push);
  // an image from the browser's cache whose priority changed and that was
  // cancelled; a POST.
  const std::vector<std::string> events = {
      R"({"method":"Network.requestWillBeSent","params":{"requestId":"1","frameId":"F1","timestamp":10.0,"request":{"url":"https://a.example/","initialPriority":"VeryHigh"}}})",
      R"({"method":"Network.loadingFinished","params":{"requestId":"1","timestamp":10.2,"encodedDataLength":5000}})",
      R"({"method":"Network.requestWillBeSent","params":{"requestId":"2","frameId":"F1","timestamp":10.3,"request":{"url":"https://a.example/app.js","initialPriority":"High"}}})",
      R"({"method":"Network.requestServedFromCache","params":{"requestId":"2"}})",
      R"({"method":"Network.responseReceived","params":{"requestId":"2","timestamp":10.31,"response":{"status":200,"headers":{"content-length":"7000"},"timing":{"requestTime":10.3,"pushStart":10.05,"pushEnd":10.25}}}})",
      R"({"method":"Network.loadingFinished","params":{"requestId":"2","timestamp":10.32,"encodedDataLength":0}})",
      R"({"method":"Network.requestWillBeSent","params":{"requestId":"3","frameId":"F1","timestamp":10.4,"request":{"url":"https://a.example/logo.png","initialPriority":"Low"}}})",
      R"({"method":"Network.requestServedFromCache","params":{"requestId":"3"}})",
      R"({"method":"Network.resourceChangedPriority","params":{"requestId":"3","timestamp":10.45,"newPriority":"High"}})",
      R"({"method":"Network.loadingFailed","params":{"requestId":"3","timestamp":10.5,"canceled":true}})",
      R"({"method":"Network.requestWillBeSent","params":{"requestId":"4","frameId":"F1","timestamp":10.6,"request":{"url":"https://a.example/log","method":"POST","initialPriority":"Low"}}})",
      R"({"method":"Network.loadingFailed","params":{"requestId":"4","timestamp":10.7,"canceled":true}})",
  };
  const CliRun run = run_cli(as_array(events), {"import", "cdp", "TRACE"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const std::vector<json> t = lines_of(run.out);
  const json& x = t[0]["x-import"];
  EXPECT_EQ(x["pushed"], 1);
  EXPECT_EQ(x["demands"], 2) << "the document and the pushed script";
  const auto subs = records_with(t, "subscribe");
  ASSERT_EQ(subs.size(), 2u);
  EXPECT_EQ(subs[1]["artifact"], "https://a.example/app.js");
  EXPECT_EQ(subs[1]["owner"], "F1");
  EXPECT_EQ(records_with(t, "artifact")[1]["size"], 7000) << "its Content-Length";
  // Requests, cancels and priority changes read equal records plus skips.
  const json& skipped = x["skipped"];
  auto skips = [&](const char* why) { return skipped.contains(why) ? skipped[why].get<int>() : 0; };
  int skipped_requests = 0;
  for (const auto& [why, n] : skipped.items())
    if (why != "cancel of a skipped request" && why != "priority change of a skipped request")
      skipped_requests += n.get<int>();
  EXPECT_EQ(x["requests"], x["demands"].get<int>() + skipped_requests) << x.dump();
  EXPECT_EQ(x["cancels_read"], x["cancels"].get<int>() + skips("cancel of a skipped request"));
  EXPECT_EQ(skips("cancel of a skipped request"), 2) << x.dump();
  EXPECT_EQ(x["priority_changes_read"],
            x["set_priorities"].get<int>() + x["priority_changes_after_the_end"].get<int>() +
                skips("priority change of a skipped request"));
  EXPECT_EQ(skips("priority change of a skipped request"), 1) << x.dump();
  // Pushed ones skipped when asked.
  const CliRun skip = run_cli(as_array(events), {"import", "cdp", "TRACE", "--pushed", "skip"});
  ASSERT_EQ(skip.exit_code, 0) << skip.err;
  EXPECT_EQ(lines_of(skip.out)[0]["x-import"]["skipped"]["pushed by the server"], 1);
}

TEST(ImportHar, APushedEntryIsADemandNotACacheHit) {
  const std::string har = R"({"log": {"version": "1.2", "entries": [
{"startedDateTime": "2026-01-01T00:00:00Z", "time": 20, "request": {"method": "GET", "url": "https://a.example/"},
 "response": {"status": 200, "bodySize": 900, "content": {"size": 900}}},
{"startedDateTime": "2026-01-01T00:00:00.100Z", "time": 1, "_was_pushed": 1, "_fromCache": "memory",
 "request": {"method": "GET", "url": "https://a.example/app.js"},
 "response": {"status": 200, "bodySize": 0, "content": {"size": 4000}}},
{"startedDateTime": "2026-01-01T00:00:00.200Z", "time": 5, "request": {"method": "POST", "url": "https://a.example/log"},
 "response": {"status": 0, "_error": "net::ERR_ABORTED", "bodySize": 0}}]}})";
  const CliRun run = run_cli(har, {"import", "har", "TRACE"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const json x = lines_of(run.out)[0]["x-import"];
  EXPECT_EQ(x["pushed"], 1);
  EXPECT_EQ(x["demands"], 2) << x.dump();
  EXPECT_EQ(x["skipped"]["method POST"], 1);
  EXPECT_EQ(x["skipped"]["cancel of a skipped request"], 1) << "the POST was aborted";
}

TEST(ImportOptions, LimitImportsTheFirstNRequestsAndCountsOrStopsThere) {
  const std::string log = plain_log(50, 5, 1.0);
  const CliRun run = run_cli(log, {"import", "csv", "TRACE", "--time", "ts", "--key", "obj",
                                   "--size", "bytes", "--limit", "10"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const json x = lines_of(run.out)[0]["x-import"];
  EXPECT_EQ(x["demands"], 10);
  EXPECT_EQ(x["rows"], 10) << "csv stops reading at the limit";
  EXPECT_EQ(x["read_up_to_the_limit"], 1);
  EXPECT_EQ(records_with(lines_of(run.out), "subscribe").back()["demand"], "r10");
  // A format that sorts first counts the rest.
  const CliRun cdp = run_cli(as_array(kCdp), {"import", "cdp", "TRACE", "--limit", "2"});
  ASSERT_EQ(cdp.exit_code, 0) << cdp.err;
  const json cx = lines_of(cdp.out)[0]["x-import"];
  EXPECT_EQ(cx["demands"], 2);
  EXPECT_EQ(cx["skipped"]["beyond --limit"], 2) << cx.dump();
  const CliRun bad = run_cli(log, {"import", "csv", "TRACE", "--time", "ts", "--key", "obj",
                                   "--size", "bytes", "--limit", "0"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("--limit: \"0\" is not a number of requests"), std::string::npos) << bad.err;
}

TEST(ImportOptions, AFileInAnotherFormatSaysWhatItLooksLike) {
  struct Case {
    std::string input;
    std::vector<std::string> args;
    std::string says;
  };
  const std::string har = R"({"log": {"version": "1.2", "entries": []}})";
  const std::vector<Case> cases = {
      {har, {"import", "csv", "TRACE", "--time", "t", "--key", "k", "--size", "s"},
       "(it looks like a HAR capture (import har))"},
      {har, {"import", "cdp", "TRACE"}, "(it looks like a HAR capture (import har))"},
      {as_array(kCdp), {"import", "har", "TRACE"}, "(it looks like a DevTools protocol log (import cdp))"},
      {"t,key,size\n1,a,5\n", {"import", "har", "TRACE"}, "(it looks like a CSV log (import csv))"},
      {"1.2.3.4 - - [06/Dec/2026:10:00:01 +0000] \"GET /a HTTP/1.1\" 200 5 \"-\" \"c\"\n",
       {"import", "csv", "TRACE", "--time", "t", "--key", "k", "--size", "s"},
       "(it looks like a web server's access log (import access-log))"},
  };
  for (const Case& c : cases) {
    const CliRun run = run_cli(c.input, c.args);
    EXPECT_EQ(run.exit_code, 2) << c.says;
    EXPECT_NE(run.err.find(c.says), std::string::npos) << c.args[1] << ": " << run.err;
  }
}

TEST(ImportOptions, BadOrUnknownOptionsAreNamed) {
  const std::string log = "ts,obj,bytes\n0,a,10\n";
  struct Case {
    std::vector<std::string> extra;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{"--abandon", "p=2,dist=exponential,mean_s=1"}, "--abandon: p=2 is above 1"},
      {{"--abandon", "p=0.1,dist=gamma"}, "--abandon: dist=gamma is not exponential"},
      {{"--abandon", "p=0.1,dist=lognormal,median_s=1"}, "--abandon: dist=lognormal needs sigma"},
      {{"--priority-by", "kind"}, "--priority-by needs --priority-map"},
      {{"--priority-by", "size", "--priority-map", "big=1"},
       "--priority-map: \"big\" is not a size"},
      {{"--deadline", "0"}, "--deadline: \"0\" is not a number of seconds above 0"},
      {{"--sessions", "-1"}, "--sessions: the idle gap must be above 0 s"},
  };
  for (const Case& c : cases) {
    std::vector<std::string> args = {"import", "csv", "TRACE",  "--time", "ts",
                                     "--key",  "obj", "--size", "bytes"};
    args.insert(args.end(), c.extra.begin(), c.extra.end());
    const CliRun run = run_cli(log, args);
    EXPECT_NE(run.exit_code, 0);
    EXPECT_NE(run.err.find(c.message), std::string::npos) << run.err;
    EXPECT_TRUE(run.out.empty());
  }
}

}  // namespace
}  // namespace dfl::testing
