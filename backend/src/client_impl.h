// The production client's shells around ClientCore (client_core.h): the
// class every shell file defines a part of. client.cpp: callers' calls,
// the lock and the dispatch of the core's jobs; client_io.cpp: the I/O
// thread's loop (jobs, waiting starts, throttle, progress, bounds);
// client_transfer.cpp: one transfer on libcurl (start, headers, body,
// end); client_finalize.cpp: the finalize pool and delivery.
//
// Ownership, so that no data needs more than one lock:
// - mutex_: the ClientCore (client_core.h: the Scheduler, the demands and
//   tasks, expectations, verdicts, pins, metrics), whose jobs are handed to
//   their threads' queues before it is let go;
// - the I/O thread alone: curl handles and one TaskIo record per task, in one
//   state (waiting for another fetch of its key, transferring, between
//   attempts), with its staging file (its length is the resume offset);
// - ready_mutex_: staged bodies handed from the I/O thread to finalize;
// - each queue has its own mutex and condition variable.
#pragma once

#include <curl/curl.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <variant>
#include <vector>

#include "client_core.h"
#include "demandflight/backend/cache_dir.h"
#include "demandflight/backend/client.h"
#include "demandflight/backend/http_outcome.h"
#include "demandflight/backend/transfer_bounds.h"
#include "token_bucket.h"

namespace dfl::backend {

class Recording;    // client_record.h
class TeeObserver;  // client_record.h

// The core's view of the installed objects: the cache directory's.
class CacheObjects final : public ObjectStore {
 public:
  explicit CacheObjects(CacheDir& cache) : cache_(cache) {}
  class Held final : public ObjectHold {
   public:
    explicit Held(CacheDir::Hold hold) : hold_(std::move(hold)) {}
    void release() override { hold_.release(); }

   private:
    CacheDir::Hold hold_;
  };
  static std::unique_ptr<ObjectHold> wrap(std::optional<CacheDir::Hold> hold) {
    if (!hold) return nullptr;
    return std::make_unique<Held>(std::move(*hold));
  }
  std::unique_ptr<ObjectHold> hold(const ArtifactKey& key) override {
    return wrap(cache_.hold(key));
  }
  std::filesystem::path path(const ArtifactKey& key) const override {
    return cache_.object_path(key);
  }

 private:
  CacheDir& cache_;
};
class Client::Impl {
 public:
  explicit Impl(ClientOptions options);
  ~Impl();

  // --- Calls from users --------------------------------------------------------

  DemandHandle subscribe(const ArtifactRef& artifact, const DemandOptions& options,
                         Callback on_terminal);
  void cancel(DemandHandle h);
  void set_priority(DemandHandle h, Priority p);
  RecordStatus record_status() const;
  MeasuredPlatform measured_platform() const;
  RecordStatus end_recording();
  void end_owner(OwnerId owner, std::optional<OwnerGeneration> generation);
  std::filesystem::path path_of(const ArtifactKey& key) const { return cache_.object_path(key); }
  CacheDir::SyncCounts sync_counts() const { return cache_.sync_counts(); }

  SchedulerStats stats() const;
  double clock_s() const { return now(); }

  bool idle() const;
  std::vector<TransferSnapshot> transfers() const;
  std::optional<DemandProgress> progress(DemandHandle h) const;
  std::vector<DemandProgress> progress() const;
  OwnerProgress owner_progress(OwnerId owner) const;
  void set_throttle(const ThrottleConfig& config);
  void pause(std::optional<Priority> at_or_below);
  void resume();
  ThrottleConfig throttle() const;
  ClientMetrics metrics();

 private:
  double now() const;

  // --- Dispatch (mutex_ held) ------------------------------------------------------

  // The I/O thread's jobs.
  using IoJob = std::variant<StartJob, AbortJob, ForgetJob, DropPartialJob, LimitsJob>;

  // Which threads a dispatch gave work.
  struct Wakes {
    bool io = false, finalize = false, delivery = false;
  };
  Wakes dispatch_locked();
  void wake(Wakes wakes);
  void mark_io_thread();  // Called by the I/O thread, first.
  // The core's lock. dispatch() hands the core's jobs to their queues under
  // it; the threads that got work are woken once it is released, so that
  // none wakes only to wait for it.
  class CoreLock {
   public:
    explicit CoreLock(Impl& impl) : impl_(impl), lock_(impl.mutex_) {}
    ~CoreLock() {
      lock_.unlock();
      impl_.wake(wakes_);
    }
    CoreLock(const CoreLock&) = delete;
    CoreLock& operator=(const CoreLock&) = delete;
    void dispatch() {
      const Wakes w = impl_.dispatch_locked();
      wakes_.io = wakes_.io || w.io;
      wakes_.finalize = wakes_.finalize || w.finalize;
      wakes_.delivery = wakes_.delivery || w.delivery;
    }

   private:
    Impl& impl_;
    std::unique_lock<std::mutex> lock_;
    Wakes wakes_;
  };
  void push_io(IoJob job);

