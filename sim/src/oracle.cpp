#include "demandflight/sim/oracle.h"

#include <algorithm>
#include <limits>
#include <stdexcept>

#include "demandflight/policies/registry.h"

namespace dfl::sim {

namespace {
// Past this many subscribes between now and the next request, the oracle
// takes the artifact as evicted (and keeps only the partial).
constexpr std::uint32_t kMaxScan = 1u << 22;
}  // namespace

void check_sim_policy(std::string_view spec) {
  const policies::PolicySpec parsed = policies::parse_policy_spec(spec);
  if (parsed.name == "oracle") {
    if (!parsed.params.empty()) {
      throw std::invalid_argument("policy oracle takes no parameters (got \"" +
                                  parsed.params.begin()->first + "\")");
    }
    return;
  }
  policies::make_orphan_policy(spec);
}

std::shared_ptr<OrphanPolicy> make_sim_policy(std::string_view spec, const Trace& trace) {
  check_sim_policy(spec);
  if (policies::parse_policy_spec(spec).name == "oracle") {
    return std::make_shared<OraclePolicy>(trace);
  }
  return policies::make_orphan_policy(spec);
}

OraclePolicy::OraclePolicy(const Trace& trace) {
  std::vector<std::uint32_t> key_of_artifact;
  key_of_artifact.reserve(trace.artifacts.size());
  for (const Artifact& a : trace.artifacts) {
    auto [it, inserted] =
        key_index_.try_emplace(a.key, static_cast<std::uint32_t>(key_size_.size()));
    if (inserted) key_size_.push_back(a.size_bytes);
    key_of_artifact.push_back(it->second);
  }
  positions_.resize(key_size_.size());
  // When each demand ends without help: its cancel, its owner's end, its
  // timeout (whichever comes first; infinity when none does).
  constexpr double kNever = std::numeric_limits<double>::infinity();
  std::vector<double> cancel_at(trace.demand_ids.size(), kNever);
  std::vector<std::vector<const Record*>> owner_ends(trace.owners.size());
  for (const Record& r : trace.records) {
    if (r.op == Op::cancel) cancel_at[r.demand] = std::min(cancel_at[r.demand], r.t);
    if (r.op == Op::end_owner) owner_ends[r.owner].push_back(&r);
  }
  for (const Record& r : trace.records) {
    if (r.op != Op::subscribe) continue;
    const std::uint32_t key = key_of_artifact[r.artifact];
    positions_[key].push_back(static_cast<std::uint32_t>(sequence_.size()));
    sequence_.push_back(key);
    time_.push_back(r.t);
    double end = std::min(cancel_at[r.demand], r.t + r.timeout_s);
    for (const Record* e : owner_ends[r.owner]) {
      if (e->t >= r.t && (!e->has_generation || r.owner_generation <= e->owner_generation)) {
        end = std::min(end, e->t);
        break;  // In time order: the first that covers it.
      }
    }
    end_.push_back(end);
  }
  seen_of_key_.assign(key_size_.size(), 0);
  stamp_.assign(key_size_.size(), 0);
}

void OraclePolicy::observe_request(const ArtifactKey& key, double) {
  auto it = key_index_.find(key);
  if (it == key_index_.end()) return;  // Not from this trace (a test's own call).
  ++seen_of_key_[it->second];
  ++seen_;
}

std::optional<double> OraclePolicy::next_request_s(const ArtifactKey& key) const {
  auto it = key_index_.find(key);
  if (it == key_index_.end()) return std::nullopt;
  const std::vector<std::uint32_t>& mine = positions_[it->second];
  if (seen_of_key_[it->second] >= mine.size()) return std::nullopt;
  return time_[mine[seen_of_key_[it->second]]];
}

OrphanDecision OraclePolicy::decide(const OrphanView& view) {
  if (view.key == nullptr) return OrphanDecision::abort;
  auto it = key_index_.find(*view.key);
  if (it == key_index_.end()) return OrphanDecision::abort;
  const std::uint32_t key = it->second;
  const std::vector<std::uint32_t>& mine = positions_[key];
  if (seen_of_key_[key] >= mine.size()) return OrphanDecision::abort;  // Never again.
  const std::uint32_t next = mine[seen_of_key_[key]];

  // LRU stack distance: the distinct other keys asked for before then.
  const std::uint64_t size = view.size_bytes > 0 ? view.size_bytes : key_size_[key];
  const std::uint64_t capacity = view.cache_capacity_bytes;
  bool fits = size <= capacity;
  if (fits && next - seen_ > kMaxScan) fits = false;
  if (fits) {
    if (++scan_ == 0) {  // Wrapped: old stamps could look current.
      std::fill(stamp_.begin(), stamp_.end(), 0);
      scan_ = 1;
    }
    std::uint64_t between = 0;
    for (std::uint32_t i = seen_; i < next; ++i) {
      const std::uint32_t other = sequence_[i];
      if (other == key || stamp_[other] == scan_) continue;
      stamp_[other] = scan_;
      between += key_size_[other];
      if (between + size > capacity) {
        fits = false;
        break;
      }
    }
  }
  if (!fits) return OrphanDecision::keep_partial;
  // It will be used: finish it, unless a real demand waits for its slot now
  // and the key's next demand comes after the rest would have arrived. Then
  // the partial is kept instead (the same bytes in the end, fetched when
  // asked for), and the slot goes to the demand that waits.
  // Bytes it saves: a refetch of the whole artifact for the next demand, or
  // only what that demand would have received before it ends on its own.
  const double rate = view.throughput_Bps;
  double saves = static_cast<double>(size);
  if (rate > 0 && end_[next] < std::numeric_limits<double>::infinity()) {
    saves = std::min(saves, std::max(0.0, end_[next] - time_[next]) * rate);
  }
  if (saves <= static_cast<double>(view.bytes_remaining)) return OrphanDecision::keep_partial;
  const bool blocked = view.queued_tasks > 0 && view.free_slots == 0;
  if (!blocked) return OrphanDecision::complete;
  const double rest_s = rate > 0 ? static_cast<double>(view.bytes_remaining) / rate : 0.0;
  return time_[next] <= view.now_s + rest_s ? OrphanDecision::complete
                                            : OrphanDecision::keep_partial;
}

}  // namespace dfl::sim
