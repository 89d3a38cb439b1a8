// Exhaustive bounded check of the scheduler core (demand model).
//
// The randomized model-based test samples the space of call sequences; this
// explores all of it at a small scope: every sequence of up to --depth steps
// over a small alphabet, where a step is any call or runtime event enabled at
// that point, and each orphan decision the step may ask for is tried in
// turn. Scope (--scope small, the default; large in brackets):
//   - 3 demands [4]: d0 and d1 of owners 1 and 2 on key k0, d2 of owner 1 on
//     k1 [and d3 of owner 2 on k1];
//   - 1 transfer slot [2]; a cache that holds one artifact (the other is
//     evicted); one kept partial; 2 attempts per task, no backoff jitter;
//   - steps: subscribe a demand not yet subscribed (priority 0 or 1, with or
//     without a deadline 1 s ahead), cancel any subscribed demand (also an
//     ended one: idempotence), toggle a subscribed demand's priority,
//     end_owner (1 or 2, all generations; 1 through generation 0), fire the
//     next timer (time jumps to it), report progress of the running
//     transfer, finish it (ok, retryable after 400 bytes, permanent), finish
//     the finalize (installed, verify failed, error); a step that asks the
//     orphan policy is run once per answer (abort, complete, keep partial).
// A state already seen with as many steps left is not explored again: its
// canonical form is
// everything observable (the live tasks in creation order with their state,
// priority, demands, attempts and offsets; kept partials; what is installed;
// the reference's demands; the time to the next timer and to each deadline).
//
// After every step, against a reference of the demands:
//   - each demand gets at most one terminal, and success only once its key
//     is installed;
//   - a cancel, an end_owner and a deadline end exactly the demands they
//     name, in that call, with their outcome; nothing else ends but the
//     demands of a key whose transfer or finalize ended (succeeded only on
//     an install);
//   - a live task's effective priority is the max over its active demands
//     (none: the orphan level) and it counts them right;
//   - at most one live task per key, no more transfers running than slots;
//   - the engine's own invariant check.
// At each leaf the run is driven to quiescence (every transfer and finalize
// succeeds, every timer fires): then no task and no demand is left, and every
// subscribed demand has had exactly one terminal.
//
// Usage: engine_exhaustive_check [--depth N] [--scope small|large]. Prints
// the scope, the sequences and distinct states explored and the time; exits
// 1 on the first violation, printing the sequence that reached it.
#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include "demandflight/engine/scheduler.h"

namespace dfl {
namespace {

// The scope: `small` (CI) or `large` (make check-exhaustive).
struct Scope {
  int demands = 3;  // d0, d1 on k0 (owners 1, 2); d2, d3 on k1 (owners 1, 2).
  std::uint32_t slots = 1;
};
Scope g_scope;
constexpr int kMaxDemands = 4;
constexpr int kKeys = 2;
constexpr std::uint64_t kSize = 1000;
constexpr std::array<int, kMaxDemands> kKeyOf = {0, 0, 1, 1};
constexpr std::array<OwnerId, kMaxDemands> kOwnerOf = {1, 2, 1, 2};

struct Violation : std::runtime_error {
  using std::runtime_error::runtime_error;
};

#define CHECK(cond, msg)                                                      \
  do {                                                                        \
    if (!(cond)) {                                                            \
      std::ostringstream os_;                                                 \
      os_ << "violated: " << msg << " [" #cond "] (line " << __LINE__ << ")"; \
      throw Violation(os_.str());                                             \
    }                                                                         \
  } while (0)

ArtifactKey key_of(int k) {
  return ArtifactKey{"k" + std::to_string(k), "r1", "pc", 0};
}

int index_of(const ArtifactKey& key) {
  for (int k = 0; k < kKeys; ++k)
    if (key == key_of(k)) return k;
  throw Violation("a command names an unknown key " + key.resource);
}

// Answers every question of one step the same way, and counts them.
class ScriptedPolicy final : public OrphanPolicy {
 public:
  OrphanDecision answer = OrphanDecision::abort;
  int asked = 0;
  OrphanDecision decide(const OrphanView&) override {
    ++asked;
    return answer;
  }
  std::string_view name() const override { return "scripted"; }
};

enum class Kind : std::uint8_t {
  subscribe,    // a = demand, b = priority, c = with deadline
  cancel,       // a = demand
  toggle,       // a = demand
  end_owner,    // a = owner, b = 1: through generation 0, 0: all
  timer,        //
  progress,     //
  transfer_ok,  //
  transfer_retry,
  transfer_fail,
  finalize_ok,
  finalize_bad,  // verify failed
  finalize_error,
};

struct Step {
  Kind kind;
  int a = 0, b = 0, c = 0;
  OrphanDecision decision = OrphanDecision::abort;
};

std::string describe(const Step& s) {
  static const char* names[] = {"subscribe",
                                "cancel",
                                "set_priority",
                                "end_owner",
                                "timer",
                                "progress",
                                "transfer_ok",
                                "transfer_retry",
                                "transfer_fail",
                                "finalize_ok",
                                "finalize_verify_failed",
                                "finalize_error"};
  std::string out = names[static_cast<int>(s.kind)];
  switch (s.kind) {
    case Kind::subscribe:
      out +=
          " d" + std::to_string(s.a) + " p=" + std::to_string(s.b) + (s.c ? " deadline=+1s" : "");
      break;
    case Kind::cancel:
    case Kind::toggle:
      out += " d" + std::to_string(s.a);
      break;
    case Kind::end_owner:
      out += " " + std::to_string(s.a) + (s.b ? " through generation 0" : " (all)");
      break;
    default:
      break;
  }
  static const char* decisions[] = {"abort", "complete", "keep_partial"};
  return out + " [orphan: " + decisions[static_cast<int>(s.decision)] + "]";
}

// The engine, the reference, and the runtime's view of what runs.
class World {
 public:
  World() {
    SchedulerConfig c;
    c.model = Model::demand;
    c.max_transfers = g_scope.slots;
    c.max_per_origin = g_scope.slots;
    c.cache_bytes = kSize;  // One artifact: installing the other evicts it.
    c.partial_bytes = kSize;
    c.max_partials = 1;
    c.retry = RetryConfig{2, 1.0, 4.0, 0.0};
    c.max_origins = 1;
    policy_ = std::make_shared<ScriptedPolicy>();
    engine_ = std::make_unique<Scheduler>(c, policy_);
  }

