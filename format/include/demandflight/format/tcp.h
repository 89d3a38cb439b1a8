// TCP's slow start in closed form: the delay the simulator's `tcp` network
// model adds before a transfer's bytes flow (sim/tcp_connections.h), and the
// lone transfer that describe() assumes (format/describe.h).
#pragma once

#include <algorithm>

namespace dfl::format {

struct SlowStart {
  double delay_s = 0;        // Time beyond bytes / share.
  double window_bytes = 0;   // The congestion window when the transfer ends.
  int window_limited_rounds = 0;
};

// A transfer of `bytes` that starts with a congestion window of `window_bytes`
// on a path of round trip `rtt_s`, whose share of the links is `share_Bps`.
// Each round trip sends one window; while the window is below the share's
// bandwidth-delay product the round trip is only partly used, and the rest
// of it is the delay: the sum over those rounds of (rtt - window / share),
// except the round in which the last byte goes out. The window doubles each
// round (no loss: slow start ends when the share is reached, and a transfer
// that outgrows it keeps the window it needed); in the last round it grows
// to twice that round's bytes at most (Linux grows a window only while it is
// below twice what is in flight), so a small response leaves it as it was.
// Inline: the backend's measured platform inverts it (backend/src/platform_meter.cpp)
// without linking the format library.
inline SlowStart slow_start(double bytes, double window_bytes, double rtt_s, double share_Bps) {
  SlowStart out;
  out.window_bytes = window_bytes;
  if (!(share_Bps > 0) || !(rtt_s > 0) || !(window_bytes > 0)) return out;
  const double bdp = share_Bps * rtt_s;
  double window = window_bytes;
  double sent = 0;
  // At most 64 doublings: a window of 2^64 segments covers any share.
  for (int round = 0; round < 64; ++round) {
    if (window >= bdp) {
      out.window_bytes = window;  // Slow start is over: the share is reached.
      return out;
    }
    if (sent + window >= bytes) {
      // The last bytes went out in this round. Slow start grows the window by
      // what is acknowledged while the window is below twice what is in
      // flight (tcp_is_cwnd_limited()): to twice this round's bytes at most.
      out.window_bytes = std::max(window, 2 * (bytes - sent));
      return out;
    }
    out.delay_s += rtt_s - window / share_Bps;
    ++out.window_limited_rounds;
    sent += window;
    window *= 2;
  }
  out.window_bytes = window;
  return out;
}

}  // namespace dfl::format
