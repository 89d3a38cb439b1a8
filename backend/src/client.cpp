// The libcurl runtime for the scheduler core. See client.h for the threads.
//
// Ownership, so that no data needs more than one lock:
// - mutex_: the ClientCore (client_core.h: the Scheduler, the demands and
//   tasks, expectations, verdicts, pins, metrics), whose jobs are handed to
//   their threads' queues before it is let go;
// - the I/O thread alone: curl handles, transfers in flight, and each task's
//   staging file between attempts (its length is the resume offset);
// - ready_mutex_: staged bodies handed from the I/O thread to finalize;
// - each queue has its own mutex and condition variable.
#include "demandflight/backend/client.h"

#include <curl/curl.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <unordered_map>
#include <variant>
#include <vector>

#include "demandflight/backend/cache_dir.h"
#include "demandflight/backend/http_outcome.h"
#include "client_core.h"
#include "curl_seam.h"
#include "token_bucket.h"

namespace dfl::backend {
namespace {

void global_curl_init() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
      throw std::runtime_error("curl_global_init failed");
    }
  });
}

bool starts_with_nocase(std::string_view line, std::string_view prefix) {
  if (line.size() < prefix.size()) return false;
  for (std::size_t i = 0; i < prefix.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(line[i])) != prefix[i]) return false;
  }
  return true;
}

std::string header_value(std::string_view line, std::size_t name_length) {
  std::string_view v = line.substr(name_length);
  while (!v.empty() && (v.front() == ' ' || v.front() == '\t'))
    v.remove_prefix(1);
  while (!v.empty() && (v.back() == '\r' || v.back() == '\n' || v.back() == ' '))
    v.remove_suffix(1);
  return std::string(v);
}

// libcurl before 8.0 fails every request that reuses an HTTP/2 connection
// made by prior knowledge ("no HTTP response"; curl issue 10634, fixed in
// 8.0.0): refused at once rather than failing every second request.
void check_prior_knowledge_works() {
  const curl_version_info_data* info = curl_version_info(CURLVERSION_NOW);
  if (info->version_num < 0x080000) {
    throw std::invalid_argument(
        std::string("HTTP/2 by prior knowledge needs libcurl 8.0 or later (this is ") +
        info->version +
        ", which fails every request that reuses such a connection); use https:// with "
        "negotiation, or HTTP/1.1");
  }
  if ((info->features & CURL_VERSION_HTTP2) == 0) {
    throw std::invalid_argument("HTTP/2 by prior knowledge: this libcurl has no HTTP/2");
  }
}

}  // namespace

int rfc9218_urgency(Priority priority) {
  return static_cast<int>(std::clamp<std::int64_t>(3 - std::int64_t{priority}, 0, 7));
}

int h2_stream_weight(Priority priority) {
  return 256 >> rfc9218_urgency(priority);
}

namespace curl_seam {
Calls& calls() {
  static Calls in_use;
  return in_use;
}
}  // namespace curl_seam

