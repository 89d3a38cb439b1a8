#include "demandflight/format/describe.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <optional>
#include <ostream>
#include <string>
#include <unordered_map>
#include <vector>

#include "demandflight/format/defaults.h"
#include "demandflight/format/tcp.h"

namespace dfl::format {
namespace {

using ojson = nlohmann::ordered_json;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// Nearest rank: the ceil(pct * n / 100)-th smallest, in integers (no
// rounding of 0.99 * 100).
Distribution distribution(std::vector<double> values) {
  Distribution d;
  d.count = values.size();
  if (values.empty()) {
    d.p10 = d.p50 = d.p90 = d.p99 = d.min = d.max = d.mean = kNaN;
    return d;
  }
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  auto rank = [&](std::size_t pct) {
    return values[std::max<std::size_t>(1, (pct * n + 99) / 100) - 1];
  };
  d.p10 = rank(10);
  d.p50 = rank(50);
  d.p90 = rank(90);
  d.p99 = rank(99);
  d.min = values.front();
  d.max = values.back();
  double sum = 0;
  for (const double v : values)
    sum += v;
  d.mean = sum / static_cast<double>(n);
  return d;
}

// Prefix sums over positions 0..n-1 (a Fenwick tree).
class Fenwick {
 public:
  explicit Fenwick(std::size_t n) : tree_(n + 1, 0) {}
  void add(std::size_t i, std::int64_t delta) {
    for (++i; i < tree_.size(); i += i & (~i + 1))
      tree_[i] += delta;
  }
  // Sum of positions 0..i-1.
  std::int64_t prefix(std::size_t i) const {
    std::int64_t s = 0;
    for (; i > 0; i -= i & (~i + 1))
      s += tree_[i];
    return s;
  }

 private:
  std::vector<std::int64_t> tree_;
};

enum class End : std::uint8_t { none, cancel, owner, stale };

struct DemandFacts {
  double t = 0;
  double natural_end = 0;  // t + min(lone transfer, timeout_s).
  double end_t = kInf;     // Its cancel's or owner's end's t.
  std::uint32_t key = 0;
  std::uint32_t owner = 0;
  std::uint64_t size = 0;
  std::size_t end_record = 0;
  std::int64_t generation = 0;
  Priority priority = 0;  // Current (after set_priority records so far).
  End end = End::none;
  bool reprioritized = false;
};

double lone_transfer_s(const Trace& trace, const Artifact& a) {
  const Platform& p = trace.platform;
  const OriginSpec& o = p.origins[a.origin];
  const double line = std::min(p.client_bandwidth_Bps, o.bandwidth_Bps);
  const double one_way = p.client_latency_s + o.latency_s;
  const double size = static_cast<double>(a.size_bytes);
  // The network model's factors (sim/network_model.cpp): CM02 has none.
  double latency_factor = 1;
  double bandwidth_factor = 1;
  const bool tcp = p.network_model == NetworkModel::tcp || p.network_model == NetworkModel::ns3;
  if (tcp || p.network_model == NetworkModel::calibrated) {
    latency_factor = defaults::calibrated_latency_factor;
    bandwidth_factor = defaults::calibrated_bandwidth_factor;
  } else if (p.network_model == NetworkModel::lv08) {
    latency_factor = defaults::lv08_latency_factor;
    bandwidth_factor = defaults::lv08_bandwidth_factor;
  }
  const double rate = bandwidth_factor * line;
  double s = latency_factor * one_way + (size == 0 ? 0.0 : size / rate);
  if (tcp) {  // A new connection: its handshake, then slow start (sim/tcp_connections.h).
    const double rtt = 2 * one_way;
    s += defaults::tcp_handshake_round_trips * rtt +
         slow_start(size, defaults::tcp_segment_bytes * defaults::tcp_initial_window_segments,
                    rtt, rate)
             .delay_s;
  }
  return s;
}

ojson distribution_json(const Distribution& d) {
  return ojson{{"count", d.count}, {"p10", d.p10}, {"p50", d.p50}, {"p90", d.p90},
               {"p99", d.p99},     {"min", d.min}, {"max", d.max}, {"mean", d.mean}};
}

std::string fmt(const char* format, double a) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, a);
  return buf;
}

std::string number(double v) {
  if (std::isnan(v)) return "-";
  if (v == std::floor(v) && std::fabs(v) < 1e15) return fmt("%.0f", v);
  return fmt("%.4g", v);
}

