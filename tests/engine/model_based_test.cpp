// Randomized model-based test of the scheduler core.
//
// Each sequence builds a random configuration and plays a random mix of user
// calls (subscribe, cancel, set_priority, end_owner) and runtime events
// (time passing, deadlines, progress, transfer ok / retryable / permanent
// failure, verify failure, finalize done or error, late events for dead ids),
// with orphan decisions drawn at random. After every step the outbox is checked
// against a simple reference model of the demands:
//   - at most one live task per key;
//   - a task's effective priority is the max over its active demands;
//   - each demand gets exactly one terminal, and never success after it ended;
//   - the terminal of a user action (cancel, end_owner, deadline) is the one
//     that action implies, delivered in that same call;
//   - success only from an install of that key, or a cache hit on a key the
//     reference knows is installed;
//   - slots (global and per origin) are never exceeded, no queued task waits
//     while its origin and a global slot are free, and no task started in a
//     call is outranked by one left queued for the same origin (priority,
//     then first-enqueue order, which task ids follow);
//   - a running transfer is only aborted when nobody waits for it (never
//     preempted);
// and at the end the run is driven to quiescence: no task and no demand left,
// every demand with exactly one terminal.
//
// The other two models run the same sequences with the reference relaxed
// exactly where their rules differ: the callbacks model dedups by resource,
// cancels whole tasks (refusing while finalizing) and has no deadlines or owner
// generations; the independent model keeps one task per demand. Exactly one
// terminal, slots, queue order and quiescence hold for all three.
//
// Usage: engine_model_test [--sequences N] [--shard S] [--model demand|callbacks|independent]
// Sequence i of shard S uses seed BASE + S * N + i. BASE comes from DFL_SEED
// (random otherwise) and is printed. A failure prints the sequence's own seed:
// `DFL_SEED=<that seed> engine_model_test --sequences 1` replays exactly it.
#include <unistd.h>
#include <algorithm>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include "demandflight/engine/scheduler.h"

namespace dfl {
namespace {

volatile std::sig_atomic_t g_running_seed_valid = 0;
std::uint64_t g_running_seed = 0;

void on_abort(int) {
  // The engine's own invariant check aborts: say which seed got there.
  if (g_running_seed_valid) {
    char buffer[128];
    const int n = std::snprintf(buffer, sizeof buffer,
                                "\nengine aborted in sequence with seed %llu: replay with "
                                "DFL_SEED=%llu engine_model_test --sequences 1\n",
                                static_cast<unsigned long long>(g_running_seed),
                                static_cast<unsigned long long>(g_running_seed));
    if (n > 0) (void)!write(2, buffer, static_cast<std::size_t>(n));
  }
  std::signal(SIGABRT, SIG_DFL);
  std::raise(SIGABRT);
}

// Coverage over the whole run: shows that the random sequences reach every
// path (printed at the end; a path never taken would be a blind spot).
struct Coverage {
  std::map<std::string, std::uint64_t> counts;
  void add(const std::string& what) { ++counts[what]; }
};
Coverage g_coverage;

struct Violation : std::runtime_error {
  using std::runtime_error::runtime_error;
};

#define REQUIRE(cond, msg)                                               \
  do {                                                                   \
    if (!(cond)) {                                                       \
      std::ostringstream os_;                                            \
      os_ << "violated: " << msg << " [" #cond "] at line " << __LINE__; \
      throw Violation(os_.str());                                        \
    }                                                                    \
  } while (0)

// Where a sequence's choices come from: a seeded mt19937_64 (this test), or
// the bytes of a fuzz input (tests/fuzz/engine_fuzz.cpp), one byte per
// choice, zeros once they run out. Bytes are mapped directly (the standard
// distributions reject and redraw, which never ends on a run of zeros).
class Entropy {
 public:
  explicit Entropy(std::uint64_t seed) : rng_(seed) {}
  Entropy(const std::uint8_t* data, std::size_t size) : data_(data), size_(size), bytes_(true) {}
  std::uint64_t bits() {
    if (!bytes_) return rng_();
    return next() * 0x0101010101010101ull;
  }
  int uniform(int lo, int hi) {
    if (!bytes_) return std::uniform_int_distribution<int>(lo, hi)(rng_);
    return lo + static_cast<int>(next() % static_cast<unsigned>(hi - lo + 1));
  }
  double unit() {  // In [0, 1).
    if (!bytes_) return std::uniform_real_distribution<double>(0, 1)(rng_);
    return next() / 256.0;
  }

 private:
  std::uint8_t next() { return pos_ < size_ ? data_[pos_++] : 0; }