  // --- I/O thread ---------------------------------------------------------------

  struct Transfer {
    Impl* impl = nullptr;
    TransferId id;
    TaskId task;
    ArtifactKey key;
    std::optional<std::uint64_t> expected_size;  // Limits::exact.
    std::optional<std::uint64_t> size_cap;       // Limits::cap.
    std::uint64_t offset = 0;
    OriginId origin = 0;
    bool background = false;  // Its task is in the throttled class (I/O thread's view).
    bool paused = false;      // Its write callback paused it for want of tokens.
    bool held = false;        // Client::pause holds it: paused in libcurl until resume.
    CURL* easy = nullptr;
    curl_slist* headers = nullptr;
    std::string url;
    long status = 0;
    std::optional<std::string> content_range, retry_after, etag;
    bool judged = false;
    HeaderVerdict verdict;
    std::uint64_t appended = 0;
    double requested_s = 0;                 // now() as the request left.
    std::optional<double> first_byte_s;     // now() at its first body byte.
    bool too_large = false;
    std::optional<IoError> write_error;
    AttemptWatch watch;             // Its stall rule and deadline.
    std::optional<std::string> breach;  // Why the watch ended it.
    char error_detail[CURL_ERROR_SIZE] = {};  // CURLOPT_ERRORBUFFER.
  };
  struct TaskFiles {
    std::optional<CacheDir::Staging> staging;
    std::string etag;
    OriginId staged_from = 0;  // The origin whose response the staged bytes (and etag) are.
    // The key's lock across processes, held while this task transfers (and
    // then finalizes): released in backoff, so that no two processes wait
    // on each other's keys with their slots full.
    std::optional<CacheDir::KeyLock> lock;
  };
  // A task as the I/O thread sees it, from its first start to its body's
  // hand-off to finalize (or its end): one record, in one state.
  struct TaskIo {
    enum class State {
      // Its start waits for another fetch of the key (another process, or
      // another Client on the cache): for that fetch's object, or its lock.
      waiting,
      transferring,     // An attempt is in flight: `transfer`.
      between_attempts,  // Backoff: the staged bytes kept, the key's lock given up.
      held               // Client::pause: its start waits for the resume.
    };
    State state = State::between_attempts;
    StartTransfer start;  // The last start (waiting: the one to make).
    Limits limits;
    std::unique_ptr<Transfer> transfer;  // transferring.
    TaskFiles files;
  };
  // A body ready for finalize, or the news that another fetch installed it.
  struct Ready {
    std::optional<CacheDir::Staging> staging;
    std::optional<CacheDir::KeyLock> lock;
    bool installed_elsewhere = false;
  };

  void io_loop();

  // --- Throttling (ClientOptions::throttle) ------------------------------------

  void refresh_throttle();
  bool admit(const Transfer& t, std::size_t bytes);
  void resume_paused();
  int throttle_wait_ms() const;
  void publish_progress();
  void enforce_bounds();
  void handle(IoJob& job);
  void handle(StartJob& job) { start(job.start, job.limits, job.held); }
  void handle(LimitsJob& job);
  void handle(AbortJob& job);
  void handle(DropPartialJob& job) { partials_.erase(job.key); }
  void handle(ForgetJob& job);
  bool poll_waiting();
  // Calls f(Transfer&) for each attempt in flight.
  template <typename F>
  void for_each_transfer(F&& f) {
    for (auto& [task, io] : io_tasks_) {
      if (io.state == TaskIo::State::transferring) f(*io.transfer);
    }
  }
  void installed_elsewhere(const StartTransfer& c);
  void start(const StartTransfer& c, const Limits& limits, bool held = false);
  // start()'s steps (client_transfer.cpp): the staged bytes it resumes and
  // whether If-Range may vouch for them, its staging file, its record, its
  // libcurl options, and its hand-off to libcurl's loop.
  void find_partial(const StartTransfer& c, const Limits& limits, std::uint64_t size,
                    TaskFiles& files);
  bool vouch_for_staged(const StartTransfer& c, const Limits& limits, TaskFiles& files);
  bool begin_staging(const StartTransfer& c, std::uint64_t size, TaskFiles& files);
  std::unique_ptr<Transfer> new_transfer(const StartTransfer& c, const Limits& limits,
                                         const TaskFiles& files);
  bool set_options(const StartTransfer& c, Transfer& t, const TaskFiles& files, bool if_range);
  void launch(const StartTransfer& c, TaskIo& io, std::unique_ptr<Transfer> t);
  void hold(Transfer& t, bool held);  // Client::pause's hold on a transfer in flight, or its end.
  static bool add_header(Transfer& t, const std::string& line);
  void fail_to_start(const StartTransfer& c, Transfer& t, const std::string& why,
                     TransferStatus status = TransferStatus::retryable_error);
  void fail_all_in_flight(const std::string& why);
  static std::size_t on_header(char* data, std::size_t size, std::size_t n, void* user);
  void judge(Transfer& t);
  static std::size_t on_body(char* data, std::size_t size, std::size_t n, void* user);
  void finish(CURL* easy, CURLcode code);
  // When a transfer's first body byte came, and its rate (for the metrics).
  struct Timing {
    std::optional<double> first_byte_s, rate_Bps, connect_s;
  };
  // A transfer's end, to the core; `key` and `reason` say why a failed
  // attempt failed (for the observer).
  void report(TransferId id, TaskId task, TransferStatus status, std::uint64_t bytes,
              std::optional<double> retry_after_s = std::nullopt, const ArtifactKey* key = nullptr,
              const std::string& reason = {}, Timing timing = {}, const std::string& url = {});
  CURL* easy_handle();
  void release(Transfer& t);

