// Backoff: the delay before a task's next attempt after a retryable failure.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "demandflight/engine/config.h"
#include "demandflight/engine/ids.h"

namespace dfl::detail {

// SplitMix64's finaliser: a well-mixed 64-bit value from any 64-bit input.
inline std::uint64_t splitmix64(std::uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Uniform double in [0, 1) from the top 53 bits: the same on every standard
// library (std::uniform_real_distribution is not).
inline double unit_interval(std::uint64_t bits) {
  return static_cast<double>(bits >> 11) * 0x1.0p-53;
}

// Exponential backoff with jitter: base * 2^(attempt-1), capped, scaled by
// 1 + jitter * U(-1, 1). U is drawn from the seed, the task and the attempt
// (a counter-based draw), not from one shared stream: two tasks that fail
// at the same instant get the same delays in whichever order a runtime
// reports them (the simulator's lone-finalize timers and its Execs, or the
// simulator and the real backend, order simultaneous events differently).
inline double backoff_delay_s(const RetryConfig& retry, std::uint64_t seed, TaskId task,
                            std::uint32_t failed_attempt) {
  const double exponent = std::min<double>(failed_attempt - 1, 62);
  const double delay = std::min(retry.cap_s, retry.base_s * std::exp2(exponent));
  const std::uint64_t bits =
      splitmix64(splitmix64(seed ^ splitmix64(task.value)) ^ failed_attempt);
  const double scale = 1.0 + retry.jitter * (2.0 * unit_interval(bits) - 1.0);
  return std::max(0.0, delay * scale);
}

}  // namespace dfl::detail
