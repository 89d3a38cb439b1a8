// Starts nginx for a test on 127.0.0.1: HTTP/2 over TLS with a certificate
// made for the test (openssl), and HTTP/2 by prior knowledge on a second,
// plain port. Its own configuration, pid, logs and temporary paths in a
// scratch directory; one process (master_process off), killed with the test.
//
// The access log says, per response, which connection carried it and how:
// "CONNECTION PROTOCOL STATUS URI PRIORITY RANGE BYTES COMPLETION"; tests
// read it with log().
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "loopback.h"  // dead_port(): a free port to give nginx.

namespace dfl::testing {

// One line of the access log.
struct NginxLogLine {
  std::string connection, protocol, uri, priority, range;
  int status = 0;
  long bytes = 0;
  bool complete = false;  // nginx sent the whole response.
};

class Nginx {
 public:
  // Serves `root`; under /slow/ each response is sent at `slow_Bps`.
  Nginx(const std::filesystem::path& root, const std::filesystem::path& work, long slow_Bps)
      : work_(work) {
    namespace fs = std::filesystem;
    fs::create_directories(work_ / "logs");
    const fs::path key = work_ / "key.pem";
    cert_ = work_ / "cert.pem";
    const std::string openssl =
        "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 1 "
        "-subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 -keyout '" +
        key.string() + "' -out '" + cert_.string() + "' >/dev/null 2>&1";
    if (std::system(openssl.c_str()) != 0) throw std::runtime_error("openssl could not make a certificate");
    tls_port_ = dead_port();
    plain_port_ = dead_port();
    const fs::path w = work_;
    std::ofstream conf(w / "nginx.conf");
    conf << "daemon off;\nmaster_process off;\nworker_processes 1;\n"
         << "pid " << (w / "nginx.pid").string() << ";\n"
         << "error_log " << (w / "logs/error.log").string() << " warn;\n"
         << "events { worker_connections 256; }\n"
         << "http {\n"
         << "  log_format dfl '$connection $server_protocol $status \"$request_uri\" "
            "\"$http_priority\" \"$http_range\" $body_bytes_sent \"$request_completion\"';\n"
         << "  access_log " << (w / "logs/access.log").string() << " dfl;\n";
    for (const char* temp : {"client_body", "proxy", "fastcgi", "uwsgi", "scgi"}) {
      conf << "  " << temp << "_temp_path " << (w / (std::string("tmp-") + temp)).string() << ";\n";
    }
    conf << "  keepalive_requests 100000;\n"
         << "  http2_max_concurrent_streams 128;\n"
         << "  server {\n"
         << "    listen 127.0.0.1:" << tls_port_ << " ssl http2;\n"
         << "    listen 127.0.0.1:" << plain_port_ << " http2;\n"
         << "    ssl_certificate " << cert_.string() << ";\n"
         << "    ssl_certificate_key " << key.string() << ";\n"
         << "    root " << root.string() << ";\n"
         << "    location /slow/ { limit_rate " << slow_Bps << "; }\n"
         << "  }\n}\n";
    conf.close();
    pid_ = ::fork();
    if (pid_ == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // Gone with the test, also when it aborts.
      const std::string prefix = w.string() + "/", config = (w / "nginx.conf").string();
      ::execlp("nginx", "nginx", "-p", prefix.c_str(), "-c", config.c_str(),
               static_cast<char*>(nullptr));
      ::execl("/usr/sbin/nginx", "nginx", "-p", prefix.c_str(), "-c", config.c_str(),
              static_cast<char*>(nullptr));
      ::_exit(127);
    }
    for (int i = 0; i < 500 && !(listening(tls_port_) && listening(plain_port_)); ++i) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        throw std::runtime_error("nginx did not start: " + read(w / "logs/error.log"));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  ~Nginx() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }

  std::string https_base() const { return "https://127.0.0.1:" + std::to_string(tls_port_); }
  std::string plain_base() const { return "http://127.0.0.1:" + std::to_string(plain_port_); }
  const std::filesystem::path& certificate() const { return cert_; }

  // The responses so far (nginx writes a line once a response has ended).
  std::vector<NginxLogLine> log() const {
    std::vector<NginxLogLine> out;
    std::istringstream in(read(work_ / "logs/access.log"));
    for (std::string line; std::getline(in, line);) {
      NginxLogLine l;
      std::istringstream fields(line);
      fields >> l.connection >> l.protocol >> l.status;
      l.uri = quoted(fields);
      l.priority = quoted(fields);
      l.range = quoted(fields);
      fields >> l.bytes;
      l.complete = quoted(fields) == "OK";
      if (l.priority == "-") l.priority.clear();
      if (l.range == "-") l.range.clear();
      out.push_back(std::move(l));
    }
    return out;
  }

 private:
  static std::string quoted(std::istringstream& in) {
    std::string word;
    in >> word;
    if (word.size() >= 2 && word.front() == '"' && word.back() == '"') {
      return word.substr(1, word.size() - 2);
    }
    return word;
  }
  static std::string read(const std::filesystem::path& path) {
    std::ifstream in(path);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  static bool listening(int port) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(static_cast<std::uint16_t>(port));
    const bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
    ::close(fd);
    return ok;
  }

  std::filesystem::path work_, cert_;
  int tls_port_ = 0, plain_port_ = 0;
  pid_t pid_ = -1;
};

}  // namespace dfl::testing
