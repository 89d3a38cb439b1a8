// A delay line between two TAP devices: a network round trip in user space,
// for kernels without netem (bench/fidelity.py).
//
//   delay_line TAP_A TAP_B PORT:RTT_S [PORT:RTT_S...]
//
// Creates the TAP devices TAP_A and TAP_B (the caller gives them addresses and
// moves one into a network namespace; the devices live as long as this
// process), prints "ready" on stdout, and then forwards every Ethernet frame
// from one to the other, a TCP segment of a listed port (source or
// destination) held for half that port's round trip in each direction, every
// other frame (ARP, other ports) at once. Frames of one direction and one
// port leave in the order they came. The round trip is then in the network,
// where TCP sees it: the handshake, slow start and its restart after idle
// pay it as they would across a real path. Stops on SIGTERM or SIGINT.
#include <arpa/inet.h>
#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <deque>
#include <map>
#include <string>
#include <vector>

namespace {

volatile std::sig_atomic_t stopping = 0;

int open_tap(const std::string& name) {
  const int fd = ::open("/dev/net/tun", O_RDWR | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    std::perror("delay_line: /dev/net/tun");
    std::exit(1);
  }
  ifreq request{};
  request.ifr_flags = IFF_TAP | IFF_NO_PI;
  std::strncpy(request.ifr_name, name.c_str(), IFNAMSIZ - 1);
  if (::ioctl(fd, TUNSETIFF, &request) < 0) {
    std::perror(("delay_line: TUNSETIFF " + name).c_str());
    std::exit(1);
  }
  return fd;
}

double now_s() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// The TCP ports of an IPv4 TCP frame, or false.
bool tcp_ports(const unsigned char* frame, std::size_t size, std::uint16_t& source,
               std::uint16_t& destination) {
  if (size < 14 + 20 + 4 || frame[12] != 0x08 || frame[13] != 0x00) return false;  // IPv4
  const unsigned char* ip = frame + 14;
  if (ip[9] != 6) return false;  // TCP
  const std::size_t header = static_cast<std::size_t>(ip[0] & 0x0f) * 4;
  if (size < 14 + header + 4) return false;
  const unsigned char* tcp = ip + header;
  source = static_cast<std::uint16_t>(tcp[0] << 8 | tcp[1]);
  destination = static_cast<std::uint16_t>(tcp[2] << 8 | tcp[3]);
  return true;
}

struct Held {
  double due;
  std::vector<unsigned char> frame;
};

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: delay_line TAP_A TAP_B PORT:RTT_S [PORT:RTT_S...]\n");
    return 2;
  }
  std::map<std::uint16_t, double> one_way;  // Port -> half its round trip.
  for (int i = 3; i < argc; ++i) {
    const char* colon = std::strchr(argv[i], ':');
    char* end = nullptr;
    const long port = std::strtol(argv[i], &end, 10);
    const double rtt = colon ? std::strtod(colon + 1, &end) : -1;
    if (colon == nullptr || port <= 0 || port > 65535 || !(rtt >= 0) || *end != '\0') {
      std::fprintf(stderr, "delay_line: %s: expected PORT:RTT_S\n", argv[i]);
      return 2;
    }
    one_way[static_cast<std::uint16_t>(port)] = rtt / 2;
  }
  const int taps[2] = {open_tap(argv[1]), open_tap(argv[2])};
  std::signal(SIGTERM, [](int) { stopping = 1; });
  std::signal(SIGINT, [](int) { stopping = 1; });
  std::printf("ready\n");
  std::fflush(stdout);

  // Per direction (0: A -> B, 1: B -> A) and port, a FIFO: one delay per port
  // keeps each FIFO in due order.
  std::map<std::uint16_t, std::deque<Held>> held[2];
  std::vector<unsigned char> buffer(65536);
  while (!stopping) {
    double next_due = -1;
    for (auto& direction : held) {
      for (auto& [port, queue] : direction) {
        if (!queue.empty() && (next_due < 0 || queue.front().due < next_due))
          next_due = queue.front().due;
      }
    }
    pollfd fds[2] = {{taps[0], POLLIN, 0}, {taps[1], POLLIN, 0}};
    timespec wait{};
    timespec* timeout = nullptr;
    if (next_due >= 0) {
      const double left = std::max(0.0, next_due - now_s());
      wait.tv_sec = static_cast<time_t>(left);
      wait.tv_nsec = static_cast<long>((left - static_cast<double>(wait.tv_sec)) * 1e9);
      timeout = &wait;
    }
    if (::ppoll(fds, 2, timeout, nullptr) < 0 && errno != EINTR) {
      std::perror("delay_line: ppoll");
      return 1;
    }
    const double t = now_s();
    for (int from = 0; from < 2; ++from) {
      if (!(fds[from].revents & POLLIN)) continue;
      for (;;) {
        const ssize_t n = ::read(taps[from], buffer.data(), buffer.size());
        if (n <= 0) break;
        const auto size = static_cast<std::size_t>(n);
        std::uint16_t source = 0, destination = 0;
        double delay = 0;
        std::uint16_t port = 0;
        if (tcp_ports(buffer.data(), size, source, destination)) {
          if (auto it = one_way.find(source); it != one_way.end()) {
            port = source;
            delay = it->second;
          } else if (auto it2 = one_way.find(destination); it2 != one_way.end()) {
            port = destination;
            delay = it2->second;
          }
        }
        if (delay <= 0) {
          (void)::write(taps[1 - from], buffer.data(), size);  // A full queue drops, as a link.
          continue;
        }
        held[from][port].push_back(
            Held{t + delay, std::vector<unsigned char>(buffer.begin(), buffer.begin() + n)});
      }
    }
    for (int from = 0; from < 2; ++from) {
      for (auto& [port, queue] : held[from]) {
        while (!queue.empty() && queue.front().due <= t) {
          (void)::write(taps[1 - from], queue.front().frame.data(), queue.front().frame.size());
          queue.pop_front();
        }
      }
    }
  }
  return 0;
}