std::string percent(double share) {
  return std::isnan(share) ? "-" : fmt("%.1f%%", 100 * share);
}

std::string bytes(double b) {
  const char* units[] = {"B", "kB", "MB", "GB", "TB", "PB"};
  int u = 0;
  while (b >= 1000 && u < 5) {
    b /= 1000;
    ++u;
  }
  return u == 0 ? fmt("%.0f B", b) : fmt("%.2f ", b) + units[u];
}

std::string quantiles(const Distribution& d, std::string (*show)(double)) {
  if (d.count == 0) return "none";
  return "p10 " + show(d.p10) + "  p50 " + show(d.p50) + "  p90 " + show(d.p90) + "  p99 " +
         show(d.p99) + "  (n " + std::to_string(d.count) + ", min " + show(d.min) + ", max " +
         show(d.max) + ", mean " + show(d.mean) + ")";
}

std::string seconds(double s) {
  return number(s) + " s";
}

// Artifact ids that declare one key are one key.
struct Keys {
  std::vector<std::uint32_t> key_of;        // By artifact id.
  std::vector<const ArtifactKey*> keys;     // By key.
  std::vector<std::uint32_t> ids_per_key;   // By key.
};

Keys index_keys(const Trace& trace) {
  Keys out;
  std::unordered_map<ArtifactKey, std::uint32_t> key_index;
  out.key_of.resize(trace.artifacts.size());
  for (std::size_t a = 0; a < trace.artifacts.size(); ++a) {
    const ArtifactKey& key = trace.artifacts[a].key;
    const auto [it, added] =
        key_index.try_emplace(key, static_cast<std::uint32_t>(out.keys.size()));
    if (added) {
      out.keys.push_back(&key);
      out.ids_per_key.push_back(0);
    }
    out.key_of[a] = it->second;
    ++out.ids_per_key[it->second];
  }
  return out;
}

// One pass over the records: each demand's facts, each key's requests and
// the reuse between them, the owners' ends.
class Walk {
 public:
  Walk(const Trace& trace, const Keys& keys, Description& d)
      : demands(trace.demand_ids.size()),
        key_requests(keys.keys.size(), 0),
        key_size(keys.keys.size(), 0),
        key_subscribe_records(keys.keys.size()),
        trace_(trace),
        keys_(keys),
        d_(d),
        last_request_(keys.keys.size(), kNever),
        last_request_t_(keys.keys.size(), 0),
        latest_(trace.demand_ids.size()),
        owner_active_(trace.owners.size()),
        owner_ended_through_(trace.owners.size()) {
    const std::size_t n = trace.demand_ids.size();
    reuse_times.reserve(n);
    reuse_distances.reserve(n);
    request_sizes.reserve(n);
    for (std::size_t i = 0; i < trace.records.size(); ++i)
      record(i);
  }

  std::vector<DemandFacts> demands;
  std::vector<std::uint64_t> key_requests;
  std::vector<std::uint64_t> key_size;
  std::vector<std::vector<std::size_t>> key_subscribe_records;
  std::vector<double> reuse_times, reuse_distances, request_sizes;
  std::map<Priority, std::uint64_t> by_priority;

 private:
  static constexpr std::size_t kNever = std::numeric_limits<std::size_t>::max();

  void record(std::size_t i) {
    const Record& r = trace_.records[i];
    switch (r.op) {
      case Op::subscribe:
        return subscribe(i, r);
      case Op::cancel: {
        ++d_.cancels;
        DemandFacts& f = demands[r.demand];
        if (f.end == End::none) end(f, End::cancel, i, r.t);
        return;
      }
      case Op::set_priority:
        return set_priority(r);
      case Op::end_owner:
        return end_owner(i, r);
      case Op::fault:
        ++d_.faults;
        return;
      case Op::throttle:
        return;
    }
  }

  static void end(DemandFacts& f, End how, std::size_t record, double t) {
    f.end = how;
    f.end_t = t;
    f.end_record = record;
  }

