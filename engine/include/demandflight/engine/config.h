// Scheduler configuration: limits, retry, cache, and which model runs.
//
// Every limit is explicit (style: put a limit on everything). Defaults match the
// trace format's documented defaults.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dfl {

// The three models of docs/design.md §4, behind one command/event interface.
enum class Model : std::uint8_t {
  // Physical task + Demand (this project): dedup by the full ArtifactKey,
  // per-demand cancel and deadline, priority = max over active demands.
  demand,
  // The legacy model: dedup by resource name only, priority = max ever seen,
  // cancel ends the whole task of that resource (and cannot cancel while
  // finalizing), no per-demand deadline, no owner generations.
  callbacks,
  // One physical task per demand: no sharing of transfers in flight.
  independent,
};

std::string_view to_string(Model model);
// The model named `name` ("demand", "callbacks" or "independent"), or nullopt.
std::optional<Model> parse_model(std::string_view name);
// Every model's name, in the order above: for help texts, choices and errors.
const std::vector<std::string>& model_names();
// "demand, callbacks, independent".
std::string model_names_text();

struct RetryConfig {
  std::uint32_t max_attempts = 4;  // Attempts per task, the first included.
  double base_s = 0.5;             // Delay after the first failed attempt.
  double cap_s = 8.0;              // Upper bound of the exponential delay.
  double jitter = 0.2;             // Delay is scaled by 1 + jitter * U(-1, 1).
};

// An origin's circuit breaker (docs/design.md, *Mirrors and failover*): this
// many retryable failures in a row open it for open_s, and tasks that have
// mirrors skip it meanwhile. failures 0: never opens.
struct BreakerConfig {
  std::uint32_t failures = 3;
  double open_s = 30.0;
};

struct SchedulerConfig {
  Model model = Model::demand;
  std::uint32_t max_transfers = 4;            // Concurrent transfers, all origins together.
  std::uint32_t max_per_origin = 4;           // Concurrent transfers per origin.
  std::uint64_t cache_bytes = 2'000'000'000;  // Installed-artifact index capacity.
  RetryConfig retry;
  BreakerConfig breaker;
  std::uint64_t seed = 1;  // Drives backoff jitter, nothing else.
  // Bounds, checked at every subscribe: a runtime that exceeds them has a bug.
  std::uint32_t max_origins = 4096;
  std::uint32_t max_live_demands = 1u << 30;
  // Keys whose request history orphan policies can see (0: none). Past it the
  // least recently requested are forgotten.
  std::uint32_t key_history_limit = 1u << 18;
  // Bytes of kept partials (OrphanDecision::keep_partial) remembered at once;
  // past it the oldest partials are dropped (DropPartial). 0 turns keeping
  // off: keep_partial then acts as abort.
  std::uint64_t partial_bytes = 256ull << 20;
  // And at most this many partials (a runtime may hold a file for each).
  std::uint32_t max_partials = 256;
};

}  // namespace dfl
