// What a Client has done and holds, as numbers (Client::metrics()), and the
// Prometheus text format of them (write_prometheus()).
//
// Counters only grow; gauges are the state when the snapshot was taken;
// histograms count observations per bucket (upper bounds, in seconds or
// bytes per second) with their sum. `demandflight fetch --metrics FILE`
// writes the same snapshot once the manifest is done, and its summary line
// uses these numbers.
#pragma once

#include <cstdint>
#include <map>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "demandflight/engine/ids.h"

namespace dfl::backend {

struct Histogram {
  std::vector<double> bounds;         // Upper bounds, increasing; +Inf is implied.
  std::vector<std::uint64_t> counts;  // Per bucket (bounds.size() + 1), not cumulative.
  double sum = 0;
  std::uint64_t count = 0;

  Histogram() = default;
  explicit Histogram(std::vector<double> upper_bounds);
  void observe(double value);
};

// Latencies from 1 ms to 10 min; rates from 10 kB/s to 10 GB/s.
std::vector<double> latency_buckets_s();
std::vector<double> rate_buckets_Bps();

struct ClientMetrics {
  // Counters.
  // Demands by outcome ("succeeded", "failed", ...) and by their priority
  // when they ended.
  std::map<std::pair<std::string, Priority>, std::uint64_t> demands;
  std::uint64_t transfers_started = 0;  // Attempts, retries included.
  std::uint64_t transfers_failed = 0;   // Attempts that ended in an error.
  std::uint64_t retries = 0;            // Attempts after a task's first.
  std::uint64_t bytes_received = 0;     // Body bytes, every attempt.
  std::uint64_t cache_hits = 0;         // Demands served from the cache directory.
  std::uint64_t installs = 0;
  // Demands that failed because the installed bytes contradict what they
  // expected (another demand's expectation was met).
  std::uint64_t conflicts_of_expectation = 0;
  // Mirrors: attempts sent to another origin than the task's last, and
  // origins' breakers opened (docs/backend.md, *Mirrors*).
  std::uint64_t failovers = 0;
  std::uint64_t breaker_opens = 0;
  // Orphan decisions by kind: "abort", "complete", "keep_partial".
  std::map<std::string, std::uint64_t> orphan_decisions;

  // Gauges.
  std::map<Priority, std::uint64_t> queued;     // Tasks waiting for a slot, by priority.
  std::map<Priority, std::uint64_t> in_flight;  // Tasks transferring, by priority.
  std::uint64_t pinned_bytes = 0;  // Objects held by pins (each object once).
  std::uint64_t cache_bytes = 0;   // Objects in the cache directory's index.

  // Histograms.
  // Subscribe to terminal, by the demand's priority and outcome.
  std::map<std::pair<Priority, std::string>, Histogram> wait_s;
  Histogram time_to_first_byte_s{latency_buckets_s()};  // Request to first body byte.
  Histogram transfer_rate_Bps{rate_buckets_Bps()};      // Complete attempts only.

  std::uint64_t demands_with(const std::string& outcome) const;
};

// The Prometheus text exposition format (version 0.0.4): one `# HELP` and
// `# TYPE` per family, names prefixed `demandflight_`, labels quoted,
// histogram buckets cumulative with `le`, then `_sum` and `_count`.
void write_prometheus(const ClientMetrics& metrics, std::ostream& out);

}  // namespace dfl::backend
