// The three-caller story of docs/design.md §1, run on the scheduler core under each
// of the three models, step by step.
//
// One transfer slot is busy with terrain, so the rock waits in the queue next
// to a normal-priority grass download. Streaming prefetches the rock, the
// camera needs it now, a short-lived session preloads it and is destroyed,
// then the camera's object leaves the view. The demo prints what each caller
// receives and the rock task's priority after every step, then a side-by-side
// summary. Times are explicit; a tiny runtime here finishes transfers and
// installs when the story says so.
#include <cstdio>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "demandflight/engine/scheduler.h"

namespace {

using namespace dfl;

ArtifactKey key(const char* resource) {
  return ArtifactKey{resource, "r7", "pc", 0};
}

const std::map<OwnerId, const char*> kCallers = {
    {1, "streaming"}, {2, "ui"}, {3, "camera"}, {4, "session"}};

struct Step {
  double t;
  const char* what;
  std::function<void(class Story&)> action;
};

class Story {
 public:
  explicit Story(Model model) : scheduler_(config(model)), model_(model) {}

  static SchedulerConfig config(Model model) {
    SchedulerConfig c;
    c.model = model;
    c.max_transfers = 1;
    c.max_per_origin = 1;
    return c;
  }

  void subscribe(const char* name, const char* resource, OwnerId owner, Priority priority) {
    DemandOptions o;
    o.owner = owner;
    o.priority = priority;
    o.size_bytes = 50'000'000;
    handles_[name] = scheduler_.subscribe(now_, key(resource), o);
    callers_[handles_[name]] = name;
    drain();
  }
  void cancel(const char* name) {
    scheduler_.cancel(now_, handles_.at(name));
    drain();
  }
  void end_owner(OwnerId owner) {
    scheduler_.end_owner(now_, owner, std::nullopt);
    drain();
  }
  // Finishes every running transfer (or install) of `resource`: the
  // independent model may run several. Says so when there is none.
  template <class Id, class Finish>
  void finish_all(std::map<std::uint64_t, std::string>& running, const char* resource,
                  const char* what, Finish finish) {
    bool any = false;
    for (auto it = running.begin(); it != running.end();) {
      if (it->second != resource) {
        ++it;
        continue;
      }
      const Id id{it->first};
      it = running.erase(it);
      finish(id);
      drain();
      any = true;
    }
    if (!any) note("no " + std::string(resource) + " " + what + " is running");
  }
  void finish_transfers(const char* resource) {
    finish_all<TransferId>(running_, resource, "transfer", [this](TransferId id) {
      scheduler_.on_transfer_finished(now_, id, TransferStatus::ok, 50'000'000);
    });
  }
  void finish_installs(const char* resource) {
    finish_all<FinalizeId>(finalizing_, resource, "install", [this](FinalizeId id) {
      scheduler_.on_finalize_finished(now_, id, FinalizeStatus::installed);
    });
  }
  void complete(const char* resource) {
    finish_transfers(resource);
    finish_installs(resource);
  }

  void run(const std::vector<Step>& steps) {
    std::printf("\n== %s model ==\n", std::string(to_string(model_)).c_str());
    std::printf("%6s  %-44s %-34s %s\n", "t", "step", "rock task(s)", "callers told");
    for (const Step& step : steps) {
      now_ = step.t;
      told_.clear();
      notes_.clear();
      step.action(*this);
      std::string told;
      for (const auto& line : told_)
        told += (told.empty() ? "" : ", ") + line;
      for (const auto& line : notes_)
        told += (told.empty() ? "(" : ", (") + line + ")";
      std::printf("%6.2f  %-44s %-34s %s\n", step.t, step.what, rock_tasks().c_str(), told.c_str());
    }
    std::printf("rock: %u transfer(s), %u install(s)\n", rock_transfers_, rock_installs_);
  }

  std::string final_outcome(const char* name) const {
    auto it = outcome_.find(name);
    return it == outcome_.end() ? "(never told)" : it->second;
  }
  unsigned rock_transfers() const { return rock_transfers_; }
  unsigned rock_installs() const { return rock_installs_; }

 private:
  void note(std::string line) { notes_.push_back(std::move(line)); }

  std::string rock_tasks() const {
    std::string out;
    for (const TaskInfo& task : scheduler_.tasks()) {
      if (task.key.resource != "rock") continue;
      char buffer[96];
      const std::string priority =
          task.effective_priority ? "p" + std::to_string(*task.effective_priority) : "orphan";
      std::snprintf(buffer, sizeof buffer, "%s%s %s, %u waiting", out.empty() ? "" : "; ",
                    std::string(to_string(task.state)).c_str(), priority.c_str(),
                    task.active_demands);
      out += buffer;
    }
    return out.empty() ? "-" : out;
  }

