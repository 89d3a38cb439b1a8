// Background throttling: which transfers a runtime slows down, and how much
// (docs/design.md, *Background throttling*).
//
// Two caps, both changeable at any time:
// - the background cap: the transfers of tasks at or below a priority level
//   (orphans too) share `background_Bps` together, but only while a demand
//   above that level waits (some live task's highest active demand is above
//   it): the game loads something critical, prefetch backs off;
// - the overall cap: every transfer together, always.
//
// The rule is the engine's view, computed from its commands: a runtime
// (simulator or backend) feeds it every command it drains and asks it which
// transfers to limit; it moves the bytes itself (a token bucket on a real
// socket, a link of that bandwidth in the simulator). Not thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <unordered_map>

#include "demandflight/engine/command.h"
#include "demandflight/engine/ids.h"

namespace dfl {

struct ThrottleConfig {
  // Tasks whose effective priority is at or below this are background;
  // nullopt: no background cap.
  std::optional<Priority> background_at_or_below;
  double background_Bps = 0;  // Their cap, together, while a demand above waits. 0: none.
  double overall_Bps = 0;     // Every transfer together, always. 0: none.
  bool operator==(const ThrottleConfig&) const = default;
};

class ThrottleRule {
 public:
  explicit ThrottleRule(ThrottleConfig config = {}) : config_(config) {}

  const ThrottleConfig& config() const { return config_; }
  // A new configuration, effective at once. Returns whether anything changed.
  bool set(const ThrottleConfig& config);

  // Feeds one of the engine's commands (TaskPriorityChanged and TaskEnded
  // matter). Returns true when background_limited() or a task's class may
  // have changed.
  bool observe(const Command& command);
  // The same for one live task's priorities (effective nullopt: an orphan),
  // and for its end: for a runtime that starts following the engine late,
  // from Scheduler::tasks().
  bool track(TaskId task, std::optional<Priority> effective, std::optional<Priority> demanded);
  bool forget(TaskId task);

  // True while the background cap applies: it is set, and a demand above
  // the background level waits.
  bool background_limited() const;
  // Whether `task` is background: the level is set and the task's effective
  // priority is at or below it, or it is an orphan. False for a task the rule
  // has not heard of.
  bool is_background(TaskId task) const;
  // The cap on `task`'s transfer's class right now (the background cap when
  // it is background and the cap applies), else nullopt. The overall cap is
  // separate: overall_Bps() applies to every transfer.
  std::optional<double> class_cap_Bps(TaskId task) const;
  std::optional<double> overall_Bps() const;

 private:
  struct Entry {
    std::optional<Priority> effective;  // nullopt: orphan level.
    std::optional<Priority> demanded;   // Its highest active demand; nullopt: none.
    bool demand_above = false;          // `demanded` is above the level.
  };
  bool above(std::optional<Priority> p) const;
  void recount();

  ThrottleConfig config_;
  std::unordered_map<std::uint64_t, Entry> tasks_;  // Live tasks, by id.
  std::uint64_t waiting_above_ = 0;                 // Tasks with demand_above.
};

}  // namespace dfl