  // Runs one step and checks the outcome. False if the step asked no orphan
  // question (its other answers would repeat it).
  bool apply(const Step& s) {
    policy_->answer = s.decision;
    policy_->asked = 0;
    std::map<int, DemandOutcome> must_end;  // What this call must end, and how.
    // A transfer's or finalize's end may end the demands of its key, and only so.
    may_end_key_ = -1;
    switch (s.kind) {
      case Kind::subscribe: {
        Demand& d = demands_[s.a];
        DemandOptions o;
        o.owner = kOwnerOf[s.a];
        o.priority = s.b;
        o.size_bytes = kSize;
        if (s.c) o.deadline_s = now_ + 1.0;
        d.state = State::active;
        d.priority = s.b;
        d.deadline = o.deadline_s;
        if (auto it = ended_through_.find(o.owner); it != ended_through_.end() && it->second >= 0)
          must_end[s.a] = DemandOutcome::owner_ended;
        else if (installed_.count(kKeyOf[s.a]) != 0)
          must_end[s.a] = DemandOutcome::succeeded;
        d.handle = engine_->subscribe(now_, key_of(kKeyOf[s.a]), o);
        break;
      }
      case Kind::cancel:
        if (demands_[s.a].state == State::active) must_end[s.a] = DemandOutcome::cancelled;
        engine_->cancel(now_, demands_[s.a].handle);
        break;
      case Kind::toggle: {
        Demand& d = demands_[s.a];
        const Priority p = d.priority == 0 ? 1 : 0;
        if (d.state == State::active) d.priority = p;
        engine_->set_priority(now_, d.handle, p);
        break;
      }
      case Kind::end_owner: {
        for (int i = 0; i < g_scope.demands; ++i) {
          if (demands_[i].state == State::active && kOwnerOf[i] == static_cast<OwnerId>(s.a))
            must_end[i] = DemandOutcome::owner_ended;
        }
        std::optional<OwnerGeneration> through;
        if (s.b != 0) {
          through = 0;
          ended_through_[static_cast<OwnerId>(s.a)] = 0;
        }
        engine_->end_owner(now_, static_cast<OwnerId>(s.a), through);
        break;
      }
      case Kind::timer: {
        now_ = *engine_->next_wakeup_s();
        for (int i = 0; i < g_scope.demands; ++i) {
          if (demands_[i].state == State::active && demands_[i].deadline <= now_)
            must_end[i] = DemandOutcome::timed_out;
        }
        engine_->on_timer(now_);
        break;
      }
      case Kind::progress: {
        Running& r = running_[static_cast<std::size_t>(s.a)];
        r.progressed = true;
        engine_->on_transfer_progress(now_, TransferId{r.id}, 300);
        break;
      }
      case Kind::transfer_ok:
      case Kind::transfer_retry:
      case Kind::transfer_fail: {
        const Running r = running_[static_cast<std::size_t>(s.a)];
        running_.erase(running_.begin() + s.a);
        may_end_key_ = r.key;
        may_end_outcome_ = DemandOutcome::failed;
        const TransferStatus status = s.kind == Kind::transfer_ok ? TransferStatus::ok
                                      : s.kind == Kind::transfer_retry
                                          ? TransferStatus::retryable_error
                                          : TransferStatus::permanent_error;
        const std::uint64_t bytes = s.kind == Kind::transfer_ok ? kSize - r.offset
                                    : s.kind == Kind::transfer_retry
                                        ? std::min<std::uint64_t>(400, kSize - r.offset)
                                        : 0;
        engine_->on_transfer_finished(now_, TransferId{r.id}, status, bytes);
        break;
      }
      case Kind::finalize_ok:
      case Kind::finalize_bad:
      case Kind::finalize_error: {
        const Finalizing f = finalizing_[static_cast<std::size_t>(s.a)];
        finalizing_.erase(finalizing_.begin() + s.a);
        may_end_key_ = f.key;
        may_end_outcome_ =
            s.kind == Kind::finalize_ok ? DemandOutcome::succeeded : DemandOutcome::failed;
        const FinalizeStatus status = s.kind == Kind::finalize_ok    ? FinalizeStatus::installed
                                      : s.kind == Kind::finalize_bad ? FinalizeStatus::verify_failed
                                                                     : FinalizeStatus::error;
        if (status == FinalizeStatus::installed) installed_.insert(f.key);
        engine_->on_finalize_finished(now_, FinalizeId{f.id}, status);
        break;
      }
    }
    settle(must_end);
    return policy_->asked > 0;
  }

