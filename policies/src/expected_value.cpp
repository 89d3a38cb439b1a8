#include "demandflight/policies/expected_value.h"

#include <algorithm>

namespace dfl::policies {

std::string ExpectedValuePolicy::class_of(const ArtifactKey& key) {
  const std::size_t slash = key.resource.rfind('/');
  return slash == std::string::npos ? std::string() : key.resource.substr(0, slash);
}

std::string ExpectedValuePolicy::key_id(const ArtifactKey& key) {
  std::string id;
  id.reserve(key.resource.size() + key.revision.size() + key.target.size() + 24);
  id += key.resource;
  id += '\0';
  id += key.revision;
  id += '\0';
  id += key.target;
  id += '\0';
  id += std::to_string(key.generation);
  return id;
}

// Events older than the horizon resolve as "not reused".
void ExpectedValuePolicy::expire(double now_s) {
  while (!events_.empty() && now_s - events_.front().at_s > params_.horizon_s) {
    const Event& e = events_.front();
    auto it = pending_.find(e.key);
    if (it != pending_.end() && it->second == e.at_s) {
      by_key_[e.key].events += 1;
      by_class_[e.cls].events += 1;
      pending_.erase(it);
    }
    events_.pop_front();
  }
}

void ExpectedValuePolicy::observe_request(const ArtifactKey& key, double now_s) {
  expire(now_s);
  if (pending_.empty()) return;
  const std::string id = key_id(key);
  auto it = pending_.find(id);
  if (it == pending_.end()) return;
  // Asked for again within the horizon: the orphan would have been used.
  Counts& k = by_key_[id];
  k.events += 1;
  k.reused += 1;
  Counts& c = by_class_[class_of(key)];
  c.events += 1;
  c.reused += 1;
  pending_.erase(it);
}

double ExpectedValuePolicy::reuse_probability(const ArtifactKey& key,
                                              const OrphanView* view) const {
  double class_events = 0, class_reused = 0;
  if (auto it = by_class_.find(class_of(key)); it != by_class_.end()) {
    class_events = it->second.events;
    class_reused = it->second.reused;
  }
  const double p_class = (class_reused + 1) / (class_events + 2);
  double events = 0, reused = 0;
  if (auto it = by_key_.find(key_id(key)); it != by_key_.end()) {
    events = it->second.events;
    reused = it->second.reused;
  }
  // Its own request history: asked twice within the horizon before.
  if (view != nullptr && view->previous_gap_s && *view->previous_gap_s <= params_.horizon_s) {
    events += 1;
    reused += 1;
  }
  return (reused + params_.prior_weight * p_class) / (events + params_.prior_weight);
}

OrphanDecision ExpectedValuePolicy::decide(const OrphanView& view) {
  expire(view.now_s);
  const OrphanDecision give_up = params_.keep ? OrphanDecision::keep_partial : OrphanDecision::abort;
  OrphanDecision decision = give_up;
  if (view.size_bytes > 0 && view.key != nullptr) {
    const double p = reuse_probability(*view.key, &view);
    const bool blocked = view.queued_tasks > 0 && view.free_slots == 0;
    const double cost = static_cast<double>(view.bytes_remaining) *
                        (1 + (blocked ? params_.queue_weight : 0.0));
    const double benefit = p * static_cast<double>(view.size_bytes);
    decision = benefit > cost ? OrphanDecision::complete : give_up;
  }
  // Each orphaning opens one event; re-asks on pressure changes do not.
  if (view.first_decision && view.key != nullptr) {
    std::string id = key_id(*view.key);
    if (!pending_.contains(id)) {
      if (by_key_.size() > params_.max_keys) by_key_.clear();
      pending_.emplace(id, view.now_s);
      events_.push_back(Event{view.now_s, std::move(id), class_of(*view.key)});
    }
  }
  return decision;
}

}  // namespace dfl::policies
