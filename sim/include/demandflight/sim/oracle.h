// The simulator's hindsight policies, which read the rest of the trace.
//
// lookahead: when a transfer is orphaned it looks up the next subscribe of
// the same key; it completes exactly when there is one and the artifact
// would still be in the cache by then, keeps the partial when there is one
// but the artifact would be evicted first, and aborts when the key is never
// asked for again. "Still in the cache" is LRU's rule: the distinct other
// keys asked for in between, with their sizes, plus this one fit in the
// cache's capacity. Completing must also save more than it costs: the next
// demand would otherwise fetch the whole artifact, or only what arrives
// before it ends on its own (its cancel, owner end or timeout, read from the
// trace at the current transfer's rate); completing costs the remaining
// bytes. And while a real demand waits for the slot, it completes only if
// the next demand comes before the rest would have arrived. In every other
// case where the key is asked for again it keeps the partial. A rule of
// thumb: it ignores what a decision does to other keys (slot time, the
// partial budget, evictions), and online policies can beat it.
//
// oracle: the bound `demandflight compare` scores regret against. It
// searches the run's orphan decisions with the whole future known, by
// simulating: SimGrid's engine runs in one thread, so a forked child carries
// the whole simulated world, takes one choice and runs on.
//
// 1. Its bases. At its first decision it runs every base policy's own
//    decisions to the end of the trace (a child each) and follows the best
//    run from then on (the incumbent): its score is never above any base's.
//    Every built-in policy with its default parameters and lookahead are its
//    bases by default, and `compare` adds every policy it compares.
// 2. The scout. One more child follows the incumbent to the end and, at
//    the later decisions with most at stake (below), probes the other two
//    choices (of abort, complete, keep-partial): a probe is a child that
//    takes the choice, lets the
//    incumbent make every later decision, and is scored at the decision's
//    horizon on what differs between the choices (below); the scout's own
//    state at the same horizon scores the incumbent's choice. A choice whose
//    probe scores lower is a suggestion, with what it gained. A key the trace
//    never asks for again is suggested aborted (completing or keeping it can
//    only cost).
// 3. The verified changes. The oracle's own run follows the incumbent and,
//    at the kOracleVerifiedChanges suggestions that gained most, runs the
//    change to the end (a child) and keeps it only if that run scores below
//    the best run so far (a "fortified rollout"). Its score is that best
//    run's: every simulation here depends on the trace alone, so a child's
//    run is reproduced exactly (the result warns if it was not).
//
// Cost: (bases + 1 + kOracleVerifiedChanges) runs to the end, and two probes
// for each of at most kOracleProbedDecisions decisions, each at most
// kOracleHorizonSubscribes subscribes long (a probe's fork copies the
// process's page tables, which grow with the trace): it grows linearly with
// the trace (docs/benchmarks.md has the figures).
//
// A decision's horizon is when its consequences have shown: the key's next
// subscribe plus the time that subscribe's fetch would take at the orphaned
// transfer's rate (at least the time its own rest would take), and at most
// kOracleHorizonSubscribes subscribes ahead. A probe's score at its horizon
// H uses the score's weights (format/score.h) on what the run has done by
// then: bytes transferred (in-flight ones included), wasted, demands
// unserved and timed out, priority pollution up to H; the p95 of the
// critical class, which is not a sum, enters by its tail: each critical
// demand served since the decision, or still waiting at H (latency censored
// at H), adds its latency above the incumbent's critical p95, divided by 5%
// of the trace's critical demands (the first-order change of the mean of the
// slowest 5%). A probe only ranks choices; only runs to the end decide. This
// is a hindsight search, not a proof of optimality: a policy it never tried
// as a base may still do better.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "demandflight/engine/orphan_policy.h"
#include "demandflight/format/result.h"
#include "demandflight/format/score.h"
#include "demandflight/format/trace.h"

namespace dfl::sim {

class LookaheadPolicy final : public OrphanPolicy {
 public:
  explicit LookaheadPolicy(const format::Trace& trace);

  OrphanDecision decide(const OrphanView& view) override;
  void observe_request(const ArtifactKey& key, double now_s) override;
  std::string_view name() const override { return "lookahead"; }
  bool uses_key_history() const override { return true; }  // To follow the trace.

  // When `key` is subscribed next (after every subscribe observed so far),
  // or nullopt if never again.
  std::optional<double> next_request_s(const ArtifactKey& key) const;
  // When the subscribe `count` after the last one observed comes (+inf:
  // past the trace's end).
  double subscribe_time_ahead_s(std::uint32_t count) const;

