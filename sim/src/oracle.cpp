#include "demandflight/sim/oracle.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "demandflight/policies/registry.h"

namespace dfl::sim {
using namespace dfl::format;

namespace {
// Past this many subscribes between now and the next request, lookahead
// takes the artifact as evicted (and keeps only the partial).
constexpr std::uint32_t kMaxScan = 1u << 22;

// In a child of the oracle: where its score goes, and the weights to score
// with. One oracle per process (one simulation per process).
int g_rollout_fd = -1;
format::Weights g_rollout_weights;

constexpr double kInf = std::numeric_limits<double>::infinity();

// The weights in an oracle spec's parameters (all of them optional).
format::Weights oracle_weights(const policies::PolicySpec& spec) {
  return format::weights_from_params(spec.params, "policy oracle");
}
}  // namespace

void check_sim_policy(std::string_view spec) {
  const policies::PolicySpec parsed = policies::parse_policy_spec(spec);
  if (parsed.name == "oracle") {
    oracle_weights(parsed);
    return;
  }
  if (parsed.name == "lookahead") {
    if (!parsed.params.empty()) {
      throw std::invalid_argument("policy lookahead takes no parameters (got \"" +
                                  parsed.params.begin()->first + "\")");
    }
    return;
  }
  policies::make_orphan_policy(spec);
}

std::vector<std::string> default_oracle_bases() {
  std::vector<std::string> bases;
  for (const auto& [name, what] : policies::list_orphan_policies()) {
    if (name == "oracle" || name == "learned") continue;  // Itself; needs a model file.
    bases.push_back(name);
  }
  return bases;
}

std::shared_ptr<OrphanPolicy> make_sim_policy(std::string_view spec, const Trace& trace,
                                              const std::vector<std::string>& oracle_bases) {
  check_sim_policy(spec);
  const policies::PolicySpec parsed = policies::parse_policy_spec(spec);
  if (parsed.name == "oracle") {
    std::vector<std::string> bases = oracle_bases.empty() ? default_oracle_bases() : oracle_bases;
    // Every default base is in, also when more are given: the bound holds
    // against each of them whatever a comparison names.
    if (!oracle_bases.empty()) {
      for (std::string& name : default_oracle_bases()) {
        if (std::find(bases.begin(), bases.end(), name) == bases.end())
          bases.push_back(std::move(name));
      }
    }
    return std::make_shared<HindsightOracle>(trace, oracle_weights(parsed), std::move(bases));
  }
  if (parsed.name == "lookahead") return std::make_shared<LookaheadPolicy>(trace);
  return policies::make_orphan_policy(spec);
}

// --- oracle ------------------------------------------------------------------------

bool in_rollout() { return g_rollout_fd >= 0; }

void finish_rollout(const Result& result, const Trace& trace) {
  double score = kInf;
  try {
    std::ostringstream json;
    write_result_json(result, trace, json);
    score = format::score_result_json(json.str(), g_rollout_weights).score;
  } catch (...) {  // An infinite score: the parent never takes this run.
  }
  const bool sent = ::write(g_rollout_fd, &score, sizeof score) == sizeof score;
  ::_exit(sent ? 0 : 1);  // No destructor, no stdio flush: the parent owns the outputs.
}

HindsightOracle::HindsightOracle(const Trace& trace, const format::Weights& weights,
                                 std::vector<std::string> base_specs)
    : trace_(trace), weights_(weights) {
  for (std::string& spec : base_specs) {
    if (policies::parse_policy_spec(spec).name == "oracle") continue;
    std::shared_ptr<OrphanPolicy> policy = make_sim_policy(spec, trace);
    bases_.push_back(Base{std::move(spec), std::move(policy)});
  }
  if (bases_.empty()) throw std::invalid_argument("policy oracle: no base policy");
}

HindsightOracle::~HindsightOracle() = default;

void HindsightOracle::observe_request(const ArtifactKey& key, double now_s) {
  if (in_rollout()) {
    Base& mine = bases_[incumbent_];
    if (mine.policy->uses_key_history()) mine.policy->observe_request(key, now_s);
    return;
  }
  for (Base& b : bases_) {
    if (b.policy->uses_key_history()) b.policy->observe_request(key, now_s);
  }
}

std::optional<double> HindsightOracle::ask_again_at_s(const OrphanView& view) {
  return bases_[incumbent_].policy->ask_again_at_s(view);
}

OrphanDecision HindsightOracle::decide(const OrphanView& view) {
  if (in_rollout()) {
    if (forced_) return *std::exchange(forced_, std::nullopt);
    return bases_[incumbent_].policy->decide(view);
  }
  ++stats_.decisions;
  // Every base decides, so that each one's state stays what it would be in
  // a child that follows it from here.
  std::vector<OrphanDecision> choice(bases_.size());
  for (std::size_t b = 0; b < bases_.size(); ++b)
    choice[b] = bases_[b].policy->decide(view);
  std::vector<std::pair<OrphanDecision, std::size_t>> runs;
  if (!started_) {
    for (std::size_t b = 0; b < bases_.size(); ++b)
      runs.emplace_back(choice[b], b);
  } else {
    for (OrphanDecision c :
         {OrphanDecision::abort, OrphanDecision::complete, OrphanDecision::keep_partial}) {
      if (c != choice[incumbent_]) runs.emplace_back(c, incumbent_);
    }
  }
  const std::vector<double> scores = run_all(runs);
  if (in_rollout()) return decide(view);  // This is a child now: its forced choice.
  stats_.runs += runs.size();
  if (!started_) {
    started_ = true;
    std::size_t best = 0;
    for (std::size_t i = 1; i < runs.size(); ++i) {
      if (scores[i] < scores[best]) best = i;
    }
    incumbent_ = runs[best].second;
    stats_.score = scores[best];
    stats_.base = bases_[incumbent_].spec;
    return runs[best].first;
  }
  std::optional<std::size_t> better;
  for (std::size_t i = 0; i < runs.size(); ++i) {
    if (scores[i] < (better ? scores[*better] : stats_.score)) better = i;
  }
  if (!better) return choice[incumbent_];
  ++stats_.changed;
  stats_.score = scores[*better];
  return runs[*better].first;
}

std::vector<double> HindsightOracle::run_all(
    const std::vector<std::pair<OrphanDecision, std::size_t>>& runs) {
  struct Child {
    pid_t pid = -1;
    int fd = -1;
  };
  std::vector<Child> children(runs.size());
  std::vector<double> scores(runs.size(), kInf);
  const std::size_t parallel = std::max(1u, std::thread::hardware_concurrency());
  auto reap = [&](std::size_t i) {
    Child& c = children[i];
    if (c.pid < 0) return;
    double score = kInf;
    std::size_t got = 0;
    while (got < sizeof score) {
      const ssize_t n = ::read(c.fd, reinterpret_cast<char*>(&score) + got, sizeof score - got);
      if (n > 0) {
        got += static_cast<std::size_t>(n);
      } else if (n < 0 && errno == EINTR) {
        continue;
      } else {
        break;
      }
    }
    ::close(c.fd);
    int status = 0;
    while (::waitpid(c.pid, &status, 0) < 0 && errno == EINTR) {
    }
    const bool ok = got == sizeof score && WIFEXITED(status) && WEXITSTATUS(status) == 0;
    scores[i] = ok ? score : kInf;
    c.pid = -1;
  };
  for (std::size_t i = 0; i < runs.size(); ++i) {
    if (i >= parallel) reap(i - parallel);
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) continue;  // This run is not tried.
    std::fflush(nullptr);  // Nothing buffered is written twice.
    const pid_t pid = ::fork();
    if (pid < 0) {
      ::close(fds[0]);
      ::close(fds[1]);
      continue;
    }
    if (pid == 0) {
      ::close(fds[0]);
      g_rollout_fd = fds[1];
      g_rollout_weights = weights_;
      incumbent_ = runs[i].second;
      forced_ = runs[i].first;
      return {};
    }
    ::close(fds[1]);
    children[i] = Child{pid, fds[0]};
  }
  for (std::size_t i = 0; i < runs.size(); ++i)
    reap(i);
  return scores;
}