 private:
  std::mt19937_64 rng_;
  const std::uint8_t* data_ = nullptr;
  std::size_t size_ = 0;
  std::size_t pos_ = 0;
  bool bytes_ = false;
};

// What a random orphan policy answers comes from the sequence's entropy.
class RandomOrphanPolicy final : public OrphanPolicy {
 public:
  explicit RandomOrphanPolicy(Entropy& rng, double abort_probability)
      : rng_(rng), abort_probability_(abort_probability) {}
  OrphanDecision decide(const OrphanView& view) override {
    if (view.key == nullptr) throw Violation("orphan view without a key");
    if (rng_.unit() >= abort_probability_) return OrphanDecision::complete;
    return rng_.unit() < 0.5 ? OrphanDecision::abort : OrphanDecision::keep_partial;
  }
  std::string_view name() const override { return "random"; }

 private:
  Entropy& rng_;
  double abort_probability_;
};

struct RefDemand {
  ArtifactKey key;
  OwnerId owner = 0;
  OwnerGeneration generation = 0;
  Priority priority = 0;
  double deadline_s = kNoDeadline;
  bool active = true;
  int terminals = 0;
};

struct Running {
  ArtifactKey key;
  OriginId origin = 0;
  std::uint64_t resume = 0;
  std::uint64_t size = 0;
};

class Sequence {
 public:
  Sequence(std::uint64_t seed, Model model) : rng_(seed), model_(model) {}
  Sequence(Entropy entropy, Model model) : rng_(entropy), model_(model) {}

  void run() {
    configure();
    const int steps = uniform(10, 60);
    for (int i = 0; i < steps; ++i)
      step();
    quiesce();
  }

  const std::vector<std::string>& log() const { return log_; }

 private:
  // --- Set-up ---------------------------------------------------------------

  void configure() {
    config_.model = model_;
    config_.max_transfers = static_cast<std::uint32_t>(uniform(1, 3));
    config_.max_per_origin = static_cast<std::uint32_t>(uniform(1, 3));
    config_.cache_bytes = static_cast<std::uint64_t>(uniform(0, 4)) * 1000;
    // Small enough that kept partials are dropped for room.
    config_.partial_bytes = static_cast<std::uint64_t>(uniform(0, 3)) * 400;
    config_.max_partials = static_cast<std::uint32_t>(uniform(1, 3));
    config_.retry.max_attempts = static_cast<std::uint32_t>(uniform(1, 4));
    config_.retry.base_s = 0.1 * uniform(1, 5);
    config_.retry.cap_s = 2.0;
    config_.retry.jitter = 0.2;
    config_.seed = rng_.bits();
    origins_ = static_cast<OriginId>(uniform(1, 2));
    const int resources = uniform(1, 3);
    for (int r = 0; r < resources; ++r) {
      const std::string name = "res" + std::to_string(r);
      keys_.push_back(ArtifactKey{name, "r1", "pc", 0});
      // Same resource, other revision / target / generation: other keys.
      if (chance(0.5)) keys_.push_back(ArtifactKey{name, "r2", "pc", 0});
      if (chance(0.3)) keys_.push_back(ArtifactKey{name, "r1", "mobile", 0});
      if (chance(0.3)) keys_.push_back(ArtifactKey{name, "r1", "pc", 1});
    }
    for (std::size_t k = 0; k < keys_.size(); ++k) {
      origin_of_.push_back(static_cast<OriginId>(uniform(0, static_cast<int>(origins_) - 1)));
    }
    policy_ = std::make_shared<RandomOrphanPolicy>(rng_, 0.1 * uniform(0, 10));
    // Mirrors: some keys have other origins (of three), breakers open fast.
    config_.breaker = BreakerConfig{static_cast<std::uint32_t>(uniform(0, 3)), 0.1 * uniform(1, 20)};
    for (std::size_t k = 0; k < keys_.size(); ++k) {
      std::vector<OriginId> mirrors;
      if (chance(0.4)) {
        const int n = uniform(1, 2);
        for (int i = 0; i < n; ++i)
          mirrors.push_back(static_cast<OriginId>(uniform(0, 2)));
      }
      mirrors_of_.push_back(std::move(mirrors));
    }
    scheduler_ = std::make_unique<Scheduler>(config_, policy_);
    note("config transfers=" + std::to_string(config_.max_transfers) + " per_origin=" +
         std::to_string(config_.max_per_origin) + " cache=" + std::to_string(config_.cache_bytes) +
         " attempts=" + std::to_string(config_.retry.max_attempts) +
         " keys=" + std::to_string(keys_.size()));
  }

  // --- Random operations ---------------------------------------------------

  void step() {
    const int op = uniform(0, 99);
    if (op < 25) {
      do_subscribe();
    } else if (op < 35) {
      do_cancel();
    } else if (op < 42) {
      do_set_priority();
    } else if (op < 47) {
      do_end_owner();
    } else if (op < 57) {
      do_advance();
    } else if (op < 62) {
      do_progress();
    } else if (op < 80) {
      do_finish_transfer();
    } else if (op < 94) {
      do_finish_finalize();
    } else {
      do_late_event();
    }
  }

