#include "demandflight/sim/oracle.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cerrno>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <thread>

#include "demandflight/policies/registry.h"

namespace dfl::sim {
using namespace dfl::format;

namespace {
// Past this many subscribes between now and the next request, lookahead
// takes the artifact as evicted (and keeps only the partial).
constexpr std::uint32_t kMaxScan = 1u << 22;

// In a child of the oracle: where its reply goes. One oracle per process
// (one simulation per process).
int g_rollout_fd = -1;
HindsightOracle* g_oracle = nullptr;

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

namespace {
void append(std::string& out, double value) {
  out.append(reinterpret_cast<const char*>(&value), sizeof value);
}

// The doubles at the start of a reply (NaN past its end).
double read_double(const std::string& reply, std::size_t index) {
  double value = std::numeric_limits<double>::quiet_NaN();
  if (reply.size() >= (index + 1) * sizeof value)
    std::memcpy(&value, reply.data() + index * sizeof value, sizeof value);
  return value;
}

[[noreturn]] void reply_and_exit(const std::string& reply) {
  std::size_t sent = 0;
  while (sent < reply.size()) {
    const ssize_t n = ::write(g_rollout_fd, reply.data() + sent, reply.size() - sent);
    if (n > 0) {
      sent += static_cast<std::size_t>(n);
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else {
      break;
    }
  }
  ::_exit(sent == reply.size() ? 0 : 1);  // No destructor, no stdio flush: the parent owns the outputs.
}

// A run's reply: its score and its critical p95; a base run's adds the
// floor of its stakes and the ties the scout probes; a scout's adds its
// probes, the decisions probed and its suggestions' count, then each as
// (decision, choice, gain).
constexpr std::size_t kScoutHead = 5;
}  // namespace

bool in_rollout() { return g_rollout_fd >= 0; }
bool oracle_watching() { return g_oracle != nullptr && g_oracle->watching(); }
void oracle_served(Priority priority, double latency_s) { g_oracle->served(priority, latency_s); }
std::optional<SnapshotRequest> take_snapshot_request() {
  return g_oracle != nullptr ? g_oracle->take_snapshot_request() : std::nullopt;
}
void oracle_snapshot(std::uint64_t id, const ProbeEnd& state) { g_oracle->snapshot(id, state); }
void oracle_run_ended(const ProbeEnd& state) { g_oracle->run_ended(state); }

void finish_rollout(const Result& result) {
  const format::Metrics m = format::score_result(result, g_oracle->weights());
  std::string reply;
  append(reply, m.score);
  append(reply, m.critical_p95);
  reply += g_oracle->scout_reply();
  reply += g_oracle->base_reply();
  reply_and_exit(reply);
}

HindsightOracle::HindsightOracle(const Trace& trace, const format::Weights& weights,
                                 std::vector<std::string> base_specs)
    : trace_(trace), weights_(weights), next_use_(trace) {
  for (std::string& spec : base_specs) {
    if (policies::parse_policy_spec(spec).name == "oracle") continue;
    std::shared_ptr<OrphanPolicy> policy = make_sim_policy(spec, trace);
    bases_.push_back(Base{std::move(spec), std::move(policy)});
  }
  if (bases_.empty()) throw std::invalid_argument("policy oracle: no base policy");
  // The score's critical class (format/score.h) and its size.
  std::optional<Priority> critical;
  if (!std::isnan(weights.critical_priority)) {
    critical = static_cast<Priority>(weights.critical_priority);
  } else {
    for (const Record& r : trace.records)
      if (r.op == Op::subscribe && (!critical || r.priority > *critical)) critical = r.priority;
  }
  has_critical_ = critical.has_value();
  critical_priority_ = critical.value_or(0);
  for (const Record& r : trace.records)
    if (r.op == Op::subscribe && critical && r.priority == *critical) ++critical_demands_;
  g_oracle = this;
}

HindsightOracle::~HindsightOracle() {
  if (g_oracle == this) g_oracle = nullptr;
}

void HindsightOracle::observe_request(const ArtifactKey& key, double now_s) {
  next_use_.observe_request(key, now_s);
  if (started_ || role_ != Role::parent) {
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
  const std::uint64_t index = decisions_seen_++;
  switch (role_) {
    case Role::base_run:
      if (forced_) return *std::exchange(forced_, std::nullopt);
      if (view.key != nullptr && next_use_.next_request_s(*view.key)) stakes_.push_back(stake(view));
      return bases_[incumbent_].policy->decide(view);
    case Role::probe:
      if (forced_) return *std::exchange(forced_, std::nullopt);
      return bases_[incumbent_].policy->decide(view);
    case Role::scout: {
      if (forced_) return *std::exchange(forced_, std::nullopt);  // Its first, the incumbent's.
      const OrphanDecision incumbent = bases_[incumbent_].policy->decide(view);
      scout(view, incumbent, index);
      if (role_ == Role::probe) return *std::exchange(forced_, std::nullopt);
      return incumbent;
    }
    case Role::parent:
      break;
  }
  ++stats_.decisions;
  if (!started_) return first_decision(view);
  const OrphanDecision incumbent = bases_[incumbent_].policy->decide(view);
  auto it = suggestions_.find(index);
  if (it == suggestions_.end() || it->second == incumbent) return incumbent;
  // A promising change: it stays only if the run to the end shows it better.
  const std::vector<std::string> run =
      fork_children({it->second}, {incumbent_}, Role::base_run);
  if (role_ != Role::parent) return *std::exchange(forced_, std::nullopt);
  ++stats_.runs;
  ++stats_.verified;
  const double score = score_of(run.front());
  if (!(score < stats_.score)) return incumbent;
  ++stats_.changed;
  stats_.score = score;
  return it->second;
}

OrphanDecision HindsightOracle::first_decision(const OrphanView& view) {
  started_ = true;
  // Every base decides and runs its own decisions to the end.
  std::vector<OrphanDecision> choice(bases_.size());
  std::vector<std::size_t> which(bases_.size());
  for (std::size_t b = 0; b < bases_.size(); ++b) {
    choice[b] = bases_[b].policy->decide(view);
    which[b] = b;
  }
  const std::vector<std::string> runs = fork_children(choice, which, Role::base_run);
  if (role_ != Role::parent) return *std::exchange(forced_, std::nullopt);
  stats_.runs += runs.size();
  std::size_t best = 0;
  for (std::size_t b = 1; b < runs.size(); ++b)
    if (score_of(runs[b]) < score_of(runs[best])) best = b;
  incumbent_ = best;
  stats_.base = bases_[best].spec;
  stats_.base_score = score_of(runs[best]);
  stats_.score = stats_.base_score;
  const double p95 = read_double(runs[best], 1);
  critical_p95_ = std::isnan(p95) ? 0.0 : p95;
  // Which of its decisions the scout probes: the base run counted them.
  const double floor = read_double(runs[best], 2);
  const double ties = read_double(runs[best], 3);
  if (!std::isnan(floor) && !std::isnan(ties)) {
    stake_floor_ = floor;
    stake_ties_ = static_cast<std::uint64_t>(ties);
  }
  // The scout follows the incumbent from here and probes each decision.
  const std::vector<std::string> scout = fork_children({choice[best]}, {best}, Role::scout);
  if (role_ != Role::parent) return *std::exchange(forced_, std::nullopt);
  stats_.runs += 1;
  const std::string& reply = scout.front();
  std::vector<Suggestion> found;
  if (reply.size() >= kScoutHead * sizeof(double)) {
    stats_.probes = static_cast<std::uint64_t>(read_double(reply, 2));
    stats_.probed = static_cast<std::uint64_t>(read_double(reply, 3));
    const auto count = static_cast<std::size_t>(read_double(reply, 4));
    if (reply.size() == (kScoutHead + 3 * count) * sizeof(double)) {
      for (std::size_t i = 0; i < count; ++i) {
        const std::size_t at = kScoutHead + 3 * i;
        found.push_back(Suggestion{static_cast<std::uint64_t>(read_double(reply, at)),
                                   static_cast<OrphanDecision>(read_double(reply, at + 1)),
                                   read_double(reply, at + 2)});
      }
    }
  }
  stats_.suggested = found.size();
  // The most promising ones, by what their probes gained.
  if (found.size() > kOracleVerifiedChanges) {
    std::nth_element(found.begin(), found.begin() + kOracleVerifiedChanges, found.end(),
                     [](const Suggestion& a, const Suggestion& b) {
                       return a.gain > b.gain || (a.gain == b.gain && a.index < b.index);
                     });
    found.resize(kOracleVerifiedChanges);
  }
  for (const Suggestion& s : found)
    suggestions_.emplace(s.index, s.choice);
  return choice[best];
}

void HindsightOracle::scout(const OrphanView& view, OrphanDecision incumbent,
                            std::uint64_t index) {
  const std::optional<double> next =
      view.key != nullptr ? next_use_.next_request_s(*view.key) : std::nullopt;
  if (!next) {  // Never asked for again: completing or keeping it can only cost.
    if (incumbent != OrphanDecision::abort) {
      suggested_.push_back(Suggestion{index, OrphanDecision::abort, kInf});
    }
    return;
  }
  // Only the decisions with most at stake (the incumbent's run counted them).
  const double at_stake = stake(view);
  if (at_stake < stake_floor_) return;
  if (at_stake == stake_floor_) {
    if (stake_ties_ == 0) return;
    --stake_ties_;
  }
  ++stats_.probed;
  // A probe for each other choice; the scout's own run, which goes on with
  // the incumbent's, is the third (its state at the same horizon).
  std::vector<OrphanDecision> others;
  for (OrphanDecision c :
       {OrphanDecision::abort, OrphanDecision::complete, OrphanDecision::keep_partial}) {
    if (c != incumbent) others.push_back(c);
  }
  const std::uint64_t id = next_snapshot_++;
  const SnapshotRequest request{id, horizon_s(view, *next)};
  const std::vector<std::string> probes = fork_children(
      others, std::vector<std::size_t>(others.size(), incumbent_), Role::probe);
  if (role_ != Role::scout) {  // A probe now: its horizon is the decision's.
    requests_.assign(1, request);
    my_snapshot_ = id;
    my_from_ = served_.size();
    return;
  }
  stats_.probes += probes.size();
  std::size_t best = 0;
  for (std::size_t i = 1; i < probes.size(); ++i)
    if (score_of(probes[i]) < score_of(probes[best])) best = i;
  windows_.emplace(id, Window{index, served_.size(), others[best], score_of(probes[best])});
  requests_.push_back(request);
}

void HindsightOracle::served(Priority priority, double latency_s) {
  served_.push_back({priority, latency_s});
}

std::optional<SnapshotRequest> HindsightOracle::take_snapshot_request() {
  if (requests_.empty()) return std::nullopt;
  const SnapshotRequest r = requests_.back();
  requests_.pop_back();
  return r;
}

void HindsightOracle::snapshot(std::uint64_t id, const ProbeEnd& state) {
  if (role_ == Role::probe) {
    if (id != my_snapshot_) return;  // The scout's, armed before the fork.
    std::string reply;
    append(reply, probe_score(state, my_from_));
    reply_and_exit(reply);
  }
  if (role_ != Role::scout) return;
  auto it = windows_.find(id);
  if (it == windows_.end()) return;
  const Window& w = it->second;
  const double mine = probe_score(state, w.from);
  if (w.best_score < mine) suggested_.push_back(Suggestion{w.index, w.best, mine - w.best_score});
  windows_.erase(it);
}

void HindsightOracle::run_ended(const ProbeEnd& state) {
  if (role_ == Role::probe) snapshot(my_snapshot_, state);  // Does not return.
  if (role_ != Role::scout) return;
  std::vector<std::uint64_t> ids;
  for (const auto& [id, window] : windows_)
    ids.push_back(id);
  std::sort(ids.begin(), ids.end());  // In decision order.
  for (std::uint64_t id : ids)
    snapshot(id, state);
}

double HindsightOracle::horizon_s(const OrphanView& view, double next_s) const {
  const double rate = view.throughput_Bps > 0 ? view.throughput_Bps
                                              : trace_.platform.client_bandwidth_Bps;
  const double rest_s = rate > 0 ? static_cast<double>(view.bytes_remaining) / rate : 0.0;
  const double fetch_s = rate > 0 ? static_cast<double>(view.size_bytes) / rate : 0.0;
  double horizon = std::max(view.now_s + rest_s, next_s + fetch_s);
  horizon = std::min(horizon, next_use_.subscribe_time_ahead_s(kOracleHorizonSubscribes));
  if (!std::isfinite(horizon)) horizon = std::max(view.now_s, next_s);
  return std::max(horizon, view.now_s);
}

double HindsightOracle::stake(const OrphanView& view) {
  return static_cast<double>(view.size_bytes) + static_cast<double>(view.bytes_remaining);
}

std::string HindsightOracle::base_reply() const {
  if (role_ != Role::base_run) return {};
  // The kOracleProbedDecisions largest stakes: those above the floor, and
  // as many equal to it as there is room for.
  double floor = -1;
  std::uint64_t ties = 0;
  if (stakes_.size() > kOracleProbedDecisions) {
    std::vector<double> stakes = stakes_;
    std::nth_element(stakes.begin(), stakes.begin() + (kOracleProbedDecisions - 1), stakes.end(),
                     std::greater<>());
    floor = stakes[kOracleProbedDecisions - 1];
    const auto above = static_cast<std::uint64_t>(
        std::count_if(stakes_.begin(), stakes_.end(), [&](double s) { return s > floor; }));
    ties = kOracleProbedDecisions - above;
  }
  std::string reply;
  append(reply, floor);
  append(reply, static_cast<double>(ties));
  return reply;
}

std::string HindsightOracle::scout_reply() const {
  if (role_ != Role::scout) return {};
  std::string reply;
  append(reply, static_cast<double>(stats_.probes));
  append(reply, static_cast<double>(stats_.probed));
  append(reply, static_cast<double>(suggested_.size()));
  for (const Suggestion& s : suggested_) {
    append(reply, static_cast<double>(s.index));
    append(reply, static_cast<double>(static_cast<int>(s.choice)));
    append(reply, s.gain);
  }
  return reply;
}

double HindsightOracle::score_of(const std::string& reply) {
  const double score = read_double(reply, 0);
  return std::isnan(score) ? kInf : score;
}

double HindsightOracle::probe_score(const ProbeEnd& end, std::size_t from) const {
  // The p95 term by its tail: each critical latency above the incumbent's
  // p95, over 5% of the critical demands (see the top of oracle.h).
  double excess = 0;
  auto add = [&](const ProbeEnd::Latency& l) {
    if (l.priority == critical_priority_) excess += std::max(0.0, l.latency_s - critical_p95_);
  };
  if (has_critical_) {
    for (std::size_t i = from; i < served_.size(); ++i)
      add(served_[i]);
    for (const ProbeEnd::Latency& l : end.latencies)
      add(l);
  }
  const double tail = std::max(1.0, 0.05 * critical_demands_);
  const format::Weights& w = weights_;
  return w.gb * end.bytes_transferred / 1e9 + w.wasted_gb * end.bytes_wasted / 1e9 +
         w.p95_critical_s * excess / tail + w.unserved * end.unserved +
         w.deadline_miss * end.timed_out + w.pollution_s * end.pollution_s;
}

std::vector<std::string> HindsightOracle::fork_children(const std::vector<OrphanDecision>& firsts,
                                                        const std::vector<std::size_t>& bases,
                                                        Role role) {
  struct Child {
    pid_t pid = -1;
    int fd = -1;
  };
  std::vector<Child> children(firsts.size());
  std::vector<std::string> replies(firsts.size());
  const std::size_t parallel = std::max(1u, std::thread::hardware_concurrency());
  auto reap = [&](std::size_t i) {
    Child& c = children[i];
    if (c.pid < 0) return;
    std::string reply;
    char buffer[4096];
    for (;;) {
      const ssize_t n = ::read(c.fd, buffer, sizeof buffer);
      if (n > 0) {
        reply.append(buffer, static_cast<std::size_t>(n));
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
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) replies[i] = std::move(reply);
    c.pid = -1;
  };
  for (std::size_t i = 0; i < firsts.size(); ++i) {
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
      if (g_rollout_fd >= 0) ::close(g_rollout_fd);  // Its parent's, not its own.
      g_rollout_fd = fds[1];
      role_ = role;
      incumbent_ = bases[i];
      forced_ = firsts[i];
      return {};
    }
    ::close(fds[1]);
    children[i] = Child{pid, fds[0]};
  }
  for (std::size_t i = 0; i < firsts.size(); ++i)
    reap(i);
  return replies;
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

double LookaheadPolicy::subscribe_time_ahead_s(std::uint32_t count) const {
  if (count == 0) count = 1;
  const std::uint64_t at = std::uint64_t{seen_} + count - 1;
  return at < time_.size() ? time_[at] : kInf;
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
