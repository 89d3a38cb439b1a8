// expected-value: finish an orphan only if the bytes it is expected to save
// are worth more than the bytes (and the slot) it costs.
//
// In bytes, aborting costs nothing now but a full refetch (size) if the key is
// asked for again within the horizon; completing costs the remaining bytes
// now, and more while a queued task waits for the slot it holds. So it
// completes iff
//
//     P(reuse within horizon_s) * size > remaining * (1 + queue_weight * blocked)
//
// where blocked is 1 when a task is queued and no slot is free. P(reuse) is
// learned online from what happened after earlier orphan decisions: every
// orphaned key opens an "event" that resolves as reused (the key is asked for
// within horizon_s) or not (the horizon passes). The key's own events are
// pooled with its class's (the resource's directory: `world/cell_3_4/a.mesh`
// belongs to `world/cell_3_4`) under a Beta prior:
//
//     p_class = (reused_class + 1) / (events_class + 2)
//     p       = (reused_key + prior_weight * p_class) / (events_key + prior_weight)
//
// A key asked for twice within the horizon before (the view's previous gap)
// counts as one more reused event of its own. An unknown size is aborted
// (there is nothing to weigh). With keep=1, an abort keeps the partial.
//
// The idea is the cost-benefit admission of web caches (GreedyDual-Size, and
// the expected-value reasoning of prefetchers): weigh the chance of reuse by
// what a miss would cost.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <unordered_map>

#include "demandflight/engine/orphan_policy.h"

namespace dfl::policies {

class ExpectedValuePolicy final : public OrphanPolicy {
 public:
  struct Params {
    double horizon_s = 60;      // Reuse later than this does not count.
    double prior_weight = 2;    // How many events the class prior is worth.
    double queue_weight = 1;    // Extra cost per remaining byte while a slot is wanted.
    bool keep = false;          // Abort as keep_partial.
    std::uint32_t max_keys = 1u << 18;  // Per-key statistics kept (then cleared).
  };
  explicit ExpectedValuePolicy(Params params) : params_(params) {}

  OrphanDecision decide(const OrphanView& view) override;
  void observe_request(const ArtifactKey& key, double now_s) override;
  std::string_view name() const override { return "expected-value"; }
  bool uses_key_history() const override { return true; }

  // P(reuse within the horizon) for `key` now (for tests and the learned
  // policy's features).
  double reuse_probability(const ArtifactKey& key, const OrphanView* view = nullptr) const;
  const Params& params() const { return params_; }

  // The class of a key: its resource up to the last '/' ("" for none).
  static std::string class_of(const ArtifactKey& key);

 private:
  struct Counts {
    double events = 0;
    double reused = 0;
  };
  struct Event {
    double at_s;
    std::string key;  // Serialised key (see key_id).
    std::string cls;
  };
  static std::string key_id(const ArtifactKey& key);
  void expire(double now_s);

  Params params_;
  std::unordered_map<std::string, Counts> by_key_;
  std::unordered_map<std::string, Counts> by_class_;
  std::unordered_map<std::string, double> pending_;  // Open events: key -> orphaned at.
  std::deque<Event> events_;                           // Open events, oldest first.
};

}  // namespace dfl::policies
