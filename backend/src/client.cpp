// The libcurl runtime for the scheduler core. See client.h for the threads.
//
// Ownership, so that no data needs more than one lock:
// - engine_mutex_: the Scheduler, the callbacks, the expected digests;
// - the I/O thread alone: curl handles, transfers in flight, and each task's
//   staging file between attempts (its length is the resume offset);
// - ready_mutex_: staged bodies handed from the I/O thread to finalize;
// - each queue has its own mutex and condition variable.
#include "demandflight/backend/client.h"

#include <curl/curl.h>

#include <algorithm>
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
#include "demandflight/policies/registry.h"

namespace dfl::backend {
namespace {

std::uint64_t pack(DemandHandle h) {
  return (std::uint64_t{h.slot} << 32) | h.generation;
}

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

}  // namespace

UrlResolver url_template(std::string pattern) {
  return [pattern = std::move(pattern)](const ArtifactKey& key, OriginId) {
    std::string url = pattern;
    auto replace = [&url](std::string_view name, const std::string& value) {
      for (std::size_t at = url.find(name); at != std::string::npos;
           at = url.find(name, at + value.size())) {
        url.replace(at, name.size(), value);
      }
    };
    replace("{resource}", key.resource);
    replace("{revision}", key.revision);
    replace("{target}", key.target);
    replace("{generation}", std::to_string(key.generation));
    return url;
  };
}

class Client::Impl {
 public:
  explicit Impl(ClientOptions options)
      : options_(std::move(options)),
        cache_(options_.cache_dir, CacheOptions{.write_behind = true,
                                                .sync = options_.install_sync,
                                                .drop_behind_bytes = options_.drop_behind_bytes,
                                                .direct_writes = options_.direct_writes}),
        engine_(with_task_events(options_.scheduler),
                policies::make_orphan_policy(options_.orphan_policy)),
        start_(std::chrono::steady_clock::now()) {
    if (!options_.resolver) throw std::invalid_argument("ClientOptions.resolver is required");
    global_curl_init();
    multi_ = curl_multi_init();
    if (multi_ == nullptr) throw std::runtime_error("curl_multi_init failed");
    curl_multi_setopt(multi_, CURLMOPT_MAX_HOST_CONNECTIONS,
                      static_cast<long>(options_.scheduler.max_per_origin));
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
      std::lock_guard lock(engine_mutex_);
      std::vector<DemandHandle> waiting;
      for (const auto& [packed, callback] : callbacks_) {
        waiting.push_back(DemandHandle{static_cast<std::uint32_t>(packed >> 32),
                                       static_cast<std::uint32_t>(packed)});
      }
      for (DemandHandle h : waiting)
        engine_.cancel(now(), h);
      route_locked();
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
    DemandOptions o = options;
    o.origin = artifact.origin;
    o.size_bytes = artifact.size_bytes;
    std::lock_guard lock(engine_mutex_);
    const double t = now();
    fire_due_timers_locked(t);
    if (artifact.sha256) expected_sha256_[artifact.key] = *artifact.sha256;
    if (artifact.size_bytes > 0) expected_size_[artifact.key] = artifact.size_bytes;
    // An installed artifact the engine does not know yet (installed by an
    // earlier process) is a cache hit too.
    if (auto size = cache_.installed_size(artifact.key);
        size && (artifact.size_bytes == 0 || *size == artifact.size_bytes)) {
      engine_.note_installed(t, artifact.key, *size);
    }
    const DemandHandle h = engine_.subscribe(t, artifact.key, o);
    callbacks_.emplace(pack(h), std::move(on_terminal));
    if (options_.observer != nullptr) {
      std::optional<TaskId> task;
      if (auto info = engine_.demand(h); info && info->task.value != 0) task = info->task;
      options_.observer->on_subscribe(t, h, artifact, o, task);
    }
    route_locked();
    return h;
  }

