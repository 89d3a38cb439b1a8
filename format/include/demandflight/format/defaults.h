// Every default of the trace format and the simulator, in one place.
//
// A trace header may leave out any field of `platform` and `scheduler`; these
// values apply then, and command-line flags override both. The scheduler's are
// the engine's own SchedulerConfig defaults, so the two cannot drift apart.
#pragma once

#include <cstdint>

#include "demandflight/engine/config.h"

namespace dfl::format::defaults {

// platform
// The calibrated network model (NetworkModel::calibrated): CM02 with these
// factors, measured by bench/fidelity.py against the real backend over a
// kernel-shaped link (docs/validation.md): a transfer waits a full round trip
// before its first byte, and payload moves at 1448/1514 of the line rate.
inline constexpr double calibrated_latency_factor = 2.0;
inline constexpr double calibrated_bandwidth_factor = 0.956;

// The `tcp` model's connections (sim/tcp_connections.h): a 1500-byte MTU's
// segment with timestamps, and Linux's initial window (RFC 6928).
inline constexpr double tcp_segment_bytes = 1448;
inline constexpr double tcp_initial_window_segments = 10;
inline constexpr double tcp_handshake_round_trips = 1;  // SYN, SYN-ACK (the request rides the ACK).
// SimGrid's own factors of its LV08 model (network/model:LV08, the `lv08` model).
inline constexpr double lv08_latency_factor = 13.01;
inline constexpr double lv08_bandwidth_factor = 0.97;

inline constexpr double client_bandwidth_Bps = 12'500'000;  // 100 Mbit/s last mile.
inline constexpr double client_latency_s = 0.01;
inline constexpr double origin_bandwidth_Bps = 50'000'000;  // An origin not described in
inline constexpr double origin_latency_s = 0.03;            // platform.origins gets these.
inline constexpr double disk_write_Bps = 400'000'000;
inline constexpr double hash_Bps = 800'000'000;

// scheduler: 4 transfers, 4 per origin, a 2 GB cache, 4 attempts from 0.5 s
// doubling to at most 8 s, scaled by 1 +- 20% jitter.
inline constexpr SchedulerConfig scheduler{};
inline constexpr std::uint32_t max_transfers = scheduler.max_transfers;
inline constexpr std::uint32_t max_per_origin = scheduler.max_per_origin;
inline constexpr std::uint64_t cache_bytes = scheduler.cache_bytes;
inline constexpr std::uint32_t retry_max_attempts = scheduler.retry.max_attempts;
inline constexpr double retry_base_s = scheduler.retry.base_s;
inline constexpr double retry_cap_s = scheduler.retry.cap_s;
inline constexpr double retry_jitter = scheduler.retry.jitter;
// An origin's breaker opens after 3 failures in a row, for 30 s.
inline constexpr std::uint32_t breaker_failures = scheduler.breaker.failures;
inline constexpr double breaker_open_s = scheduler.breaker.open_s;

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
// Origins of one artifact (its `origins` list): the engine's kMaxOriginsPerArtifact.
inline constexpr std::uint32_t max_origins_per_artifact = 32;
inline constexpr std::uint32_t max_transfers_limit = 100'000;

}  // namespace dfl::format::defaults
