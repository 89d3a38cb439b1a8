// Every default of the trace format and the simulator, in one place.
//
// A trace header may leave out any field of `platform` and `scheduler`; these
// values apply then, and command-line flags override both. The engine's own
// SchedulerConfig defaults are the same numbers.
#pragma once

#include <cstdint>

namespace dfl::sim::defaults {

// platform
inline constexpr double client_bandwidth_Bps = 12'500'000;  // 100 Mbit/s last mile.
inline constexpr double client_latency_s = 0.01;
inline constexpr double origin_bandwidth_Bps = 50'000'000;  // An origin not described in
inline constexpr double origin_latency_s = 0.03;            // platform.origins gets these.
inline constexpr double disk_write_Bps = 400'000'000;
inline constexpr double hash_Bps = 800'000'000;

// scheduler
inline constexpr std::uint32_t max_transfers = 4;
inline constexpr std::uint32_t max_per_origin = 4;
inline constexpr std::uint64_t cache_bytes = 2'000'000'000;
inline constexpr std::uint32_t retry_max_attempts = 4;
inline constexpr double retry_base_s = 0.5;
inline constexpr double retry_cap_s = 8.0;
inline constexpr double retry_jitter = 0.2;

// header
inline constexpr std::uint64_t seed = 0;

// records
inline constexpr std::int64_t owner_generation = 0;  // subscribe
inline constexpr std::uint32_t fault_count = 1;      // transfer_error, corrupt
inline constexpr double fault_after_fraction = 0.5;  // transfer_error
inline constexpr bool fault_retryable = true;        // transfer_error

// Bounds: a trace beyond them is refused (put a limit on everything).
inline constexpr std::uint64_t max_records = 100'000'000;
inline constexpr std::uint64_t max_artifact_size_bytes = 1ull << 50;  // 1 PiB.
inline constexpr std::uint32_t max_origins = 4096;
inline constexpr std::uint32_t max_transfers_limit = 100'000;

}  // namespace dfl::sim::defaults