  void cancel(DemandHandle h) {
    std::lock_guard lock(engine_mutex_);
    engine_.cancel(now(), h);
    route_locked();
  }

  void set_priority(DemandHandle h, Priority p) {
    std::lock_guard lock(engine_mutex_);
    const double t = now();
    fire_due_timers_locked(t);  // A demand whose deadline has passed is not live.
    if (options_.observer != nullptr && engine_.demand(h))
      options_.observer->on_set_priority(t, h, p);
    engine_.set_priority(t, h, p);
    route_locked();
  }

  void end_owner(OwnerId owner, std::optional<OwnerGeneration> generation) {
    std::lock_guard lock(engine_mutex_);
    engine_.end_owner(now(), owner, generation);
    route_locked();
  }

  std::filesystem::path path_of(const ArtifactKey& key) const { return cache_.object_path(key); }
  CacheDir::SyncCounts sync_counts() const { return cache_.sync_counts(); }

  SchedulerStats stats() const {
    std::lock_guard lock(engine_mutex_);
    return engine_.stats();
  }

  double clock_s() const { return now(); }

  bool idle() const {
    std::lock_guard lock(engine_mutex_);
    return engine_.live_demands() == 0 && engine_.live_tasks() == 0;
  }

  std::vector<TransferSnapshot> transfers() const {
    std::lock_guard lock(progress_mutex_);
    return snapshot_;
  }

 private:
  static SchedulerConfig with_task_events(SchedulerConfig c) {
    c.emit_task_events = true;  // TaskEnded tells the I/O thread to drop a task's staging.
    return c;
  }

  double now() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }

  // --- Routing (engine_mutex_ held) ---------------------------------------------

  // Deadlines and retries due by `t` that the timer thread has not fired yet
  // fire now, and their commands go out, before a subscribe (or set_priority):
  // the engine would fire them inside that call and could give the new demand
  // the slot of one that timed out there, and an observer would hear of the
  // new demand before the old one's end (or of a new priority for a demand
  // that has ended).
  void fire_due_timers_locked(double t) {
    const auto due = engine_.next_wakeup_s();
    if (!due || *due > t) return;
    engine_.on_timer(t);
    route_locked();
  }

  struct IoJob {
    enum class Kind { start, abort, forget, drop_partial } kind;
    StartTransfer start;
    TransferId transfer;
    TaskId task;
    bool keep_partial = false;  // abort: keep the staged bytes for the key.
    ArtifactKey key;            // drop_partial.
  };
  struct FinalizeJob {
    FinalizeId finalize;
    TaskId task;
    ArtifactKey key;
    std::optional<std::uint64_t> size;
    std::optional<std::string> sha256;
  };
  struct Delivery {
    Callback callback;
    DemandOutcome outcome;
  };