// --- lookahead ---------------------------------------------------------------------

LookaheadPolicy::LookaheadPolicy(const Trace& trace) {
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
  // Per owner, its first end not before the current subscribe: records are in
  // time order, so it only moves forward (an owner that comes and goes ends
  // many times; scanning its ends from the first for every subscribe was
  // quadratic).
  std::vector<std::size_t> first_end(trace.owners.size(), 0);
  for (const Record& r : trace.records) {
    if (r.op != Op::subscribe) continue;
    const std::uint32_t key = key_of_artifact[r.artifact];
    positions_[key].push_back(static_cast<std::uint32_t>(sequence_.size()));
    sequence_.push_back(key);
    time_.push_back(r.t);
    double end = std::min(cancel_at[r.demand], r.t + r.timeout_s);
    const std::vector<const Record*>& ends = owner_ends[r.owner];
    std::size_t& from = first_end[r.owner];
    while (from < ends.size() && ends[from]->t < r.t)
      ++from;
    for (std::size_t i = from; i < ends.size(); ++i) {
      const Record* e = ends[i];
      if (!e->has_generation || r.owner_generation <= e->owner_generation) {
        end = std::min(end, e->t);
        break;  // In time order: the first that covers it.
      }
    }
    end_.push_back(end);
  }
  seen_of_key_.assign(key_size_.size(), 0);

  const auto n = static_cast<std::uint32_t>(sequence_.size());
  next_of_position_.assign(n, n);
  marked_.assign(key_size_.size(), n);
  fenwick_.assign(std::size_t{n} + 1, 0);
  for (const std::vector<std::uint32_t>& mine : positions_) {
    for (std::size_t i = 0; i + 1 < mine.size(); ++i)
      next_of_position_[mine[i]] = mine[i + 1];
  }
  for (std::uint32_t key = 0; key < positions_.size(); ++key) {
    if (positions_[key].empty()) continue;
    marked_[key] = positions_[key].front();
    fenwick_add(marked_[key], static_cast<std::int64_t>(key_size_[key]));
  }
}

