#include "demandflight/format/score.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdio>
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

double percentile(const nlohmann::json& p, const char* which) {
  if (!p.is_object() || !p.contains(which) || p[which].is_null()) return std::nan("");
  return p[which].get<double>();
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

Metrics score_result_json(std::string_view text, const Weights& w) {
  try {
    const nlohmann::json result = nlohmann::json::parse(text);
    const auto& s = result.at("summary");
    Metrics m;
    m.gb = s.at("bytes_transferred").get<double>() / 1e9;
    m.wasted_gb = s.at("bytes_wasted").get<double>() / 1e9;
    m.p50 = percentile(s.at("latency_s"), "p50");
    m.p95 = percentile(s.at("latency_s"), "p95");
    m.p99 = percentile(s.at("latency_s"), "p99");
    // The critical class: the one asked for, else the highest priority any
    // demand subscribed with.
    std::optional<long long> critical;
    if (!std::isnan(w.critical_priority)) {
      critical = static_cast<long long>(w.critical_priority);
    } else {
      for (const auto& d : result.at("demands")) {
        const long long p = d.at("priority").get<long long>();
        if (!critical || p > *critical) critical = p;
      }
    }
    double served = 0, unserved = 0, critical_served = 0, critical_unserved = 0;
    for (const auto& d : result.at("demands")) {
      const std::string& outcome = d.at("outcome").get_ref<const std::string&>();
      const bool ok = outcome == "succeeded";
      const bool lost = outcome == "failed" || outcome == "timed_out";
      const bool is_critical = critical && d.at("priority").get<long long>() == *critical;
      served += ok;
      unserved += lost;
      critical_served += ok && is_critical;
      critical_unserved += lost && is_critical;
    }
    const double nan = std::nan("");
    m.unserved = unserved;
    m.service_rate = served + unserved > 0 ? served / (served + unserved) : nan;
    m.critical_service_rate = critical_served + critical_unserved > 0
                                  ? critical_served / (critical_served + critical_unserved)
                                  : nan;
    m.critical_priority = critical ? static_cast<double>(*critical) : nan;
    nlohmann::json crit;
    if (critical && s.contains("latency_s_by_priority")) {
      const std::string key = std::to_string(*critical);
      if (s["latency_s_by_priority"].contains(key)) crit = s["latency_s_by_priority"][key];
    }
    m.critical_p50 = percentile(crit, "p50");
    m.critical_p95 = percentile(crit, "p95");
    m.critical_p99 = percentile(crit, "p99");
    m.deadline_misses = s.at("outcomes").at("timed_out").get<double>();
    m.cache_hits = s.at("cache_hits").get<double>();
    m.pollution_s = s.at("priority_pollution_s").get<double>();
    const double p95 = std::isnan(m.critical_p95) ? 0.0 : m.critical_p95;
    m.score = w.gb * m.gb + w.wasted_gb * m.wasted_gb + w.p95_critical_s * p95 +
              w.unserved * m.unserved + w.deadline_miss * m.deadline_misses +
              w.pollution_s * m.pollution_s;
    return m;
  } catch (const nlohmann::json::exception& e) {
    throw std::invalid_argument(std::string("not a demandflight result: ") + e.what());
  }
}

}  // namespace dfl::format
