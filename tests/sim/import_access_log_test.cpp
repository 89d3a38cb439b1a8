// `demandflight import access-log`: the Combined Log Format, an Apache
// LogFormat and an nginx log_format written for the tests, bad input by file
// and line, and a log that nginx itself writes while a client fetches,
// abandons a response mid-body and gives up on one that never came (499).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "cli_runner.h"

namespace dfl::testing {
namespace {

using nlohmann::json;

std::vector<json> records_with(const std::vector<json>& t, const std::string& op) {
  std::vector<json> out;
  for (std::size_t i = 1; i < t.size(); ++i)
    if (t[i]["op"] == op) out.push_back(t[i]);
  return out;
}

std::map<std::string, json> by_demand(const std::vector<json>& records) {
  std::map<std::string, json> out;
  for (const json& r : records)
    out[r["demand"].get<std::string>()] = r;
  return out;
}

// Lines in the order the responses ended (nginx's order); times are ends.
const std::string kCombined =
    "10.0.0.1 - - [06/Dec/2026:10:00:01 +0000] \"GET /a.bin HTTP/1.1\" 200 5000 \"-\" \"curl/7.88\"\n"
    "10.0.0.2 - bob [06/Dec/2026:10:00:02 +0000] \"GET /a.bin HTTP/1.1\" 200 1200 \"-\" "
    "\"Mozilla/5.0 (X11; \\\"quoted\\\")\"\n"
    "10.0.0.1 - - [06/Dec/2026:11:00:03 +0100] \"GET /b.bin?v=2 HTTP/1.1\" 499 0 \"-\" \"curl\"\n"
    "10.0.0.1 - - [06/Dec/2026:10:00:04 +0000] \"GET /b.bin?v=2 HTTP/1.1\" 200 3000 \"-\" \"curl\"\n"
    "10.0.0.1 - - [06/Dec/2026:10:00:05 +0000] \"GET /a.bin HTTP/1.1\" 304 0 \"-\" \"curl\"\n"
    "10.0.0.1 - - [06/Dec/2026:10:00:05 +0000] \"POST /upload HTTP/1.1\" 200 10 \"-\" \"curl\"\n"
    "10.0.0.1 - - [06/Dec/2026:10:00:06 +0000] \"GET /missing HTTP/1.1\" 404 150 \"-\" \"curl\"\n"
    "10.0.0.9 - - [06/Dec/2026:10:00:06 +0000] \"\\x16\\x03\\x01\" 400 157 \"-\" \"-\"\n"
    "10.0.0.3 - - [06/Dec/2026:10:00:07 +0000] \"GET /v.mp4 HTTP/1.1\" 206 1000 \"-\" \"vlc\"\n"
    "\n";

TEST(ImportAccessLog, CombinedLinesAreDemandsByClientAndAbandonsAreCancels) {
  const CliRun run = run_cli(kCombined, {"import", "access-log", "TRACE", "--name", "web"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const std::vector<json> t = lines_of(run.out);
  const json& x = t[0]["x-import"];
  EXPECT_EQ(x["format"], "access-log");
  EXPECT_EQ(x["lines"], 10);
  EXPECT_EQ(x["demands"], 5);
  EXPECT_EQ(x["cancels"], 2);
  EXPECT_EQ(x["abandoned_by_status"], 1);
  EXPECT_EQ(x["cut_short"], 1);
  EXPECT_EQ(x["sized_by_206_only"], 1);
  EXPECT_EQ(x["skipped"], json::parse(R"j({"empty line": 1, "method not --methods": 1,
      "request not METHOD URI PROTOCOL": 1, "status 304 (the client's cache had it)": 1,
      "status 404": 1})j"));
  const auto subs = by_demand(records_with(t, "subscribe"));
  ASSERT_EQ(subs.size(), 5u) << run.out;
  // Times from the first line's; 11:00:03+01:00 is 10:00:03Z.
  EXPECT_EQ(subs.at("l1")["t"], 0.0);
  EXPECT_EQ(subs.at("l1")["owner"], "10.0.0.1");
  EXPECT_EQ(subs.at("l2")["owner"], "10.0.0.2");
  EXPECT_EQ(subs.at("l3")["t"], 2.0);
  EXPECT_EQ(subs.at("l3")["artifact"], "/b.bin?v=2");
  EXPECT_EQ(subs.at("l9")["t"], 6.0);
  const auto artifacts = records_with(t, "artifact");
  std::map<std::string, std::uint64_t> size;
  for (const json& a : artifacts)
    size[a["id"]] = a["size"];
  EXPECT_EQ(size, (std::map<std::string, std::uint64_t>{
                      {"/a.bin", 5000}, {"/b.bin?v=2", 3000}, {"/v.mp4", 1000}}))
      << "the largest 200, one artifact for a 200 cut short";
  EXPECT_EQ(artifacts[0]["origin"], "origin");
  const auto cancels = by_demand(records_with(t, "cancel"));
  ASSERT_EQ(cancels.size(), 2u);
  EXPECT_EQ(cancels.at("l2")["t"], 1.0) << "a 200 with fewer bytes: cut short at its end";
  EXPECT_EQ(cancels.at("l3")["t"], 2.0) << "499 at its end (no duration: its start)";

  // The query stripped, one owner, and the trace simulates.
  const CliRun stripped = run_cli(kCombined, {"import", "access-log", "TRACE", "--strip-query",
                                              "--owner-by", "none"});
  ASSERT_EQ(stripped.exit_code, 0) << stripped.err;
  const auto s = by_demand(records_with(lines_of(stripped.out), "subscribe"));
  EXPECT_EQ(s.at("l3")["artifact"], "/b.bin");
  EXPECT_EQ(s.at("l3")["owner"], "log");
  // Owners by address and user agent.
  const CliRun agents = run_cli(kCombined, {"import", "access-log", "TRACE", "--owner-by", "addr+agent"});
  ASSERT_EQ(agents.exit_code, 0) << agents.err;
  const auto a = by_demand(records_with(lines_of(agents.out), "subscribe"));
  EXPECT_EQ(a.at("l1")["owner"], "10.0.0.1 curl/7.88");
  EXPECT_EQ(a.at("l2")["owner"], "10.0.0.2 Mozilla/5.0 (X11; \\\"quoted\\\")");
  const CliRun sim = run_cli(run.out, {"sim", "TRACE", "--out", "OUT", "--quiet"});
  ASSERT_EQ(sim.exit_code, 0) << sim.err;
  EXPECT_EQ(sim.result["summary"]["outcomes"]["succeeded"].get<int>() +
                sim.result["summary"]["outcomes"]["cancelled"].get<int>(),
            5);
}

TEST(ImportAccessLog, ApacheLogFormatStartsAtItsTimeAndEndsAfterD) {
  // Apache's %t is when the request came; %D its duration in microseconds;
  // %b is "-" for no bytes.
  const std::string log =
      "10.0.0.1 - - [06/Dec/2026:10:00:00 +0000] \"GET /big HTTP/1.1\" 200 9000 2500000\n"
      "10.0.0.2 - - [06/Dec/2026:10:00:01 +0000] \"GET /big HTTP/1.1\" 200 4000 1500000\n"
      "10.0.0.2 - - [06/Dec/2026:10:00:02 +0000] \"GET /big HTTP/1.1\" 499 - 250000\n";
  const CliRun run = run_cli(log, {"import", "access-log", "TRACE", "--format",
                                   "%h %l %u %t \"%r\" %>s %b %D"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const std::vector<json> t = lines_of(run.out);
  EXPECT_EQ(t[0]["x-import"]["options"]["time-is"], "start");
  const auto subs = by_demand(records_with(t, "subscribe"));
  EXPECT_EQ(subs.at("l2")["t"], 1.0);
  const auto cancels = by_demand(records_with(t, "cancel"));
  ASSERT_EQ(cancels.size(), 2u);
  EXPECT_DOUBLE_EQ(cancels.at("l2")["t"].get<double>(), 2.5) << "start 1 s + 1.5 s";
  EXPECT_DOUBLE_EQ(cancels.at("l3")["t"].get<double>(), 2.25);
}

TEST(ImportAccessLog, AnNginxLogFormatWithMsecHostAndRequestTimeIsSortedByStart) {
  // Written as responses ended; the long one began first.
  const std::string log =
      "1796551200.500 cdn.example.com \"GET /s HTTP/2.0\" 200 100 0.100\n"
      "1796551201.000 cdn.example.com \"GET /l HTTP/2.0\" 200 90000 1.000\n"
      "1796551201.200 img.example.com \"GET /s HTTP/2.0\" 200 300 0.050\n";
  const std::string format = "$msec $host \"$request\" $status $body_bytes_sent $request_time";
  const CliRun run = run_cli(log, {"import", "access-log", "TRACE", "--format", format});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const std::vector<json> t = lines_of(run.out);
  const auto subs = records_with(t, "subscribe");
  ASSERT_EQ(subs.size(), 3u);
  EXPECT_EQ(subs[0]["demand"], "l2") << "it began at 1796551200.000";
  EXPECT_EQ(subs[0]["t"], 0.0);
  EXPECT_EQ(subs[0]["owner"], "log") << "no remote_addr: one owner";
  EXPECT_NEAR(subs[1]["t"].get<double>(), 0.4, 1e-6);
  EXPECT_EQ(subs[1]["artifact"], "cdn.example.com/s");
  EXPECT_EQ(subs[2]["artifact"], "img.example.com/s");
  const auto artifacts = records_with(t, "artifact");
  EXPECT_EQ(artifacts[0]["origin"], "cdn.example.com");
  EXPECT_EQ(artifacts[2]["origin"], "img.example.com");
  EXPECT_TRUE(records_with(t, "cancel").empty());

  // nginx's $request_completion: a response not sent whole is cut short,
  // whatever its bytes.
  const std::string completion =
      "1796551200.000 \"GET /x HTTP/1.1\" 200 1000 OK\n"
      "1796551201.000 \"GET /x HTTP/1.1\" 200 1000 \n";
  const CliRun cut = run_cli(completion, {"import", "access-log", "TRACE", "--format",
                                          "$msec \"$request\" $status $bytes_sent $request_completion"});
  ASSERT_EQ(cut.exit_code, 0) << cut.err;
  const std::vector<json> c = lines_of(cut.out);
  EXPECT_EQ(c[0]["x-import"]["cut_short"], 1);
  const auto cancels = records_with(c, "cancel");
  ASSERT_EQ(cancels.size(), 1u);
  EXPECT_EQ(cancels[0]["demand"], "l2");
}

std::string gzip(const std::string& text) {
  uLongf size = compressBound(static_cast<uLong>(text.size())) + 32;
  std::string out(size, '\0');
  z_stream z{};
  deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY);
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text.data()));
  z.avail_in = static_cast<uInt>(text.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&z, Z_FINISH), Z_STREAM_END);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

TEST(ImportAccessLog, ARotatedGzipLogReadsTheSame) {
  const CliRun plain = run_cli(kCombined, {"import", "access-log", "TRACE"});
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  const std::string gz = plain.dir + "/access.log.1.gz";
  std::ofstream(gz, std::ios::binary) << gzip(kCombined);
  const CliRun zipped = run_cli("", {"import", "access-log", gz});
  ASSERT_EQ(zipped.exit_code, 0) << zipped.err;
  json a = lines_of(plain.out)[0], b = lines_of(zipped.out)[0];
  a["x-import"].erase("inputs");
  b["x-import"].erase("inputs");
  EXPECT_EQ(a, b);
  EXPECT_EQ(plain.out.substr(plain.out.find('\n')), zipped.out.substr(zipped.out.find('\n')));
}

TEST(ImportAccessLog, BadInputIsNamedByFileLineAndField) {
  struct Case {
    std::string log;
    std::vector<std::string> options;
    std::string message;
  };
  const std::string ok = "1.2.3.4 - - [06/Dec/2026:10:00:01 +0000] \"GET /a HTTP/1.1\" 200 5 \"-\" \"c\"\n";
  const std::vector<Case> cases = {
      {ok + "1.2.3.4 - - [06/Dec/2026:10:00:01 +0000] \"GET /a HTTP/1.1\" 200 5\n", {},
       ":2: -: does not match the format: $body_bytes_sent: no \" \"\" after it"},
      {ok + "1.2.3.4 - - [yesterday] \"GET /a HTTP/1.1\" 200 5 \"-\" \"c\"\n", {},
       ":2: $time_local: \"yesterday\" is not a time"},
      {ok + "1.2.3.4 - - [06/Dec/2026:10:00:01 +0000] \"GET /a HTTP/1.1\" OK 5 \"-\" \"c\"\n", {},
       ":2: $status: \"OK\" is not an HTTP status"},
      {ok + "1.2.3.4 - - [06/Dec/2026:10:00:01 +0000] \"GET /a HTTP/1.1\" 200 -5 \"-\" \"c\"\n", {},
       ":2: $body_bytes_sent: \"-5\" is not a size in bytes"},
      {"{\"log\": {\"entries\": []}}\n", {}, ":1: -: does not match the format: $remote_addr: no \" - \" after it"},
      {"{\"log\": {\"entries\": []}}\n", {}, "(it looks like a HAR capture (import har))"},
      {"time,key,size\n1,a,5\n", {}, "(it looks like a CSV log (import csv))"},
      {ok, {"--format", "$remote_addr $status $body_bytes_sent"},
       "--format: has no field for a time"},
      {ok, {"--format", "$remote_addr$status"}, "have nothing between them"},
      {ok, {"--format", "plain words"}, "is not combined, common, an nginx log_format"},
      {ok, {"--owner-by", "addr+cookie"}, "--owner-by: the format has no field \"cookie\""},
      {ok, {"--time-is", "middle"}, "--time-is: \"middle\" is not start or end"},
      {ok, {"--abandon-status", "4xx"}, "--abandon-status: \"4xx\" is not an HTTP status"},
  };
  for (const Case& c : cases) {
    std::vector<std::string> args = {"import", "access-log", "TRACE"};
    args.insert(args.end(), c.options.begin(), c.options.end());
    const CliRun run = run_cli(c.log, args);
    EXPECT_EQ(run.exit_code, 2) << c.message;
    EXPECT_NE(run.err.find(c.message), std::string::npos) << run.err;
    EXPECT_EQ(run.out, "") << "nothing written";
  }
  // A bad line skipped when asked, and counted.
  const CliRun skip = run_cli(ok + "garbage\n" + ok, {"import", "access-log", "TRACE",
                                                     "--bad-lines", "skip"});
  ASSERT_EQ(skip.exit_code, 0) << skip.err;
  EXPECT_EQ(lines_of(skip.out)[0]["x-import"]["skipped"]["does not match the format"], 1);
  // A file that is not there: the system's reason.
  const CliRun missing = run_cli("", {"import", "access-log", "/nonexistent/access.log"});
  EXPECT_NE(missing.exit_code, 0);
  EXPECT_NE(missing.err.find("/nonexistent/access.log"), std::string::npos) << missing.err;
}

// --- A log nginx writes ---------------------------------------------------------------

int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

int connect_to(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// Sends a GET and reads up to `keep` bytes of the response (all of it when
// negative), then closes.
std::size_t get(int port, const std::string& path, long keep) {
  const int fd = connect_to(port);
  if (fd < 0) return 0;
  const std::string request =
      "GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
  (void)!::write(fd, request.data(), request.size());
  std::size_t got = 0;
  char buffer[16384];
  while (keep < 0 || got < static_cast<std::size_t>(keep)) {
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n <= 0) break;
    got += static_cast<std::size_t>(n);
  }
  ::close(fd);
  return got;
}

TEST(ImportAccessLog, ALogNginxWroteOfFetchesAndAbandonsImportsAndSimulates) {
  namespace fs = std::filesystem;
  const CliRun setup = run_cli("", {"gen", "session_churn", "--demands", "1"});  // A scratch directory.
  const fs::path work = fs::path(setup.dir) / "nginx";
  fs::create_directories(work / "root" / "slow");
  fs::create_directories(work / "logs");
  std::ofstream(work / "root" / "small.bin") << std::string(20000, 's');
  std::ofstream(work / "root" / "slow" / "big.bin") << std::string(1000000, 'b');
  const int port = free_port();
  // nginx's upstream for /api/: its first request is answered, the others
  // never are (the client gives up: 499).
  const int upstream = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(upstream, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(upstream, 16), 0);
  socklen_t len = sizeof addr;
  ::getsockname(upstream, reinterpret_cast<sockaddr*>(&addr), &len);
  const int upstream_port = ntohs(addr.sin_port);
  std::vector<int> held;
  std::thread answer([&] {
    for (int n = 0;; ++n) {
      const int c = ::accept(upstream, nullptr, nullptr);
      if (c < 0) return;  // Closed: the test is over.
      char buffer[4096];
      (void)!::read(c, buffer, sizeof buffer);
      if (n > 0) {
        held.push_back(c);
        continue;
      }
      const std::string response = "HTTP/1.1 200 OK\r\nContent-Length: 5000\r\nConnection: close\r\n\r\n" +
                                   std::string(5000, 'a');
      (void)!::write(c, response.data(), response.size());
      ::close(c);
    }
  });
  {
    std::ofstream conf(work / "nginx.conf");
    conf << "daemon off;\nmaster_process off;\nworker_processes 1;\n"
         << "pid " << (work / "nginx.pid").string() << ";\n"
         << "error_log " << (work / "logs/error.log").string() << " warn;\n"
         << "events { worker_connections 64; }\n"
         << "http {\n"
         << "  log_format timed '$remote_addr - $remote_user [$time_local] \"$request\" $status "
            "$body_bytes_sent \"$http_referer\" \"$http_user_agent\" $request_time';\n"
         << "  access_log " << (work / "logs/combined.log").string() << " combined;\n"
         << "  access_log " << (work / "logs/timed.log").string() << " timed;\n";
    for (const char* temp : {"client_body", "proxy", "fastcgi", "uwsgi", "scgi"})
      conf << "  " << temp << "_temp_path " << (work / (std::string("tmp-") + temp)).string() << ";\n";
    conf << "  server {\n"
         << "    listen 127.0.0.1:" << port << ";\n"
         << "    root " << (work / "root").string() << ";\n"
         << "    location /slow/ { limit_rate 1000000; }\n"
         << "    location /api/ { proxy_pass http://127.0.0.1:" << upstream_port << "; }\n"
         << "  }\n}\n";
  }
  const pid_t nginx = ::fork();
  if (nginx == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    const std::string prefix = work.string() + "/", config = (work / "nginx.conf").string();
    ::execlp("nginx", "nginx", "-p", prefix.c_str(), "-c", config.c_str(), static_cast<char*>(nullptr));
    ::execl("/usr/sbin/nginx", "nginx", "-p", prefix.c_str(), "-c", config.c_str(),
            static_cast<char*>(nullptr));
    ::_exit(127);
  }
  struct Cleanup {
    pid_t pid;
    int upstream;
    std::thread& answer;
    std::vector<int>& held;
    ~Cleanup() {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
      ::shutdown(upstream, SHUT_RDWR);
      ::close(upstream);
      answer.join();
      for (int fd : held) ::close(fd);
    }
  } cleanup{nginx, upstream, answer, held};
  int fd = -1;
  for (int i = 0; i < 500 && (fd = connect_to(port)) < 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_GE(fd, 0) << "nginx did not start";
  ::close(fd);

  EXPECT_GT(get(port, "/small.bin", -1), 20000u);
  EXPECT_GT(get(port, "/slow/big.bin", -1), 1000000u);  // About 1 s.
  get(port, "/small.bin", -1);
  get(port, "/slow/big.bin", 100000);  // Abandoned mid-body: a 200 cut short.
  EXPECT_GT(get(port, "/api/x", -1), 5000u);
  {
    // Gives up on a response that never comes: nginx logs 499.
    const int api = connect_to(port);
    const std::string request = "GET /api/x HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
    (void)!::write(api, request.data(), request.size());
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    ::close(api);
  }
  get(port, "/nope", -1);  // 404.
  // nginx writes a line once it has seen each request end.
  const fs::path combined = work / "logs/combined.log", timed = work / "logs/timed.log";
  auto lines = [](const fs::path& p) {
    std::ifstream in(p);
    return std::count(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>(), '\n');
  };
  for (int i = 0; i < 500 && lines(timed) < 7; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ASSERT_EQ(lines(timed), 7) << read_file(timed.string());

  const CliRun run = run_cli("", {"import", "access-log", combined.string()});
  ASSERT_EQ(run.exit_code, 0) << run.err << read_file(combined.string());
  const json x = lines_of(run.out)[0]["x-import"];
  EXPECT_EQ(x["demands"], 6) << x.dump() << read_file(combined.string());
  EXPECT_EQ(x["abandoned_by_status"], 1) << x.dump();
  EXPECT_EQ(x["cut_short"], 1) << x.dump() << read_file(combined.string());
  EXPECT_EQ(x["cancels"], 2) << x.dump();
  EXPECT_EQ(x["skipped"]["status 404"], 1) << x.dump();
  // The log with $request_time: the cut-short fetch began before its line's time.
  const std::string format =
      "$remote_addr - $remote_user [$time_local] \"$request\" $status $body_bytes_sent "
      "\"$http_referer\" \"$http_user_agent\" $request_time";
  const CliRun with_time = run_cli("", {"import", "access-log", timed.string(), "--format", format});
  ASSERT_EQ(with_time.exit_code, 0) << with_time.err << read_file(timed.string());
  const std::vector<json> t = lines_of(with_time.out);
  EXPECT_EQ(t[0]["x-import"]["cancels"], 2);
  std::map<std::string, std::uint64_t> size;
  for (const json& a : records_with(t, "artifact"))
    size[a["id"]] = a["size"];
  EXPECT_EQ(size, (std::map<std::string, std::uint64_t>{
                      {"/api/x", 5000}, {"/slow/big.bin", 1000000}, {"/small.bin", 20000}}));
  // It describes and compares.
  const CliRun described = run_cli(with_time.out, {"describe", "TRACE"});
  EXPECT_EQ(described.exit_code, 0) << described.err;
  const CliRun compared =
      run_cli(with_time.out, {"compare", "TRACE", "--policies", "keep-partial", "--seeds", "1"});
  EXPECT_EQ(compared.exit_code, 0) << compared.err;
  EXPECT_NE(compared.out.find("keep-partial"), std::string::npos) << compared.out;
}

}  // namespace
}  // namespace dfl::testing
