// ClientCore: the production client's rules, with no threads, no curl and
// no files. Every call takes `now` (the client's clock).
//
// It owns the Scheduler, the demand and task records, the expectations
// and their verdicts, the install decision, pins by owner, the throttle
// rule and the metrics. Callers' calls and the shells' events go in; typed
// jobs come out, in the order the engine emitted the commands behind them:
//
//   in (from)                                  jobs out
//   subscribe / cancel / set_priority /        StartJob, AbortJob, ForgetJob,
//     end_owner (callers)                      DropPartialJob, LimitsJob (I/O)
//   on_timer, progress (I/O thread)            FinalizeJob (finalize pool)
//   transfer_ended / transfer_aborted (I/O)    DeliverJob (delivery)
//   decide_install / adopted /                 EvictJob (run at once, under
//     finalize_ended (finalize pool)             the lock: no later install
//                                                of the key may be undone)
//                                              ThrottleJob (the rule's answers
//                                                changed: the I/O thread reads them)
//
// The client (client.cpp) holds one mutex around it; the fake driver of
// tests/backend/client_core_test.cpp runs it alone. The objects it pins
// come through ObjectHolds (CacheDir::Hold in the client, a counter in
// the tests), so that it never opens a file.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <variant>
#include <vector>

#include "demandflight/backend/client.h"
#include "platform_meter.h"

namespace dfl::backend {

// What one demand expects of the bytes: its own, never the key's.
struct Expect {
  std::uint64_t size = 0;  // 0: any.
  std::optional<std::string> sha256;
  bool operator==(const Expect&) const = default;
};

// Why `size` and `sha256` contradict `e`, or nullopt.
std::optional<std::string> contradiction(const Expect& e, std::uint64_t size,
                                         const std::string& sha256);

// What a transfer of a task must enforce, from every expectation its
// demands stated: the exact size when they agree on one, else a cap.
struct Limits {
  std::optional<std::uint64_t> exact;
  std::optional<std::uint64_t> cap;
  bool verified = false;  // Some demand states the whole body's digest.
  bool operator==(const Limits&) const = default;
};
Limits limits_of(const std::vector<Expect>& expects);

// The caller's expectation (its digest in lower case); std::invalid_argument
// naming the field for a malformed digest.
Expect expect_of(const ArtifactRef& artifact);
// std::invalid_argument naming `name`'s field for a negative or non-finite rate.
void check_throttle(const ThrottleConfig& config, const std::string& name);

// A hold on an installed object, which eviction (in any process) respects.
// Its owner calls release() exactly once before dropping it.
class ObjectHold {
 public:
  virtual ~ObjectHold() = default;
  virtual void release() = 0;
};

struct Pin::State {
  std::mutex mutex;
  std::unique_ptr<ObjectHold> hold;
  std::filesystem::path path;
  std::uint64_t bytes = 0;  // The object's size (ClientMetrics::pinned_bytes).
  OwnerId owner = 0;
  OwnerGeneration generation = 0;
  ~State();
  void release();  // Once, whoever asks first (the caller, or its owner's end).
  bool held();
};

// What the core asks of the installed objects.
class ObjectStore {
 public:
  virtual ~ObjectStore() = default;
  // Holds `key`'s installed object; null when it is not installed.
  virtual std::unique_ptr<ObjectHold> hold(const ArtifactKey& key) = 0;
  virtual std::filesystem::path path(const ArtifactKey& key) const = 0;
};

// The facts of an installed object.
struct ObjectFacts {
  std::uint64_t size = 0;
  std::string sha256;  // Empty when not read.
};

// --- Jobs --------------------------------------------------------------------

struct StartJob {  // I/O: start a transfer.
  StartTransfer start;  // URL from its key and origin, range, effective priority.
  Limits limits;        // What the task's demands expect.
  bool held = false;    // Paused (Client::pause): it waits for the resume.
};
struct AbortJob {  // I/O: abort a transfer.
  TransferId transfer;
  TaskId task;
  bool keep_partial = false;  // Keep its staged bytes for the key.
};
struct ForgetJob {  // I/O: the task ended; its files go.
  TaskId task;
};
struct DropPartialJob {  // I/O: the engine dropped a kept partial.
  ArtifactKey key;
};
struct LimitsJob {  // I/O: a running transfer of the task enforces new limits.
  TaskId task;
  Limits limits;
};
struct FinalizeJob {  // Finalize pool: verify and install the staged body.
  FinalizeId finalize;
  TaskId task;
  ArtifactKey key;
};
struct DeliverJob {  // Delivery: the demand's one terminal.
  Client::Callback callback;
  DemandResult result;
  // Instead, a progress report (ClientOptions::on_progress), in order with
  // the terminals.
  std::function<void()> report;
};
struct EvictJob {  // Remove the object now.
  ArtifactKey key;
};
struct ThrottleJob {};  // The throttle rule's answers changed.

using Job = std::variant<StartJob, AbortJob, ForgetJob, DropPartialJob, LimitsJob, FinalizeJob,
                         DeliverJob, EvictJob, ThrottleJob>;

// --- Events ------------------------------------------------------------------

// A transfer attempt ended (not by an abort).
struct TransferEnd {
  TransferId transfer;
  TaskId task;
  TransferStatus status = TransferStatus::ok;
  std::uint64_t bytes = 0;  // Body bytes this attempt received.
  std::optional<double> retry_after_s;
  std::optional<ArtifactKey> key;  // For the observer's on_attempt_failed.
  std::string reason;              // Why it failed.
  std::string url;                 // Where it went.
  std::optional<double> first_byte_s, rate_Bps;  // For the metrics.
  std::optional<double> connect_s;  // TCP connect time, when this attempt opened a connection.
};

// Why a body is not installed (ClientCore::decide_install).
struct Refusal {
  std::string why;
  bool again = true;  // Worth fetching again.
};

class ClientCore {
 public:
  struct Options {
    SchedulerConfig scheduler;
    std::string orphan_policy = "always-abort";
    // When set, the policy itself (orphan_policy is then not read).
    std::shared_ptr<OrphanPolicy> orphan_policy_object;
    bool pin_on_success = false;
    ClientObserver* observer = nullptr;
    ThrottleConfig throttle;
  };
  ClientCore(Options options, ObjectStore& objects);
  ~ClientCore();  // Releases the holds of what is left.
  ClientCore(const ClientCore&) = delete;
  ClientCore& operator=(const ClientCore&) = delete;