  void drain() {
    for (Command& command : scheduler_.take_commands()) {
      if (auto* start = std::get_if<StartTransfer>(&command)) {
        running_[start->transfer.value] = start->key->resource;
        rock_transfers_ += start->key->resource == "rock";
      } else if (auto* abort = std::get_if<AbortTransfer>(&command)) {
        running_.erase(abort->transfer.value);
      } else if (auto* finalize = std::get_if<StartFinalize>(&command)) {
        finalizing_[finalize->finalize.value] = finalize->key->resource;
        rock_installs_ += finalize->key->resource == "rock";
      } else if (auto* deliver = std::get_if<Deliver>(&command)) {
        const std::string& name = callers_.at(deliver->demand);
        const std::string outcome(to_string(deliver->outcome));
        told_.push_back(name + ": " + outcome);
        char at[32];
        std::snprintf(at, sizeof at, " at %.1f", now_);
        outcome_[name] = outcome + at;
      }
    }
  }

  Scheduler scheduler_;
  Model model_;
  double now_ = 0;
  std::map<std::string, DemandHandle> handles_;
  std::map<DemandHandle, std::string> callers_;
  std::map<std::uint64_t, std::string> running_;
  std::map<std::uint64_t, std::string> finalizing_;
  std::map<std::string, std::string> outcome_;
  std::vector<std::string> told_;
  std::vector<std::string> notes_;
  unsigned rock_transfers_ = 0;
  unsigned rock_installs_ = 0;
};

const std::vector<Step> kStory = {
    {0.0, "streaming loads terrain (p0): takes the slot",
     [](Story& s) { s.subscribe("terrain", "terrain", 1, 0); }},
    {0.1, "streaming prefetches rock (p0)",
     [](Story& s) { s.subscribe("streaming", "rock", 1, 0); }},
    {0.2, "ui asks for grass (p1)", [](Story& s) { s.subscribe("grass", "grass", 2, 1); }},
    {1.0, "camera needs rock now (p3, critical)",
     [](Story& s) { s.subscribe("camera", "rock", 3, 3); }},
    {1.2, "session preloads rock (p2)", [](Story& s) { s.subscribe("session", "rock", 4, 2); }},
    {1.5, "session is destroyed (end_owner)", [](Story& s) { s.end_owner(4); }},
    {1.8, "camera's object leaves the view (cancel)", [](Story& s) { s.cancel("camera"); }},
    {2.0, "terrain transfer + install finish", [](Story& s) { s.complete("terrain"); }},
    {3.0, "whatever got the slot next finishes", [](Story& s) { s.complete("grass"); }},
    {3.5, "rock transfer finishes", [](Story& s) { s.finish_transfers("rock"); }},
    {4.0, "rock verify + install finish", [](Story& s) { s.finish_installs("rock"); }},
};

}  // namespace

int main() {
  std::printf(
      "The three-caller story (docs/design.md §1) on the demandflight core.\n"
      "One transfer slot; terrain holds it, grass (p1) and rock wait.\n");
  std::vector<Story> stories;
  for (Model model : {Model::demand, Model::callbacks, Model::independent}) {
    stories.emplace_back(model);
    stories.back().run(kStory);
  }

  std::printf("\n== side by side: what each rock caller was finally told ==\n");
  std::printf("%-10s %-22s %-22s %-22s\n", "caller", "demand", "callbacks", "independent");
  for (const char* caller : {"streaming", "camera", "session"}) {
    std::printf("%-10s", caller);
    for (const Story& story : stories)
      std::printf(" %-22s", story.final_outcome(caller).c_str());
    std::printf("\n");
  }
  std::printf("%-10s", "rock xfers");
  for (const Story& story : stories)
    std::printf(" %-22u", story.rock_transfers());
  std::printf("\n%-10s", "installs");
  for (const Story& story : stories)
    std::printf(" %-22u", story.rock_installs());
  std::printf(
      "\n\ndemand: the session's end and the camera's cancel end only their own waits; the\n"
      "rock falls back to p0 when the camera leaves, so grass (p1) goes first; one transfer,\n"
      "one install, streaming succeeds.\n"
      "callbacks: destroying the session cancels the whole rock task, so streaming and the\n"
      "camera are told 'cancelled' although neither asked; the rock is never installed.\n");
  return 0;
}