  void do_subscribe() {
    const std::size_t k = static_cast<std::size_t>(uniform(0, static_cast<int>(keys_.size()) - 1));
    DemandOptions o;
    o.owner = static_cast<OwnerId>(uniform(1, 3));
    o.owner_generation = uniform(0, 2);
    o.priority = uniform(0, 3);
    const int deadline_kind = uniform(0, 9);
    if (deadline_kind < 3) {
      o.deadline_s = now_ + 0.1 * uniform(1, 30);
    } else if (deadline_kind == 3) {
      o.deadline_s = now_;  // A deadline equal to now.
    }
    o.origin = origin_of_[k];
    o.mirrors = mirrors_of_[k];
    o.size_bytes = 1000;
    note("subscribe " + to_string(keys_[k]) + " owner=" + std::to_string(o.owner) + "/" +
         std::to_string(o.owner_generation) + " p=" + std::to_string(o.priority) +
         " deadline=" + std::to_string(o.deadline_s));
    const DemandHandle h = scheduler_->subscribe(now_, keys_[k], o);
    REQUIRE(!ref_.contains(h), "subscribe returned a handle already in use");
    // The legacy model has no deadlines: for it, the demand has none.
    ref_[h] = RefDemand{keys_[k], o.owner, o.owner_generation, o.priority,
                        legacy() ? kNoDeadline : o.deadline_s};
    handles_.push_back(h);

    // What the reference expects from this call for the new demand.
    std::optional<DemandOutcome> expected;
    auto ended = ended_through_.find(o.owner);
    if (!legacy() && ended != ended_through_.end() && o.owner_generation <= ended->second) {
      expected = DemandOutcome::owner_ended;
    } else if (!legacy() && o.deadline_s <= now_) {
      expected = DemandOutcome::timed_out;
    } else if (is_installed(keys_[k])) {
      expected = DemandOutcome::succeeded;
    }
    Call call;
    call.subscribed = h;
    if (expected) call.must_end[h] = *expected;
    after(call);
    if (!expected) REQUIRE(ref_[h].active, "subscribe ended a demand it had no reason to end");
  }

  void do_cancel() {
    if (handles_.empty()) return;
    DemandHandle h = pick_handle();
    if (chance(0.05)) h = DemandHandle{h.slot + 1000, 7};  // Unknown handle.
    note("cancel slot=" + std::to_string(h.slot) + "/" + std::to_string(h.generation));
    Call call;
    auto it = ref_.find(h);
    if (legacy()) {
      // The whole task ends cancelled, unless it is finalizing (refused).
      call.legacy_allowed = {DemandOutcome::cancelled};
      if (it != ref_.end() && it->second.active) call.legacy_refusable.push_back(h);
    } else if (it != ref_.end() && it->second.active) {
      call.must_end[h] = DemandOutcome::cancelled;
    }
    scheduler_->cancel(now_, h);
    after(call);
  }

  void do_set_priority() {
    if (handles_.empty()) return;
    const DemandHandle h = pick_handle();
    const Priority p = uniform(0, 3);
    note("set_priority slot=" + std::to_string(h.slot) + " p=" + std::to_string(p));
    auto it = ref_.find(h);
    if (it != ref_.end() && it->second.active) it->second.priority = p;
    scheduler_->set_priority(now_, h, p);
    after(Call{});
  }

  void do_end_owner() {
    const OwnerId owner = static_cast<OwnerId>(uniform(1, 3));
    std::optional<OwnerGeneration> generation;
    if (chance(0.6)) generation = uniform(0, 2);
    note("end_owner " + std::to_string(owner) +
         (generation ? "/" + std::to_string(*generation) : "/all"));
    Call call;
    const OwnerGeneration through =
        generation.value_or(std::numeric_limits<OwnerGeneration>::max());
    for (const auto& [h, d] : ref_) {
      if (!d.active || d.owner != owner || d.generation > through) continue;
      if (legacy()) {
        call.legacy_refusable.push_back(h);
      } else {
        call.must_end[h] = DemandOutcome::owner_ended;
      }
    }
    if (legacy()) {
      call.legacy_allowed = {DemandOutcome::owner_ended, DemandOutcome::cancelled};
    } else if (generation) {
      auto [it, inserted] = ended_through_.try_emplace(owner, through);
      if (!inserted) it->second = std::max(it->second, through);
    }
    scheduler_->end_owner(now_, owner, generation);
    after(call);
  }

  void do_advance() {
    double target = now_ + 0.05 * uniform(0, 20);
    const auto wake = scheduler_->next_wakeup_s();
    if (wake && chance(0.5)) target = std::max(now_, *wake);  // Exactly at the wake-up.
    note("advance to " + std::to_string(target));
    now_ = target;
    scheduler_->on_timer(now_);
    after(Call{});
  }

  void do_progress() {
    if (running_.empty()) return;
    auto it = pick(running_);
    note("progress transfer " + std::to_string(it->first));
    scheduler_->on_transfer_progress(now_, TransferId{it->first}, 300);
    after(Call{});
  }