  std::vector<Step> enabled() const {
    std::vector<Step> out;
    for (int i = 0; i < g_scope.demands; ++i) {
      if (demands_[i].state == State::none) {
        for (int p = 0; p < 2; ++p)
          for (int deadline = 0; deadline < 2; ++deadline)
            out.push_back(Step{Kind::subscribe, i, p, deadline});
      } else {
        out.push_back(Step{Kind::cancel, i});
        out.push_back(Step{Kind::toggle, i});
      }
    }
    out.push_back(Step{Kind::end_owner, 1, 0});
    out.push_back(Step{Kind::end_owner, 2, 0});
    out.push_back(Step{Kind::end_owner, 1, 1});
    if (engine_->next_wakeup_s()) out.push_back(Step{Kind::timer});
    for (int r = 0; r < static_cast<int>(running_.size()); ++r) {
      out.push_back(Step{Kind::progress, r});
      out.push_back(Step{Kind::transfer_ok, r});
      out.push_back(Step{Kind::transfer_retry, r});
      out.push_back(Step{Kind::transfer_fail, r});
    }
    for (int f = 0; f < static_cast<int>(finalizing_.size()); ++f) {
      out.push_back(Step{Kind::finalize_ok, f});
      out.push_back(Step{Kind::finalize_bad, f});
      out.push_back(Step{Kind::finalize_error, f});
    }
    return out;
  }

  // Everything observable, as text: two worlds with the same form behave alike.
  std::string canonical() const {
    std::ostringstream os;
    const auto wake = engine_->next_wakeup_s();
    os << "w" << (wake ? *wake - now_ : -1) << ";";
    for (const TaskInfo& t : engine_->tasks()) {  // Creation order.
      os << "t" << index_of(t.key) << static_cast<int>(t.state) << ","
         << (t.effective_priority ? *t.effective_priority : -9) << "," << t.active_demands << ","
         << t.attempts << "," << t.resume_offset_bytes << ";";
    }
    for (const Running& r : running_)
      os << "r" << r.key << r.progressed << ";";
    for (const Finalizing& f : finalizing_)
      os << "f" << f.key << ";";
    for (int k = 0; k < kKeys; ++k) {
      os << "p" << engine_->kept_partial(key_of(k)).value_or(0) << ";";
    }
    for (int k : installed_)
      os << "i" << k << ";";
    for (const Demand& d : demands_) {  // An ended demand's priority and deadline are moot.
      const bool active = d.state == State::active;
      os << "d" << static_cast<int>(d.state) << "," << (active ? d.priority : 0) << ","
         << (!active || d.deadline == kNoDeadline ? -1 : d.deadline - now_) << ";";
    }
    for (const auto& [owner, through] : ended_through_)
      os << "e" << owner << "," << through << ";";
    return os.str();
  }

