// Client metrics and their Prometheus text format: see metrics.h.
#include "demandflight/backend/metrics.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string_view>

namespace dfl::backend {

Histogram::Histogram(std::vector<double> upper_bounds)
    : bounds(std::move(upper_bounds)), counts(bounds.size() + 1, 0) {}

void Histogram::observe(double value) {
  if (counts.size() != bounds.size() + 1) counts.assign(bounds.size() + 1, 0);
  const auto at = std::lower_bound(bounds.begin(), bounds.end(), value);  // le: value <= bound.
  ++counts[static_cast<std::size_t>(at - bounds.begin())];
  sum += value;
  ++count;
}

std::vector<double> latency_buckets_s() {
  return {0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 600};
}

std::vector<double> rate_buckets_Bps() {
  std::vector<double> out;
  for (double b = 1e4; b <= 1e10; b *= 10) {
    out.push_back(b);
    out.push_back(3 * b);
  }
  out.pop_back();  // Up to 1e10.
  return out;
}

std::uint64_t ClientMetrics::demands_with(const std::string& outcome) const {
  std::uint64_t n = 0;
  for (const auto& [key, count] : demands)
    if (key.first == outcome) n += count;
  return n;
}

namespace {

// A number as Prometheus reads it: integers plainly, +Inf for infinity.
std::string number(double v) {
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  if (std::isnan(v)) return "NaN";
  char buffer[64];
  if (v == std::floor(v) && std::fabs(v) < 1e15) {
    std::snprintf(buffer, sizeof buffer, "%.0f", v);
  } else {
    std::snprintf(buffer, sizeof buffer, "%.17g", v);
  }
  return buffer;
}

void family(std::ostream& out, std::string_view name, std::string_view type,
            std::string_view help) {
  out << "# HELP demandflight_" << name << ' ' << help << "\n# TYPE demandflight_" << name << ' '
      << type << '\n';
}

void sample(std::ostream& out, std::string_view name, const std::string& labels, double value) {
  out << "demandflight_" << name;
  if (!labels.empty()) out << '{' << labels << '}';
  out << ' ' << number(value) << '\n';
}

std::string label(std::string_view key, const std::string& value) {
  std::string out(key);
  out += "=\"";
  for (char c : value) {  // Escapes of the text format.
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out + '"';
}

void histogram(std::ostream& out, std::string_view name, const std::string& labels,
               const Histogram& h) {
  std::uint64_t cumulative = 0;
  const std::string name_bucket = std::string(name) + "_bucket";
  const std::string prefix = labels.empty() ? "" : labels + ",";
  for (std::size_t i = 0; i <= h.bounds.size(); ++i) {
    cumulative += i < h.counts.size() ? h.counts[i] : 0;
    const double le = i < h.bounds.size() ? h.bounds[i] : INFINITY;
    sample(out, name_bucket, prefix + label("le", number(le)), static_cast<double>(cumulative));
  }
  sample(out, std::string(name) + "_sum", labels, h.sum);
  sample(out, std::string(name) + "_count", labels, static_cast<double>(h.count));
}

}  // namespace

void write_prometheus(const ClientMetrics& m, std::ostream& out) {
  family(out, "demands_total", "counter", "Demands ended, by outcome and priority.");
  for (const auto& [key, n] : m.demands) {
    sample(out, "demands_total",
           label("outcome", key.first) + "," + label("priority", std::to_string(key.second)),
           static_cast<double>(n));
  }
  const std::pair<const char*, std::uint64_t> counters[] = {
      {"transfers_started_total", m.transfers_started},
      {"transfers_failed_total", m.transfers_failed},
      {"retries_total", m.retries},
      {"received_bytes_total", m.bytes_received},
      {"cache_hits_total", m.cache_hits},
      {"installs_total", m.installs},
      {"expectation_conflicts_total", m.conflicts_of_expectation},
      {"failovers_total", m.failovers},
      {"breaker_opens_total", m.breaker_opens},
  };
  const char* helps[] = {
      "Transfer attempts started, retries included.",
      "Transfer attempts that ended in an error.",
      "Transfer attempts after a task's first.",
      "Body bytes received, every attempt.",
      "Demands served from the cache directory.",
      "Artifacts verified and installed.",
      "Demands failed because the installed bytes contradict their expectation.",
      "Transfer attempts sent to another origin (mirror) than the task's last.",
      "Origins' circuit breakers opened (failures in a row).",
  };
  for (std::size_t i = 0; i < std::size(counters); ++i) {
    family(out, counters[i].first, "counter", helps[i]);
    sample(out, counters[i].first, "", static_cast<double>(counters[i].second));
  }
  family(out, "orphan_decisions_total", "counter",
         "Decisions on transfers nobody waits for, by kind.");
  for (const auto& [kind, n] : m.orphan_decisions)
    sample(out, "orphan_decisions_total", label("decision", kind), static_cast<double>(n));

  family(out, "queued_tasks", "gauge", "Tasks waiting for a transfer slot, by priority.");
  for (const auto& [p, n] : m.queued)
    sample(out, "queued_tasks", label("priority", std::to_string(p)), static_cast<double>(n));
  family(out, "in_flight_tasks", "gauge", "Tasks transferring, by priority.");
  for (const auto& [p, n] : m.in_flight)
    sample(out, "in_flight_tasks", label("priority", std::to_string(p)), static_cast<double>(n));
  family(out, "pinned_bytes", "gauge", "Bytes of the objects held by pins.");
  sample(out, "pinned_bytes", "", static_cast<double>(m.pinned_bytes));
  family(out, "cache_bytes", "gauge", "Bytes of the objects in the cache directory.");
  sample(out, "cache_bytes", "", static_cast<double>(m.cache_bytes));

  family(out, "wait_seconds", "histogram",
         "Subscribe to terminal, by the demand's priority and outcome.");
  for (const auto& [key, h] : m.wait_s) {
    histogram(out, "wait_seconds",
              label("priority", std::to_string(key.first)) + "," + label("outcome", key.second), h);
  }
  family(out, "time_to_first_byte_seconds", "histogram",
         "From a transfer's request to its first body byte.");
  histogram(out, "time_to_first_byte_seconds", "", m.time_to_first_byte_s);
  family(out, "transfer_rate_bytes_per_second", "histogram",
         "Body bytes over the time from the first byte to the end, complete attempts.");
  histogram(out, "transfer_rate_bytes_per_second", "", m.transfer_rate_Bps);
}

}  // namespace dfl::backend