std::string percent_encode_path(std::string_view value, bool keep_slash) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(value.size());
  for (const char ch : value) {
    const auto c = static_cast<unsigned char>(ch);
    const bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    const bool unreserved = alnum || c == '-' || c == '.' || c == '_' || c == '~';
    // pchar's sub-delimiters, ':' and '@' mean nothing special in a path segment.
    const bool pchar = std::string_view("!$&'()*+,;=:@").find(ch) != std::string_view::npos;
    if (unreserved || pchar || (keep_slash && c == '/')) {
      out += ch;
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

UrlResolver url_template(std::string pattern) {
  return [pattern = std::move(pattern)](const ArtifactKey& key, OriginId) {
    std::string url = pattern;
    auto replace = [&url](std::string_view name, const std::string& value) {
      for (std::size_t at = url.find(name); at != std::string::npos;
           at = url.find(name, at + value.size())) {
        url.replace(at, name.size(), value);
      }
    };
    replace("{resource}", percent_encode_path(key.resource, /*keep_slash=*/true));
    replace("{revision}", percent_encode_path(key.revision, false));
    replace("{target}", percent_encode_path(key.target, false));
    replace("{generation}", std::to_string(key.generation));
    return url;
  };
}

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
  explicit Impl(ClientOptions options)
      : options_(std::move(options)),
        cache_(options_.cache_dir, CacheOptions{.write_behind = true,
                                                .sync = options_.install_sync,
                                                .drop_behind_bytes = options_.drop_behind_bytes,
                                                .direct_writes = options_.direct_writes,
                                                .capacity_bytes = options_.scheduler.cache_bytes}),
        objects_(cache_),
        core_(ClientCore::Options{options_.scheduler, options_.orphan_policy,
                                  options_.pin_on_success, options_.observer, options_.throttle},
              objects_),
        start_(std::chrono::steady_clock::now()) {
    if (!options_.resolver) throw std::invalid_argument("ClientOptions.resolver is required");
    check_bounds(options_.bounds, "ClientOptions.bounds");
    global_curl_init();
    if (options_.http == HttpVersion::h2_prior_knowledge) check_prior_knowledge_works();
    multi_ = curl_multi_init();
    if (multi_ == nullptr) throw std::runtime_error("curl_multi_init failed");
    // HTTP/1.1: a connection per slot. HTTP/2: the slots are streams, spread
    // over h2_connections_per_origin connections (libcurl opens another one
    // when a connection has its maximum of streams).
    const unsigned connections = std::max(1u, options_.h2_connections_per_origin);
    curl_multi_setopt(multi_, CURLMOPT_PIPELINING, CURLPIPE_MULTIPLEX);
    curl_multi_setopt(multi_, CURLMOPT_MAX_HOST_CONNECTIONS,
                      static_cast<long>(options_.scheduler.max_per_origin));
    curl_multi_setopt(multi_, CURLMOPT_MAX_CONCURRENT_STREAMS,
                      static_cast<long>(std::max(1u, (options_.scheduler.max_per_origin +
                                                      connections - 1) / connections)));
    io_thread_ = std::thread([this] { io_loop(); });
    unsigned threads = options_.finalize_threads;
    if (threads == 0) {
      threads = options_.install_sync == SyncMode::per_file
                    ? 16
                    : std::clamp(std::thread::hardware_concurrency(), 2u, 8u);
    }
    for (unsigned i = 0; i < threads; ++i) {
      finalize_threads_.emplace_back([this] { finalize_loop(); });
    }
    delivery_thread_ = std::thread([this] { delivery_loop(); });
  }

  ~Impl() {
    stopping_ = true;
    curl_multi_wakeup(multi_);
    io_thread_.join();
    {
      std::lock_guard lock(finalize_mutex_);
      finalize_stop_ = true;
    }
    finalize_cv_.notify_all();
    for (auto& t : finalize_threads_)
      t.join();
    cache_.drain();  // Installs handed to the committer report to the engine first.
    // Demands still waiting are cancelled: each gets its one terminal.
    {
      std::lock_guard lock(mutex_);
      core_.cancel_all(now());
      dispatch_locked();
    }
    {
      std::lock_guard lock(delivery_mutex_);
      delivery_stop_ = true;
    }
    delivery_cv_.notify_all();
    delivery_thread_.join();
    curl_multi_cleanup(multi_);
  }

  // --- Calls from users --------------------------------------------------------

  DemandHandle subscribe(const ArtifactRef& artifact, const DemandOptions& options,
                         Callback on_terminal) {
    const Expect expect = expect_of(artifact);
    // The disk decides a cache hit: another process may have installed the
    // key, or evicted it, since this one last looked. Read before the lock
    // (it may hash an object), and held at once when pinning, so that no
    // eviction takes it before the demand's result does.
    std::optional<ObjectFacts> on_disk;
    if (auto info = cache_.stat_object(artifact.key, expect.sha256.has_value()))
      on_disk = ObjectFacts{info->size, std::move(info->sha256)};
    std::unique_ptr<ObjectHold> held;
    if (on_disk && options_.pin_on_success) held = objects_.hold(artifact.key);
    std::lock_guard lock(mutex_);
    const DemandHandle h = core_.subscribe(now(), artifact, options, std::move(on_terminal),
                                           std::move(on_disk), std::move(held));
    dispatch_locked();
    return h;
  }

  void cancel(DemandHandle h) {
    std::lock_guard lock(mutex_);
    core_.cancel(now(), h);
    dispatch_locked();
  }

  void set_priority(DemandHandle h, Priority p) {
    std::lock_guard lock(mutex_);
    core_.set_priority(now(), h, p);
    dispatch_locked();
  }

  void end_owner(OwnerId owner, std::optional<OwnerGeneration> generation) {
    std::lock_guard lock(mutex_);
    core_.end_owner(now(), owner, generation);
    dispatch_locked();
  }

  std::filesystem::path path_of(const ArtifactKey& key) const { return cache_.object_path(key); }
  CacheDir::SyncCounts sync_counts() const { return cache_.sync_counts(); }

  SchedulerStats stats() const {
    std::lock_guard lock(mutex_);
    return core_.stats();
  }

  double clock_s() const { return now(); }

  bool idle() const {
    std::lock_guard lock(mutex_);
    // The core's work, and what it handed the I/O thread: an abort's bytes
    // and time to first byte reach the metrics when the I/O thread handles it.
    return core_.no_work() && io_jobs_pending_ == 0;
  }

  std::vector<TransferSnapshot> transfers() const {
    std::lock_guard lock(progress_mutex_);
    return snapshot_;
  }

  void set_throttle(const ThrottleConfig& config) {
    std::lock_guard lock(mutex_);
    if (core_.set_throttle(config)) dispatch_locked();
  }
  ThrottleConfig throttle() const {
    std::lock_guard lock(mutex_);
    return core_.throttle_rule().config();
  }

  ClientMetrics metrics() {
    ClientMetrics out;
    {
      std::lock_guard lock(mutex_);
      out = core_.metrics();
    }
    out.cache_bytes = cache_.installed_bytes();
    return out;
  }

 private:
  double now() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }

  // --- Dispatch (mutex_ held) ------------------------------------------------------

  // The I/O thread's jobs.
  using IoJob = std::variant<StartJob, AbortJob, ForgetJob, DropPartialJob, LimitsJob>;
  struct Delivery {
    Callback callback;
    DemandResult result;
  };

  // The core's jobs to their threads, in its order: each queue sees them as
  // the engine emitted them.
  void dispatch_locked() {
    core_.take_jobs(jobs_);
    bool io = false, finalize = false, delivery = false;
    for (Job& job : jobs_) {
      if (auto* start = std::get_if<StartJob>(&job)) {
        push_io(std::move(*start));
        io = true;
      } else if (auto* abort = std::get_if<AbortJob>(&job)) {
        push_io(*abort);
        io = true;
      } else if (auto* forget = std::get_if<ForgetJob>(&job)) {
        // Housekeeping: no need to wake the I/O thread for it (it wakes at
        // least every 100 ms, and at once for the next start or abort).
        push_io(*forget);
      } else if (auto* drop = std::get_if<DropPartialJob>(&job)) {
        push_io(std::move(*drop));
      } else if (auto* limits = std::get_if<LimitsJob>(&job)) {
        push_io(*limits);
        io = true;
      } else if (auto* f = std::get_if<FinalizeJob>(&job)) {
        std::lock_guard lock(finalize_mutex_);
        finalize_jobs_.push_back(std::move(*f));
        finalize = true;
      } else if (auto* d = std::get_if<DeliverJob>(&job)) {
        std::lock_guard lock(delivery_mutex_);
        deliveries_.push_back(Delivery{std::move(d->callback), std::move(d->result)});
        delivery = true;
      } else if (auto* ev = std::get_if<EvictJob>(&job)) {
        // Now, under the lock, so that no later install of the key can be undone by it.
        cache_.remove(ev->key);
      } else if (std::holds_alternative<ThrottleJob>(job)) {
        throttle_generation_.fetch_add(1, std::memory_order_release);
        io = true;
      }
    }
    jobs_.clear();
    if (io) curl_multi_wakeup(multi_);
    if (finalize) finalize_cv_.notify_one();
    if (delivery) delivery_cv_.notify_one();
  }

  void push_io(IoJob job) {
    std::lock_guard lock(io_mutex_);
    io_jobs_.push_back(std::move(job));
    ++io_jobs_pending_;
  }

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
  // A start whose key another fetch (another process, or another Client on
  // the cache) holds: it waits for that fetch's object, or for its lock.
  struct Waiting {
    StartTransfer start;
    Limits limits;
  };
  // A body ready for finalize, or the news that another fetch installed it.
  struct Ready {
    std::optional<CacheDir::Staging> staging;
    std::optional<CacheDir::KeyLock> lock;
    bool installed_elsewhere = false;
  };

  void io_loop() {
    while (!stopping_) {
      std::deque<IoJob> jobs;
      {
        std::lock_guard lock(io_mutex_);
        jobs.swap(io_jobs_);
      }
      for (IoJob& job : jobs) {
        handle(job);
        --io_jobs_pending_;
      }
      poll_waiting();
      refresh_throttle();
      resume_paused();
      int running = 0;
      if (const CURLMcode performed = curl_seam::calls().multi_perform(multi_, &running);
          performed != CURLM_OK) {
        fail_all_in_flight(std::string("libcurl's transfer loop failed (") +
                           curl_multi_strerror(performed) + ")");
      }
      int queued = 0;
      while (CURLMsg* msg = curl_multi_info_read(multi_, &queued)) {
        if (msg->msg == CURLMSG_DONE) finish(msg->easy_handle, msg->data.result);
      }
      publish_progress();
      enforce_bounds();
      int timeout_ms = 100;
      {
        std::lock_guard lock(mutex_);
        if (auto wake = core_.next_wakeup_s()) {
          const double wait_s = *wake - now();
          if (wait_s <= 0) {
            core_.on_timer(now());
            dispatch_locked();
            timeout_ms = 0;
          } else {
            timeout_ms = std::min(timeout_ms, static_cast<int>(wait_s * 1000) + 1);
          }
        }
      }
      // Another process's install is seen by looking: often enough not to add to its latency.
      if (!waiting_.empty()) timeout_ms = std::min(timeout_ms, kWaitPollMs);
      // A paused transfer goes on when its class has tokens again.
      if (paused_ > 0) timeout_ms = std::min(timeout_ms, throttle_wait_ms());
      if (timeout_ms > 0 && curl_multi_poll(multi_, nullptr, 0, timeout_ms, nullptr) != CURLM_OK) {
        // No wait for the sockets (libcurl out of memory): a short sleep, so
        // that the loop neither spins nor stalls the transfers for long.
        std::this_thread::sleep_for(std::chrono::milliseconds(std::min(timeout_ms, 10)));
      }
    }
    for (auto& [id, transfer] : transfers_)
      release(*transfer);
    transfers_.clear();
    waiting_.clear();
    files_.clear();
    partials_.clear();
    for (CURL* e : idle_handles_)
      curl_easy_cleanup(e);
    idle_handles_.clear();
    std::lock_guard lock(progress_mutex_);
    snapshot_.clear();
  }

  // --- Throttling (ClientOptions::throttle) ------------------------------------

  // The rule's answers, copied when they may have changed (a command moved a
  // task across the level, a demand above it came or went, set_throttle, a
  // new transfer): each transfer's class and the buckets' rates.
  void refresh_throttle() {
    const std::uint64_t generation = throttle_generation_.load(std::memory_order_acquire);
    if (generation == throttle_seen_) return;
    throttle_seen_ = generation;
    ThrottleConfig config;
    {
      std::lock_guard lock(mutex_);
      const ThrottleRule& rule = core_.throttle_rule();
      config = rule.config();
      background_limited_ = rule.background_limited();
      for (auto& [id, t] : transfers_)
        t->background = rule.is_background(t->task);
    }
    throttling_ = config.background_at_or_below.has_value() || config.overall_Bps > 0;
    const double t = now();
    background_bucket_.set_rate(background_limited_ ? config.background_Bps : 0, t);
    overall_bucket_.set_rate(config.overall_Bps, t);
  }

  // May this piece of `t`'s body be taken now? Takes its bytes from its buckets.
  bool admit(const Transfer& t, std::size_t bytes) {
    if (!throttling_) return true;
    const double at = now();
    const bool in_background = t.background && background_limited_;
    if (in_background) {
      background_bucket_.refill(at);
      if (!background_bucket_.ready()) return false;
    }
    overall_bucket_.refill(at);
    if (!overall_bucket_.ready()) return false;
    if (in_background) background_bucket_.take(static_cast<double>(bytes));
    overall_bucket_.take(static_cast<double>(bytes));
    return true;
  }

  // Unpauses the transfers whose buckets hold tokens again (libcurl may hand
  // over their kept piece at once, which admit() judges as any other).
  void resume_paused() {
    if (paused_ == 0) return;
    const double at = now();
    background_bucket_.refill(at);
    overall_bucket_.refill(at);
    for (auto& [id, t] : transfers_) {
      if (!t->paused) continue;
      const bool in_background = t->background && background_limited_;
      if ((in_background && !background_bucket_.ready()) || !overall_bucket_.ready()) continue;
      t->paused = false;
      --paused_;
      t->watch.release(at);
      curl_easy_pause(t->easy, CURLPAUSE_CONT);
    }
  }

  int throttle_wait_ms() const {
    const double wait_s = std::max(background_limited_ ? background_bucket_.wait_s() : 0.0,
                                   overall_bucket_.wait_s());
    return std::max(1, static_cast<int>(wait_s * 1000) + 1);
  }

  // Every progress interval: the engine learns what each transfer received
  // (orphan policies weigh it) and displays get a fresh snapshot.
  void publish_progress() {
    const double t = now();
    if (t < next_progress_s_) return;
    next_progress_s_ = t + options_.progress_interval_s;
    std::vector<TransferSnapshot> snapshot;
    snapshot.reserve(transfers_.size());
    for (const auto& [id, transfer] : transfers_) {
      snapshot.push_back(TransferSnapshot{transfer->id, transfer->task, transfer->key,
                                          transfer->offset, transfer->appended,
                                          transfer->expected_size.value_or(0)});
    }
    std::sort(snapshot.begin(), snapshot.end(),
              [](const auto& a, const auto& b) { return a.transfer.value < b.transfer.value; });
    if (!snapshot.empty()) {
      std::lock_guard lock(mutex_);
      core_.progress(now(), snapshot);  // Read under the lock: time never goes backwards.
      dispatch_locked();
    }
    std::lock_guard lock(progress_mutex_);
    snapshot_ = std::move(snapshot);
  }

  // Now and then: ends the attempts that broke their bounds
  // (ClientOptions::bounds): a stall or a deadline, a retryable failure.
  void enforce_bounds() {
    const double t = now();
    if (t < next_bounds_check_s_) return;
    next_bounds_check_s_ = t + kBoundsCheckS;
    std::vector<CURL*> ended;
    for (auto& [id, transfer] : transfers_) {
      if (auto breach = transfer->watch.check(t, transfer->appended)) {
        transfer->breach = describe(*breach, transfer->url);
        ended.push_back(transfer->easy);
      }
    }
    for (CURL* e : ended)
      finish(e, CURLE_OPERATION_TIMEDOUT);
  }

  void handle(IoJob& job) {
    std::visit([this](auto& j) { handle(j); }, job);
  }
  void handle(StartJob& job) { start(job.start, job.limits); }
  void handle(LimitsJob& job) {
    for (auto& [id, transfer] : transfers_) {
      if (transfer->task.value != job.task.value) continue;
      transfer->expected_size = job.limits.exact;
      transfer->size_cap = job.limits.cap;
    }
    for (Waiting& w : waiting_) {
      if (w.start.task.value == job.task.value) w.limits = job.limits;
    }
  }
  void handle(AbortJob& job) {
    if (std::erase_if(waiting_, [&](const Waiting& w) {
          return w.start.transfer.value == job.transfer.value;
        }) > 0) {
      std::lock_guard lock(mutex_);
      core_.transfer_aborted(now(), job.task, job.transfer, 0, -1.0);
    }
    ArtifactKey key;
    if (auto it = transfers_.find(job.transfer.value); it != transfers_.end()) {
      const std::uint64_t received = it->second->appended;
      // Time to first byte, or -1 if no body byte came.
      const double first_byte_s = it->second->first_byte_s.has_value()
                                      ? *it->second->first_byte_s - it->second->requested_s
                                      : -1.0;
      if (job.keep_partial) key = it->second->key;
      release(*it->second);
      transfers_.erase(it);
      std::lock_guard lock(mutex_);
      core_.transfer_aborted(now(), job.task, job.transfer, received, first_byte_s);
    }
    if (job.keep_partial && !key.resource.empty()) {
      // Kept for the key: the next task of it resumes after these bytes.
      auto node = files_.extract(job.task.value);
      if (node && node.mapped().staging && node.mapped().staging->bytes() > 0) {
        node.mapped().lock.reset();  // Others may fetch the key meanwhile.
        partials_.insert_or_assign(key, std::move(node.mapped()));
      }
    }
    files_.erase(job.task.value);  // Aborted: its bytes are not kept.
  }
  void handle(DropPartialJob& job) { partials_.erase(job.key); }
  void handle(ForgetJob& job) {
    files_.erase(job.task.value);
    std::lock_guard lock(ready_mutex_);
    ready_.erase(job.task.value);
  }

  // Each waiting start looks for the object another fetch is installing,
  // then tries the key's lock: the fetch it waited for failed, or died.
  void poll_waiting() {
    if (waiting_.empty()) return;
    std::vector<Waiting> waiting;
    waiting.swap(waiting_);
    for (Waiting& w : waiting) {
      if (cache_.stat_object(*w.start.key, false)) {
        installed_elsewhere(w.start);
      } else if (auto lock = cache_.try_lock_key(*w.start.key)) {
        files_[w.start.task.value].lock = std::move(*lock);
        start(w.start, w.limits);
      } else {
        waiting_.push_back(std::move(w));
      }
    }
  }

  // The key is installed (by another fetch): no bytes to move; finalize
  // checks the object and holds it.
  void installed_elsewhere(const StartTransfer& c) {
    auto node = files_.extract(c.task.value);  // Whatever it staged is not needed.
    {
      std::lock_guard lock(ready_mutex_);
      Ready ready;
      ready.installed_elsewhere = true;
      ready_.insert_or_assign(c.task.value, std::move(ready));
    }
    report(c.transfer, c.task, TransferStatus::ok, 0);
  }

  void start(const StartTransfer& c, const Limits& limits) {
    TaskFiles& files = files_[c.task.value];
    if (!files.lock) {
      auto lock = cache_.try_lock_key(*c.key);
      if (!lock) {  // Another fetch of the key, in this process or another.
        waiting_.push_back(Waiting{c, limits});
        return;
      }
      files.lock = std::move(*lock);
    }
    // Installed meanwhile, by the fetch this one waited for or by another
    // process since the subscribe looked.
    if (cache_.stat_object(*c.key, false)) {
      installed_elsewhere(c);
      return;
    }
    const std::uint64_t size = limits.exact.value_or(0);
    if (!files.staging) {
      // A first attempt with an offset resumes the key's kept partial.
      if (auto node = partials_.extract(c.key)) {
        // A partial that holds the whole body is not resumed: a Range past
        // the end would only earn a 416. Started over instead (rare: the
        // last bytes arrived in the instant of the abort).
        const bool whole = size > 0 && node.mapped().staging->bytes() >= size;
        if (c.attempt == 1 && c.resume_offset_bytes > 0 && !whole) {
          files.staging = std::move(node.mapped().staging);
          files.etag = std::move(node.mapped().etag);
          files.staged_from = node.mapped().staged_from;
        }
      }
    }
    if (!files.staging && limits.verified && c.attempt == 1) {
      // What a fetch that died left: only where the whole body's digest is
      // checked, since nothing else vouches for those bytes.
      if (auto adopted = cache_.adopt_partial(*c.key, size)) {
        if (size == 0 || adopted->bytes() < size) {
          files.staging = std::move(adopted);
          files.staged_from = c.origin;  // Its origin is unknown; the digest vouches.
        }
      }
    }
    // Bytes staged from another origin (a mirror: docs/backend.md, *Mirrors*)
    // are resumed only where something vouches for them: the digest of the
    // whole body, which is checked, or the same ETag (If-Range, below).
    bool if_range = true;
    if (files.staging && files.staging->bytes() > 0 && files.staged_from != c.origin) {
      if (limits.verified && limits.exact) {
        if_range = false;  // Another server's ETag would only restart it.
      } else if (files.etag.empty()) {
        files.staging.reset();  // Nothing to check them against: start over.
        files.etag.clear();
      }
    }
    if (!files.staging) {
      auto begun = cache_.begin(c.key, size);
      if (auto* error = std::get_if<IoError>(&begun)) {
        const std::string reason = error->message;
        files_.erase(c.task.value);
        report(c.transfer, c.task, TransferStatus::permanent_error, 0, std::nullopt, &*c.key,
               reason);
        return;
      }
      files.staging.emplace(std::move(std::get<CacheDir::Staging>(begun)));
    }
    auto t = std::make_unique<Transfer>();
    t->impl = this;
    t->id = c.transfer;
    t->task = c.task;
    t->key = c.key;
    t->expected_size = limits.exact;
    t->size_cap = limits.cap;
    // The staged bytes are the truth: resume after exactly those.
    t->offset = files.staging->bytes();
    t->origin = c.origin;
    t->url = options_.resolver(c.key, c.origin);
    t->easy = easy_handle();
    if (t->easy == nullptr) {
      fail_to_start(c, *t, "libcurl could not make a transfer handle (out of memory)");
      return;
    }
    CURL* e = t->easy;
    curl_easy_setopt(e, CURLOPT_URL, t->url.c_str());
    curl_easy_setopt(e, CURLOPT_PRIVATE, t.get());
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, &Impl::on_body);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, t.get());
    curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, &Impl::on_header);
    curl_easy_setopt(e, CURLOPT_HEADERDATA, t.get());
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    // libcurl's defaults, stated: an artifact is only as trustworthy as its origin.
    curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, 1L);
    curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, 2L);
    curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(e, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(e, CURLOPT_MAXREDIRS, 5L);
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, options_.connect_timeout_ms);
    // Slow and stalled servers: enforce_bounds(), not libcurl's low-speed
    // limit, which cannot tell our own throttle's pauses from the server's.
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, t->error_detail);
    // Large bodies arrive in fewer, larger pieces with a large buffer; a small
    // body does not need one (libcurl allocates it per handle).
    curl_easy_setopt(e, CURLOPT_BUFFERSIZE,
                     t->expected_size && *t->expected_size < 256 * 1024 ? 64L * 1024 : 256L * 1024);
    if (!options_.ca_file.empty()) curl_easy_setopt(e, CURLOPT_CAINFO, options_.ca_file.c_str());
    switch (options_.http) {
      case HttpVersion::negotiate:
        curl_easy_setopt(e, CURLOPT_HTTP_VERSION, static_cast<long>(CURL_HTTP_VERSION_2TLS));
        break;
      case HttpVersion::http1_1:
        curl_easy_setopt(e, CURLOPT_HTTP_VERSION, static_cast<long>(CURL_HTTP_VERSION_1_1));
        break;
      case HttpVersion::h2_prior_knowledge:
        curl_easy_setopt(e, CURLOPT_HTTP_VERSION,
                         static_cast<long>(CURL_HTTP_VERSION_2_PRIOR_KNOWLEDGE));
        break;
    }
    // Wait for a connection that may multiplex rather than open another: the
    // streams of an origin share it (over HTTP/1.1 libcurl opens more).
    // Only where HTTP/2 may come: over http:// (HTTP/1.1 unless by prior
    // knowledge) a waiting request would queue behind a busy connection
    // instead of opening its own (ThrottleTest saw a prefetch wait for a held
    // transfer to end).
    const bool h2_possible =
        options_.http == HttpVersion::h2_prior_knowledge ||
        (options_.http == HttpVersion::negotiate && t->url.rfind("https://", 0) == 0);
    if (h2_possible) curl_easy_setopt(e, CURLOPT_PIPEWAIT, 1L);
    // The task's effective priority as the engine started it (an orphan's is
    // the lowest), as an RFC 9218 header and, on HTTP/2, a stream weight.
    const Priority priority = c.priority.value_or(std::numeric_limits<Priority>::min());
    bool headers_made =
        add_header(*t, "Priority: u=" + std::to_string(rfc9218_urgency(priority)));
    curl_easy_setopt(e, CURLOPT_STREAM_WEIGHT, static_cast<long>(h2_stream_weight(priority)));
    if (t->offset > 0) {
      const std::string range = std::to_string(t->offset) + "-";
      curl_easy_setopt(e, CURLOPT_RANGE, range.c_str());  // libcurl copies the string.
      if (!files.etag.empty() && if_range) {
        headers_made = headers_made && add_header(*t, "If-Range: " + files.etag);
      }
    }
    if (!headers_made) {
      fail_to_start(c, *t, "libcurl could not make the request's headers (out of memory)");
      return;
    }
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, t->headers);
    t->requested_s = now();
    t->watch = AttemptWatch(options_.bounds, t->requested_s);
    if (t->expected_size)
      t->watch.set_to_move(*t->expected_size - std::min(*t->expected_size, t->offset));
    if (throttling_) throttle_seen_ = 0;  // Its class is read before its first byte.
    if (const CURLMcode added = curl_seam::calls().multi_add_handle(multi_, e);
        added != CURLM_OK) {
      fail_to_start(c, *t,
                    std::string("libcurl refused the transfer (") + curl_multi_strerror(added) + ")");
      return;
    }
    transfers_.emplace(c.transfer.value, std::move(t));
  }

  // Appends a request header; false (the list as it was) when libcurl could not.
  static bool add_header(Transfer& t, const std::string& line) {
    curl_slist* longer = curl_slist_append(t.headers, line.c_str());
    if (longer == nullptr) return false;
    t.headers = longer;
    return true;
  }

  // A transfer that libcurl could not start: a retryable failure of this
  // attempt (a later one may find memory), its staged bytes kept for it, the
  // key's lock given up meanwhile as in any backoff.
  void fail_to_start(const StartTransfer& c, Transfer& t, const std::string& why) {
    const std::string url = t.url;
    if (t.easy != nullptr) release(t);  // Frees the headers too (none without a handle).
    if (auto it = files_.find(c.task.value); it != files_.end()) it->second.lock.reset();
    report(c.transfer, c.task, TransferStatus::retryable_error, 0, std::nullopt, &*c.key,
           why + " for " + url + " (" + c.key->resource + ")", {}, url);
  }

  // libcurl's loop failed as a whole: every transfer in it ends as a
  // retryable failure, with the bytes it staged kept for its next attempt.
  void fail_all_in_flight(const std::string& why) {
    std::vector<std::uint64_t> ids;
    for (const auto& [id, transfer] : transfers_)
      ids.push_back(id);
    for (std::uint64_t id : ids) {
      auto node = transfers_.extract(id);
      Transfer& t = *node.mapped();
      if (auto it = files_.find(t.task.value); it != files_.end()) it->second.lock.reset();
      release(t);  // Its handle and headers; the record lives on in `node`.
      report(t.id, t.task, TransferStatus::retryable_error, t.appended, std::nullopt, &t.key,
             why + " during " + t.url, {}, t.url);
    }
  }

  static std::size_t on_header(char* data, std::size_t size, std::size_t n, void* user) {
    auto* t = static_cast<Transfer*>(user);
    const std::string_view line(data, size * n);
    if (line.rfind("HTTP/", 0) == 0) {
      // A new response (after a redirect or a 100): forget the previous one's headers.
      t->content_range.reset();
      t->retry_after.reset();
      t->etag.reset();
    } else if (starts_with_nocase(line, "content-range:")) {
      t->content_range = header_value(line, 14);
    } else if (starts_with_nocase(line, "retry-after:")) {
      t->retry_after = header_value(line, 12);
    } else if (starts_with_nocase(line, "etag:")) {
      t->etag = header_value(line, 5);
    }
    return size * n;
  }

  // Judges the response once, before the first byte of its body is kept.
  void judge(Transfer& t) {
    if (t.judged) return;
    t.judged = true;
    curl_easy_getinfo(t.easy, CURLINFO_RESPONSE_CODE, &t.status);
    HttpExchange exchange;
    exchange.resume_offset_bytes = t.offset;
    exchange.expected_size_bytes = t.expected_size;
    exchange.http_status = t.status;
    exchange.content_range = t.content_range;
    exchange.retry_after = t.retry_after;
    t.verdict = judge_headers(exchange);
    if (!t.expected_size && t.verdict.plan != BodyPlan::reject) {
      curl_off_t length = -1;
      if (curl_easy_getinfo(t.easy, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &length) == CURLE_OK &&
          length >= 0) {
        t.watch.set_to_move(static_cast<std::uint64_t>(length));
      }
    } else if (t.expected_size && t.verdict.plan == BodyPlan::restart) {
      t.watch.set_to_move(*t.expected_size);  // The whole body after all.
    }
    TaskFiles& files = files_[t.task.value];
    if (t.verdict.plan == BodyPlan::restart && files.staging && files.staging->bytes() > 0) {
      // The whole body is coming (the server ignored Range, or If-Range no
      // longer matched): what was staged is worthless now.
      auto begun = cache_.begin(t.key, t.expected_size.value_or(0));
      if (auto* error = std::get_if<IoError>(&begun)) {
        t.write_error = *error;
      } else {
        files.staging.emplace(std::move(std::get<CacheDir::Staging>(begun)));
      }
      t.offset = 0;
    }
    if (t.verdict.plan != BodyPlan::reject) {
      if (t.etag) {
        files.etag = *t.etag;
      } else if (files.staged_from != t.origin) {
        files.etag.clear();  // Another server's validator says nothing of these bytes.
      }
      files.staged_from = t.origin;
    }
  }

  static std::size_t on_body(char* data, std::size_t size, std::size_t n, void* user) {
    auto* t = static_cast<Transfer*>(user);
    Impl& self = *t->impl;
    self.judge(*t);
    if (t->verdict.plan == BodyPlan::reject || t->write_error) return 0;  // Nothing is kept.
    const std::size_t bytes = size * n;
    if (!self.admit(*t, bytes)) {
      // libcurl keeps the piece and hands it over again once unpaused.
      t->paused = true;
      ++self.paused_;
      t->watch.hold(self.now());  // Held back by us: no stall.
      return CURL_WRITEFUNC_PAUSE;
    }
    TaskFiles& files = self.files_[t->task.value];
    if (!t->first_byte_s && bytes > 0) t->first_byte_s = self.now();
    const std::optional<std::uint64_t> limit = t->expected_size ? t->expected_size : t->size_cap;
    if (limit && files.staging->bytes() + bytes > *limit) {
      t->too_large = true;
      return 0;
    }
    if (auto error = files.staging->write(data, bytes)) {
      t->write_error = std::move(error);
      return 0;
    }
    t->appended += bytes;
    return bytes;
  }

  void finish(CURL* easy, CURLcode code) {
    Transfer* t = nullptr;
    curl_easy_getinfo(easy, CURLINFO_PRIVATE, &t);
    judge(*t);  // A response without a body (404, 503) is judged here.
    TransferStatus status = TransferStatus::ok;
    std::string reason;
    // The transport's words, with where it happened.
    auto transport = [&] {
      long os_errno = 0;
      curl_easy_getinfo(easy, CURLINFO_OS_ERRNO, &os_errno);
      const std::string what = describe_transport_error(code, t->error_detail, os_errno);
      return t->appended > 0 ? what + " after " + human_bytes(t->appended) + " of " + t->url
                             : what + " from " + t->url;
    };
    if (t->breach) {
      status = TransferStatus::retryable_error;  // A slower server, or a later attempt, may do.
      reason = *t->breach;
    } else if (t->verdict.plan == BodyPlan::reject && t->status == 0 && code != CURLE_OK) {
      // No response at all: the transport says why (refused, timed out, TLS, ...).
      status = judge_transport_error(code);
      reason = transport();
    } else if (t->verdict.plan == BodyPlan::reject) {
      status = t->verdict.status;
      reason = t->verdict.reason + " from " + t->url;
    } else if (t->too_large) {
      status = TransferStatus::permanent_error;
      reason = "body larger than the expected " +
               std::to_string(t->expected_size.value_or(t->size_cap.value_or(0))) +
               " bytes from " + t->url;
    } else if (t->write_error) {
      // A full disk may have room later (other downloads end, another process
      // evicts): retried from byte 0, its staged bytes given back at once.
      status = t->write_error->no_space ? TransferStatus::retryable_error
                                        : TransferStatus::permanent_error;
      reason = t->write_error->message;
      if (t->write_error->no_space) files_[t->task.value].staging.reset();
    } else if (code != CURLE_OK) {
      status = judge_transport_error(code);
      reason = transport();
    } else if (t->expected_size && files_[t->task.value].staging->bytes() != *t->expected_size) {
      status = TransferStatus::retryable_error;  // A short body the server called complete.
      reason = "short body: " + std::to_string(files_[t->task.value].staging->bytes()) + " of " +
               std::to_string(*t->expected_size) + " bytes from " + t->url;
    }
    if (status == TransferStatus::ok) {
      // The body goes to finalize, with the key's lock; this task's files
      // leave the I/O thread.
      auto node = files_.extract(t->task.value);
      Ready ready;
      ready.staging = std::move(node.mapped().staging);
      ready.lock = std::move(node.mapped().lock);
      std::lock_guard lock(ready_mutex_);
      ready_.insert_or_assign(t->task.value, std::move(ready));
    } else if (status == TransferStatus::permanent_error) {
      files_.erase(t->task.value);
    } else if (auto it = files_.find(t->task.value); it != files_.end()) {
      it->second.lock.reset();  // In backoff: another process may fetch the key meanwhile.
    }
    const TransferId id = t->id;
    const TaskId task = t->task;
    const std::uint64_t appended = t->appended;
    const std::optional<double> retry_after =
        status == TransferStatus::retryable_error ? t->verdict.retry_after_s : std::nullopt;
    const ArtifactKey key = t->key;
    Timing timing;
    if (t->first_byte_s) {
      timing.first_byte_s = *t->first_byte_s - t->requested_s;
      const double body_s = now() - *t->first_byte_s;
      if (status == TransferStatus::ok && body_s > 0 && appended > 0)
        timing.rate_Bps = static_cast<double>(appended) / body_s;
    }
    const std::string url = t->url;
    release(*t);
    transfers_.erase(id.value);
    report(id, task, status, appended, retry_after, &key,
           reason.empty() ? "transfer failed" : reason, timing, url);
  }

  // `key` and `reason` say why a failed attempt failed (for the observer).
  // When a transfer's first body byte came, and its rate (for the metrics).
  struct Timing {
    std::optional<double> first_byte_s, rate_Bps;
  };

  void report(TransferId id, TaskId task, TransferStatus status, std::uint64_t bytes,
              std::optional<double> retry_after_s = std::nullopt, const ArtifactKey* key = nullptr,
              const std::string& reason = {}, Timing timing = {}, const std::string& url = {}) {
    TransferEnd end{id, task, status, bytes, retry_after_s, std::nullopt, reason, url,
                    timing.first_byte_s, timing.rate_Bps};
    if (key != nullptr) end.key = *key;
    std::lock_guard lock(mutex_);
    core_.transfer_ended(now(), end);
    dispatch_locked();
  }

  // Easy handles are reused (reset between transfers): a fresh one costs
  // allocations and page faults per transfer, which small artifacts feel.
  CURL* easy_handle() {
    if (idle_handles_.empty()) return curl_seam::calls().easy_init();
    CURL* e = idle_handles_.back();
    idle_handles_.pop_back();
    return e;
  }

  void release(Transfer& t) {
    if (t.paused) --paused_;
    t.paused = false;
    curl_multi_remove_handle(multi_, t.easy);
    if (!stopping_ && idle_handles_.size() < 64) {
      curl_easy_reset(t.easy);
      idle_handles_.push_back(t.easy);
    } else {
      curl_easy_cleanup(t.easy);
    }
    curl_slist_free_all(t.headers);
    t.easy = nullptr;
    t.headers = nullptr;
  }

  // --- Finalize pool -------------------------------------------------------------

  void finalize_loop() {
    for (;;) {
      FinalizeJob job;
      {
        std::unique_lock lock(finalize_mutex_);
        finalize_cv_.wait(lock, [this] { return finalize_stop_ || !finalize_jobs_.empty(); });
        if (finalize_stop_) return;
        job = std::move(finalize_jobs_.front());
        finalize_jobs_.pop_front();
      }
      Ready ready;
      {
        std::lock_guard lock(ready_mutex_);
        if (auto node = ready_.extract(job.task.value)) ready = std::move(node.mapped());
      }
      if (ready.installed_elsewhere) {
        adopt_install(job);
        continue;
      }
      if (!ready.staging) {  // Its files were dropped: nothing to install.
        finalize_ended(job, 0, FinalizeStatus::error, "staged bytes lost");
        continue;
      }
      const std::uint64_t bytes = ready.staging->bytes();
      auto sealed = cache_.seal(*ready.staging);
      // A refused body's file is gone before anybody hears of it.
      if (auto* error = std::get_if<IoError>(&sealed)) {
        const std::string reason = error->message;
        // A full disk may have room later (as for a write while the body
        // arrived): fetched again from byte 0, its bytes given back now.
        const FinalizeStatus status =
            error->no_space ? FinalizeStatus::verify_failed : FinalizeStatus::error;
        ready.staging.reset();
        finalize_ended(job, bytes, status, reason);
        continue;
      }
      const CacheDir::Sealed body = std::get<CacheDir::Sealed>(sealed);
      if (auto refusal = decide(job.task, body)) {
        // Fetched again from byte 0 (once per body, whoever expects what),
        // unless the origin sent these same bytes last time too.
        ready.staging.reset();
        finalize_ended(job, bytes,
                       refusal->again ? FinalizeStatus::verify_failed : FinalizeStatus::error,
                       refusal->why);
        continue;
      }
      // Reports on this thread, or on the cache's committer once the install
      // is durable; the key's lock goes once the demands have their verdicts.
      auto lock = std::make_shared<std::optional<CacheDir::KeyLock>>(std::move(ready.lock));
      cache_.commit_async(std::move(*ready.staging), std::nullopt, std::nullopt,
                          [this, job = std::move(job), bytes, lock](std::optional<IoError> error) {
                            if (error) {
                              finalize_ended(job, bytes, FinalizeStatus::error, error->message);
                            } else {
                              finalize_ended(job, bytes, FinalizeStatus::installed, {});
                            }
                            lock->reset();
                          });
    }
  }

  // Whether the body is installed (the rule: ClientCore::decide_install).
  std::optional<Refusal> decide(TaskId task, const CacheDir::Sealed& body) {
    std::lock_guard lock(mutex_);
    return core_.decide_install(task, body.bytes, body.sha256);
  }

  // Another fetch installed the key: checked (its size and digest, for the
  // verdicts) and held until the task's demands have theirs.
  void adopt_install(const FinalizeJob& job) {
    auto info = cache_.stat_object(job.key, /*with_digest=*/true);
    auto held = info ? objects_.hold(job.key) : nullptr;
    if (!info || !held) {
      finalize_ended(job, 0, FinalizeStatus::verify_failed,
                     "installed by another process, then evicted");
      return;
    }
    {
      std::lock_guard lock(mutex_);
      core_.adopted(job.task, ObjectFacts{info->size, info->sha256}, std::move(held));
    }
    finalize_ended(job, 0, FinalizeStatus::installed, {});
  }

  void finalize_ended(const FinalizeJob& job, std::uint64_t bytes, FinalizeStatus status,
                      const std::string& reason) {
    std::lock_guard lock(mutex_);
    core_.finalize_ended(now(), job, bytes, status, reason);
    dispatch_locked();
  }

  // --- Delivery thread -------------------------------------------------------------

  void delivery_loop() {
    for (;;) {
      std::deque<Delivery> batch;
      {
        std::unique_lock lock(delivery_mutex_);
        delivery_cv_.wait(lock, [this] { return delivery_stop_ || !deliveries_.empty(); });
        if (deliveries_.empty() && delivery_stop_) return;
        batch.swap(deliveries_);
      }
      for (Delivery& d : batch) {
        if (options_.executor) {
          // An executor's task is copyable; the result (with its pin) is not.
          auto result = std::make_shared<DemandResult>(std::move(d.result));
          options_.executor([cb = std::move(d.callback), result] {
            if (cb) cb(std::move(*result));
          });
        } else if (d.callback) {
          d.callback(std::move(d.result));  // No lock held: it may call back into the client.
        }
      }
    }
  }

  ClientOptions options_;
  CacheDir cache_;

  CacheObjects objects_;
  // The one lock around the core; the I/O thread, the finalize pool and
  // callers take it for each event and hand the jobs on before letting go.
  mutable std::mutex mutex_;
  ClientCore core_;
  std::vector<Job> jobs_;  // dispatch_locked()'s.
  const std::chrono::steady_clock::time_point start_;

  CURLM* multi_ = nullptr;
  std::atomic<bool> stopping_{false};
  std::mutex io_mutex_;
  std::deque<IoJob> io_jobs_;
  std::atomic<std::size_t> io_jobs_pending_{0};  // Pushed and not yet handled (idle()).
  std::unordered_map<std::uint64_t, std::unique_ptr<Transfer>> transfers_;  // I/O thread.
  std::vector<Waiting> waiting_;                                            // I/O thread.
  static constexpr int kWaitPollMs = 20;
  std::unordered_map<std::uint64_t, TaskFiles> files_;  // I/O thread.
  // Kept partials (OrphanDecision::keep_partial) by key, until the engine
  // drops them or a new task of the key resumes them. I/O thread.
  std::unordered_map<ArtifactKey, TaskFiles> partials_;
  std::thread io_thread_;
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

  std::mutex ready_mutex_;
  std::unordered_map<std::uint64_t, Ready> ready_;

  std::mutex finalize_mutex_;
  std::condition_variable finalize_cv_;
  std::deque<FinalizeJob> finalize_jobs_;
  bool finalize_stop_ = false;
  std::vector<std::thread> finalize_threads_;


  std::mutex delivery_mutex_;
  std::condition_variable delivery_cv_;
  std::deque<Delivery> deliveries_;
  bool delivery_stop_ = false;
  std::thread delivery_thread_;
};

