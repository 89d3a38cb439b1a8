// oracle: the orphan policy that knows the future (simulator only).
//
// It reads the rest of the trace. When a transfer is orphaned it looks up the
// next subscribe of the same key; it completes exactly when there is one and
// the artifact would still be in the cache by then, keeps the partial when
// there is one but the artifact would be evicted first, and aborts when the
// key is never asked for again. "Still in the cache" is LRU's rule: the
// distinct other keys asked for in between, with their sizes, plus this one
// fit in the cache's capacity. Completing must also save more than it costs:
// the next demand would otherwise fetch the whole artifact, or only what
// arrives before it ends on its own (its cancel, owner end or timeout, read
// from the trace at the current transfer's rate); completing costs the
// remaining bytes. And while a real demand waits for the slot, it completes
// only if the next demand comes before the rest would have arrived. In every
// other case where the key is asked for again it keeps the partial. It is the
// bound the other policies are scored against (`demandflight compare`
// reports their regret).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "demandflight/engine/orphan_policy.h"
#include "demandflight/format/trace.h"

namespace dfl::sim {

class OraclePolicy final : public OrphanPolicy {
 public:
  explicit OraclePolicy(const format::Trace& trace);

  OrphanDecision decide(const OrphanView& view) override;
  void observe_request(const ArtifactKey& key, double now_s) override;
  std::string_view name() const override { return "oracle"; }
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

// The simulator's policies: the registry's (policies/registry.h) and the
// oracle, which needs the trace. Throws std::invalid_argument for a bad spec;
// check_sim_policy() does so before any trace is read.
void check_sim_policy(std::string_view spec);
std::shared_ptr<OrphanPolicy> make_sim_policy(std::string_view spec, const format::Trace& trace);

}  // namespace dfl::sim