  // Drives the world to rest: every transfer and finalize succeeds, every
  // timer fires. Then nothing may be left and every demand has its one terminal.
  void quiesce() {
    for (int round = 0; round < 100; ++round) {
      if (!finalizing_.empty()) {
        apply(Step{Kind::finalize_ok, 0});
      } else if (!running_.empty()) {
        apply(Step{Kind::transfer_ok, 0});
      } else if (engine_->next_wakeup_s()) {
        apply(Step{Kind::timer});
      } else {
        break;
      }
    }
    CHECK(engine_->live_tasks() == 0, "a task is left at rest");
    CHECK(engine_->live_demands() == 0, "a demand is left at rest");
    for (int i = 0; i < g_scope.demands; ++i) {
      if (demands_[i].state != State::none)
        CHECK(demands_[i].terminals == 1, "d" << i << " ended without exactly one terminal");
    }
  }

 private:
  enum class State : std::uint8_t { none, active, ended };
  struct Demand {
    State state = State::none;
    Priority priority = 0;
    double deadline = kNoDeadline;
    DemandHandle handle;
    int terminals = 0;
  };
  struct Running {
    std::uint64_t id = 0;
    int key = 0;
    std::uint64_t offset = 0;
    bool progressed = false;  // 300 bytes reported: what an orphan decision weighs.
  };
  struct Finalizing {
    std::uint64_t id = 0;
    int key = 0;
  };

  int demand_of(DemandHandle h) const {
    for (int i = 0; i < g_scope.demands; ++i) {
      if (demands_[i].state != State::none && demands_[i].handle == h) return i;
    }
    return -1;
  }

  // Takes the call's commands and checks them and the engine's state.
  void settle(const std::map<int, DemandOutcome>& must_end) {
    std::map<int, DemandOutcome> ended;
    for (const Command& command : engine_->take_commands()) {
      if (const auto* c = std::get_if<StartTransfer>(&command)) {
        running_.push_back(
            Running{c->transfer.value, index_of(*c->key), c->resume_offset_bytes, false});
        CHECK(running_.size() <= g_scope.slots, "more transfers started than slots");
      } else if (const auto* a = std::get_if<AbortTransfer>(&command)) {
        auto it = std::find_if(running_.begin(), running_.end(),
                               [&](const Running& r) { return r.id == a->transfer.value; });
        CHECK(it != running_.end(), "an abort of no running transfer");
        running_.erase(it);
      } else if (const auto* f = std::get_if<StartFinalize>(&command)) {
        finalizing_.push_back(Finalizing{f->finalize.value, index_of(*f->key)});
      } else if (const auto* e = std::get_if<EvictArtifact>(&command)) {
        installed_.erase(index_of(*e->key));
      } else if (const auto* d = std::get_if<Deliver>(&command)) {
        const int i = demand_of(d->demand);
        CHECK(i >= 0, "a terminal for an unknown demand");
        CHECK(demands_[i].terminals == 0, "d" << i << " got a second terminal");
        CHECK(demands_[i].state == State::active, "d" << i << " told after it ended");
        if (d->outcome == DemandOutcome::succeeded) {
          CHECK(installed_.count(kKeyOf[i]) != 0,
                "d" << i << " told success without an install of its key");
        }
        ++demands_[i].terminals;
        demands_[i].state = State::ended;
        ended[i] = d->outcome;
      }
    }
    for (const auto& [i, outcome] : must_end) {
      auto it = ended.find(i);
      CHECK(it != ended.end(), "d" << i << " was not ended by the call that ends it");
      CHECK(it->second == outcome, "d" << i << " ended with another outcome than its call's");
    }
    // Nothing else ends but the demands of the key whose transfer or finalize ended.
    for (const auto& [i, outcome] : ended) {
      if (must_end.count(i) != 0) continue;
      CHECK(kKeyOf[i] == may_end_key_ && outcome == may_end_outcome_,
            "d" << i << " ended by a call that had no reason to end it");
    }
    // Priorities and demand counts, key by key.
    std::array<int, kKeys> tasks_of{};
    for (const TaskInfo& t : engine_->tasks()) {
      const int k = index_of(t.key);
      ++tasks_of[static_cast<std::size_t>(k)];
      std::optional<Priority> top;
      std::uint32_t active = 0;
      for (int i = 0; i < g_scope.demands; ++i) {
        if (kKeyOf[i] != k || demands_[i].state != State::active) continue;
        ++active;
        top = std::max(top.value_or(demands_[i].priority), demands_[i].priority);
      }
      CHECK(t.active_demands == active, "k" << k << "'s task counts " << t.active_demands
                                            << " active demands, the reference " << active);
      CHECK(t.effective_priority == top, "k" << k
                                             << "'s task runs at another priority than "
                                                "the max of its active demands");
    }
    for (int k = 0; k < kKeys; ++k)
      CHECK(tasks_of[static_cast<std::size_t>(k)] <= 1, "two live tasks of k" << k);
    CHECK(engine_->running_transfers() <= g_scope.slots, "more transfers than slots");
    for (int i = 0; i < g_scope.demands; ++i) {
      if (demands_[i].state == State::active) {
        CHECK(engine_->demand(demands_[i].handle).has_value(), "d" << i << " lost by the engine");
      }
    }
    engine_->check_invariants();
  }