  void subscribe(std::size_t i, const Record& r) {
    const Artifact& a = trace_.artifacts[r.artifact];
    const std::uint32_t k = keys_.key_of[r.artifact];
    DemandFacts& f = demands[r.demand];
    f.t = r.t;
    f.key = k;
    f.owner = r.owner;
    f.size = a.size_bytes;
    f.generation = r.owner_generation;
    f.priority = r.priority;
    f.natural_end = r.t + std::min(lone_transfer_s(trace_, a), r.timeout_s);
    const auto& through = owner_ended_through_[r.owner];
    if (through && r.owner_generation <= *through) {
      end(f, End::stale, i, r.t);  // Refused at once: owner_ended.
    } else {
      owner_active_[r.owner].push_back(r.demand);
    }
    ++d_.requests;
    d_.requested_bytes += a.size_bytes;
    request_sizes.push_back(static_cast<double>(a.size_bytes));
    ++by_priority[r.priority];
    if (key_requests[k]++ == 0) key_size[k] = a.size_bytes;
    key_subscribe_records[k].push_back(i);
    // Reuse: the subscribe ordinal and t of each key's latest request; latest_
    // holds 1 at the ordinal of each key's latest request.
    if (last_request_[k] == kNever) {
      ++d_.cold_requests;
    } else {
      reuse_times.push_back(r.t - last_request_t_[k]);
      reuse_distances.push_back(
          static_cast<double>(latest_.prefix(ordinal_) - latest_.prefix(last_request_[k] + 1)));
      latest_.add(last_request_[k], -1);
    }
    latest_.add(ordinal_, 1);
    last_request_[k] = ordinal_;
    last_request_t_[k] = r.t;
    ++ordinal_;
  }

  void set_priority(const Record& r) {
    ++d_.set_priorities;
    DemandFacts& f = demands[r.demand];
    if (r.priority > f.priority) {
      ++d_.priority_raises;
    } else if (r.priority < f.priority) {
      ++d_.priority_lowers;
    } else {
      ++d_.priority_unchanged;
    }
    if (r.priority != f.priority) f.reprioritized = true;
    f.priority = r.priority;
  }

  // The owner's demands not ended yet, through the generation given (the
  // engine's stale-subscribe watermark).
  void end_owner(std::size_t i, const Record& r) {
    ++d_.end_owners;
    const std::int64_t through =
        r.has_generation ? r.owner_generation : std::numeric_limits<std::int64_t>::max();
    std::vector<std::uint32_t>& active = owner_active_[r.owner];
    std::erase_if(active, [&](std::uint32_t demand) {
      DemandFacts& f = demands[demand];
      if (f.end != End::none) return true;  // Cancelled earlier.
      if (f.generation > through) return false;
      end(f, End::owner, i, r.t);
      return true;
    });
    if (r.has_generation) {
      auto& watermark = owner_ended_through_[r.owner];
      watermark = std::max(watermark.value_or(through), through);
    }
  }

  const Trace& trace_;
  const Keys& keys_;
  Description& d_;
  std::vector<std::size_t> last_request_;
  std::vector<double> last_request_t_;
  Fenwick latest_;
  std::size_t ordinal_ = 0;
  std::vector<std::vector<std::uint32_t>> owner_active_;
  std::vector<std::optional<std::int64_t>> owner_ended_through_;
};

// The keys requested, by popularity.
void rank_keys(Description& d, const Keys& keys, const Walk& walk) {
  std::vector<std::uint32_t> requested;
  for (std::uint32_t k = 0; k < keys.keys.size(); ++k) {
    if (walk.key_requests[k] == 0) continue;
    requested.push_back(k);
    d.unique_bytes += walk.key_size[k];
    d.aliased_keys += keys.ids_per_key[k] > 1;
    d.one_hit_wonders += walk.key_requests[k] == 1;
  }
  d.keys = requested.size();
  std::vector<std::string> key_text(keys.keys.size());
  for (const std::uint32_t k : requested)
    key_text[k] = to_string(*keys.keys[k]);
  std::sort(requested.begin(), requested.end(), [&](std::uint32_t a, std::uint32_t b) {
    if (walk.key_requests[a] != walk.key_requests[b])
      return walk.key_requests[a] > walk.key_requests[b];
    return key_text[a] < key_text[b];
  });
  const double all_requests = static_cast<double>(d.requests);
  std::uint64_t cumulative = 0;
  d.ranking.reserve(requested.size());
  for (std::size_t i = 0; i < requested.size(); ++i) {
    const std::uint32_t k = requested[i];
    cumulative += walk.key_requests[k];
    d.ranking.push_back(KeyPopularity{i + 1, key_text[k], walk.key_requests[k],
                                      static_cast<double>(walk.key_requests[k]) / all_requests,
                                      static_cast<double>(cumulative) / all_requests,
                                      walk.key_size[k]});
  }
  d.one_hit_wonder_share =
      d.keys == 0 ? kNaN : static_cast<double>(d.one_hit_wonders) / static_cast<double>(d.keys);
  auto top_share = [&](std::size_t divisor) {
    if (d.ranking.empty()) return 0.0;
    const std::size_t top = (d.ranking.size() + divisor - 1) / divisor;
    return d.ranking[top - 1].cumulative_share;
  };
  d.top_1pct_share = top_share(100);
  d.top_10pct_share = top_share(10);
}

