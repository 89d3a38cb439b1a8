// Starts tests/backend/loopback_server.py on 127.0.0.1 for a test, serving a
// scratch directory, and talks to its control endpoints.
#pragma once

#include <curl/curl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

namespace dfl::testing {

// A port on 127.0.0.1 nothing listens on (bound, then closed): connections
// to it are refused, as to a mirror that is down.
inline int dead_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  const bool bound = fd >= 0 && ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
                     ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0;
  if (fd >= 0) ::close(fd);
  if (!bound) throw std::runtime_error("no free port on 127.0.0.1");
  return ntohs(a.sin_port);
}

class LoopbackServer {
 public:
  // `etag_salt`: mixed into every ETag (a mirror whose ETags are not another's).
  explicit LoopbackServer(const std::filesystem::path& root, const std::string& etag_salt = "") {
    int out[2];
    if (::pipe(out) != 0) throw std::runtime_error("pipe");
    pid_ = ::fork();
    if (pid_ == 0) {
      // Gone with the test, also when the test aborts: a server left behind
      // keeps ctest's output pipe open, and ctest waits for it.
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      ::dup2(out[1], 1);
      ::close(out[0]);
      ::execl(DFL_PYTHON, DFL_PYTHON, DFL_LOOPBACK_SERVER, "--root", root.c_str(), "--etag-salt",
              etag_salt.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    ::close(out[1]);
    FILE* f = ::fdopen(out[0], "r");
    char line[64] = {};
    if (std::fgets(line, sizeof line, f) == nullptr || std::sscanf(line, "PORT %d", &port_) != 1) {
      throw std::runtime_error("the loopback server did not start");
    }
    std::fclose(f);
  }
  ~LoopbackServer() {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }

  int port() const { return port_; }
  std::string base() const { return "http://127.0.0.1:" + std::to_string(port_); }

  nlohmann::json stats() { return nlohmann::json::parse(request("/_control/stats", nullptr)); }
  void faults(const nlohmann::json& list) { request("/_control/faults", &list); }
  // A `hold` fault parks a body mid-way until its path is released: tests
  // that must act while a transfer is in flight wait on that, not on time.
  void hold(const std::string& path, long after_bytes) {
    faults({{{"path", path}, {"kind", "hold"}, {"after_bytes", after_bytes}}});
  }
  void release(const std::string& path) {
    const nlohmann::json body{{"path", path}};
    request("/_control/release", &body);
  }
  void rate(long bytes_per_s) {
    const nlohmann::json body{{"rate_Bps", bytes_per_s}};
    request("/_control/rate", &body);
  }

 private:
  std::string request(const std::string& path, const nlohmann::json* body) {
    CURL* curl = curl_easy_init();
    std::string response;
    const std::string url = base() + path;
    const std::string payload = body ? body->dump() : "";
    curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
    if (body) curl_easy_setopt(curl, CURLOPT_POSTFIELDS, payload.c_str());
    curl_easy_setopt(
        curl, CURLOPT_WRITEFUNCTION, +[](char* d, std::size_t s, std::size_t n, void* u) {
          static_cast<std::string*>(u)->append(d, s * n);
          return s * n;
        });
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, &response);
    const CURLcode rc = curl_easy_perform(curl);
    curl_easy_cleanup(curl);
    if (rc != CURLE_OK) throw std::runtime_error(std::string("control: ") + curl_easy_strerror(rc));
    return response;
  }

  pid_t pid_ = -1;
  int port_ = 0;
};

}  // namespace dfl::testing
