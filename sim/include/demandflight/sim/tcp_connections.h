// TCP connection state for the flow model (`--network-model tcp`).
//
// A flow model (CM02) moves every transfer at its fair share of the links
// from its first byte. A real transfer does not: on a new connection it first
// pays the TCP handshake, and its first round trips are limited by the
// congestion window (slow start: 10 segments, doubling per round trip) until
// the window covers the share's bandwidth-delay product. A kept-alive
// connection keeps its window, unless it was idle for longer than its
// retransmission timeout: Linux then halves the window once per timeout
// elapsed, down to the initial window (`tcp_slow_start_after_idle`,
// tcp_cwnd_restart()). The idle time is the server's: from its last send to
// the next request's arrival, one round trip more than the client's gap.
//
// TcpConnections keeps, per origin, the pool of connections the backend keeps
// (libcurl reuses the first idle connection in the order they were opened and
// closes one that is aborted mid-body or fails), and says for each transfer
// the delay to add before its bytes flow at the flow model's rate: a closed
// form of the size, the round trip, the window and the share (slow_start()).
// The simulator delays the start of the transfer's comm by that much, so that
// the link is left to the others meanwhile, as a window-limited flow leaves it.
#pragma once

#include <cstdint>
#include <vector>

#include "demandflight/format/defaults.h"
#include "demandflight/format/tcp.h"

namespace dfl::sim {

struct TcpSettings {
  double segment_bytes = format::defaults::tcp_segment_bytes;
  double initial_window_segments = format::defaults::tcp_initial_window_segments;
  double rto_min_s = 0.2;               // Linux TCP_RTO_MIN.
  double handshake_round_trips = format::defaults::tcp_handshake_round_trips;
  double max_idle_s = 118;              // libcurl closes a connection idle this long.
  // libcurl's connection cache holds at most this many connections (all origins,
  // busy and idle) per transfer in its multi handle (CURLMOPT_MAXCONNECTS unset);
  // 0: no limit.
  double cache_per_transfer = 4;
  // Whether an idle connection's window shrinks (window_after_idle): true for
  // CUBIC servers, false for BBR ones (format::ServerCongestionControl).
  bool restart_after_idle = true;

  double initial_window_bytes() const { return segment_bytes * initial_window_segments; }
  // Linux's retransmission timeout once the round trip is known: the
  // smoothed RTT plus its variance, the variance floored at TCP_RTO_MIN.
  double rto_s(double rtt_s) const { return rtt_s + rto_min_s; }
};

// The delay of slow start (format/tcp.h: describe() uses it too).
using format::slow_start;
using format::SlowStart;

// The window after `idle_s` without sending (tcp_cwnd_restart(): halved once
// for each full retransmission timeout after the first, never below the
// initial window; unchanged if idle for less than one timeout).
double window_after_idle(double window_bytes, double idle_s, double rto_s,
                         double initial_window_bytes);

class TcpConnections {
 public:
  struct Start {
    double delay_s = 0;  // Handshake plus slow start, before the bytes flow.
    bool new_connection = false;
    double handshake_s = 0;
    double slow_start_s = 0;
    std::uint64_t connection = 0;  // The connection's number (1, 2, ... as opened).
    double idle_s = 0;             // The server's idle time on a kept one (0 on a new one).
    double window_bytes = 0;       // The window the transfer starts with (after idle).
  };

  explicit TcpConnections(std::uint32_t origins, TcpSettings settings = {});

  // A transfer `transfer` of `bytes` from `origin` starts at `now_s` on a path
  // of round trip `rtt_s` with a share of `share_Bps` (of the path's
  // `path_Bps` alone): it takes an idle connection (the first opened) or
  // opens one, and returns the delay. A connection whose window covered its
  // share leaves slow start; from then on its window is at least the path's
  // bandwidth-delay product: loss-based TCP (CUBIC) in congestion avoidance
  // grows it until the bottleneck's queue overflows, so when the other
  // transfers end it takes the freed bandwidth at once, as the flow model
  // does. Only an idle period (window_after_idle) shrinks it again.
  Start start(std::uint64_t transfer, std::uint32_t origin, double now_s, double bytes,
              double rtt_s, double share_Bps, double path_Bps);
  // The transfer ended at `now_s`: its connection stays for the next one
  // (`keep`, a complete response) or is closed (an abort mid-body, an error).
  // As libcurl returns a kept connection to its cache, it closes the one idle
  // longest (of any origin) if the cache then holds more than
  // `cache_per_transfer` connections per transfer still in the multi handle,
  // the one ending included (Curl_conncache_return_conn()): with one transfer
  // at a time, at most 4 connections survive.
  void finish(std::uint64_t transfer, std::uint32_t origin, double now_s, bool keep);
  // The origin went down: its connections are gone.
  void close_all(std::uint32_t origin);

  std::uint32_t busy(std::uint32_t origin) const { return busy_[origin]; }
  std::uint32_t busy_total() const { return busy_total_; }
  std::uint64_t opened() const { return opened_; }
  std::uint64_t evicted() const { return evicted_; }  // Closed by the cache's limit.

 private:
  struct Connection {
    std::uint64_t number = 0;    // As opened: 1, 2, ...
    std::uint64_t transfer = 0;  // Running on it, or 0 if idle.
    bool busy = false;
    double window_bytes = 0;
    double last_sent_s = 0;
  };
  TcpSettings settings_;
  std::vector<std::vector<Connection>> pools_;  // Per origin, in the order opened.
  std::vector<std::uint32_t> busy_;
  std::uint32_t busy_total_ = 0;
  std::uint64_t opened_ = 0;
  std::uint64_t evicted_ = 0;
  std::uint64_t connections_ = 0;  // In every pool.
};

}  // namespace dfl::sim
