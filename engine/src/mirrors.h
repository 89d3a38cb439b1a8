// Mirrors: an artifact's origins in order of preference, and each origin's
// circuit breaker. The rules (docs/design.md, *Mirrors and failover*):
//
// - A task whose demand named mirrors (DemandOptions::mirrors) holds its list
//   of origins: the demand's `origin` first, then the mirrors in order.
// - A failed attempt (a transfer error, retryable or not, or a body that
//   failed verification) moves the next attempt to the next origin of the
//   list at once, without backoff; once every origin has failed in this
//   round, the task backs off as a one-origin task does and starts the next
//   round at the first origin again. An origin that answered with a
//   permanent error (404, a body larger than expected) is not asked again by
//   this task; when none is left the task fails.
// - Each origin has a breaker: `failures` retryable failures in a row (of
//   any task) open it for `open_s`; a success closes it. While open, a task
//   choosing an origin skips it, unless every origin it may still ask is
//   open. Queued tasks waiting for an origin whose breaker opens move to
//   their next choice. After `open_s` the next attempt there is a trial: one
//   more failure opens it again at once.
// - A task's attempts are retry.max_attempts, or its number of origins if
//   that is larger: every mirror is asked at least once.
//
// A task with one origin behaves exactly as before mirrors existed: the
// breaker only chooses between origins.
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <span>
#include <vector>

#include "demandflight/engine/config.h"
#include "demandflight/engine/ids.h"

namespace dfl::detail {

// Lists of origins, interned: tasks of one mirror set share one list. Index 0
// is "no list" (the task has one origin).
class OriginLists {
 public:
  OriginLists() { lists_.emplace_back(); }

  // The list [first, mirrors...] without repeats; 0 when that is `first` alone.
  std::uint32_t intern(OriginId first, std::span<const OriginId> mirrors) {
    if (mirrors.empty()) return 0;
    std::vector<OriginId> list{first};
    for (OriginId o : mirrors) {
      bool seen = false;
      for (OriginId have : list)
        seen = seen || have == o;
      if (!seen) list.push_back(o);
    }
    if (list.size() == 1) return 0;
    const auto [it, added] = index_.try_emplace(list, static_cast<std::uint32_t>(lists_.size()));
    if (added) lists_.push_back(std::move(list));
    return it->second;
  }

  std::span<const OriginId> get(std::uint32_t id) const { return lists_[id]; }

 private:
  std::vector<std::vector<OriginId>> lists_;
  std::map<std::vector<OriginId>, std::uint32_t> index_;
};

// An origin's breaker.
struct Breaker {
  std::uint32_t failures_in_a_row = 0;
  double open_until_s = -std::numeric_limits<double>::infinity();

  bool open(double now) const { return now < open_until_s; }

  // A retryable failure at `now`: true when it opens the breaker (it was closed).
  bool failed(double now, const BreakerConfig& config) {
    ++failures_in_a_row;
    if (config.failures == 0 || failures_in_a_row < config.failures) return false;
    const bool was_open = open(now);
    open_until_s = now + config.open_s;
    return !was_open;
  }
  void succeeded() {
    failures_in_a_row = 0;
    open_until_s = -std::numeric_limits<double>::infinity();
  }
};

// The index in `list` a task's next attempt goes to: the first from `from`
// on (cyclically) that the task may still ask (not in `excluded`, a bit per
// index) and whose breaker is closed; if every such origin is open, the first
// it may ask. Returns list.size() when it may ask none.
template <class BreakerOf>
std::uint32_t choose_origin(std::span<const OriginId> list, std::uint32_t from,
                            std::uint32_t excluded, double now, const BreakerOf& breaker_of) {
  const auto n = static_cast<std::uint32_t>(list.size());
  std::uint32_t first_allowed = n;
  for (std::uint32_t k = 0; k < n; ++k) {
    const std::uint32_t i = (from + k) % n;
    if (excluded & (1u << i)) continue;
    if (first_allowed == n) first_allowed = i;
    if (!breaker_of(list[i]).open(now)) return i;
  }
  return first_allowed;
}

}  // namespace dfl::detail
