#include "platform_meter.h"

#include <algorithm>
#include <cmath>
#include <tuple>
#include <vector>

#include "demandflight/format/defaults.h"
#include "demandflight/format/tcp.h"

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
  origin.ended_bytes += bytes;
  if (connect_s && *connect_s >= 0) {
    origin.rtt_s = origin.rtt_samples == 0 ? *connect_s : std::min(origin.rtt_s, *connect_s);
    ++origin.rtt_samples;
  }
  if (rate_Bps && *rate_Bps > 0 && !it->second.shared && bytes >= kLoneMinBytes) {
    origin.lone_Bps = std::max(origin.lone_Bps, *rate_Bps);
    ++origin.lone_samples;
    if (connect_s && *connect_s > 0) {
      const auto b = static_cast<double>(bytes);
      if (auto path = path_rate(b, b / *rate_Bps, *connect_s)) {
        if (origin.path_Bps.size() < kMaxPathSamples) {
          origin.path_Bps.push_back(*path);
        } else {
          origin.path_Bps[origin.path_samples % kMaxPathSamples] = *path;
        }
        ++origin.path_samples;
      }
    }
  }
  in_flight_.erase(it);
}

void PlatformMeter::BusiestWindow::tick(double now, std::uint64_t bytes) {
  last_s = now;
  last_bytes = bytes;
  if (start_s < 0 || bytes < start_bytes) {
    start_s = now;
    start_bytes = bytes;
    return;
  }
  const double span = now - start_s;
  if (span < kWindowS) return;
  busiest_Bps = std::max(busiest_Bps, static_cast<double>(bytes - start_bytes) / span);
  ++windows;
  start_s = now;
  start_bytes = bytes;
}

std::pair<double, std::uint64_t> PlatformMeter::BusiestWindow::best() const {
  const double open = last_s - start_s;
  if (start_s >= 0 && open >= kLastWindowS && last_bytes >= start_bytes) {
    return {std::max(busiest_Bps, static_cast<double>(last_bytes - start_bytes) / open),
            windows + 1};
  }
  return {busiest_Bps, windows};
}

void PlatformMeter::received(double now, std::uint64_t total_bytes,
                             const std::vector<TransferSnapshot>& in_flight) {
  client_.tick(now, total_bytes);
  std::unordered_map<OriginId, std::uint64_t> by_origin;
  for (auto& [id, origin] : origins_)
    by_origin[id] = origin.ended_bytes;
  for (const TransferSnapshot& s : in_flight) {
    if (auto it = in_flight_.find(s.transfer.value); it != in_flight_.end())
      by_origin[it->second.origin] += s.received;
  }
  for (const auto& [id, bytes] : by_origin)
    origins_[id].window.tick(now, bytes);
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

std::optional<double> PlatformMeter::path_rate(double bytes, double body_s, double rtt_s) {
  const double window = format::defaults::tcp_segment_bytes *
                        format::defaults::tcp_initial_window_segments;
  auto time_at = [&](double rate) {
    return bytes / rate + format::slow_start(bytes, window, rtt_s, rate).delay_s;
  };
  // The time falls as the rate rises: from the body's own rate (which slow
  // start can only have slowed) up to a thousand times it.
  double low = bytes / body_s, high = 1000 * low;
  if (time_at(high) > body_s) return std::nullopt;
  for (int i = 0; i < 60 && high / low > 1.0001; ++i) {
    const double mid = std::sqrt(low * high);
    (time_at(mid) > body_s ? low : high) = mid;
  }
  return std::sqrt(low * high);
}

MeasuredPlatform PlatformMeter::measured() const {
  MeasuredPlatform out;
  for (const auto& [id, o] : origins_) {
    MeasuredPlatform::Origin m;
    m.origin = id;
    m.rtt_samples = o.rtt_samples;
    m.rtt_s = o.rtt_s;
    std::tie(m.busiest_Bps, m.windows) = o.window.best();
    if (o.path_Bps.empty()) {
      m.lone_Bps = o.lone_Bps;
      m.lone_samples = o.lone_samples;
    } else {
      std::vector<double> rates = o.path_Bps;
      const auto middle = rates.begin() + static_cast<std::ptrdiff_t>(rates.size() / 2);
      std::nth_element(rates.begin(), middle, rates.end());
      m.lone_Bps = *middle;
      m.lone_samples = o.path_samples;
      m.lone_fit = true;
    }
    out.origins.push_back(m);
  }
  std::sort(out.origins.begin(), out.origins.end(),
            [](const auto& a, const auto& b) { return a.origin < b.origin; });
  std::tie(out.client_Bps, out.client_windows) = client_.best();
  out.finalize_bytes = finalized_bytes_;
  out.finalize_busy_s = busy_s_;
  out.finalizes = finalizes_;
  return out;
}

}  // namespace dfl::backend
