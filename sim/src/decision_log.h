// DecisionLog: every answer of the orphan policy in a run, with the view the
// policy answered and what the trace did next with the key (`demandflight sim
// --decisions FILE`, `dfl.simulate(..., decisions=True)`): material for
// training and debugging policies. The format is in docs/trace-format.md.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "demandflight/engine/command.h"
#include "demandflight/engine/orphan_policy.h"
#include "demandflight/format/recorder.h"
#include "demandflight/format/result.h"
#include "demandflight/format/trace.h"

namespace dfl::sim {

class DecisionLog {
 public:
  // `horizon_s`: a key "came back" when it is subscribed again within this
  // many seconds of the decision.
  DecisionLog(const format::Trace& trace, const format::ResultRecorder& recorder,
              double horizon_s);

  // The policy for the scheduler: `inner`, with every view it is asked kept.
  std::shared_ptr<OrphanPolicy> tap(std::shared_ptr<OrphanPolicy> inner);

  // A subscribe of `key` is about to go in (the log counts them, so that it
  // knows each decision's next subscribe of its key in the trace).
  void subscribed(std::uint32_t key) { ++subscribes_seen_[key]; }
  // Each OrphanDecided, in the order the engine emitted them: one per view.
  // `before_subscribe_of_key`: it came inside a subscribe of the same key
  // that had not reached its demand yet (a timer due at that instant), so
  // that subscribe is still to come for it.
  void decided(double t, const OrphanDecided& c, std::uint32_t key, bool before_subscribe_of_key);

  // One JSON object per line, in decision order. Throws std::runtime_error
  // when the file cannot be written.
  void write(const std::string& path, const format::Result& result,
             const format::Trace& trace) const;

 private:
  struct Entry {
    double t = 0;
    std::uint64_t task = 0;
    std::uint32_t key = 0;
    OrphanDecision decision = OrphanDecision::abort;
    OrphanView view;  // Its key pointer cleared: the task names the artifact.
    std::uint32_t subscribes_before = 0;  // Of the key, when decided.
  };

  double horizon_s_;
  std::vector<std::vector<double>> subscribe_times_;  // By key, in trace order.
  std::vector<std::uint32_t> subscribes_seen_;        // By key.
  std::deque<OrphanView> asked_;                      // Views not yet matched with their answer.
  std::vector<Entry> entries_;
};

}  // namespace dfl::sim