 private:
  // The subscribes of the trace in order: which key, and for each key the
  // positions of its subscribes in that order.
  std::unordered_map<ArtifactKey, std::uint32_t> key_index_;
  std::vector<std::uint64_t> key_size_;
  std::vector<std::uint32_t> sequence_;  // Key of each subscribe.
  std::vector<double> time_;             // Time of each subscribe.
  std::vector<double> end_;  // When each subscribe's demand ends on its own (inf: never).
  std::vector<std::vector<std::uint32_t>> positions_;  // Per key: its subscribes.
  std::vector<std::uint32_t> seen_of_key_;             // Per key: subscribes so far.
  std::uint32_t seen_ = 0;                             // Subscribes so far.
  // The bytes of the distinct keys asked for between two positions, in
  // O(log n): each key's first subscribe at or after seen_ carries its size
  // in a Fenwick tree over positions (0 elsewhere), so the sum over [seen_,
  // next) counts every key met in between once. Moving seen_ past a
  // subscribe moves its key's mark to that key's next subscribe.
  std::vector<std::uint32_t> next_of_position_;  // The same key's next subscribe (or n).
  std::vector<std::uint32_t> marked_;            // Per key: its marked position (or n).
  std::vector<std::uint64_t> fenwick_;           // 1-based.
  void fenwick_add(std::uint32_t position, std::int64_t delta);
  std::uint64_t fenwick_prefix(std::uint32_t end) const;  // Sum over [0, end).
};

// What a probe has done by its horizon (the simulator fills it).
struct ProbeEnd {
  double t = 0;
  double bytes_transferred = 0;  // In-flight transfers' bytes included.
  double bytes_wasted = 0;
  double unserved = 0;           // Failed or timed out.
  double timed_out = 0;
  double pollution_s = 0;
  // Every demand still waiting (its latency censored at t); the oracle
  // adds those served since the decision.
  struct Latency {
    Priority priority;
    double latency_s;
  };
  std::vector<Latency> latencies;
};

// A snapshot of the run the oracle asks the simulator for (see below).
struct SnapshotRequest {
  std::uint64_t id;
  double at_s;
};

// How far ahead of a decision an oracle probe may run, in subscribes; how
// many decisions the scout probes at most; how many of the changes probes
// suggest are run to the end.
inline constexpr std::uint32_t kOracleHorizonSubscribes = 200;
inline constexpr std::size_t kOracleProbedDecisions = 512;
inline constexpr std::size_t kOracleVerifiedChanges = 32;

// The oracle (see the top of this file). Its spec's parameters are the
// score's weights (oracle:gb=1,p95_critical_s=2, ...; format/score.h).
class HindsightOracle final : public OrphanPolicy {
 public:
  HindsightOracle(const format::Trace& trace, const format::Weights& weights,
                  std::vector<std::string> base_specs);
  ~HindsightOracle() override;

  OrphanDecision decide(const OrphanView& view) override;
  void observe_request(const ArtifactKey& key, double now_s) override;
  // The incumbent base's: the parent is asked again when its children were.
  std::optional<double> ask_again_at_s(const OrphanView& view) override;
  std::string_view name() const override { return "oracle"; }
  bool uses_key_history() const override { return true; }

  // What it did, for the result's policy report.
  struct Stats {
    std::uint64_t decisions = 0;
    std::uint64_t runs = 0;       // Children run to the end.
    std::uint64_t probes = 0;     // Children run to a horizon,
    std::uint64_t probed = 0;     // at this many decisions.
    std::uint64_t suggested = 0;  // Decisions where a probe beat the incumbent,
    std::uint64_t verified = 0;   // of which run to the end,
    std::uint64_t changed = 0;    // and better there.
    double score = 0;             // What this run must score.
    double base_score = 0;        // The incumbent base's run.
    std::string base;             // The incumbent base.
  };
  const Stats& stats() const { return stats_; }
  const format::Weights& weights() const { return weights_; }

  // For the rollout functions below (one oracle per process).
  std::string scout_reply() const;
  std::string base_reply() const;
  void served(Priority priority, double latency_s);
  std::optional<SnapshotRequest> take_snapshot_request();
  void snapshot(std::uint64_t id, const ProbeEnd& state);
  void run_ended(const ProbeEnd& state);
  bool watching() const { return role_ == Role::scout || role_ == Role::probe; }

