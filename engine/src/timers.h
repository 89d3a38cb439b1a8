// Timers: the demands' deadlines, the tasks' retry times and the times at
// which orphan policies asked to be asked again (OrphanPolicy::ask_again_at_s),
// in one ordered set, fired in (time, arming order), so that equal times fire
// in a fixed order.
#pragma once

#include <cstdint>
#include <optional>
#include <set>

#include "engine_assert.h"
#include "slab.h"

namespace dfl::detail {

enum class TimerKind : std::uint8_t { deadline, retry, orphan_reask };

// Ordered by (time, arming order) so equal times fire deterministically.
struct Timer {
  double at_s = 0;
  std::uint64_t seq = 0;
  TimerKind kind = TimerKind::deadline;
  std::uint32_t index = kNone;  // Demand or task slot.
  std::uint64_t identity = 0;   // Demand slot generation or TaskId, to reject stale entries.

  friend bool operator<(const Timer& a, const Timer& b) {
    if (a.at_s != b.at_s) return a.at_s < b.at_s;
    return a.seq < b.seq;
  }
};

class Timers {
 public:
  // Arms a timer; returns its number, which disarm() takes.
  std::uint64_t arm(double at_s, TimerKind kind, std::uint32_t index, std::uint64_t identity) {
    const std::uint64_t seq = ++last_seq_;
    timers_.insert(Timer{at_s, seq, kind, index, identity});
    return seq;
  }
  // Disarms the timer `seq` armed for `at_s` (0: none armed), and clears `seq`.
  void disarm(double at_s, std::uint64_t& seq) {
    if (seq == 0) return;
    const std::size_t erased = timers_.erase(Timer{at_s, seq, TimerKind::deadline, kNone, 0});
    DFL_ASSERT(erased == 1, "disarming a timer that is not armed");
    seq = 0;
  }
  // The first timer due by `now`, taken out; nullopt when none is.
  std::optional<Timer> pop_due(double now) {
    if (timers_.empty() || timers_.begin()->at_s > now) return std::nullopt;
    const Timer timer = *timers_.begin();
    timers_.erase(timers_.begin());
    return timer;
  }
  std::optional<double> next_s() const {
    if (timers_.empty()) return std::nullopt;
    return timers_.begin()->at_s;
  }
  bool armed(double at_s, std::uint64_t seq, TimerKind kind) const {
    return timers_.count(Timer{at_s, seq, kind, kNone, 0}) == 1;
  }
  auto begin() const { return timers_.begin(); }
  auto end() const { return timers_.end(); }

 private:
  std::set<Timer> timers_;
  std::uint64_t last_seq_ = 0;
};

}  // namespace dfl::detail