  int may_end_key_ = -1;
  DemandOutcome may_end_outcome_ = DemandOutcome::failed;
  std::shared_ptr<ScriptedPolicy> policy_;
  std::unique_ptr<Scheduler> engine_;
  double now_ = 0;
  std::array<Demand, kMaxDemands> demands_{};
  std::map<OwnerId, OwnerGeneration> ended_through_;
  std::set<int> installed_;
  std::vector<Running> running_;        // In the order they started.
  std::vector<Finalizing> finalizing_;  // In the order they started.
};

struct Explorer {
  int depth = 6;
  std::uint64_t sequences = 0;  // Leaves reached (depth bound, or nothing enabled).
  std::uint64_t steps = 0;      // Steps run, replays included.
  // Each state seen, with the most steps that were left to explore from it:
  // a state reached again with no more steps left is not explored again.
  std::unordered_map<std::string, int> seen;
  std::vector<Step> path;

  void explore(World& here) {
    if (static_cast<int>(path.size()) == depth) {
      ++sequences;
      here.quiesce();
      return;
    }
    const std::vector<Step> options = here.enabled();
    for (const Step& base : options) {
      for (OrphanDecision decision :
           {OrphanDecision::abort, OrphanDecision::complete, OrphanDecision::keep_partial}) {
        Step s = base;
        s.decision = decision;
        path.push_back(s);
        World next = replay_prefix_then(s);
        const bool asked = last_asked_;
        const int left = depth - static_cast<int>(path.size());
        auto [it, fresh] = seen.try_emplace(next.canonical(), left);
        if (fresh || it->second < left) {
          it->second = left;
          explore(next);
        } else {
          ++sequences;  // Ends in a state explored before, as deep.
        }
        path.pop_back();
        if (!asked) break;  // The other answers would repeat this step.
      }
    }
  }

  World replay_prefix_then(const Step& s) {
    World w;
    for (std::size_t i = 0; i + 1 < path.size(); ++i) {
      w.apply(path[i]);
      ++steps;
    }
    last_asked_ = w.apply(s);
    ++steps;
    return w;
  }
  bool last_asked_ = false;
};

}  // namespace
}  // namespace dfl

int main(int argc, char** argv) {
  dfl::Explorer explorer;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--depth") == 0 && i + 1 < argc) {
      explorer.depth = std::atoi(argv[++i]);
    } else if (std::strcmp(argv[i], "--scope") == 0 && i + 1 < argc &&
               (std::strcmp(argv[i + 1], "small") == 0 || std::strcmp(argv[i + 1], "large") == 0)) {
      if (std::strcmp(argv[++i], "large") == 0) dfl::g_scope = dfl::Scope{4, 2};
    } else {
      std::fprintf(stderr, "usage: %s [--depth N] [--scope small|large]\n", argv[0]);
      return 2;
    }
  }
  std::printf(
      "exhaustive check: demand model, %d demands (2 owners) on 2 keys, %u slot(s), a cache of "
      "one artifact, one kept partial, 2 attempts; every sequence of up to %d steps\n",
      dfl::g_scope.demands, dfl::g_scope.slots, explorer.depth);
  std::fflush(stdout);
  const auto t0 = std::chrono::steady_clock::now();
  try {
    dfl::World start;
    explorer.seen.emplace(start.canonical(), explorer.depth);
    explorer.explore(start);
  } catch (const dfl::Violation& v) {
    std::printf("%s\nafter:\n", v.what());
    for (const dfl::Step& s : explorer.path)
      std::printf("  %s\n", dfl::describe(s).c_str());
    return 1;
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf(
      "exhaustive check: %llu sequences, %zu distinct states, %llu steps run, %.1f s: "
      "no violation\n",
      static_cast<unsigned long long>(explorer.sequences), explorer.seen.size(),
      static_cast<unsigned long long>(explorer.steps), seconds);
  return 0;
}
