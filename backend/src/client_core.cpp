// ClientCore: see client_core.h.
#include "client_core.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <map>
#include <span>
#include <string>
#include <unordered_set>
#include <stdexcept>

#include "demandflight/policies/registry.h"

namespace dfl::backend {
namespace {

std::uint64_t pack(DemandHandle h) {
  return (static_cast<std::uint64_t>(h.slot) << 32) | h.generation;
}
DemandHandle unpack(std::uint64_t packed) {
  return DemandHandle{static_cast<std::uint32_t>(packed >> 32),
                      static_cast<std::uint32_t>(packed & 0xffffffffu)};
}

// What a subscribe may be given: the artifact's origins within those the
// engine takes (it stops the process on others: a runtime's bug), and
// DemandOptions' copies of ArtifactRef's fields (the engine's origin,
// mirrors and size_bytes, which the client fills from the artifact) left at
// their defaults or the same.
void check_subscribe(const ArtifactRef& artifact, const DemandOptions& options,
                     std::uint32_t max_origins) {
  auto differs = [](const char* field, const std::string& given, const std::string& theirs) {
    throw std::invalid_argument(std::string("DemandOptions.") + field + " " + given +
                                " contradicts ArtifactRef." + field + " " + theirs +
                                ": the client takes the artifact's from ArtifactRef");
  };
  auto list = [](std::span<const OriginId> origins) {
    std::string out = "[";
    for (OriginId o : origins) {
      if (out.size() > 1) out += ',';
      out += std::to_string(o);
    }
    return out + "]";
  };
  if (options.origin != 0 && options.origin != artifact.origin)
    differs("origin", std::to_string(options.origin), std::to_string(artifact.origin));
  if (!options.mirrors.empty() && !std::ranges::equal(options.mirrors, artifact.mirrors))
    differs("mirrors", list(options.mirrors), list(artifact.mirrors));
  if (options.size_bytes != 0 && options.size_bytes != artifact.size_bytes)
    differs("size_bytes", std::to_string(options.size_bytes), std::to_string(artifact.size_bytes));
  if (auto problem = origins_problem(artifact.origin, artifact.mirrors, max_origins))
    throw std::invalid_argument("ArtifactRef." + *problem);
}

SchedulerConfig engine_config(SchedulerConfig c) {
  // The capacity is the cache directory's, which knows the pins of every
  // process: the engine's index only remembers what is installed.
  c.cache_bytes = ~std::uint64_t{0};
  return c;
}

}  // namespace

// --- Expectations ------------------------------------------------------------

std::optional<std::string> contradiction(const Expect& e, std::uint64_t size,
                                         const std::string& sha256) {
  if (e.size != 0 && e.size != size) {
    return "size mismatch: expected " + std::to_string(e.size) + " bytes, got " +
           std::to_string(size);
  }
  if (e.sha256 && *e.sha256 != sha256) {
    return "sha256 mismatch: expected " + *e.sha256 + ", got " + sha256;
  }
  return std::nullopt;
}

Limits limits_of(const std::vector<Expect>& expects) {
  Limits l;
  bool all_sized = !expects.empty();
  std::uint64_t lo = ~std::uint64_t{0}, hi = 0;
  for (const Expect& e : expects) {
    l.verified = l.verified || e.sha256.has_value();
    if (e.size == 0) {
      all_sized = false;
    } else {
      lo = std::min(lo, e.size);
      hi = std::max(hi, e.size);
    }
  }
  if (all_sized) (lo == hi ? l.exact : l.cap) = hi;
  return l;
}

Expect expect_of(const ArtifactRef& artifact) {
  Expect e{artifact.size_bytes, std::nullopt};
  if (!artifact.sha256) return e;
  std::string d = *artifact.sha256;
  for (char& c : d)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (d.size() != 64 || d.find_first_not_of("0123456789abcdef") != std::string::npos) {
    throw std::invalid_argument("ArtifactRef.sha256: expected 64 hex digits, got \"" +
                                *artifact.sha256 + "\"");
  }
  e.sha256 = std::move(d);
  return e;
}

void check_throttle(const ThrottleConfig& config, const std::string& name) {
  auto check = [&](const char* field, double value) {
    if (!(value >= 0) || !std::isfinite(value)) {
      throw std::invalid_argument(name + "." + field + ": must be a finite rate >= 0, got " +
                                  std::to_string(value));
    }
  };
  check("background_Bps", config.background_Bps);
  check("overall_Bps", config.overall_Bps);
}

// --- Pins --------------------------------------------------------------------

Pin::State::~State() { release(); }

void Pin::State::release() {
  std::unique_ptr<ObjectHold> h;
  {
    std::lock_guard lock(mutex);
    h = std::move(hold);
  }
  if (h) h->release();
}

bool Pin::State::held() {
  std::lock_guard lock(mutex);
  return hold != nullptr;
}

Pin& Pin::operator=(Pin&& other) noexcept {
  if (this != &other) {
    release();
    state_ = std::move(other.state_);
  }
  return *this;
}

void Pin::release() {
  if (state_) state_->release();
  state_.reset();
}

Pin::operator bool() const {
  return state_ && state_->held();
}

const std::filesystem::path& Pin::path() const {
  static const std::filesystem::path none;
  return state_ ? state_->path : none;
}

// --- Callers -----------------------------------------------------------------

ClientCore::ClientCore(Options options, ObjectStore& objects)
    : options_(std::move(options)),
      objects_(objects),
      engine_(engine_config(options_.scheduler),
              options_.orphan_policy_object
                  ? options_.orphan_policy_object
                  : policies::make_orphan_policy(options_.orphan_policy)) {
  check_throttle(options_.throttle, "ClientOptions.throttle");
  throttle_rule_.set(options_.throttle);
}

ClientCore::~ClientCore() {
  for (auto& [packed, demand] : demands_) {
    if (demand.hit_hold) demand.hit_hold->release();
  }
  for (auto& [id, task] : tasks_) {
    if (task.held) task.held->release();
  }
}

DemandHandle ClientCore::subscribe(double now, const ArtifactRef& artifact,
                                   const DemandOptions& options, Client::Callback on_terminal,
                                   std::optional<ObjectFacts> on_disk,
                                   std::unique_ptr<ObjectHold> hit_hold) {
  const Expect expect = expect_of(artifact);
  check_subscribe(artifact, options, options_.scheduler.max_origins);
  DemandOptions o = options;
  o.origin = artifact.origin;
  o.mirrors = artifact.mirrors;
  o.size_bytes = artifact.size_bytes;
  if (options_.pin_on_success && on_disk && !hit_hold) on_disk.reset();  // Gone meanwhile.
  if (on_disk) {
    engine_.note_installed(now, artifact.key, on_disk->size);
  } else {
    engine_.forget_installed(now, artifact.key);
  }
  const DemandHandle h = engine_.subscribe(now, artifact.key, o);
  DemandRecord record{std::move(on_terminal), artifact.key,      expect,
                      options.owner,          options.owner_generation, std::move(on_disk),
                      std::move(hit_hold)};
  std::optional<TaskId> task;
  if (auto info = engine_.demand(h); info && info->task.value != 0) {
    task = info->task;
    record.hit.reset();  // Served by the task, judged by what it installs.
    if (record.hit_hold) record.hit_hold->release();
    record.hit_hold.reset();
    attach_expectation(info->task, artifact.key, expect);
  }
  record.priority = options.priority;
  record.subscribed_s = now;
  demands_.insert_or_assign(pack(h), std::move(record));
  if (options_.observer != nullptr) options_.observer->on_subscribe(now, h, artifact, o, task);
  route(now);
  return h;
}

void ClientCore::cancel(double now, DemandHandle h) {
  engine_.cancel(now, h);
  route(now);
}

void ClientCore::set_priority(double now, DemandHandle h, Priority p) {
  engine_.set_priority(now, h, p);
  if (engine_.demand(h)) {
    if (auto it = demands_.find(pack(h)); it != demands_.end()) it->second.priority = p;
    if (options_.observer != nullptr) options_.observer->on_set_priority(now, h, p);
  }
  route(now);
}

void ClientCore::end_owner(double now, OwnerId owner, std::optional<OwnerGeneration> generation) {
  engine_.end_owner(now, owner, generation);
  route(now);
  // Its pins go with it.
  auto [first, last] = pins_.equal_range(owner);
  for (auto it = first; it != last;) {
    auto state = it->second.lock();
    if (!state || !generation || state->generation <= *generation) {
      if (state) state->release();
      it = pins_.erase(it);
    } else {
      ++it;
    }
  }
}

std::vector<DemandHandle> ClientCore::cancel_all(double now) {
  std::vector<DemandHandle> waiting;
  for (const auto& [packed, demand] : demands_) {
    waiting.push_back(DemandHandle{static_cast<std::uint32_t>(packed >> 32),
                                   static_cast<std::uint32_t>(packed)});
  }
  for (DemandHandle h : waiting)
    engine_.cancel(now, h);
  route(now);
  return waiting;
}

bool ClientCore::set_throttle(const ThrottleConfig& config) {
  check_throttle(config, "throttle");
  if (!throttle_rule_.set(config)) return false;
  jobs_.push_back(ThrottleJob{});
  return true;
}

// The engine starts no held task; the I/O thread holds the transfers in
// flight (and a start made just before the pause) by pause_rule_.
bool ClientCore::pause(double now, std::optional<Priority> at_or_below) {
  ThrottleConfig level;
  level.background_at_or_below = at_or_below.value_or(std::numeric_limits<Priority>::max());
  const bool changed = pause_rule_.set(level) || !pausing_;
  pausing_ = true;
  if (!changed) return false;
  engine_.hold_starts(now, level.background_at_or_below);
  jobs_.push_back(ThrottleJob{});  // The I/O thread reads the holds again.
  route(now);
  return true;
}

bool ClientCore::resume(double now) {
  if (!pausing_) return false;
  pausing_ = false;
  engine_.hold_starts(now, std::nullopt);
  jobs_.push_back(ThrottleJob{});
  route(now);
  return true;
}

// --- Shells' events ----------------------------------------------------------

void ClientCore::on_timer(double now) {
  engine_.on_timer(now);
  route(now);
}

void ClientCore::progress(double now, const std::vector<TransferSnapshot>& transfers,
                          const std::vector<TaskId>& waiting_elsewhere) {
  std::uint64_t in_flight = 0;
  for (const TransferSnapshot& s : transfers) {
    engine_.on_transfer_progress(now, s.transfer, s.received);
    in_flight += s.received;
    if (auto it = tasks_.find(s.task.value); it != tasks_.end()) {
      it->second.have = s.offset + s.received;
      if (s.size > 0) it->second.size_seen = s.size;
    }
  }
  for (TaskId task : waiting_elsewhere_) {
    if (auto it = tasks_.find(task.value); it != tasks_.end()) it->second.waiting_elsewhere = false;
  }
  waiting_elsewhere_ = waiting_elsewhere;
  for (TaskId task : waiting_elsewhere_) {
    if (auto it = tasks_.find(task.value); it != tasks_.end()) it->second.waiting_elsewhere = true;
  }
  if (!transfers.empty()) meter_.received(now, metrics_.bytes_received + in_flight, transfers);
  route(now);
}

void ClientCore::transfer_ended(double now, const TransferEnd& end) {
  auto task = tasks_.find(end.task.value);
  if (!end.url.empty() && task != tasks_.end()) task->second.last_url = end.url;
  metrics_.bytes_received += end.bytes;
  if (task != tasks_.end()) task->second.have = task->second.attempt_offset + end.bytes;
  meter_.transfer_ended(end.transfer.value, end.bytes,
                        end.status == TransferStatus::ok ? end.rate_Bps : std::nullopt,
                        end.connect_s);
  if (end.status != TransferStatus::ok) ++metrics_.transfers_failed;
  if (end.first_byte_s) metrics_.time_to_first_byte_s.observe(*end.first_byte_s);
  if (end.rate_Bps) metrics_.transfer_rate_Bps.observe(*end.rate_Bps);
  const std::string reason = end.reason.empty() ? "transfer failed" : end.reason;
  if (end.status != TransferStatus::ok && task != tasks_.end()) {
    task->second.last_reason = reason;
    task->second.rejected_digest.clear();
  }
  if (options_.observer != nullptr) {
    if (end.status != TransferStatus::ok && end.key)
      options_.observer->on_attempt_failed(now, end.task, *end.key, end.reason);
    options_.observer->on_transfer_ended(now, end.task, end.transfer, end.bytes, false);
  }
  engine_.on_transfer_finished(now, end.transfer, end.status, end.bytes, end.retry_after_s);
  route(now);
}

void ClientCore::transfer_aborted(double now, TaskId task, TransferId transfer,
                                  std::uint64_t received, double first_byte_s) {
  metrics_.bytes_received += received;
  if (first_byte_s >= 0) metrics_.time_to_first_byte_s.observe(first_byte_s);
  if (options_.observer != nullptr)
    options_.observer->on_transfer_ended(now, task, transfer, received, true);
}

// Whether the body (its size and digest, judged once) is installed: when
// it meets the expectation of some demand that states a digest; or, when
// no demand of the task states one, that of any demand; or, when digests
// were stated and none is met, that of a demand which states none, if the
// origin served these same bytes twice in a row (then it is the origin's
// artifact, not a transfer's accident, and a demand that expects other
// bytes is what is wrong). Otherwise the body is refused: the task
// retries, once per body, while the bodies differ; a body the same as the
// last refused one ends the task at once (the origin serves these bytes,
// and fetching them again would change nothing). On install, what was
// installed is recorded for the verdicts.
std::optional<Refusal> ClientCore::decide_install(TaskId task, std::uint64_t bytes,
                                                  const std::string& sha256) {
  auto it = tasks_.find(task.value);
  if (it == tasks_.end()) return std::nullopt;  // Nobody expects anything.
  TaskRecord& record = it->second;
  bool digest_stated = false, digest_met = false, plain_met = false;
  std::optional<std::string> first_why;
  for (const Expect& e : record.expects) {
    const auto why = contradiction(e, bytes, sha256);
    if (e.sha256) {
      digest_stated = true;
      digest_met = digest_met || !why;
    } else {
      plain_met = plain_met || !why;
    }
    if (why && !first_why) first_why = why;
  }
  const bool accept = record.expects.empty() || digest_met || (!digest_stated && plain_met) ||
                      (plain_met && record.rejected_digest == sha256);
  if (!accept) {
    const bool same_again = digest_stated && record.rejected_digest == sha256;
    record.rejected_digest = digest_stated ? sha256 : std::string();
    record.keep_rejected = same_again;  // The demands' verdicts name it.
    return Refusal{first_why.value_or("the body meets no demand's expectation") +
                       record.provenance(),
                   !same_again};
  }
  record.installed = ObjectFacts{bytes, sha256};
  return std::nullopt;
}

void ClientCore::adopted(TaskId task, ObjectFacts facts, std::unique_ptr<ObjectHold> hold) {
  auto it = tasks_.find(task.value);
  if (it == tasks_.end()) {
    if (hold) hold->release();
    return;
  }
  it->second.installed = std::move(facts);
  if (it->second.held) it->second.held->release();
  it->second.held = std::move(hold);
}

void ClientCore::finalize_ended(double now, const FinalizeJob& job, std::uint64_t bytes,
                                FinalizeStatus status, const std::string& reason,
                                std::unique_ptr<ObjectHold> installed) {
  auto it = tasks_.find(job.task.value);
  TaskRecord* task = it != tasks_.end() ? &it->second : nullptr;
  if (installed) {
    if (status == FinalizeStatus::installed && task != nullptr && !task->held) {
      task->held = std::move(installed);
    } else {
      installed->release();
    }
  }
  if (status != FinalizeStatus::installed && task != nullptr) {
    task->last_reason = reason;
    if (status != FinalizeStatus::verify_failed && !task->keep_rejected)
      task->rejected_digest.clear();
  }
  if (options_.observer != nullptr) {
    if (status != FinalizeStatus::installed)
      options_.observer->on_attempt_failed(now, job.task, job.key, reason);
    options_.observer->on_finalize_ended(now, job.task, status, bytes);
  }
  meter_.finalize_ended(now, bytes);
  engine_.on_finalize_finished(now, job.finalize, status);
  route(now);
}

void ClientCore::take_jobs(std::vector<Job>& out) {
  out.clear();
  out.swap(jobs_);
}

// --- Reading -----------------------------------------------------------------

ClientMetrics ClientCore::metrics() const {
  ClientMetrics out = metrics_;
  const SchedulerStats& stats = engine_.stats();
  out.cache_hits = stats.cache_hits;
  out.installs = stats.installs;
  out.failovers = stats.failovers;
  out.breaker_opens = stats.breaker_opens;
  out.orphan_decisions["abort"] = stats.orphan_aborts;
  out.orphan_decisions["complete"] = stats.orphan_completes;
  out.orphan_decisions["keep_partial"] = stats.partials_kept;
  for (const TaskInfo& task : engine_.tasks()) {
    const Priority p = task.effective_priority.value_or(std::numeric_limits<Priority>::min());
    if (task.state == TaskState::queued) ++out.queued[p];
    if (task.state == TaskState::transferring) ++out.in_flight[p];
  }
  std::map<std::filesystem::path, std::uint64_t> held;
  for (const auto& [owner, weak] : pins_) {
    if (auto state = weak.lock(); state && state->held()) held[state->path] = state->bytes;
  }
  for (const auto& [path, bytes] : held)
    out.pinned_bytes += bytes;
  return out;
}

// --- Rules -------------------------------------------------------------------

std::string ClientCore::TaskRecord::provenance() const {
  return (last_url.empty() ? std::string() : " from " + last_url) +
         (keep_rejected ? " (the same bytes twice in a row: not fetched again)" : "");
}

// A demand joined `task` (new, live, or an orphan it re-attaches to).
void ClientCore::attach_expectation(TaskId task, const ArtifactKey& key, const Expect& expect) {
  TaskRecord& record = tasks_[task.value];
  if (record.expects.empty()) record.key = key;
  if (std::find(record.expects.begin(), record.expects.end(), expect) != record.expects.end())
    return;
  const Limits before = limits_of(record.expects);
  record.expects.push_back(expect);
  const Limits after = limits_of(record.expects);
  if (after == before || record.expects.size() == 1) return;
  jobs_.push_back(LimitsJob{task, after});  // A running transfer enforces them from now on.
}

// The one terminal of the demand behind `d`, judged for that demand.
DemandResult ClientCore::verdict(const Deliver& d, DemandRecord& demand) {
  DemandResult r;
  r.outcome = d.outcome;
  auto task = d.task.value != 0 ? tasks_.find(d.task.value) : tasks_.end();
  TaskRecord* record = task != tasks_.end() ? &task->second : nullptr;
  switch (d.outcome) {
    case DemandOutcome::succeeded: {
      const ObjectFacts* facts = nullptr;
      if (record != nullptr && record->installed) facts = &*record->installed;
      if (record == nullptr && demand.hit) facts = &*demand.hit;
      if (facts == nullptr) {
        r.outcome = DemandOutcome::failed;
        r.reason = "the installed object could not be checked";
        return r;
      }
      if (auto why = contradiction(demand.expect, facts->size, facts->sha256)) {
        r.outcome = DemandOutcome::failed;  // Right for others, not for this caller.
        r.reason = *why;
        ++metrics_.conflicts_of_expectation;
        return r;
      }
      if (!options_.pin_on_success) return r;
      // The task's key names the object (the callbacks model shares a
      // task between revisions of one resource).
      const ArtifactKey& object = record != nullptr ? record->key : demand.key;
      std::unique_ptr<ObjectHold> held =
          record == nullptr ? std::move(demand.hit_hold)
          : record->held    ? std::move(record->held)  // The install's (or adoption's) own.
                            : objects_.hold(object);
      if (!held) {
        r.outcome = DemandOutcome::failed;
        r.reason = "evicted before it could be pinned";
        return r;
      }
      r.pin = make_pin(std::move(held), object, demand, facts->size);
      return r;
    }
    case DemandOutcome::failed:
      if (record != nullptr && !record->rejected_digest.empty() && demand.expect.sha256 &&
          *demand.expect.sha256 != record->rejected_digest) {
        r.reason = "sha256 mismatch: expected " + *demand.expect.sha256 + ", got " +
                   record->rejected_digest + record->provenance();
      } else if (record != nullptr && !record->last_reason.empty()) {
        r.reason = record->last_reason;
      } else {
        r.reason = "failed";
      }
      return r;
    default:
      r.reason = std::string(to_string(d.outcome));
      return r;
  }
}

Pin ClientCore::make_pin(std::unique_ptr<ObjectHold> held, const ArtifactKey& object,
                         const DemandRecord& demand, std::uint64_t bytes) {
  auto state = std::make_shared<Pin::State>();
  state->hold = std::move(held);
  state->bytes = bytes;
  state->owner = demand.owner;
  state->generation = demand.generation;
  state->path = objects_.path(object);
  if (pins_.size() >= 2 * pins_live_ + 64) {  // Forget the pins released since.
    for (auto it = pins_.begin(); it != pins_.end();)
      it = it->second.expired() ? pins_.erase(it) : std::next(it);
    pins_live_ = pins_.size();
  }
  pins_.emplace(demand.owner, state);
  return Pin(std::move(state));
}

// A demand's terminal, in the metrics.
void ClientCore::count_demand(double now, const DemandRecord& demand, DemandOutcome outcome) {
  const std::string name(to_string(outcome));
  ++metrics_.demands[{name, demand.priority}];
  auto [it, fresh] = metrics_.wait_s.try_emplace({demand.priority, name}, latency_buckets_s());
  it->second.observe(std::max(0.0, now - demand.subscribed_s));
}

void ClientCore::route(double now) {
  engine_.take_commands(commands_);
  // Each demand's verdict first: what an observer hears of a Deliver is
  // what the caller gets (a success the caller's own expectation
  // contradicts is its failure). The deliveries go after the other jobs of
  // these commands, in their order.
  std::vector<DeliverJob> delivered;
  for (Command& command : commands_) {
    auto* d = std::get_if<Deliver>(&command);
    if (d == nullptr) continue;
    auto it = demands_.find(pack(d->demand));
    if (it == demands_.end()) continue;
    DemandRecord demand = std::move(it->second);
    demands_.erase(it);
    DeliverJob out{std::move(demand.callback), verdict(*d, demand), {}};
    if (demand.hit_hold) demand.hit_hold->release();  // Not taken by a pin.
    count_demand(now, demand, out.result.outcome);
    d->outcome = out.result.outcome;
    if (options_.observer != nullptr) options_.observer->on_delivered(now, d->demand, out.result);
    delivered.push_back(std::move(out));
  }
  if (options_.observer != nullptr) {
    for (const Command& command : commands_)
      options_.observer->on_command(now, command);
    options_.observer->on_settled(now);
  }
  bool throttle_changed = false, pause_changed = false;
  // The shells' jobs; the other kinds are the observer's, and Deliver was
  // handled above.
  for (Command& command : commands_) {
    throttle_changed = throttle_rule_.observe(command) || throttle_changed;
    pause_changed = pause_rule_.observe(command) || pause_changed;
    dispatch(command, Overloaded{
        [&](StartTransfer& c) {
          ++metrics_.transfers_started;
          if (c.attempt > 1) ++metrics_.retries;
          meter_.transfer_started(c.transfer.value, c.origin);
          const bool hold = held(c.task);
          StartJob job{std::move(c), {}, hold};
          if (auto it = tasks_.find(job.start.task.value); it != tasks_.end()) {
            job.limits = limits_of(it->second.expects);
            it->second.attempt_offset = it->second.have = job.start.resume_offset_bytes;
          } else if (job.start.size_bytes > 0) {
            job.limits.exact = job.start.size_bytes;
          }
          jobs_.push_back(std::move(job));
        },
        [&](const AbortTransfer& a) {
          meter_.transfer_ended(a.transfer.value, 0, std::nullopt, std::nullopt);
          jobs_.push_back(AbortJob{a.transfer, a.task, a.keep_partial});
        },
        [&](DropPartial& p) { jobs_.push_back(DropPartialJob{std::move(p.key)}); },
        [&](const TaskEnded& e) {
          jobs_.push_back(ForgetJob{e.task});
          if (auto it = tasks_.find(e.task.value); it != tasks_.end()) {
            if (it->second.held) it->second.held->release();
            tasks_.erase(it);  // Its demands' terminals came before.
          }
        },
        [&](const StartFinalize& f) {
          meter_.finalize_started(now);
          jobs_.push_back(FinalizeJob{f.finalize, f.task, *f.key});
        },
        [&](const EvictArtifact& ev) { jobs_.push_back(EvictJob{*ev.key}); },
        [](const Deliver&) {}, [](const TaskCreated&) {}, [](const DemandAttached&) {},
        [](const DemandPriorityChanged&) {}, [](const TaskPriorityChanged&) {},
        [](const OrphanDecided&) {}});
  }
  for (DeliverJob& job : delivered)
    jobs_.push_back(std::move(job));
  if ((throttle_changed && throttle_rule_.config().background_at_or_below) ||
      (pause_changed && pausing_))
    jobs_.push_back(ThrottleJob{});
}

// --- Progress (Client::progress) ---------------------------------------------

std::string_view to_string(Stage stage) {
  switch (stage) {
    case Stage::queued:
      return "queued";
    case Stage::transferring:
      return "transferring";
    case Stage::retrying:
      return "retrying";
    case Stage::waiting_elsewhere:
      return "waiting_elsewhere";
    case Stage::paused:
      return "paused";
    case Stage::finalizing:
      return "finalizing";
  }
  return "?";
}

DemandProgress ClientCore::progress_of(DemandHandle h, const DemandRecord& demand,
                                       const TaskInfo& task) const {
  DemandProgress p;
  p.demand = h;
  p.owner = demand.owner;
  p.task = task.id;
  const auto record = tasks_.find(task.id.value);
  const TaskRecord* r = record == tasks_.end() ? nullptr : &record->second;
  switch (task.state) {
    case TaskState::queued:
      p.stage = Stage::queued;
      break;
    case TaskState::backoff:
      p.stage = Stage::retrying;
      break;
    case TaskState::finalizing:
      p.stage = Stage::finalizing;
      break;
    case TaskState::transferring:
      p.stage = r != nullptr && r->waiting_elsewhere ? Stage::waiting_elsewhere
                                                     : Stage::transferring;
      break;
  }
  if ((p.stage == Stage::queued || p.stage == Stage::transferring) && held(task.id))
    p.stage = Stage::paused;
  if (r != nullptr) {
    p.received = r->have;
    p.expected = limits_of(r->expects).exact.value_or(r->size_seen);
  }
  if (demand.expect.size > 0) p.expected = demand.expect.size;
  if (p.stage == Stage::finalizing && p.expected > 0) p.received = p.expected;  // Whole.
  return p;
}

std::optional<DemandProgress> ClientCore::progress_of(DemandHandle h) const {
  const auto demand = demands_.find(pack(h));
  if (demand == demands_.end()) return std::nullopt;
  const std::optional<TaskInfo> task = engine_.task_of(h);
  if (!task) return std::nullopt;
  return progress_of(h, demand->second, *task);
}

std::vector<DemandProgress> ClientCore::progress_all() const {
  std::vector<std::pair<std::pair<double, std::uint64_t>, DemandProgress>> found;
  for (const auto& [packed, demand] : demands_) {
    const DemandHandle h = unpack(packed);
    if (const std::optional<TaskInfo> task = engine_.task_of(h))
      found.push_back({{demand.subscribed_s, packed}, progress_of(h, demand, *task)});
  }
  std::sort(found.begin(), found.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<DemandProgress> out;
  out.reserve(found.size());
  for (auto& [order, p] : found) out.push_back(p);
  return out;
}

void ClientCore::report_progress(
    const std::function<void(const std::vector<DemandProgress>&)>& to) {
  std::vector<DemandProgress> all = progress_all();
  if (all.empty()) return;
  DeliverJob job;
  job.report = [to, all = std::move(all)] { to(all); };
  jobs_.push_back(std::move(job));
}

OwnerProgress ClientCore::owner_progress(OwnerId owner) const {
  OwnerProgress out;
  std::unordered_set<std::uint64_t> counted;  // Tasks already in the bytes.
  for (const auto& [packed, demand] : demands_) {
    if (demand.owner != owner) continue;
    const DemandHandle h = unpack(packed);
    const std::optional<TaskInfo> task = engine_.task_of(h);
    if (!task) continue;
    const DemandProgress p = progress_of(h, demand, *task);
    ++out.demands;
    ++out.by_stage[static_cast<std::size_t>(p.stage)];
    if (!counted.insert(p.task.value).second) continue;
    out.received += p.received;
    if (p.expected > 0) {
      out.expected += p.expected;
    } else {
      ++out.unknown_size;
    }
  }
  return out;
}

}  // namespace dfl::backend