 private:
  struct Base {
    std::string spec;
    std::shared_ptr<OrphanPolicy> policy;
  };
  enum class Role : std::uint8_t { parent, base_run, scout, probe };
  struct Suggestion {
    std::uint64_t index;  // Of the decision, in the run's order.
    OrphanDecision choice;
    double gain;          // The incumbent's probe score minus this choice's.
  };
  // Forks one child per entry of `firsts` (its first, forced decision),
  // following `bases` after it, as `role`. Returns each child's reply (empty when it failed); in a child,
  // returns at once with role_ set.
  std::vector<std::string> fork_children(const std::vector<OrphanDecision>& firsts,
                                         const std::vector<std::size_t>& bases, Role role);
  static double score_of(const std::string& reply);  // +inf for a failed child.
  OrphanDecision first_decision(const OrphanView& view);
  void scout(const OrphanView& view, OrphanDecision incumbent, std::uint64_t index);
  double horizon_s(const OrphanView& view, double next_s) const;

  const format::Trace& trace_;
  format::Weights weights_;
  std::vector<Base> bases_;
  std::size_t incumbent_ = 0;  // The base whose decisions the runs follow.
  bool started_ = false;
  Role role_ = Role::parent;
  std::optional<OrphanDecision> forced_;  // A child's first decision.
  std::uint64_t decisions_seen_ = 0;      // Decisions asked so far, in any role.
  LookaheadPolicy next_use_;              // When each key is asked for next.
  bool has_critical_ = false;             // The score's critical class,
  Priority critical_priority_ = 0;
  double critical_demands_ = 0;           // how many subscribes it has,
  double critical_p95_ = 0;               // and the incumbent's p95 of it.
  std::vector<Suggestion> suggested_;     // A scout's.
  // Stakes (see the top of this file): a base run's, of each decision whose
  // key is asked for again; the scout probes those above stake_floor_, and
  // stake_ties_ of those equal to it, in order.
  static double stake(const OrphanView& view);
  std::vector<double> stakes_;
  double stake_floor_ = 0;
  std::uint64_t stake_ties_ = 0;
  // A scout's decisions waiting for the incumbent's state at their horizon:
  // the best other choice, its probe's score, and where the decision's
  // served demands begin in served_.
  struct Window {
    std::uint64_t index;
    std::size_t from;
    OrphanDecision best;
    double best_score;
  };
  std::unordered_map<std::uint64_t, Window> windows_;  // By snapshot id.
  std::vector<ProbeEnd::Latency> served_;  // Watching: every demand served, in order.
  std::vector<SnapshotRequest> requests_;  // Not yet taken by the simulator.
  std::uint64_t next_snapshot_ = 1;
  std::uint64_t my_snapshot_ = 0;  // A probe's own (others inherited are ignored).
  std::size_t my_from_ = 0;        // Where its served demands begin.
  double probe_score(const ProbeEnd& state, std::size_t from) const;
  std::unordered_map<std::uint64_t, OrphanDecision> suggestions_;  // The parent's to verify.
  Stats stats_;
};

// The oracle's bases when none are given: every built-in policy that needs
// no file (with its default parameters) and lookahead.
std::vector<std::string> default_oracle_bases();

// In a child of the oracle: set by it, read by the simulator, which writes
// no output file there and ends the child with finish_rollout(), or a probe
// with finish_probe() at its horizon.
bool in_rollout();
// The oracle's scout and probes watch the run: the simulator tells them
// each demand served, takes their snapshot requests (each once) and arms a
// timer for each, and hands them the run's state at that time and at the
// run's end (which ends a probe).
bool oracle_watching();
void oracle_served(Priority priority, double latency_s);
std::optional<SnapshotRequest> take_snapshot_request();
void oracle_snapshot(std::uint64_t id, const ProbeEnd& state);
void oracle_run_ended(const ProbeEnd& state);
// Scores `result` with the oracle's weights, hands the score (and a
// search's decisions) to the parent and ends the child process.
[[noreturn]] void finish_rollout(const format::Result& result);

// The simulator's policies: the registry's (policies/registry.h), lookahead
// and the oracle, which need the trace. Throws std::invalid_argument for a
// bad spec; check_sim_policy() does so before any trace is read.
// `oracle_bases`: the oracle's bases (empty: default_oracle_bases()).
void check_sim_policy(std::string_view spec);
std::shared_ptr<OrphanPolicy> make_sim_policy(std::string_view spec, const format::Trace& trace,
                                              const std::vector<std::string>& oracle_bases = {});

}  // namespace dfl::sim