  // --- Callers ---------------------------------------------------------------
  // `on_disk`: what the shell found installed (it read the disk before the
  // lock); `hit_hold`: the object held for a pin, when pins are on.
  DemandHandle subscribe(double now, const ArtifactRef& artifact, const DemandOptions& options,
                         Client::Callback on_terminal, std::optional<ObjectFacts> on_disk,
                         std::unique_ptr<ObjectHold> hit_hold);
  void cancel(double now, DemandHandle h);
  void set_priority(double now, DemandHandle h, Priority p);
  void end_owner(double now, OwnerId owner, std::optional<OwnerGeneration> generation);
  // Destruction: each waiting demand gets its terminal. Returns those
  // demands (a recording writes their cancels).
  std::vector<DemandHandle> cancel_all(double now);
  // False when it changes nothing.
  bool set_throttle(const ThrottleConfig& config);
  // Client::pause and resume; false when they change nothing.
  bool pause(double now, std::optional<Priority> at_or_below);
  bool resume(double now);
  // Whether Client::pause holds `task` now.
  bool held(TaskId task) const { return pausing_ && pause_rule_.is_background(task); }

  // --- Shells' events --------------------------------------------------------
  std::optional<double> next_wakeup_s() const { return engine_.next_wakeup_s(); }
  void on_timer(double now);
  // What the transfers in flight received, and the tasks whose start waits
  // for another fetch of their key (the I/O thread's view).
  void progress(double now, const std::vector<TransferSnapshot>& transfers,
                const std::vector<TaskId>& waiting_elsewhere = {});
  void transfer_ended(double now, const TransferEnd& end);
  // The engine aborted it; what it received and its time to first byte (< 0: none).
  void transfer_aborted(double now, TaskId task, TransferId transfer, std::uint64_t received,
                        double first_byte_s);
  // Whether the sealed body is installed: see the rule in client_core.cpp.
  std::optional<Refusal> decide_install(TaskId task, std::uint64_t bytes,
                                        const std::string& sha256);
  // Another process installed the key: its facts and our hold on it.
  void adopted(TaskId task, ObjectFacts facts, std::unique_ptr<ObjectHold> hold);
  // `installed`: the new object, held by its install (the first pin takes
  // that hold instead of taking one more).
  void finalize_ended(double now, const FinalizeJob& job, std::uint64_t bytes,
                      FinalizeStatus status, const std::string& reason,
                      std::unique_ptr<ObjectHold> installed = nullptr);