void LookaheadPolicy::fenwick_add(std::uint32_t position, std::int64_t delta) {
  for (std::size_t i = std::size_t{position} + 1; i < fenwick_.size(); i += i & (~i + 1))
    fenwick_[i] += static_cast<std::uint64_t>(delta);  // Wraps back for a negative delta.
}

std::uint64_t LookaheadPolicy::fenwick_prefix(std::uint32_t end) const {
  std::uint64_t sum = 0;
  for (std::size_t i = end; i > 0; i -= i & (~i + 1))
    sum += fenwick_[i];
  return sum;
}

void LookaheadPolicy::observe_request(const ArtifactKey& key, double) {
  auto it = key_index_.find(key);
  if (it == key_index_.end()) return;  // Not from this trace (a test's own call).
  ++seen_of_key_[it->second];
  if (seen_ < sequence_.size()) {
    // The subscribe at seen_ is behind us now, and it is its key's mark (the
    // key's first subscribe at or after seen_): the mark moves on.
    const std::uint32_t passed = seen_;
    const std::uint32_t other = sequence_[passed];
    fenwick_add(passed, -static_cast<std::int64_t>(key_size_[other]));
    marked_[other] = next_of_position_[passed];
    if (marked_[other] < sequence_.size())
      fenwick_add(marked_[other], static_cast<std::int64_t>(key_size_[other]));
  }
  ++seen_;
}

std::optional<double> LookaheadPolicy::next_request_s(const ArtifactKey& key) const {
  auto it = key_index_.find(key);
  if (it == key_index_.end()) return std::nullopt;
  const std::vector<std::uint32_t>& mine = positions_[it->second];
  if (seen_of_key_[it->second] >= mine.size()) return std::nullopt;
  return time_[mine[seen_of_key_[it->second]]];
}

OrphanDecision LookaheadPolicy::decide(const OrphanView& view) {
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
  if (fits && next > seen_) {
    // The distinct other keys between now and then (this key's own subscribes
    // in between, if it had any, do not count).
    std::uint64_t between = fenwick_prefix(next) - fenwick_prefix(seen_);
    if (marked_[key] < next) between -= key_size_[key];  // Marks are at or after seen_.
    fits = between + size <= capacity;
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
