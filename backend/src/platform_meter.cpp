#include "platform_meter.h"

#include <algorithm>
#include <vector>

namespace dfl::backend {

void PlatformMeter::transfer_started(std::uint64_t transfer, OriginId origin) {
  const bool others = !in_flight_.empty();
  for (auto& [id, t] : in_flight_)
    t.shared = true;
  in_flight_[transfer] = InFlight{origin, others};
}

void PlatformMeter::transfer_ended(std::uint64_t transfer, std::uint64_t bytes,
                                   std::optional<double> rate_Bps,
                                   std::optional<double> connect_s) {
  auto it = in_flight_.find(transfer);
  if (it == in_flight_.end()) return;  // Ended before (an abort, then its bytes).
  Origin& origin = origins_[it->second.origin];
  if (connect_s && *connect_s >= 0) {
    origin.rtt_s = origin.rtt_samples == 0 ? *connect_s : std::min(origin.rtt_s, *connect_s);
    ++origin.rtt_samples;
  }
  if (rate_Bps && !it->second.shared && bytes >= kLoneMinBytes) {
    origin.lone_Bps = std::max(origin.lone_Bps, *rate_Bps);
    ++origin.lone_samples;
  }
  in_flight_.erase(it);
}

void PlatformMeter::received(double now, std::uint64_t total_bytes) {
  last_s_ = now;
  last_bytes_ = total_bytes;
  if (window_start_s_ < 0 || total_bytes < window_start_bytes_) {
    window_start_s_ = now;
    window_start_bytes_ = total_bytes;
    return;
  }
  const double span = now - window_start_s_;
  if (span < kWindowS) return;
  busiest_Bps_ = std::max(busiest_Bps_,
                          static_cast<double>(total_bytes - window_start_bytes_) / span);
  ++windows_;
  window_start_s_ = now;
  window_start_bytes_ = total_bytes;
}

void PlatformMeter::finalize_started(double now) {
  if (finalizing_++ == 0) busy_since_s_ = now;
}

void PlatformMeter::finalize_ended(double now, std::uint64_t bytes) {
  if (finalizing_ == 0) return;
  if (--finalizing_ == 0) busy_s_ += now - busy_since_s_;
  finalized_bytes_ += bytes;
  ++finalizes_;
}

MeasuredPlatform PlatformMeter::measured() const {
  MeasuredPlatform out;
  for (const auto& [id, o] : origins_) {
    MeasuredPlatform::Origin m;
    m.origin = id;
    m.rtt_samples = o.rtt_samples;
    m.rtt_s = o.rtt_s;
    m.lone_Bps = o.lone_Bps;
    m.lone_samples = o.lone_samples;
    out.origins.push_back(m);
  }
  std::sort(out.origins.begin(), out.origins.end(),
            [](const auto& a, const auto& b) { return a.origin < b.origin; });
  out.client_Bps = busiest_Bps_;
  out.client_windows = windows_;
  // The window still open, if long enough to say something.
  const double open = last_s_ - window_start_s_;
  if (window_start_s_ >= 0 && open >= kLastWindowS && last_bytes_ >= window_start_bytes_) {
    out.client_Bps =
        std::max(out.client_Bps, static_cast<double>(last_bytes_ - window_start_bytes_) / open);
    ++out.client_windows;
  }
  out.finalize_bytes = finalized_bytes_;
  out.finalize_busy_s = busy_s_;
  out.finalizes = finalizes_;
  return out;
}

}  // namespace dfl::backend
