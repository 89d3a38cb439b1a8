// TCP's slow start in closed form: see tcp.h.
#include "demandflight/format/tcp.h"

#include <algorithm>

namespace dfl::format {

SlowStart slow_start(double bytes, double window_bytes, double rtt_s, double share_Bps) {
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