// Zipf: ln(requests) = c - alpha ln(rank), least squares over every rank.
void fit_zipf(Description& d) {
  d.zipf_ranks = d.ranking.size();
  d.zipf_alpha = d.zipf_r2 = kNaN;
  if (d.ranking.size() < 2) return;
  const double m = static_cast<double>(d.ranking.size());
  double sx = 0, sy = 0;
  for (const KeyPopularity& p : d.ranking) {
    sx += std::log(static_cast<double>(p.rank));
    sy += std::log(static_cast<double>(p.requests));
  }
  const double mx = sx / m, my = sy / m;
  double sxx = 0, sxy = 0, syy = 0;
  for (const KeyPopularity& p : d.ranking) {
    const double x = std::log(static_cast<double>(p.rank)) - mx;
    const double y = std::log(static_cast<double>(p.requests)) - my;
    sxx += x * x;
    sxy += x * y;
    syy += y * y;
  }
  const double slope = sxy / sxx;
  d.zipf_alpha = -slope;
  double ss_res = 0;
  for (const KeyPopularity& p : d.ranking) {
    const double x = std::log(static_cast<double>(p.rank)) - mx;
    const double y = std::log(static_cast<double>(p.requests)) - my;
    ss_res += (y - slope * x) * (y - slope * x);
  }
  d.zipf_r2 = syy == 0 ? 1.0 : 1.0 - ss_res / syy;
}

// Single flight: a request inside the window of an earlier demand of its
// key. Demands come in subscribe order, so the earlier ones started at or
// before it: the latest window end among them decides.
void count_single_flight(Description& d, const std::vector<DemandFacts>& demands,
                         std::size_t keys) {
  std::vector<double> window_end(keys, -kInf);
  for (const DemandFacts& f : demands) {
    if (f.t < window_end[f.key]) {
      ++d.overlapping_requests;
      d.single_flight_saved_bytes += f.size;
    }
    window_end[f.key] = std::max(window_end[f.key], std::min(f.natural_end, f.end_t));
  }
  d.overlapping_share = d.requests == 0 ? kNaN
                                        : static_cast<double>(d.overlapping_requests) /
                                              static_cast<double>(d.requests);
}

// Orphans: ended by the caller while the lone transfer would still run; and
// how soon their key was asked for again.
void count_orphans(Description& d, const Trace& trace, const Walk& walk) {
  std::vector<double> came_back_s;
  for (const DemandFacts& f : walk.demands) {
    d.cancelled_demands += f.end == End::cancel;
    d.owner_ended_demands += f.end == End::owner;
    if ((f.end != End::cancel && f.end != End::owner) || !(f.end_t < f.natural_end)) continue;
    ++(f.end == End::cancel ? d.cancelled_in_flight : d.owner_ended_in_flight);
    const std::vector<std::size_t>& later = walk.key_subscribe_records[f.key];
    const auto next = std::upper_bound(later.begin(), later.end(), f.end_record);
    if (next != later.end()) {
      ++d.came_back;
      came_back_s.push_back(trace.records[*next].t - f.end_t);
    }
  }
  d.orphan_share = d.requests == 0
                       ? kNaN
                       : static_cast<double>(d.cancelled_in_flight + d.owner_ended_in_flight) /
                             static_cast<double>(d.requests);
  d.came_back_s = distribution(std::move(came_back_s));
}

}  // namespace