  // The jobs made since the last call, in order.
  void take_jobs(std::vector<Job>& out);

  // --- Reading ---------------------------------------------------------------
  const SchedulerStats& stats() const { return engine_.stats(); }
  bool no_work() const { return engine_.live_demands() == 0 && engine_.live_tasks() == 0; }
  ClientMetrics metrics() const;  // Without the cache's figures.
  MeasuredPlatform measured() const { return meter_.measured(); }
  const ThrottleRule& throttle_rule() const { return throttle_rule_; }
  // Client::progress: nullopt once the demand has ended.
  std::optional<DemandProgress> progress_of(DemandHandle h) const;
  std::vector<DemandProgress> progress_all() const;  // In subscribe order.
  OwnerProgress owner_progress(OwnerId owner) const;
  // A DeliverJob that hands `to` every live demand's progress (none when no
  // demand lives).
  void report_progress(const std::function<void(const std::vector<DemandProgress>&)>& to);

 private:
  struct DemandRecord {
    Client::Callback callback;
    ArtifactKey key;
    Expect expect;
    OwnerId owner = 0;
    OwnerGeneration generation = 0;
    std::optional<ObjectFacts> hit;         // The installed object, for a cache hit.
    std::unique_ptr<ObjectHold> hit_hold;   // Held for its pin.
    Priority priority = 0;  // As last set (ClientMetrics: by priority).
    double subscribed_s = 0;
  };
  struct TaskRecord {
    ArtifactKey key;
    std::vector<Expect> expects;  // Every distinct expectation its demands stated.
    std::string last_reason;      // Why its last attempt failed.
    std::string rejected_digest;  // The last body's digest, if no demand's digest met it.
    bool keep_rejected = false;   // The task ended on it: its demands' verdicts name it.
    std::string last_url;         // Where its last attempt went.
    std::string provenance() const;
    std::optional<ObjectFacts> installed;  // Once installed: what.
    std::unique_ptr<ObjectHold> held;      // The install's (or adoption's) hold, until a pin takes it.
    // Progress: the current attempt's first byte, the body's bytes in hand,
    // the size a response announced, and whether its start waits for
    // another fetch of the key.
    std::uint64_t attempt_offset = 0;
    std::uint64_t have = 0;
    std::uint64_t size_seen = 0;
    bool waiting_elsewhere = false;
  };

  void attach_expectation(TaskId task, const ArtifactKey& key, const Expect& expect);
  DemandResult verdict(const Deliver& d, DemandRecord& demand);
  Pin make_pin(std::unique_ptr<ObjectHold> held, const ArtifactKey& object,
               const DemandRecord& demand, std::uint64_t bytes);
  void count_demand(double now, const DemandRecord& demand, DemandOutcome outcome);
  void route(double now);  // The engine's commands, as jobs.
  DemandProgress progress_of(DemandHandle h, const DemandRecord& demand,
                             const TaskInfo& task) const;

  Options options_;
  ObjectStore& objects_;
  Scheduler engine_;
  ThrottleRule throttle_rule_;
  // Client::pause: the tasks at or below its level are held (the throttle's
  // rule of background tasks, reused: it follows each task's priority).
  ThrottleRule pause_rule_;
  bool pausing_ = false;
  std::vector<Command> commands_;
  std::vector<Job> jobs_;
  std::unordered_map<std::uint64_t, DemandRecord> demands_;  // Live demands, by handle.
  std::unordered_map<std::uint64_t, TaskRecord> tasks_;      // Live tasks, by id.
  ClientMetrics metrics_;
  PlatformMeter meter_;
  std::unordered_multimap<OwnerId, std::weak_ptr<Pin::State>> pins_;  // Pins given, by owner.
  std::size_t pins_live_ = 0;  // pins_'s size when it was last pruned.
  std::vector<TaskId> waiting_elsewhere_;  // As the I/O thread last said.
};

}  // namespace dfl::backend