  void route_locked() {
    engine_.take_commands(commands_);
    bool io = false, finalize = false, delivery = false;
    if (options_.observer != nullptr) {
      const double t = now();
      for (const Command& command : commands_)
        options_.observer->on_command(t, command);
      options_.observer->on_settled(t);
    }
    for (Command& command : commands_) {
      if (auto* c = std::get_if<StartTransfer>(&command)) {
        push_io(IoJob{IoJob::Kind::start, std::move(*c), {}, c->task, false, {}});
        io = true;
      } else if (auto* a = std::get_if<AbortTransfer>(&command)) {
        push_io(IoJob{IoJob::Kind::abort, {}, a->transfer, a->task, a->keep_partial, {}});
        io = true;
      } else if (auto* p = std::get_if<DropPartial>(&command)) {
        push_io(IoJob{IoJob::Kind::drop_partial, {}, {}, {}, false, std::move(p->key)});
      } else if (auto* e = std::get_if<TaskEnded>(&command)) {
        // Housekeeping: no need to wake the I/O thread for it (it wakes at
        // least every 100 ms, and at once for the next start or abort).
        push_io(IoJob{IoJob::Kind::forget, {}, {}, e->task, false, {}});
      } else if (auto* f = std::get_if<StartFinalize>(&command)) {
        FinalizeJob job{f->finalize, f->task, f->key, std::nullopt, std::nullopt};
        if (auto it = expected_size_.find(f->key); it != expected_size_.end())
          job.size = it->second;
        if (auto it = expected_sha256_.find(f->key); it != expected_sha256_.end()) {
          job.sha256 = it->second;
        }
        std::lock_guard lock(finalize_mutex_);
        finalize_jobs_.push_back(std::move(job));
        finalize = true;
      } else if (auto* d = std::get_if<Deliver>(&command)) {
        auto it = callbacks_.find(pack(d->demand));
        if (it == callbacks_.end()) continue;
        std::lock_guard lock(delivery_mutex_);
        deliveries_.push_back(Delivery{std::move(it->second), d->outcome});
        callbacks_.erase(it);
        delivery = true;
      } else if (auto* ev = std::get_if<EvictArtifact>(&command)) {
        // Synchronously, so that no later install of the key can be undone by it.
        cache_.remove(ev->key);
      }
    }
    if (io) curl_multi_wakeup(multi_);
    if (finalize) finalize_cv_.notify_one();
    if (delivery) delivery_cv_.notify_one();
  }

  void push_io(IoJob job) {
    std::lock_guard lock(io_mutex_);
    io_jobs_.push_back(std::move(job));
  }

  // --- I/O thread ---------------------------------------------------------------

  struct Transfer {
    Impl* impl = nullptr;
    TransferId id;
    TaskId task;
    ArtifactKey key;
    std::optional<std::uint64_t> expected_size;
    std::uint64_t offset = 0;
    CURL* easy = nullptr;
    curl_slist* headers = nullptr;
    std::string url;
    long status = 0;
    std::optional<std::string> content_range, retry_after, etag;
    bool judged = false;
    HeaderVerdict verdict;
    std::uint64_t appended = 0;
    bool too_large = false;
    std::optional<IoError> write_error;
  };
  struct TaskFiles {
    std::optional<CacheDir::Staging> staging;
    std::string etag;
  };

