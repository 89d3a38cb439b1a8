// What a result scored: the figures `demandflight compare` tabulates and
// Python's dfl.metrics() returns, and the cost score, defined once here.
//
// score = gb x GB transferred + wasted_gb x GB wasted + p95_critical_s x the
// p95 latency of the critical class (the highest priority any demand asked
// for; 0 when none of them succeeded) + deadline_miss x demands timed out +
// pollution_s x seconds of priority pollution. Lower is better. Wasted bytes
// are already inside the transferred ones, so their extra weight is 0 unless
// set.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace dfl::format {

struct Weights {
  double gb = 1;               // Per GB transferred (decimal GB).
  double p95_critical_s = 1;   // Per second of p95 latency of the critical class.
  double deadline_miss = 0.1;  // Per demand that timed out.
  double pollution_s = 0.01;   // Per second of priority pollution.
  double wasted_gb = 0;        // Per GB wasted (already inside gb; extra blame).
};

// The weights by name, in their documented order, with their values in `w`.
std::vector<std::pair<std::string, double>> weight_values(const Weights& w);
// Sets the weight `name` to `value`. Throws std::invalid_argument naming the
// weight when the name is unknown or the value is not a finite number >= 0.
void set_weight(Weights& w, std::string_view name, double value);
// The same from the value's text (a k=v parameter), which must be a number.
void set_weight(Weights& w, std::string_view name, const std::string& text);

// What one run scored. Latencies are NaN when no demand of the class succeeded.
struct Metrics {
  double gb = 0, wasted_gb = 0;
  double p50 = 0, p95 = 0, p99 = 0;
  double critical_p50 = 0, critical_p95 = 0, critical_p99 = 0;
  double deadline_misses = 0, cache_hits = 0, pollution_s = 0;
  double score = 0;
  double regret = 0;  // Score minus the oracle's; filled in by whoever ran the oracle.
  double vs_oracle = 1;  // Score over the oracle's (1: as good); likewise.
};

// The figures by name, in table order (regret and vs_oracle last).
struct MetricField {
  const char* name;
  double Metrics::*field;
};
inline constexpr MetricField kMetricFields[] = {
    {"gb", &Metrics::gb},
    {"wasted_gb", &Metrics::wasted_gb},
    {"p50_s", &Metrics::p50},
    {"p95_s", &Metrics::p95},
    {"p99_s", &Metrics::p99},
    {"critical_p50_s", &Metrics::critical_p50},
    {"critical_p95_s", &Metrics::critical_p95},
    {"critical_p99_s", &Metrics::critical_p99},
    {"deadline_misses", &Metrics::deadline_misses},
    {"cache_hits", &Metrics::cache_hits},
    {"pollution_s", &Metrics::pollution_s},
    {"score", &Metrics::score},
    {"regret", &Metrics::regret},
    {"vs_oracle", &Metrics::vs_oracle},
};

// Scores a result JSON document (write_result_json's). Throws
// std::invalid_argument when it is not one.
Metrics score_result_json(std::string_view json, const Weights& weights);

}  // namespace dfl::format