Client::Client(ClientOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {}
Client::~Client() = default;

DemandHandle Client::subscribe(const ArtifactRef& artifact, const DemandOptions& options,
                               Callback on_terminal) {
  return impl_->subscribe(artifact, options, std::move(on_terminal));
}

std::future<DemandResult> Client::fetch(const ArtifactRef& artifact, const DemandOptions& options) {
  auto promise = std::make_shared<std::promise<DemandResult>>();
  auto future = promise->get_future();
  impl_->subscribe(artifact, options,
                   [promise](DemandResult result) { promise->set_value(std::move(result)); });
  return future;
}

void Client::cancel(DemandHandle demand) {
  impl_->cancel(demand);
}
void Client::set_throttle(const ThrottleConfig& config) {
  impl_->set_throttle(config);
}
ThrottleConfig Client::throttle() const {
  return impl_->throttle();
}
ClientMetrics Client::metrics() const {
  return impl_->metrics();
}
void Client::set_priority(DemandHandle demand, Priority priority) {
  impl_->set_priority(demand, priority);
}
void Client::end_owner(OwnerId owner, std::optional<OwnerGeneration> generation) {
  impl_->end_owner(owner, generation);
}
std::filesystem::path Client::path_of(const ArtifactKey& key) const {
  return impl_->path_of(key);
}

CacheDir::SyncCounts Client::sync_counts() const {
  return impl_->sync_counts();
}
SchedulerStats Client::stats() const {
  return impl_->stats();
}
double Client::clock_s() const {
  return impl_->clock_s();
}
bool Client::idle() const {
  return impl_->idle();
}
std::vector<TransferSnapshot> Client::transfers() const {
  return impl_->transfers();
}

}  // namespace dfl::backend
