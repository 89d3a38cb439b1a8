#include "demandflight/format/score.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdio>
#include <limits>
#include <optional>
#include <stdexcept>

namespace dfl::format {
namespace {

constexpr std::pair<const char*, double Weights::*> kWeights[] = {
    {"gb", &Weights::gb},
    {"p95_critical_s", &Weights::p95_critical_s},
    {"unserved", &Weights::unserved},
    {"deadline_miss", &Weights::deadline_miss},
    {"pollution_s", &Weights::pollution_s},
    {"wasted_gb", &Weights::wasted_gb},
};

std::optional<double> percentile(const nlohmann::json& p, const char* which) {
  if (!p.is_object() || !p.contains(which) || p[which].is_null()) return std::nullopt;
  return p[which].get<double>();
}

Percentiles percentiles_of(const nlohmann::json& p) {
  return Percentiles{percentile(p, "p50"), percentile(p, "p95"), percentile(p, "p99")};
}

// A demand's outcome by its name in the result.
DemandOutcome outcome_of(const std::string& name) {
  for (DemandOutcome o : {DemandOutcome::succeeded, DemandOutcome::failed, DemandOutcome::cancelled,
                          DemandOutcome::timed_out, DemandOutcome::owner_ended}) {
    if (name == to_string(o)) return o;
  }
  throw std::invalid_argument("not a demandflight result: unknown demand outcome \"" + name + "\"");
}

}  // namespace

std::vector<std::pair<std::string, double>> weight_values(const Weights& w) {
  std::vector<std::pair<std::string, double>> out;
  for (const auto& [name, field] : kWeights)
    out.emplace_back(name, w.*field);
  if (!std::isnan(w.critical_priority)) out.emplace_back("critical_priority", w.critical_priority);
  return out;
}

void set_weight(Weights& w, std::string_view name, double value) {
  if (name == "critical_priority") {
    if (!std::isfinite(value) || value != std::floor(value)) {
      char shown[32];
      std::snprintf(shown, sizeof shown, "%g", value);
      throw std::invalid_argument(std::string(name) + "=" + shown + " is not an integer");
    }
    w.critical_priority = value;
    return;
  }
  for (const auto& [known, field] : kWeights) {
    if (name != known) continue;
    if (!std::isfinite(value) || value < 0) {
      char shown[32];
      std::snprintf(shown, sizeof shown, "%g", value);
      throw std::invalid_argument(std::string(name) + "=" + shown +
                                  " is not a non-negative number");
    }
    w.*field = value;
    return;
  }
  std::string names;
  for (const auto& [known, field] : kWeights)
    names += (names.empty() ? "" : ", ") + std::string(known);
  names += ", critical_priority";
  throw std::invalid_argument("unknown weight \"" + std::string(name) + "\" (known: " + names +
                              ")");
}

void set_weight(Weights& w, std::string_view name, const std::string& text) {
  double value = 0;
  std::size_t used = 0;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (text.empty() || used != text.size()) {
    throw std::invalid_argument(std::string(name) + "=\"" + text +
                                "\" is not a non-negative number");
  }
  set_weight(w, name, value);
}

Weights weights_from_params(const std::map<std::string, std::string>& params,
                            std::string_view context) {
  Weights w;
  for (const auto& [name, value] : params) {
    try {
      set_weight(w, name, value);
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument(std::string(context) + ": " + e.what());
    }
  }
  return w;
}

Metrics score_result(const Result& r, const Weights& w) {
  const Summary& s = r.summary;
  const double nan = std::nan("");
  auto value = [&](const std::optional<double>& v) { return v ? *v : nan; };
  Metrics m;
  m.gb = static_cast<double>(s.bytes_transferred) / 1e9;
  m.wasted_gb = static_cast<double>(s.bytes_wasted) / 1e9;
  m.p50 = value(s.latency_s.p50);
  m.p95 = value(s.latency_s.p95);
  m.p99 = value(s.latency_s.p99);
  // The critical class: the one asked for, else the highest priority any
  // demand subscribed with.
  std::optional<Priority> critical;
  if (!std::isnan(w.critical_priority)) {
    critical = static_cast<Priority>(w.critical_priority);
  } else {
    for (const DemandResult& d : r.demands)
      if (!critical || d.priority > *critical) critical = d.priority;
  }
  double served = 0, unserved = 0, critical_served = 0, critical_unserved = 0;
  for (const DemandResult& d : r.demands) {
    const bool ok = d.outcome == DemandOutcome::succeeded;
    const bool lost = d.outcome == DemandOutcome::failed || d.outcome == DemandOutcome::timed_out;
    const bool is_critical = critical && d.priority == *critical;
    served += ok;
    unserved += lost;
    critical_served += ok && is_critical;
    critical_unserved += lost && is_critical;
  }
  m.unserved = unserved;
  m.service_rate = served + unserved > 0 ? served / (served + unserved) : nan;
  m.critical_service_rate = critical_served + critical_unserved > 0
                                ? critical_served / (critical_served + critical_unserved)
                                : nan;
  m.critical_priority = critical ? static_cast<double>(*critical) : nan;
  Percentiles crit;
  if (critical) {
    auto it = s.latency_s_by_priority.find(*critical);
    if (it != s.latency_s_by_priority.end()) crit = it->second;
  }
  m.critical_p50 = value(crit.p50);
  m.critical_p95 = value(crit.p95);
  m.critical_p99 = value(crit.p99);
  m.deadline_misses =
      static_cast<double>(s.outcomes[static_cast<std::size_t>(DemandOutcome::timed_out)]);
  m.cache_hits = static_cast<double>(s.cache_hits);
  m.pollution_s = s.priority_pollution_s;
  const double p95 = std::isnan(m.critical_p95) ? 0.0 : m.critical_p95;
  m.score = w.gb * m.gb + w.wasted_gb * m.wasted_gb + w.p95_critical_s * p95 +
            w.unserved * m.unserved + w.deadline_miss * m.deadline_misses +
            w.pollution_s * m.pollution_s;
  return m;
}

Metrics score_result_json(std::string_view text, const Weights& w) {
  // What the score reads of the document, into a Result: one definition.
  try {
    const nlohmann::json doc = nlohmann::json::parse(text);
    const auto& s = doc.at("summary");
    Result r;
    r.summary.bytes_transferred = s.at("bytes_transferred").get<std::uint64_t>();
    r.summary.bytes_wasted = s.at("bytes_wasted").get<std::uint64_t>();
    r.summary.latency_s = percentiles_of(s.at("latency_s"));
    if (s.contains("latency_s_by_priority")) {
      for (const auto& [priority, p] : s.at("latency_s_by_priority").items())
        r.summary.latency_s_by_priority[static_cast<Priority>(std::stoll(priority))] =
            percentiles_of(p);
    }
    const auto& outcomes = s.at("outcomes");
    r.summary.outcomes[static_cast<std::size_t>(DemandOutcome::timed_out)] =
        outcomes.at("timed_out").get<std::uint64_t>();
    r.summary.cache_hits = s.at("cache_hits").get<std::uint64_t>();
    r.summary.priority_pollution_s = s.at("priority_pollution_s").get<double>();
    for (const auto& d : doc.at("demands")) {
      DemandResult row;
      row.priority = d.at("priority").get<Priority>();
      row.outcome = outcome_of(d.at("outcome").get_ref<const std::string&>());
      r.demands.push_back(row);
    }
    return score_result(r, w);
  } catch (const nlohmann::json::exception& e) {
    throw std::invalid_argument(std::string("not a demandflight result: ") + e.what());
  }
}

void set_regret(Metrics& m, double oracle_score) {
  m.regret = m.score - oracle_score;
  m.vs_oracle = oracle_score > 0         ? m.score / oracle_score
                : m.score == oracle_score ? 1.0
                                          : std::numeric_limits<double>::infinity();
}

}  // namespace dfl::format
