// A token bucket: the rate a class of transfers may receive at
// (ClientOptions::throttle). Tokens are bytes; a piece of a body is let
// through while the bucket holds any, and may leave it in debt, which later
// pieces wait out: the average stays at the rate whatever the piece sizes.
#pragma once

#include <algorithm>

namespace dfl::backend::detail {

class TokenBucket {
 public:
  // `rate_Bps` 0: unlimited. The bucket holds at most 50 ms of the rate (and
  // at least 16 KiB), so an idle class cannot save up a burst.
  void set_rate(double rate_Bps, double now_s) {
    refill(now_s);
    rate_Bps_ = rate_Bps;
    tokens_ = std::min(tokens_, burst());
  }
  double rate_Bps() const { return rate_Bps_; }
  bool limited() const { return rate_Bps_ > 0; }

  void refill(double now_s) {
    if (limited()) tokens_ = std::min(burst(), tokens_ + (now_s - last_s_) * rate_Bps_);
    last_s_ = now_s;
  }
  bool ready() const { return !limited() || tokens_ > 0; }
  void take(double bytes) {
    if (limited()) tokens_ -= bytes;
  }
  // Seconds until ready() (0 when it is).
  double wait_s() const { return ready() ? 0 : -tokens_ / rate_Bps_; }

 private:
  double burst() const { return std::max(16384.0, rate_Bps_ * 0.05); }

  double rate_Bps_ = 0;
  double tokens_ = 0;
  double last_s_ = 0;
};

}  // namespace dfl::backend::detail
