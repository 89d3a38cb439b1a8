// TCP connection state for the flow model: see tcp_connections.h.
#include "demandflight/sim/tcp_connections.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace dfl::sim {

double window_after_idle(double window_bytes, double idle_s, double rto_s,
                         double initial_window_bytes) {
  if (!(idle_s > rto_s) || window_bytes <= initial_window_bytes) return window_bytes;
  double window = window_bytes;
  // tcp_cwnd_restart(): while ((delta -= rto) > 0 && cwnd > restart) cwnd >>= 1.
  for (double delta = idle_s - rto_s; delta > 0 && window > initial_window_bytes;
       delta -= rto_s) {
    window /= 2;
  }
  return std::max(window, initial_window_bytes);
}

TcpConnections::TcpConnections(std::uint32_t origins, TcpSettings settings)
    : settings_(settings), pools_(origins), busy_(origins, 0) {}

TcpConnections::Start TcpConnections::start(std::uint64_t transfer, std::uint32_t origin,
                                            double now_s, double bytes, double rtt_s,
                                            double share_Bps, double path_Bps) {
  auto& pool = pools_.at(origin);
  // libcurl closes a connection idle for longer than its maximum age.
  connections_ -= std::erase_if(pool, [&](const Connection& c) {
    return !c.busy && now_s - c.last_sent_s > settings_.max_idle_s;
  });
  Start out;
  Connection* chosen = nullptr;
  for (Connection& c : pool) {  // The first idle one, in the order opened.
    if (!c.busy) {
      chosen = &c;
      break;
    }
  }
  if (chosen == nullptr) {
    // None idle: a new one. The scheduler's per-origin slots keep the pool
    // within max_per_origin, as libcurl's connection limit does.
    Connection fresh;
    fresh.window_bytes = settings_.initial_window_bytes();
    fresh.number = ++opened_;
    ++connections_;
    pool.push_back(fresh);
    chosen = &pool.back();
    out.new_connection = true;
    out.handshake_s = settings_.handshake_round_trips * rtt_s;
  } else {
    // The server's idle time: from its last send (half a round trip before
    // the last byte reached the client) to this request's arrival (half a
    // round trip after the client sends it).
    out.idle_s = now_s - chosen->last_sent_s + rtt_s;
    if (settings_.restart_after_idle) {
      chosen->window_bytes = window_after_idle(chosen->window_bytes, out.idle_s,
                                               settings_.rto_s(rtt_s),
                                               settings_.initial_window_bytes());
    }
  }
  out.connection = chosen->number;
  out.window_bytes = chosen->window_bytes;
  const SlowStart ss = slow_start(bytes, chosen->window_bytes, rtt_s, share_Bps);
  out.slow_start_s = ss.delay_s;
  out.delay_s = out.handshake_s + out.slow_start_s;
  chosen->window_bytes = ss.window_bytes;
  if (ss.window_bytes >= share_Bps * rtt_s) {  // Out of slow start: see start() in the header.
    chosen->window_bytes = std::max(ss.window_bytes, path_Bps * rtt_s);
  }
  chosen->busy = true;
  chosen->transfer = transfer;
  ++busy_[origin];
  ++busy_total_;
  return out;
}

void TcpConnections::finish(std::uint64_t transfer, std::uint32_t origin, double now_s,
                            bool keep) {
  auto& pool = pools_.at(origin);
  for (auto it = pool.begin(); it != pool.end(); ++it) {
    if (!it->busy || it->transfer != transfer) continue;
    const std::uint32_t in_multi = busy_total_;  // This transfer's handle still counts.
    --busy_[origin];
    --busy_total_;
    if (!keep) {
      pool.erase(it);
      --connections_;
      return;
    }
    it->busy = false;
    it->transfer = 0;
    it->last_sent_s = now_s;
    if (settings_.cache_per_transfer > 0 &&
        static_cast<double>(connections_) > settings_.cache_per_transfer * in_multi) {
      // Curl_conncache_extract_oldest(): the idle one unused longest, any origin.
      std::vector<Connection>* oldest_pool = nullptr;
      std::size_t oldest = 0;
      for (auto& p : pools_) {
        for (std::size_t i = 0; i < p.size(); ++i) {
          if (p[i].busy) continue;
          if (oldest_pool == nullptr || p[i].last_sent_s < (*oldest_pool)[oldest].last_sent_s) {
            oldest_pool = &p;
            oldest = i;
          }
        }
      }
      if (oldest_pool != nullptr) {
        oldest_pool->erase(oldest_pool->begin() + static_cast<std::ptrdiff_t>(oldest));
        --connections_;
        ++evicted_;
      }
    }
    return;
  }
  throw std::logic_error("TcpConnections::finish: no connection runs that transfer");
}

void TcpConnections::close_all(std::uint32_t origin) {
  auto& pool = pools_.at(origin);
  connections_ -= std::erase_if(pool, [](const Connection& c) { return !c.busy; });
  // Busy ones are closed by their transfers' finish (not kept).
}

}  // namespace dfl::sim
