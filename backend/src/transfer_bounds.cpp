#include "demandflight/backend/transfer_bounds.h"

#include <cmath>
#include <cstdio>
#include <stdexcept>

namespace dfl::backend {

void check_bounds(const TransferBounds& b, const std::string& name) {
  auto check = [&](const char* field, double value) {
    if (!(value >= 0) || !std::isfinite(value)) {
      throw std::invalid_argument(name + "." + field + ": must be a finite number >= 0, got " +
                                  std::to_string(value));
    }
  };
  check("stall_window_s", b.stall_window_s);
  check("stall_floor_Bps", b.stall_floor_Bps);
  check("attempt_base_s", b.attempt_base_s);
  check("attempt_floor_Bps", b.attempt_floor_Bps);
}

std::string human_bytes(std::uint64_t bytes) {
  if (bytes < 1000) return std::to_string(bytes) + (bytes == 1 ? " byte" : " bytes");
  const char* units[] = {"kB", "MB", "GB", "TB", "PB"};
  double value = static_cast<double>(bytes) / 1000;
  std::size_t unit = 0;
  while (value >= 999.95 && unit + 1 < std::size(units)) {
    value /= 1000;
    ++unit;
  }
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.1f %s", value, units[unit]);
  return buffer;
}

std::string describe(const BoundBreach& breach, std::string_view url) {
  char seconds[32];
  std::snprintf(seconds, sizeof seconds, "%.0f s", breach.seconds);
  if (breach.kind == BoundBreach::Kind::stalled) {
    return "stalled: " + human_bytes(breach.bytes) + " in " + seconds + " from " +
           std::string(url);
  }
  return "deadline: " + human_bytes(breach.bytes) + " of " + human_bytes(breach.expected) +
         " in " + seconds + " from " + std::string(url);
}

AttemptWatch::AttemptWatch(const TransferBounds& bounds, double start_s)
    : bounds_(bounds), start_s_(start_s) {
  samples_.push_back(Sample{0, 0});
}

void AttemptWatch::hold(double t) {
  if (!held_since_) held_since_ = t;
}

void AttemptWatch::release(double t) {
  if (!held_since_) return;
  held_s_ += std::max(0.0, t - *held_since_);
  held_since_.reset();
}

double AttemptWatch::readable_s(double t) const {
  const double open = held_since_ ? std::max(0.0, t - *held_since_) : 0.0;
  return std::max(0.0, t - start_s_ - held_s_ - open);
}

void AttemptWatch::set_to_move(std::uint64_t bytes) {
  if (bounds_.attempt_floor_Bps <= 0) return;
  to_move_ = bytes;
  deadline_s_ = bounds_.attempt_base_s + static_cast<double>(bytes) / bounds_.attempt_floor_Bps;
}

std::optional<BoundBreach> AttemptWatch::check(double t, std::uint64_t received) {
  const double now = readable_s(t);
  if (deadline_s_ && now > *deadline_s_) {
    return BoundBreach{BoundBreach::Kind::deadline, received, now, to_move_};
  }
  const double window = bounds_.stall_window_s;
  if (window <= 0 || bounds_.stall_floor_Bps <= 0 || samples_.empty()) return std::nullopt;
  if (now - samples_.back().readable_s >= window / 30) samples_.push_back(Sample{now, received});
  // The newest sample at least a window old is where the window starts.
  while (samples_.size() >= 2 && now - samples_[1].readable_s >= window)
    samples_.pop_front();
  const Sample& first = samples_.front();
  if (now - first.readable_s < window) return std::nullopt;
  const std::uint64_t bytes = received - first.received;
  if (static_cast<double>(bytes) < bounds_.stall_floor_Bps * window) {
    return BoundBreach{BoundBreach::Kind::stalled, bytes, now - first.readable_s, 0};
  }
  return std::nullopt;
}

}  // namespace dfl::backend