  void do_finish_transfer() {
    if (running_.empty()) return;
    auto it = pick(running_);
    const std::uint64_t id = it->first;
    const Running transfer = it->second;
    running_.erase(it);
    const int kind = uniform(0, 9);
    const TransferStatus status = kind < 6   ? TransferStatus::ok
                                  : kind < 9 ? TransferStatus::retryable_error
                                             : TransferStatus::permanent_error;
    const std::uint64_t remaining = transfer.size - transfer.resume;
    const std::uint64_t bytes = status == TransferStatus::ok
                                    ? remaining
                                    : static_cast<std::uint64_t>(uniform(0, 1)) * remaining / 2;
    note("finish transfer " + std::to_string(id) + " " + std::string(to_string(status)));
    Call call;
    call.finished_transfer_key = transfer.key;
    if (status == TransferStatus::permanent_error) call.may_fail_key = transfer.key;
    if (status == TransferStatus::retryable_error) call.may_fail_key = transfer.key;  // Exhausted.
    scheduler_->on_transfer_finished(now_, TransferId{id}, status, bytes);
    after(call);
  }

  void do_finish_finalize() {
    if (finalizing_.empty()) return;
    auto it = pick(finalizing_);
    const std::uint64_t id = it->first;
    const ArtifactKey key = it->second;
    finalizing_.erase(it);
    const int kind = uniform(0, 9);
    const FinalizeStatus status = kind < 7   ? FinalizeStatus::installed
                                  : kind < 9 ? FinalizeStatus::verify_failed
                                             : FinalizeStatus::error;
    note("finish finalize " + std::to_string(id) + " " + std::string(to_string(status)));
    Call call;
    if (status == FinalizeStatus::installed) {
      call.installed_key = key;
      installed_.insert(key);
    } else {
      call.may_fail_key = key;
    }
    scheduler_->on_finalize_finished(now_, FinalizeId{id}, status);
    after(call);
  }

  // Events for ids the engine has forgotten (aborted transfers, finished
  // operations, ids it never issued) must change nothing.
  void do_late_event() {
    std::uint64_t id = 0;
    if (!dead_ids_.empty() && chance(0.8)) {
      id = dead_ids_[static_cast<std::size_t>(uniform(0, static_cast<int>(dead_ids_.size()) - 1))];
    } else {
      id = 1'000'000 + static_cast<std::uint64_t>(uniform(0, 100));
    }
    note("late event for id " + std::to_string(id));
    const std::size_t tasks_before = scheduler_->live_tasks();
    const std::uint64_t ignored_before = scheduler_->stats().late_events_ignored;
    if (chance(0.5)) {
      scheduler_->on_transfer_finished(now_, TransferId{id}, TransferStatus::ok, 1000);
    } else {
      scheduler_->on_finalize_finished(now_, FinalizeId{id}, FinalizeStatus::installed);
    }
    // Time did not move, so nothing at all may happen.
    REQUIRE(!scheduler_->has_commands(), "a late event produced commands");
    REQUIRE(scheduler_->live_tasks() == tasks_before, "a late event changed the tasks");
    REQUIRE(scheduler_->stats().late_events_ignored == ignored_before + 1,
            "a late event was not counted as ignored");
    after(Call{});
  }

  // --- Checking ------------------------------------------------------------

  struct Call {
    std::optional<DemandHandle> subscribed;
    std::map<DemandHandle, DemandOutcome> must_end;  // Terminals this call must deliver.
    std::optional<ArtifactKey> installed_key;        // Success allowed for this key.
    std::optional<ArtifactKey> may_fail_key;         // Failure allowed for this key.
    std::optional<ArtifactKey> finished_transfer_key;
    // Callbacks model: the only outcomes this call may deliver (empty: any),
    // and demands that end unless their task is finalizing.
    std::set<DemandOutcome> legacy_allowed;
    std::vector<DemandHandle> legacy_refusable;
  };

  bool legacy() const { return model_ == Model::callbacks; }
  // The model's identity: the callbacks model knows resource names only.
  bool same(const ArtifactKey& a, const ArtifactKey& b) const {
    return legacy() ? a.resource == b.resource : a == b;
  }
  bool is_installed(const ArtifactKey& key) const {
    return std::any_of(installed_.begin(), installed_.end(),
                       [&](const ArtifactKey& k) { return same(k, key); });
  }