Description describe(const Trace& trace) {
  Description d;
  d.trace = trace.name;
  d.network_model = std::string(to_string(trace.platform.network_model));
  d.artifact_ids = trace.artifacts.size();
  d.owners = trace.owners.size();
  const Keys keys = index_keys(trace);
  Walk walk(trace, keys, d);
  if (!trace.records.empty()) d.duration_s = trace.records.back().t - trace.records.front().t;
  rank_keys(d, keys, walk);
  fit_zipf(d);
  d.reuse_time_s = distribution(std::move(walk.reuse_times));
  d.reuse_distance = distribution(std::move(walk.reuse_distances));
  std::vector<double> key_sizes;
  key_sizes.reserve(d.keys);
  for (const KeyPopularity& p : d.ranking)
    key_sizes.push_back(static_cast<double>(p.size_bytes));
  d.key_size_bytes = distribution(std::move(key_sizes));
  d.request_size_bytes = distribution(std::move(walk.request_sizes));
  count_single_flight(d, walk.demands, keys.keys.size());
  count_orphans(d, trace, walk);
  const double all_requests = static_cast<double>(d.requests);
  for (const auto& [priority, count] : walk.by_priority)
    d.priorities.push_back(
        PriorityDemands{priority, count, static_cast<double>(count) / all_requests});
  for (const DemandFacts& f : walk.demands)
    d.demands_reprioritized += f.reprioritized;
  return d;
}

void write_description_json(const Description& d, std::ostream& out, std::size_t top) {
  const std::size_t shown = top == 0 ? d.ranking.size() : std::min(top, d.ranking.size());
  ojson ranking = ojson::array();
  for (std::size_t i = 0; i < shown; ++i) {
    const KeyPopularity& p = d.ranking[i];
    ranking.push_back(ojson{{"rank", p.rank},
                            {"key", p.key},
                            {"requests", p.requests},
                            {"share", p.share},
                            {"cumulative_share", p.cumulative_share},
                            {"size_bytes", p.size_bytes}});
  }
  ojson priorities = ojson::array();
  for (const PriorityDemands& p : d.priorities)
    priorities.push_back(
        ojson{{"priority", p.priority}, {"demands", p.demands}, {"share", p.share}});
  ojson j;
  j["format"] = "demandflight-describe";
  j["version"] = 1;
  j["trace"] = d.trace;
  j["counts"] = ojson{{"requests", d.requests},
                      {"keys", d.keys},
                      {"artifact_ids", d.artifact_ids},
                      {"aliased_keys", d.aliased_keys},
                      {"requested_bytes", d.requested_bytes},
                      {"unique_bytes", d.unique_bytes},
                      {"cancels", d.cancels},
                      {"set_priorities", d.set_priorities},
                      {"end_owners", d.end_owners},
                      {"faults", d.faults},
                      {"owners", d.owners},
                      {"duration_s", d.duration_s}};
  j["popularity"] = ojson{{"zipf_alpha", d.zipf_alpha},
                          {"zipf_r2", d.zipf_r2},
                          {"zipf_ranks", d.zipf_ranks},
                          {"top_1pct_share", d.top_1pct_share},
                          {"top_10pct_share", d.top_10pct_share},
                          {"one_hit_wonders", d.one_hit_wonders},
                          {"one_hit_wonder_share", d.one_hit_wonder_share},
                          {"top", std::move(ranking)}};
  j["reuse"] = ojson{{"cold_requests", d.cold_requests},
                     {"time_s", distribution_json(d.reuse_time_s)},
                     {"distance", distribution_json(d.reuse_distance)}};
  j["sizes"] = ojson{{"key_bytes", distribution_json(d.key_size_bytes)},
                     {"request_bytes", distribution_json(d.request_size_bytes)}};
  j["single_flight"] = ojson{{"overlapping_requests", d.overlapping_requests},
                             {"share", d.overlapping_share},
                             {"saved_bytes", d.single_flight_saved_bytes}};
  j["orphans"] = ojson{{"cancelled_demands", d.cancelled_demands},
                       {"owner_ended_demands", d.owner_ended_demands},
                       {"cancelled_in_flight", d.cancelled_in_flight},
                       {"owner_ended_in_flight", d.owner_ended_in_flight},
                       {"share", d.orphan_share},
                       {"came_back", d.came_back},
                       {"came_back_s", distribution_json(d.came_back_s)},
                       {"lone_transfer_model", d.network_model}};
  j["priorities"] = ojson{{"demands", std::move(priorities)},
                          {"set_priorities", d.set_priorities},
                          {"demands_reprioritized", d.demands_reprioritized},
                          {"raises", d.priority_raises},
                          {"lowers", d.priority_lowers},
                          {"unchanged", d.priority_unchanged}};
  out << j.dump(2) << '\n';
}