  // --- Finalize pool -------------------------------------------------------------

  void finalize_loop();
  // A finalize's end, for the core.
  struct FinalizeEnd {
    std::uint64_t bytes = 0;
    FinalizeStatus status = FinalizeStatus::error;
    std::string reason;
  };
  // One job on its way through the pool: its end, and what it holds until
  // the core has heard it.
  struct Finalized {
    FinalizeJob job;
    FinalizeEnd end;
    Ready ready;  // Its staging file kept only while it is to be installed.
  };
  std::vector<Finalized> judge(std::vector<FinalizeJob>& jobs);
  void install_and_report(std::vector<Finalized>& batch);
  FinalizeEnd adopt_install(const FinalizeJob& job);

  // --- Delivery thread -------------------------------------------------------------

  void delivery_loop();

  ClientOptions options_;
  CacheDir cache_;

  CacheObjects objects_;
  // The one lock around the core; the I/O thread, the finalize pool and
  // callers take it for each event and hand the jobs on before letting go.
  mutable std::mutex mutex_;
  // The core's observer when recording: the caller's and the recording's.
  std::unique_ptr<TeeObserver> tee_;
  ClientCore core_;
  // The callers' calls as a trace (ClientOptions::record); under mutex_.
  std::unique_ptr<Recording> recording_;
  std::vector<Job> jobs_;  // dispatch_locked()'s.
  static constexpr double kNever = std::numeric_limits<double>::infinity();
  std::atomic<double> next_wakeup_s_{kNever};  // The core's next timer, as last dispatched.
  const std::chrono::steady_clock::time_point start_;

  CURLM* multi_ = nullptr;
  std::atomic<bool> stopping_{false};
  std::mutex io_mutex_;
  std::deque<IoJob> io_jobs_;
  std::atomic<std::size_t> io_jobs_pending_{0};  // Pushed and not yet handled (idle()).
  // The tasks with files or an attempt, by task id (I/O thread).
  std::unordered_map<std::uint64_t, TaskIo> io_tasks_;
  static constexpr int kWaitPollMs = 20;
  // Kept partials (OrphanDecision::keep_partial) by key, until the engine
  // drops them or a new task of the key resumes them. I/O thread.
  std::unordered_map<ArtifactKey, TaskFiles> partials_;
  std::thread io_thread_;
  bool io_again_ = false;            // I/O thread: its own events gave it work (wake).
  double next_progress_s_ = 0;       // I/O thread.
  double next_bounds_check_s_ = 0;   // I/O thread.
  static constexpr double kBoundsCheckS = 0.25;
  // Throttling (ClientOptions::throttle): the rule in the core, fed
  // every command; the I/O thread copies its answers when the generation
  // moves, into its buckets and its transfers' `background`.
  std::atomic<std::uint64_t> throttle_generation_{1};
  std::uint64_t throttle_seen_ = 0;        // I/O thread.
  bool background_limited_ = false;        // I/O thread.
  detail::TokenBucket background_bucket_;  // I/O thread.
  detail::TokenBucket overall_bucket_;     // I/O thread.
  std::size_t paused_ = 0;                 // I/O thread: transfers paused by a bucket.
  bool throttling_ = false;                // I/O thread: some cap is configured.
  std::vector<CURL*> idle_handles_;  // I/O thread.

  mutable std::mutex progress_mutex_;
  std::vector<TransferSnapshot> snapshot_;
  bool told_waiting_ = false;  // The core last heard of tasks waiting elsewhere (I/O thread).

  std::mutex ready_mutex_;
  std::unordered_map<std::uint64_t, Ready> ready_;

  std::mutex finalize_mutex_;
  std::condition_variable finalize_cv_;
  std::deque<FinalizeJob> finalize_jobs_;
  bool finalize_stop_ = false;
  std::vector<std::thread> finalize_threads_;
  // Batched installs handed to the finalize thread installing now (finalize_loop).
  std::mutex install_mutex_;
  std::vector<Finalized> installing_;
  bool install_running_ = false;

  std::mutex delivery_mutex_;
  std::condition_variable delivery_cv_;
  std::deque<DeliverJob> deliveries_;
  bool delivery_stop_ = false;
  std::thread delivery_thread_;
};

}  // namespace dfl::backend