  void after(const Call& call) {
    std::vector<Command> commands;
    scheduler_->take_commands(commands);
    std::map<DemandHandle, DemandOutcome> delivered;
    std::vector<StartTransfer> started;

    for (const Command& command : commands) {
      if (const auto* change = std::get_if<TaskPriorityChanged>(&command))
        effective_[change->task.value] = change->priority;
      if (const auto* start = std::get_if<StartTransfer>(&command)) {
        // It carries its task's effective priority as the commands so far say
        // (a runtime asks the origin for it without asking the engine).
        const auto seen = effective_.find(start->task.value);
        REQUIRE(start->priority ==
                    (seen == effective_.end() ? std::nullopt : seen->second),
                "a transfer started with another priority than its task's");
        if (!start->priority) g_coverage.add("start_transfer.orphan");
        REQUIRE(!running_.contains(start->transfer.value), "transfer id reused");
        REQUIRE(!seen_ids_.contains(start->transfer.value), "operation id reused");
        seen_ids_.insert(start->transfer.value);
        running_[start->transfer.value] =
            Running{start->key, start->origin, start->resume_offset_bytes, start->size_bytes};
        REQUIRE(start->resume_offset_bytes <= start->size_bytes, "resume offset past the end");
        g_coverage.add(start->attempt > 1 ? "start_transfer.retry" : "start_transfer.first");
        if (model_ != Model::callbacks) {
          // Every attempt goes to one of its key's origins.
          const auto k = static_cast<std::size_t>(
              std::find(keys_.begin(), keys_.end(), *start->key) - keys_.begin());
          REQUIRE(k < keys_.size(), "a transfer of an unknown key");
          const auto& mirrors = mirrors_of_[k];
          const bool listed = start->origin == origin_of_[k] ||
                              std::find(mirrors.begin(), mirrors.end(), start->origin) !=
                                  mirrors.end();
          REQUIRE(listed, "a transfer from an origin its key does not name");
          if (start->origin != origin_of_[k]) g_coverage.add("start_transfer.mirror");
        }
        started.push_back(*start);
        if (start->resume_offset_bytes > 0) g_coverage.add("start_transfer.resumed");
        // A first attempt resumes exactly the kept partial of its key, if any.
        if (start->attempt == 1) {
          auto kept = partials_.find(start->key);
          if (kept == partials_.end()) {
            REQUIRE(start->resume_offset_bytes == 0, "a first attempt resumed nothing kept");
          } else {
            REQUIRE(start->resume_offset_bytes == kept->second,
                    "a first attempt did not resume its key's kept partial");
            partials_.erase(kept);
            g_coverage.add("start_transfer.from_partial");
          }
        }
      } else if (const auto* abort = std::get_if<AbortTransfer>(&command)) {
        auto it = running_.find(abort->transfer.value);
        REQUIRE(it != running_.end(), "abort of a transfer that is not running");
        aborted_keys_.push_back(it->second.key);
        g_coverage.add("abort_transfer");
        if (abort->keep_partial) {
          REQUIRE(abort->kept_bytes > 0, "an empty partial kept");
          REQUIRE(abort->kept_bytes <= config_.partial_bytes, "a partial over the budget kept");
          REQUIRE(!partials_.contains(it->second.key), "an older partial was not dropped first");
          partials_[it->second.key] = abort->kept_bytes;
          g_coverage.add("abort_transfer.keep_partial");
        } else {
          REQUIRE(abort->kept_bytes == 0, "bytes kept by a plain abort");
        }
        dead_ids_.push_back(abort->transfer.value);
        running_.erase(it);
      } else if (const auto* finalize = std::get_if<StartFinalize>(&command)) {
        REQUIRE(!seen_ids_.contains(finalize->finalize.value), "operation id reused");
        seen_ids_.insert(finalize->finalize.value);
        REQUIRE(call.finished_transfer_key && *call.finished_transfer_key == finalize->key,
                "finalize started without a finished transfer of that key");
        finalizing_[finalize->finalize.value] = finalize->key;
      } else if (const auto* deliver = std::get_if<Deliver>(&command)) {
        auto it = ref_.find(deliver->demand);
        REQUIRE(it != ref_.end(), "delivery to an unknown demand");
        RefDemand& d = it->second;
        REQUIRE(d.terminals == 0,
                "second terminal for one demand (" << to_string(deliver->outcome) << ")");
        REQUIRE(d.active, "delivery to a demand that had ended");
        d.terminals = 1;
        g_coverage.add(std::string("deliver.") + std::string(to_string(deliver->outcome)));
        d.active = false;
        delivered[deliver->demand] = deliver->outcome;
        if (!call.legacy_allowed.empty()) {
          REQUIRE(call.legacy_allowed.contains(deliver->outcome),
                  "the legacy cancel delivered " << to_string(deliver->outcome));
        }
        if (deliver->outcome == DemandOutcome::succeeded) {
          const bool from_install = call.installed_key && same(*call.installed_key, d.key);
          const bool from_cache = call.subscribed && *call.subscribed == deliver->demand;
          REQUIRE(from_install || from_cache, "success without an install of its key");
        }
        if (deliver->outcome == DemandOutcome::failed) {
          REQUIRE(call.may_fail_key && same(*call.may_fail_key, d.key),
                  "failure without a failed operation of its key");
        }
        if (deliver->outcome == DemandOutcome::timed_out && !(call.subscribed == deliver->demand)) {
          REQUIRE(d.deadline_s <= now_, "timed out before its deadline");
        }
      } else if (const auto* drop = std::get_if<DropPartial>(&command)) {
        auto kept = partials_.find(drop->key);
        REQUIRE(kept != partials_.end(), "a partial dropped that was not kept");
        REQUIRE(kept->second == drop->bytes, "a partial dropped with other bytes than kept");
        partials_.erase(kept);
        g_coverage.add("drop_partial");
      } else if (const auto* evict = std::get_if<EvictArtifact>(&command)) {
        std::erase_if(installed_, [&](const ArtifactKey& k) { return same(k, evict->key); });
        g_coverage.add("evict");
      }
    }

    // The terminals the user's action implies, delivered in this call.
    for (const auto& [h, outcome] : call.must_end) {
      auto it = delivered.find(h);
      REQUIRE(it != delivered.end(), "a demand that had to end got no terminal in this call");
      REQUIRE(it->second == outcome, "wrong terminal: got " << to_string(it->second) << " expected "
                                                            << to_string(outcome));
    }
    // Deadlines: no active demand survives a call made at or past its deadline.
    for (const auto& [h, d] : ref_) {
      if (d.active) REQUIRE(d.deadline_s > now_, "an active demand outlived its deadline");
    }
    // Callbacks model: a cancel is refused only while the task finalizes.
    for (const DemandHandle h : call.legacy_refusable) {
      if (delivered.contains(h)) continue;
      const auto info = scheduler_->demand(h);
      REQUIRE(info, "a refused legacy cancel left no live demand");
      const auto tasks = scheduler_->tasks();
      auto t = std::find_if(tasks.begin(), tasks.end(),
                            [&](const TaskInfo& task) { return task.id == info->task; });
      REQUIRE(t != tasks.end() && t->state == TaskState::finalizing,
              "the legacy cancel was refused although the task is not finalizing");
    }
    // Aborts only for transfers nobody waits for: no preemption. (The legacy
    // cancel aborts shared transfers by design; the independent model aborts
    // a demand's own task while other tasks of the key go on.)
    if (model_ == Model::demand) {
      for (const ArtifactKey& key : aborted_keys_) {
        REQUIRE(active_for(key) == 0, "a transfer was aborted while a demand waited for it");
      }
    }
    aborted_keys_.clear();
    std::uint64_t kept_bytes = 0;
    for (const auto& [key, bytes] : partials_) {
      kept_bytes += bytes;
      REQUIRE(scheduler_->kept_partial(key) == bytes, "the engine's kept partial disagrees");
    }
    REQUIRE(scheduler_->kept_partial_bytes() == kept_bytes, "kept partial bytes disagree");
    REQUIRE(kept_bytes <= config_.partial_bytes, "kept partials over budget");
    REQUIRE(partials_.size() <= config_.max_partials, "too many kept partials");
    for (const ArtifactKey& key : installed_) {
      if (model_ != Model::callbacks) {  // Its index is by resource; partials by exact key.
        REQUIRE(!partials_.contains(key), "a partial kept for an installed key");
      }
    }

    check_state();
    check_queue_order(started);
  }

