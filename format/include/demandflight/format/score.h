// What a result scored: the figures `demandflight compare` tabulates and
// Python's dfl.metrics() returns, and the cost score, defined once here.
//
// score = gb x GB transferred + wasted_gb x GB wasted + p95_critical_s x the
// p95 latency of the critical class + unserved x demands that ended unserved
// + deadline_miss x demands timed out + pollution_s x seconds of priority
// pollution. Lower is better.
//
// The critical class is `critical_priority` when set, else the highest
// priority any demand of the trace subscribed with. A demand ended unserved
// when it failed or timed out: it wanted the bytes to the end and did not
// get them (a cancel or an owner's end is the caller's own choice and counts
// as neither served nor unserved). The service rates are served / (served +
// unserved), overall and of the critical class: latencies count succeeded
// demands only, so they are shown beside them, and the unserved term keeps a
// policy from winning by letting demands die.
//
// Why the defaults (docs/cli.md has the table): a GB costs as much as a
// second of critical p95 latency (gb = p95_critical_s = 1: a 1 GB prefetch is
// worth one second of a critical wait); ten unserved demands cost as much as
// a GB (unserved = 0.1); deadline_miss = 0, since a timeout is already
// unserved (set it to blame timeouts more than failures); pollution_s = 0.01,
// a small tie-breaker (a hundred task-seconds above the wanted priority cost
// a GB); wasted_gb = 0, since wasted bytes are already inside the transferred
// ones (set it to blame waste beyond its transfer cost).
#pragma once

#include <limits>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "demandflight/format/result.h"

namespace dfl::format {

struct Weights {
  double gb = 1;               // Per GB transferred (decimal GB).
  double p95_critical_s = 1;   // Per second of p95 latency of the critical class.
  double unserved = 0.1;       // Per demand that failed or timed out.
  double deadline_miss = 0;    // Per demand that timed out (beyond unserved).
  double pollution_s = 0.01;   // Per second of priority pollution.
  double wasted_gb = 0;        // Per GB wasted (already inside gb; extra blame).
  // The critical class's priority; NaN: the highest in the trace. Not a
  // weight, but a setting of the score: named critical_priority among them.
  double critical_priority = std::numeric_limits<double>::quiet_NaN();
};

// The weights by name, in their documented order, with their values in `w`.
std::vector<std::pair<std::string, double>> weight_values(const Weights& w);
// Sets the weight `name` to `value`. Throws std::invalid_argument naming the
// weight when the name is unknown or the value is not a finite number >= 0.
void set_weight(Weights& w, std::string_view name, double value);
// The same from the value's text (a k=v parameter), which must be a number.
void set_weight(Weights& w, std::string_view name, const std::string& text);
// The defaults with each of `params` (name -> text) set; errors as above,
// with `context` ("--weights", "policy oracle") before the message.
Weights weights_from_params(const std::map<std::string, std::string>& params,
                            std::string_view context);

// What one run scored. Latencies are NaN when no demand of the class succeeded.
struct Metrics {
  double gb = 0, wasted_gb = 0;
  double p50 = 0, p95 = 0, p99 = 0;
  double critical_p50 = 0, critical_p95 = 0, critical_p99 = 0;
  double deadline_misses = 0, unserved = 0, cache_hits = 0, pollution_s = 0;
  double service_rate = 0, critical_service_rate = 0;  // NaN when no demand counts.
  double critical_priority = 0;  // The class the critical figures are of (NaN: none).
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
    {"unserved", &Metrics::unserved},
    {"service_rate", &Metrics::service_rate},
    {"critical_service_rate", &Metrics::critical_service_rate},
    {"critical_priority", &Metrics::critical_priority},
    {"cache_hits", &Metrics::cache_hits},
    {"pollution_s", &Metrics::pollution_s},
    {"score", &Metrics::score},
    {"regret", &Metrics::regret},
    {"vs_oracle", &Metrics::vs_oracle},
};

// Scores a run: its summary (latencies computed) and its demands.
Metrics score_result(const Result& result, const Weights& weights);
// Scores a result JSON document (write_result_json's) the same way. Throws
// std::invalid_argument when it is not one.
Metrics score_result_json(std::string_view json, const Weights& weights);

// Sets `m.regret` (its score minus the oracle's, of the same trace, model and
// seed) and `m.vs_oracle` (its score over the oracle's, as caching papers
// report cost against OPT: 1 is the oracle's; infinite where the oracle scored
// 0 and this did not). The one definition: `compare` and Python's compare and
// sweep use it.
void set_regret(Metrics& m, double oracle_score);

}  // namespace dfl::format
