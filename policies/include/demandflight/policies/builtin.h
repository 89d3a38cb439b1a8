// The built-in orphan policies: the three plain answers, and rules from
// systems that met the same question. Construct them by name through
// registry.h (`squid:min_bytes=16384,max_bytes=16384,pct=95`, `low-priority`).
#pragma once

#include <cstdint>

#include "demandflight/engine/orphan_policy.h"

namespace dfl::policies {

// Abort every orphan at once: what the engine does without a policy. It never
// spends a slot on work nobody asked for.
class AlwaysAbortPolicy final : public OrphanPolicy {
 public:
  OrphanDecision decide(const OrphanView&) override { return OrphanDecision::abort; }
  std::string_view name() const override { return "always-abort"; }
};

// Complete every orphan (it runs below every real priority; no preemption).
class AlwaysCompletePolicy final : public OrphanPolicy {
 public:
  OrphanDecision decide(const OrphanView&) override { return OrphanDecision::complete; }
  std::string_view name() const override { return "always-complete"; }
};

// Keep what arrived and stop (Chromium's HTTP cache: a cancelled response is
// kept as a truncated entry and a later request resumes it with Range).
class KeepPartialPolicy final : public OrphanPolicy {
 public:
  OrphanDecision decide(const OrphanView&) override { return OrphanDecision::keep_partial; }
  std::string_view name() const override { return "keep-partial"; }
};


// Squid's quick_abort rule (squid.conf quick_abort_min / quick_abort_max /
// quick_abort_pct): when the client goes away, finish the fetch if little is
// left (at most min_bytes) or most of it is in (at least pct percent), and
// abort if much is left (more than max_bytes); in between abort. A negative
// min_bytes finishes everything of known size; min = max = 0 aborts
// everything. An unknown size is aborted first, as Squid does (nothing can
// be judged). Squid's defaults: 16 KB, 16 KB, 95%.
class SquidPolicy final : public OrphanPolicy {
 public:
  struct Params {
    std::int64_t min_bytes = 16 * 1024;
    std::int64_t max_bytes = 16 * 1024;
    double pct = 95;
  };
  explicit SquidPolicy(Params params) : params_(params) {}

  OrphanDecision decide(const OrphanView& view) override {
    if (view.size_bytes == 0) return OrphanDecision::abort;
    if (params_.min_bytes < 0) return OrphanDecision::complete;
    const auto remaining = static_cast<std::int64_t>(view.bytes_remaining);
    if (remaining <= params_.min_bytes) return OrphanDecision::complete;
    if (remaining > params_.max_bytes) return OrphanDecision::abort;
    const double done_pct =
        100.0 * static_cast<double>(view.bytes_done) / static_cast<double>(view.size_bytes);
    return done_pct >= params_.pct ? OrphanDecision::complete : OrphanDecision::abort;
  }
  std::string_view name() const override { return "squid"; }
  const Params& params() const { return params_; }

 private:
  Params params_;
};

// Fresco's keepCancelledFetchAsLowPriority: an orphan goes on below every
// real priority (the engine runs orphans at the orphan level), and is
// aborted as soon as a real demand waits for its slot: some task is queued
// and no transfer slot is free. Re-asked whenever slot pressure changes, so
// it lets go the moment it is in the way.
class LowPriorityPolicy final : public OrphanPolicy {
 public:
  OrphanDecision decide(const OrphanView& view) override {
    return view.queued_tasks > 0 && view.free_slots == 0 ? OrphanDecision::abort
                                                         : OrphanDecision::complete;
  }
  std::string_view name() const override { return "low-priority"; }
};

}  // namespace dfl::policies