  void check_queue_order(const std::vector<StartTransfer>& started) {
    if (started.empty()) return;
    const std::vector<TaskInfo> tasks = scheduler_->tasks();
    for (const StartTransfer& start : started) {
      auto s = std::find_if(tasks.begin(), tasks.end(),
                            [&](const TaskInfo& t) { return t.id == start.task; });
      if (s == tasks.end() || s->state != TaskState::transferring) continue;
      if (!s->effective_priority) continue;  // Orphaned after it started.
      for (const TaskInfo& q : tasks) {
        if (q.state != TaskState::queued || q.origin != s->origin) continue;
        const bool outranks = *q.effective_priority > *s->effective_priority ||
                              (*q.effective_priority == *s->effective_priority && q.id < s->id);
        REQUIRE(!outranks, "a task started although a higher-ranked one of its origin waits");
      }
    }
  }

  std::size_t active_for(const ArtifactKey& key) const {
    std::size_t n = 0;
    for (const auto& [h, d] : ref_)
      n += d.active && d.key == key;
    return n;
  }

  void check_state() {
    const std::vector<TaskInfo> tasks = scheduler_->tasks();
    for (const TaskInfo& task : tasks) {
      std::optional<Priority> expected;
      std::uint32_t active = 0;
      std::uint32_t in_tasks = 0;
      std::size_t same_identity = 0;
      for (const auto& [h, d] : ref_) {
        if (!d.active || !same(d.key, task.key)) continue;
        ++active;
        expected = std::max(expected.value_or(d.priority), d.priority);
      }
      for (const TaskInfo& other : tasks) {
        if (!same(other.key, task.key)) continue;
        ++same_identity;
        in_tasks += other.active_demands;
      }
      REQUIRE(in_tasks == active, "task demand counts differ from the reference");
      if (model_ != Model::independent) {
        REQUIRE(same_identity == 1, "two live tasks for one key");
      }
      if (model_ == Model::demand) {
        REQUIRE(task.effective_priority == expected,
                "effective priority " << (task.effective_priority ? *task.effective_priority : -99)
                                      << " is not the max of active demands "
                                      << (expected ? *expected : -99));
      } else if (legacy() && expected) {
        REQUIRE(task.effective_priority && *task.effective_priority >= *expected,
                "the legacy priority fell below an active demand's");
      }
      if (task.active_demands == 0) {
        REQUIRE(task.state == TaskState::transferring || task.state == TaskState::finalizing,
                "a queued or backoff task without demands");
      }
    }
    // Every active demand is served by a live task of its key.
    for (const auto& entry : ref_) {
      const RefDemand& d = entry.second;  // Not a structured binding: clang's lambdas.
      if (!d.active) continue;
      REQUIRE(std::any_of(tasks.begin(), tasks.end(),
                          [&](const TaskInfo& t) { return same(t.key, d.key); }),
              "active demand without a task");
    }
    // Slots.
    REQUIRE(running_.size() <= config_.max_transfers, "max_transfers exceeded");
    std::map<OriginId, std::uint32_t> per_origin;
    for (const auto& [id, r] : running_) {
      REQUIRE(++per_origin[r.origin] <= config_.max_per_origin, "max_per_origin exceeded");
    }
    REQUIRE(running_.size() == scheduler_->running_transfers(), "runtime and engine disagree");
    // Work conservation: a free slot and eligible queued work do not coexist.
    if (running_.size() < config_.max_transfers) {
      for (const TaskInfo& task : tasks) {
        if (task.state == TaskState::queued) {
          REQUIRE(per_origin[task.origin] >= config_.max_per_origin,
                  "a queued task waits although its origin and a global slot are free");
        }
      }
    }
  }

