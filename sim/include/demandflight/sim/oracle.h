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
// oracle: the bound `demandflight compare` scores regret against. It tries
// each decision and keeps the best by running the simulation on: at every
// orphan decision it forks the simulator (SimGrid's engine runs in one
// thread, so a child carries the whole simulated world), each child takes
// one choice (abort, complete, keep-partial) and then decides like a base
// policy to the end of the trace, and reports the score of the run it made
// (format/score.h, with the oracle's weights); the oracle takes the best.
// Its bases are the policies it starts from: on its first decision it runs
// every base's own decisions to the end, follows the best of them, and from
// then on only changes a decision where a run shows the change lowers the
// score (a "fortified rollout": the score it ends with is the best any run
// it made reached). So its score is never above any base's own: every
// built-in policy with its default parameters and lookahead are its bases
// by default, and `compare` adds every policy it compares. It is a hindsight
// search with the whole future known, not a proof of optimality: a policy it
// never tried as a base may still do better.
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

// The oracle (see the top of this file). Its spec's parameters are the
// score's weights (oracle:gb=1,p95_critical_s=2, ...; format/score.h).
class HindsightOracle final : public OrphanPolicy {
 public:
  HindsightOracle(const format::Trace& trace, const format::Weights& weights,
                  std::vector<std::string> base_specs);
  ~HindsightOracle() override;

  OrphanDecision decide(const OrphanView& view) override;
  void observe_request(const ArtifactKey& key, double now_s) override;
  // The incumbent base's: the parent is asked again when its best child was.
  std::optional<double> ask_again_at_s(const OrphanView& view) override;
  std::string_view name() const override { return "oracle"; }
  bool uses_key_history() const override { return true; }

  // What it did, for the result's warnings and policy report.
  struct Stats {
    std::uint64_t decisions = 0;
    std::uint64_t runs = 0;      // Children run to the end.
    std::uint64_t changed = 0;   // Decisions where a run beat the incumbent.
    double score = 0;            // The best run's score (what this run must score).
    std::string base;            // The base it followed.
  };
  const Stats& stats() const { return stats_; }
  const format::Weights& weights() const { return weights_; }

 private:
  struct Base {
    std::string spec;
    std::shared_ptr<OrphanPolicy> policy;
  };
  // The score of the run where this decision is `choice` and `base` makes
  // every later one (a forked child); +inf when the child failed.
  std::vector<double> run_all(const std::vector<std::pair<OrphanDecision, std::size_t>>& runs);

  const format::Trace& trace_;
  format::Weights weights_;
  std::vector<Base> bases_;
  std::size_t incumbent_ = 0;  // The base whose decisions the best run follows.
  bool started_ = false;
  // In a child: the base it follows and its first, forced decision.
  std::optional<OrphanDecision> forced_;
  Stats stats_;
};

// The oracle's bases when none are given: every built-in policy that needs
// no file (with its default parameters) and lookahead.
std::vector<std::string> default_oracle_bases();

// In a child of the oracle: set by it, read by the simulator, which writes
// no output file there and ends the child with finish_rollout().
bool in_rollout();
// Scores `result` with the oracle's weights, hands the score to the parent
// and ends the child process.
[[noreturn]] void finish_rollout(const format::Result& result, const format::Trace& trace);

// The simulator's policies: the registry's (policies/registry.h), lookahead
// and the oracle, which need the trace. Throws std::invalid_argument for a
// bad spec; check_sim_policy() does so before any trace is read.
// `oracle_bases`: the oracle's bases (empty: default_oracle_bases()).
void check_sim_policy(std::string_view spec);
std::shared_ptr<OrphanPolicy> make_sim_policy(std::string_view spec, const format::Trace& trace,
                                              const std::vector<std::string>& oracle_bases = {});

}  // namespace dfl::sim