  void io_loop() {
    while (!stopping_) {
      std::deque<IoJob> jobs;
      {
        std::lock_guard lock(io_mutex_);
        jobs.swap(io_jobs_);
      }
      for (IoJob& job : jobs)
        handle(job);
      int running = 0;
      curl_multi_perform(multi_, &running);
      int queued = 0;
      while (CURLMsg* msg = curl_multi_info_read(multi_, &queued)) {
        if (msg->msg == CURLMSG_DONE) finish(msg->easy_handle, msg->data.result);
      }
      publish_progress();
      int timeout_ms = 100;
      {
        std::lock_guard lock(engine_mutex_);
        if (auto wake = engine_.next_wakeup_s()) {
          const double wait_s = *wake - now();
          if (wait_s <= 0) {
            engine_.on_timer(now());
            route_locked();
            timeout_ms = 0;
          } else {
            timeout_ms = std::min(timeout_ms, static_cast<int>(wait_s * 1000) + 1);
          }
        }
      }
      if (timeout_ms > 0) curl_multi_poll(multi_, nullptr, 0, timeout_ms, nullptr);
    }
    for (auto& [id, transfer] : transfers_)
      release(*transfer);
    transfers_.clear();
    files_.clear();
    partials_.clear();
    for (CURL* e : idle_handles_)
      curl_easy_cleanup(e);
    idle_handles_.clear();
    std::lock_guard lock(progress_mutex_);
    snapshot_.clear();
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
      std::lock_guard lock(engine_mutex_);
      const double at = now();  // Read under the lock: engine time never goes backwards.
      for (const TransferSnapshot& s : snapshot)
        engine_.on_transfer_progress(at, s.transfer, s.received);
      route_locked();
    }
    std::lock_guard lock(progress_mutex_);
    snapshot_ = std::move(snapshot);
  }

  void handle(IoJob& job) {
    switch (job.kind) {
      case IoJob::Kind::start:
        start(job.start);
        return;
      case IoJob::Kind::abort:
        if (auto it = transfers_.find(job.transfer.value); it != transfers_.end()) {
          const std::uint64_t received = it->second->appended;
          if (job.keep_partial) job.key = it->second->key;
          release(*it->second);
          transfers_.erase(it);
          if (options_.observer != nullptr) {
            std::lock_guard lock(engine_mutex_);
            options_.observer->on_transfer_ended(now(), job.task, job.transfer, received, true);
          }
        }
        if (job.keep_partial && !job.key.resource.empty()) {
          // Kept for the key: the next task of it resumes after these bytes.
          auto node = files_.extract(job.task.value);
          if (node && node.mapped().staging && node.mapped().staging->bytes() > 0) {
            partials_.insert_or_assign(job.key, std::move(node.mapped()));
          }
        }
        files_.erase(job.task.value);  // Aborted: its bytes are not kept.
        return;
      case IoJob::Kind::drop_partial:
        partials_.erase(job.key);
        return;
      case IoJob::Kind::forget: {
        files_.erase(job.task.value);
        std::lock_guard lock(ready_mutex_);
        ready_.erase(job.task.value);
        return;
      }
    }
  }

  void start(const StartTransfer& c) {
    TaskFiles& files = files_[c.task.value];
    if (!files.staging) {
      // A first attempt with an offset resumes the key's kept partial.
      if (auto node = partials_.extract(c.key)) {
        // A partial that holds the whole body is not resumed: a Range past
        // the end would only earn a 416. Started over instead (rare: the
        // last bytes arrived in the instant of the abort).
        const bool whole = c.size_bytes > 0 && node.mapped().staging->bytes() >= c.size_bytes;
        if (c.attempt == 1 && c.resume_offset_bytes > 0 && !whole) {
          files = std::move(node.mapped());
        }
      }
    }
    if (!files.staging) {
      auto begun = cache_.begin(c.key);
      if (auto* error = std::get_if<IoError>(&begun)) {
        report(c.transfer, c.task, TransferStatus::permanent_error, 0);
        (void)error;
        return;
      }
      files.staging.emplace(std::move(std::get<CacheDir::Staging>(begun)));
    }
    auto t = std::make_unique<Transfer>();
    t->impl = this;
    t->id = c.transfer;
    t->task = c.task;
    t->key = c.key;
    if (c.size_bytes > 0) t->expected_size = c.size_bytes;
    // The staged bytes are the truth: resume after exactly those.
    t->offset = files.staging->bytes();
    t->url = options_.resolver(c.key, c.origin);
    t->easy = easy_handle();
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
    curl_easy_setopt(e, CURLOPT_LOW_SPEED_LIMIT, options_.stall_speed_Bps);
    curl_easy_setopt(e, CURLOPT_LOW_SPEED_TIME, options_.stall_time_s);
    // Large bodies arrive in fewer, larger pieces with a large buffer; a small
    // body does not need one (libcurl allocates it per handle).
    curl_easy_setopt(e, CURLOPT_BUFFERSIZE,
                     t->expected_size && *t->expected_size < 256 * 1024 ? 64L * 1024 : 256L * 1024);
    if (t->offset > 0) {
      const std::string range = std::to_string(t->offset) + "-";
      curl_easy_setopt(e, CURLOPT_RANGE, range.c_str());  // libcurl copies the string.
      if (!files.etag.empty()) {
        t->headers = curl_slist_append(t->headers, ("If-Range: " + files.etag).c_str());
        curl_easy_setopt(e, CURLOPT_HTTPHEADER, t->headers);
      }
    }
    curl_multi_add_handle(multi_, e);
    transfers_.emplace(c.transfer.value, std::move(t));
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
    TaskFiles& files = files_[t.task.value];
    if (t.verdict.plan == BodyPlan::restart && files.staging && files.staging->bytes() > 0) {
      // The whole body is coming (the server ignored Range, or If-Range no
      // longer matched): what was staged is worthless now.
      auto begun = cache_.begin(t.key);
      if (auto* error = std::get_if<IoError>(&begun)) {
        t.write_error = *error;
      } else {
        files.staging.emplace(std::move(std::get<CacheDir::Staging>(begun)));
      }
      t.offset = 0;
    }
    if (t.verdict.plan != BodyPlan::reject && t.etag) files.etag = *t.etag;
  }

  static std::size_t on_body(char* data, std::size_t size, std::size_t n, void* user) {
    auto* t = static_cast<Transfer*>(user);
    Impl& self = *t->impl;
    self.judge(*t);
    if (t->verdict.plan == BodyPlan::reject || t->write_error) return 0;  // Nothing is kept.
    TaskFiles& files = self.files_[t->task.value];
    const std::size_t bytes = size * n;
    if (t->expected_size && files.staging->bytes() + bytes > *t->expected_size) {
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
    if (t->verdict.plan == BodyPlan::reject) {
      status = t->verdict.status;
      reason = t->verdict.reason;
    } else if (t->too_large) {
      status = TransferStatus::permanent_error;
      reason = "body larger than the expected " + std::to_string(t->expected_size.value_or(0)) +
               " bytes";
    } else if (t->write_error) {
      status = TransferStatus::permanent_error;
      reason = t->write_error->message;
    } else if (code != CURLE_OK) {
      status = judge_transport_error(code);
      reason = curl_easy_strerror(code);
    } else if (t->expected_size && files_[t->task.value].staging->bytes() != *t->expected_size) {
      status = TransferStatus::retryable_error;  // A short body the server called complete.
      reason = "short body: " + std::to_string(files_[t->task.value].staging->bytes()) + " of " +
               std::to_string(*t->expected_size) + " bytes";
    }
    if (status == TransferStatus::ok) {
      // The body goes to finalize; this task's files leave the I/O thread.
      auto node = files_.extract(t->task.value);
      std::lock_guard lock(ready_mutex_);
      ready_.insert_or_assign(t->task.value, std::move(*node.mapped().staging));
    } else if (status == TransferStatus::permanent_error) {
      files_.erase(t->task.value);
    }
    const TransferId id = t->id;
    const TaskId task = t->task;
    const std::uint64_t appended = t->appended;
    const std::optional<double> retry_after =
        status == TransferStatus::retryable_error ? t->verdict.retry_after_s : std::nullopt;
    const ArtifactKey key = t->key;
    release(*t);
    transfers_.erase(id.value);
    report(id, task, status, appended, retry_after, &key,
           reason.empty() ? "transfer failed" : reason);
  }

  // `key` and `reason` say why a failed attempt failed (for the observer).
  void report(TransferId id, TaskId task, TransferStatus status, std::uint64_t bytes,
              std::optional<double> retry_after_s = std::nullopt, const ArtifactKey* key = nullptr,
              const std::string& reason = {}) {
    std::lock_guard lock(engine_mutex_);
    const double t = now();
    if (options_.observer != nullptr) {
      if (status != TransferStatus::ok && key != nullptr) {
        options_.observer->on_attempt_failed(t, task, *key, reason);
      }
      options_.observer->on_transfer_ended(t, task, id, bytes, false);
    }
    engine_.on_transfer_finished(t, id, status, bytes, retry_after_s);
    route_locked();
  }

  // Easy handles are reused (reset between transfers): a fresh one costs
  // allocations and page faults per transfer, which small artifacts feel.
  CURL* easy_handle() {
    if (idle_handles_.empty()) return curl_easy_init();
    CURL* e = idle_handles_.back();
    idle_handles_.pop_back();
    return e;
  }

  void release(Transfer& t) {
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
      std::optional<CacheDir::Staging> staging;
      {
        std::lock_guard lock(ready_mutex_);
        if (auto node = ready_.extract(job.task.value)) staging.emplace(std::move(node.mapped()));
      }
      const std::uint64_t bytes = staging ? staging->bytes() : 0;
      if (!staging) {  // Its files were dropped: nothing to install.
        finalize_ended(job, bytes, std::nullopt, FinalizeStatus::error);
        continue;
      }
      // Reports on this thread, or on the cache's committer once the install is durable.
      const std::optional<std::uint64_t> size = job.size;
      const std::optional<std::string> sha256 = std::move(job.sha256);
      cache_.commit_async(std::move(*staging), size, sha256,
                          [this, job = std::move(job), bytes](std::optional<IoError> error) {
                            finalize_ended(job, bytes, std::move(error), FinalizeStatus::installed);
                          });
    }
  }

  // `status` is the outcome when there is no error.
  void finalize_ended(const FinalizeJob& job, std::uint64_t bytes, std::optional<IoError> error,
                      FinalizeStatus status) {
    if (error) {
      // Wrong bytes are fetched again from 0.
      status = error->message.find("mismatch") != std::string::npos ? FinalizeStatus::verify_failed
                                                                    : FinalizeStatus::error;
    }
    std::lock_guard lock(engine_mutex_);
    const double t = now();
    if (options_.observer != nullptr) {
      if (error) options_.observer->on_attempt_failed(t, job.task, job.key, error->message);
      options_.observer->on_finalize_ended(t, job.task, status, bytes);
    }
    engine_.on_finalize_finished(t, job.finalize, status);
    route_locked();
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
          options_.executor([cb = std::move(d.callback), outcome = d.outcome] { cb(outcome); });
        } else if (d.callback) {
          d.callback(d.outcome);  // No lock held: it may call back into the client.
        }
      }
    }
  }

  ClientOptions options_;
  CacheDir cache_;

  mutable std::mutex engine_mutex_;
  Scheduler engine_;
  std::vector<Command> commands_;
  std::unordered_map<std::uint64_t, Callback> callbacks_;
  std::unordered_map<ArtifactKey, std::string> expected_sha256_;
  std::unordered_map<ArtifactKey, std::uint64_t> expected_size_;
  const std::chrono::steady_clock::time_point start_;

  CURLM* multi_ = nullptr;
  std::atomic<bool> stopping_{false};
  std::mutex io_mutex_;
  std::deque<IoJob> io_jobs_;
  std::unordered_map<std::uint64_t, std::unique_ptr<Transfer>> transfers_;  // I/O thread.
  std::unordered_map<std::uint64_t, TaskFiles> files_;                      // I/O thread.
  // Kept partials (OrphanDecision::keep_partial) by key, until the engine
  // drops them or a new task of the key resumes them. I/O thread.
  std::unordered_map<ArtifactKey, TaskFiles> partials_;
  std::thread io_thread_;
  double next_progress_s_ = 0;       // I/O thread.
  std::vector<CURL*> idle_handles_;  // I/O thread.

  mutable std::mutex progress_mutex_;
  std::vector<TransferSnapshot> snapshot_;

  std::mutex ready_mutex_;
  std::unordered_map<std::uint64_t, CacheDir::Staging> ready_;

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

std::future<DemandOutcome> Client::fetch(const ArtifactRef& artifact,
                                         const DemandOptions& options) {
  auto promise = std::make_shared<std::promise<DemandOutcome>>();
  auto future = promise->get_future();
  impl_->subscribe(artifact, options,
                   [promise](DemandOutcome outcome) { promise->set_value(outcome); });
  return future;
}

void Client::cancel(DemandHandle demand) {
  impl_->cancel(demand);
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