  // Ends every owner, finishes every operation, fires every timer: nothing
  // may be left, and every demand must have exactly one terminal.
  void quiesce() {
    note("quiesce");
    const SchedulerStats& stats = scheduler_->stats();
    g_coverage.counts["cache_hits"] += stats.cache_hits;
    g_coverage.counts["orphan_completes"] += stats.orphan_completes;
    g_coverage.counts["orphan_aborts"] += stats.orphan_aborts;
    g_coverage.counts["stale_calls_ignored"] += stats.stale_calls_ignored;
    g_coverage.counts["late_events_ignored"] += stats.late_events_ignored;
    g_coverage.counts["steps"] += log_.size();
    for (OwnerId owner = 1; owner <= 3; ++owner) {
      Call call;
      for (const auto& [h, d] : ref_) {
        if (!d.active || d.owner != owner) continue;
        if (legacy()) {
          call.legacy_refusable.push_back(h);
        } else {
          call.must_end[h] = DemandOutcome::owner_ended;
        }
      }
      if (legacy()) call.legacy_allowed = {DemandOutcome::owner_ended, DemandOutcome::cancelled};
      scheduler_->end_owner(now_, owner, std::nullopt);
      after(call);
    }
    for (int round = 0; round < 1000; ++round) {
      if (!running_.empty()) {
        auto it = running_.begin();
        const std::uint64_t id = it->first;
        const Running r = it->second;
        running_.erase(it);
        Call call;
        call.finished_transfer_key = r.key;
        scheduler_->on_transfer_finished(now_, TransferId{id}, TransferStatus::ok,
                                         r.size - r.resume);
        after(call);
      } else if (!finalizing_.empty()) {
        auto it = finalizing_.begin();
        const std::uint64_t id = it->first;
        Call call;
        call.installed_key = it->second;
        installed_.insert(it->second);
        finalizing_.erase(it);
        scheduler_->on_finalize_finished(now_, FinalizeId{id}, FinalizeStatus::installed);
        after(call);
      } else if (auto wake = scheduler_->next_wakeup_s()) {
        now_ = std::max(now_, *wake);
        scheduler_->on_timer(now_);
        after(Call{});
      } else {
        break;
      }
    }
    REQUIRE(scheduler_->live_tasks() == 0, "a task is left at quiescence");
    REQUIRE(scheduler_->live_demands() == 0, "a demand is left at quiescence");
    REQUIRE(running_.empty() && finalizing_.empty(), "an operation is left at quiescence");
    for (const auto& [h, d] : ref_) {
      REQUIRE(d.terminals == 1, "a demand ended the run without exactly one terminal");
    }
  }

  // --- Helpers ---------------------------------------------------------------

  int uniform(int lo, int hi) { return rng_.uniform(lo, hi); }
  bool chance(double p) { return rng_.unit() < p; }

  DemandHandle pick_handle() {
    return handles_[static_cast<std::size_t>(uniform(0, static_cast<int>(handles_.size()) - 1))];
  }
  template <class Map>
  typename Map::iterator pick(Map& map) {
    auto it = map.begin();
    std::advance(it, uniform(0, static_cast<int>(map.size()) - 1));
    return it;
  }

  void note(std::string line) {
    if (log_.size() < 400) log_.push_back(std::to_string(now_) + " " + std::move(line));
  }

