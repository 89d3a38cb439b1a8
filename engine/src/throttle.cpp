#include "demandflight/engine/throttle.h"

namespace dfl {

bool ThrottleRule::above(std::optional<Priority> p) const {
  return p && config_.background_at_or_below && *p > *config_.background_at_or_below;
}

void ThrottleRule::recount() {
  waiting_above_ = 0;
  for (auto& [id, entry] : tasks_) {
    (void)id;
    waiting_above_ += entry.demand_above ? 1 : 0;
  }
}

bool ThrottleRule::set(const ThrottleConfig& config) {
  if (config == config_) return false;
  const bool level_changed = config.background_at_or_below != config_.background_at_or_below;
  config_ = config;
  if (level_changed) {
    // Who waits above the level is re-judged from the demanded priorities
    // kept for that (below).
    for (auto& [id, entry] : tasks_) {
      (void)id;
      entry.demand_above = above(entry.demanded);
    }
    recount();
  }
  return true;
}

bool ThrottleRule::observe(const Command& command) {
  if (const auto* change = std::get_if<TaskPriorityChanged>(&command))
    return track(change->task, change->priority, change->demanded);
  if (const auto* ended = std::get_if<TaskEnded>(&command)) return forget(ended->task);
  return false;
}

bool ThrottleRule::forget(TaskId task) {
  auto it = tasks_.find(task.value);
  if (it == tasks_.end()) return false;
  if (it->second.demand_above) --waiting_above_;
  tasks_.erase(it);
  return true;
}

bool ThrottleRule::track(TaskId task, std::optional<Priority> effective,
                         std::optional<Priority> demanded) {
  Entry& entry = tasks_[task.value];
  const bool was_above = entry.demand_above;
  entry.effective = effective;
  entry.demanded = demanded;
  entry.demand_above = above(demanded);
  if (entry.demand_above && !was_above) ++waiting_above_;
  if (!entry.demand_above && was_above) --waiting_above_;
  return true;
}

bool ThrottleRule::background_limited() const {
  return config_.background_at_or_below && config_.background_Bps > 0 && waiting_above_ > 0;
}

bool ThrottleRule::is_background(TaskId task) const {
  if (!config_.background_at_or_below) return false;
  auto it = tasks_.find(task.value);
  if (it == tasks_.end()) return false;
  return !it->second.effective || *it->second.effective <= *config_.background_at_or_below;
}

std::optional<double> ThrottleRule::class_cap_Bps(TaskId task) const {
  if (background_limited() && is_background(task)) return config_.background_Bps;
  return std::nullopt;
}

std::optional<double> ThrottleRule::overall_Bps() const {
  if (config_.overall_Bps > 0) return config_.overall_Bps;
  return std::nullopt;
}

}  // namespace dfl