void print_description(const Description& d, std::ostream& out, std::size_t top) {
  auto row = [&](const std::string& label, const std::string& value) {
    char buf[40];
    std::snprintf(buf, sizeof buf, "  %-26s ", label.c_str());
    out << buf << value << '\n';
  };
  auto count = [](std::uint64_t v) { return std::to_string(v); };
  const std::uint64_t orphans = d.cancelled_in_flight + d.owner_ended_in_flight;
  out << "trace \"" << d.trace << "\"\n";
  out << "counts\n";
  row("requests", count(d.requests));
  row("keys", count(d.keys) + " (" + count(d.artifact_ids) + " artifact ids, " +
                  count(d.aliased_keys) + " keys aliased)");
  row("requested bytes", bytes(static_cast<double>(d.requested_bytes)));
  row("unique bytes", bytes(static_cast<double>(d.unique_bytes)));
  row("cancels", count(d.cancels));
  row("set_priority", count(d.set_priorities));
  row("end_owner", count(d.end_owners));
  if (d.faults > 0) row("faults", count(d.faults));
  row("owners", count(d.owners));
  row("duration", seconds(d.duration_s));

  out << "popularity\n";
  row("zipf alpha",
      number(d.zipf_alpha) + " (R^2 " + number(d.zipf_r2) + ", " + count(d.zipf_ranks) + " ranks)");
  row("top 1% / 10% of keys",
      percent(d.top_1pct_share) + " / " + percent(d.top_10pct_share) + " of requests");
  row("one-hit wonders",
      count(d.one_hit_wonders) + " keys (" + percent(d.one_hit_wonder_share) + ")");
  const std::size_t shown = top == 0 ? d.ranking.size() : std::min(top, d.ranking.size());
  for (std::size_t i = 0; i < shown; ++i) {
    const KeyPopularity& p = d.ranking[i];
    char buf[64];
    std::snprintf(buf, sizeof buf, "%6llu  %6.1f%%  ", static_cast<unsigned long long>(p.requests),
                  100 * p.share);
    row(i == 0 ? "top keys (requests, share)" : "", buf + p.key);
  }

  out << "reuse\n";
  row("cold requests", count(d.cold_requests));
  row("reuse time (s)", quantiles(d.reuse_time_s, number));
  row("reuse distance (keys)", quantiles(d.reuse_distance, number));

  out << "sizes (bytes)\n";
  row("per key", quantiles(d.key_size_bytes, number));
  row("per request", quantiles(d.request_size_bytes, number));

  out << "single-flight opportunity\n";
  row("requests on a waiting key",
      count(d.overlapping_requests) + " (" + percent(d.overlapping_share) + " of requests)");
  row("bytes saved", bytes(static_cast<double>(d.single_flight_saved_bytes)));

  out << "orphan opportunity\n";
  row("in flight means", "ended before its lone transfer would end (the " + d.network_model +
                             " model, alone" +
                             (d.network_model == "tcp" || d.network_model == "ns3"
                                  ? ", on a new connection)"
                                  : ")"));
  row("cancelled in flight",
      count(d.cancelled_in_flight) + " of " + count(d.cancelled_demands) + " cancelled demands");
  row("owner ended in flight", count(d.owner_ended_in_flight) + " of " +
                                   count(d.owner_ended_demands) + " demands ended by end_owner");
  row("in flight, all", count(orphans) + " (" + percent(d.orphan_share) + " of demands)");
  row("came back",
      count(d.came_back) + " of " + count(orphans) +
          (d.came_back_s.count > 0 ? ", p50 after " + seconds(d.came_back_s.p50) : std::string()));

  out << "priorities\n";
  for (const PriorityDemands& p : d.priorities) {
    row("priority " + std::to_string(p.priority),
        count(p.demands) + " demands (" + percent(p.share) + ")");
  }
  row("set_priority", count(d.set_priorities) + " records: " + count(d.priority_raises) +
                          " raises, " + count(d.priority_lowers) + " lowers, " +
                          count(d.priority_unchanged) + " unchanged");
  row("demands reprioritized", count(d.demands_reprioritized));
}

}  // namespace dfl::format