  Entropy rng_;
  Model model_;
  SchedulerConfig config_;
  std::shared_ptr<RandomOrphanPolicy> policy_;
  std::unique_ptr<Scheduler> scheduler_;
  double now_ = 0;
  OriginId origins_ = 1;
  std::vector<ArtifactKey> keys_;
  std::vector<OriginId> origin_of_;
  std::vector<std::vector<OriginId>> mirrors_of_;  // By key: DemandOptions::mirrors.

  std::map<DemandHandle, RefDemand> ref_;
  std::vector<DemandHandle> handles_;
  std::map<OwnerId, OwnerGeneration> ended_through_;
  std::map<std::uint64_t, Running> running_;
  // Each task's effective priority as its TaskPriorityChanged commands said.
  std::map<std::uint64_t, std::optional<Priority>> effective_;
  std::map<std::uint64_t, ArtifactKey> finalizing_;
  std::set<std::uint64_t> seen_ids_;
  std::vector<std::uint64_t> dead_ids_;
  std::vector<ArtifactKey> aborted_keys_;
  std::unordered_map<ArtifactKey, std::uint64_t> partials_;  // Kept partials by exact key.
  struct KeyLess {
    bool operator()(const ArtifactKey& a, const ArtifactKey& b) const {
      return std::tie(a.resource, a.revision, a.target, a.generation) <
             std::tie(b.resource, b.revision, b.target, b.generation);
    }
  };
  std::set<ArtifactKey, KeyLess> installed_;
  std::vector<std::string> log_;
};

}  // namespace
}  // namespace dfl

#ifndef DFL_MODEL_SEQUENCE_ONLY  // The fuzzer includes this file for Sequence alone.
int main(int argc, char** argv) {
  std::uint64_t sequences = 200000;
  std::uint64_t shard = 0;
  dfl::Model model = dfl::Model::demand;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--sequences") == 0) {
      sequences = std::strtoull(argv[i + 1], nullptr, 10);
    } else if (std::strcmp(argv[i], "--shard") == 0) {
      shard = std::strtoull(argv[i + 1], nullptr, 10);
    } else if (std::strcmp(argv[i], "--model") == 0 &&
               (std::strcmp(argv[i + 1], "demand") == 0 ||
                std::strcmp(argv[i + 1], "callbacks") == 0 ||
                std::strcmp(argv[i + 1], "independent") == 0)) {
      model = argv[i + 1][0] == 'd'   ? dfl::Model::demand
              : argv[i + 1][0] == 'c' ? dfl::Model::callbacks
                                      : dfl::Model::independent;
    } else {
      std::fprintf(stderr,
                   "usage: %s [--sequences N] [--shard S] [--model demand|callbacks|independent]\n",
                   argv[0]);
      return 2;
    }
  }
  if (const char* env = std::getenv("DFL_SEQUENCES")) sequences = std::strtoull(env, nullptr, 10);
  std::uint64_t base = std::random_device{}();
  if (const char* env = std::getenv("DFL_SEED")) {
    base = std::strtoull(env, nullptr, 10);
  } else {
    base = base * sequences * 64;  // Far apart from other runs' ranges.
  }
  std::printf("engine_model_test: model=%s DFL_SEED=%llu shard=%llu sequences=%llu\n",
              std::string(dfl::to_string(model)).c_str(), static_cast<unsigned long long>(base),
              static_cast<unsigned long long>(shard), static_cast<unsigned long long>(sequences));
  std::fflush(stdout);
  std::signal(SIGABRT, dfl::on_abort);

  std::uint64_t failures = 0;
  for (std::uint64_t i = 0; i < sequences; ++i) {
    const std::uint64_t seed = base + shard * sequences + i;
    dfl::g_running_seed = seed;
    dfl::g_running_seed_valid = 1;
    dfl::Sequence sequence(seed, model);
    try {
      sequence.run();
    } catch (const dfl::Violation& v) {
      ++failures;
      std::printf("FAILED sequence with seed %llu: %s\n", static_cast<unsigned long long>(seed),
                  v.what());
      std::printf(
          "replay: DFL_SEED=%llu engine_model_test --sequences 1 --model %s\n"
          "last operations:\n",
          static_cast<unsigned long long>(seed), std::string(dfl::to_string(model)).c_str());
      const auto& log = sequence.log();
      for (std::size_t l = log.size() > 40 ? log.size() - 40 : 0; l < log.size(); ++l) {
        std::printf("  %s\n", log[l].c_str());
      }
      if (failures >= 3) break;
    }
  }
  dfl::g_running_seed_valid = 0;
  std::printf("coverage:");
  for (const auto& [what, count] : dfl::g_coverage.counts) {
    std::printf(" %s=%llu", what.c_str(), static_cast<unsigned long long>(count));
  }
  std::printf("\n");
  std::printf("%llu passed, %llu failed\n", static_cast<unsigned long long>(sequences - failures),
              static_cast<unsigned long long>(failures));
  return failures == 0 ? 0 : 1;
}
#endif  // DFL_MODEL_SEQUENCE_ONLY
