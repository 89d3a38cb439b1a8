#include "decision_log.h"

#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string_view>
#include <utility>

namespace dfl::sim {
namespace {

// Asks `inner` and keeps each view it is asked, for the log.
class ViewTap final : public OrphanPolicy {
 public:
  ViewTap(std::shared_ptr<OrphanPolicy> inner, std::deque<OrphanView>& asked)
      : inner_(std::move(inner)), asked_(asked) {}
  OrphanDecision decide(const OrphanView& view) override {
    asked_.push_back(view);
    asked_.back().key = nullptr;
    return inner_->decide(view);
  }
  std::string_view name() const override { return inner_->name(); }
  bool uses_key_history() const override { return inner_->uses_key_history(); }
  void observe_request(const ArtifactKey& key, double now_s) override {
    inner_->observe_request(key, now_s);
  }
  std::optional<double> ask_again_at_s(const OrphanView& view) override {
    return inner_->ask_again_at_s(view);
  }

 private:
  std::shared_ptr<OrphanPolicy> inner_;
  std::deque<OrphanView>& asked_;
};

nlohmann::ordered_json optional_json(const auto& value) {
  return value ? nlohmann::ordered_json(*value) : nlohmann::ordered_json(nullptr);
}

}  // namespace

DecisionLog::DecisionLog(const format::Trace& trace, const format::ResultRecorder& recorder,
                         double horizon_s)
    : horizon_s_(horizon_s),
      subscribe_times_(recorder.key_count()),
      subscribes_seen_(recorder.key_count(), 0) {
  for (const format::Record& r : trace.records) {
    if (r.op == format::Op::subscribe)
      subscribe_times_[recorder.key_of_artifact(r.artifact)].push_back(r.t);
  }
}

std::shared_ptr<OrphanPolicy> DecisionLog::tap(std::shared_ptr<OrphanPolicy> inner) {
  return std::make_shared<ViewTap>(std::move(inner), asked_);
}

void DecisionLog::decided(double t, const OrphanDecided& c, std::uint32_t key,
                          bool before_subscribe_of_key) {
  if (asked_.empty()) throw std::logic_error("an orphan decision without a view");
  entries_.push_back(Entry{t, c.task.value, key, c.decision, asked_.front(),
                           subscribes_seen_[key] - (before_subscribe_of_key ? 1u : 0u)});
  asked_.pop_front();
}

void DecisionLog::write(const std::string& path, const format::Result& result,
                        const format::Trace& trace) const {
  std::ofstream out(path);
  if (!out) throw std::runtime_error("cannot write " + path);
  using ojson = nlohmann::ordered_json;
  for (const Entry& e : entries_) {
    const format::TaskResult& task = result.tasks[e.task - 1];
    const OrphanView& v = e.view;
    const std::vector<double>& times = subscribe_times_[e.key];
    std::optional<double> next_in;
    if (e.subscribes_before < times.size()) next_in = times[e.subscribes_before] - e.t;
    const ojson line{
        {"t", e.t},
        {"task", e.task - 1},
        {"artifact", trace.artifacts[task.artifact].id},
        {"policy", result.policy},
        {"decision", std::string(to_string(e.decision))},
        {"first_decision", v.first_decision},
        {"size_bytes", v.size_bytes},
        {"bytes_done", v.bytes_done},
        {"bytes_remaining", v.bytes_remaining},
        {"elapsed_s", v.elapsed_s},
        {"throughput_Bps", v.throughput_Bps},
        {"queued_tasks", v.queued_tasks},
        {"queued_bytes", v.queued_bytes},
        {"queued_top_priority", optional_json(v.queued_top_priority)},
        {"free_slots", v.free_slots},
        {"key_demands", v.key_demands},
        {"since_last_demand_s", v.since_last_demand_s},
        {"previous_gap_s", optional_json(v.previous_gap_s)},
        {"cache_capacity_bytes", v.cache_capacity_bytes},
        {"cache_used_bytes", v.cache_used_bytes},
        {"partial_capacity_bytes", v.partial_capacity_bytes},
        {"partial_used_bytes", v.partial_used_bytes},
        {"task_outcome", std::string(to_string(task.outcome))},
        {"next_demand_in_s", optional_json(next_in)},
        {"came_back", next_in && *next_in <= horizon_s_},
        {"horizon_s", horizon_s_}};
    out << line.dump() << '\n';
  }
  out.close();
  if (!out) throw std::runtime_error("writing " + path + " failed");
}

}  // namespace dfl::sim
