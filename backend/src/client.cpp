// The libcurl runtime for the scheduler core: callers' calls, the one lock
// and the dispatch of ClientCore's jobs to the threads (client_impl.h).
#include "client_impl.h"
#include "client_record.h"

#include <algorithm>
#include <stdexcept>

#include "curl_seam.h"

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

Client::Impl::Impl(ClientOptions options)
    : options_(std::move(options)),
      cache_(options_.cache_dir, CacheOptions{.write_behind = true,
                                              .sync = options_.install_sync,
                                              .drop_behind_bytes = options_.drop_behind_bytes,
                                              .direct_writes = options_.direct_writes,
                                              .capacity_bytes = options_.scheduler.cache_bytes}),
      objects_(cache_),
      tee_(options_.record ? std::make_unique<TeeObserver>() : nullptr),
      core_(ClientCore::Options{options_.scheduler, options_.orphan_policy,
                                options_.orphan_policy_object, options_.pin_on_success,
                                tee_ ? tee_.get() : options_.observer, options_.throttle},
            objects_),
      start_(std::chrono::steady_clock::now()) {
  if (!options_.resolver) throw std::invalid_argument("ClientOptions.resolver is required");
  check_bounds(options_.bounds, "ClientOptions.bounds");
  if (options_.record) {
    recording_ = std::make_unique<Recording>(*options_.record, options_.scheduler,
                                             options_.throttle,
                                             options_.orphan_policy_object
                                                 ? options_.orphan_policy_object->name()
                                                 : std::string_view(options_.orphan_policy),
                                             [this] { return core_.measured(); });
    tee_->first = options_.observer;
    tee_->second = recording_.get();
  }
  global_curl_init();
  if (options_.http == HttpVersion::h2_prior_knowledge) check_prior_knowledge_works();
  multi_ = curl_multi_init();
  if (multi_ == nullptr) throw std::runtime_error("curl_multi_init failed");
  // HTTP/1.1: a connection per slot. HTTP/2: the slots are streams, spread
  // over h2_connections_per_origin connections (libcurl opens another one
  // when a connection has its maximum of streams).
  const unsigned connections = std::max(1u, options_.h2_connections_per_origin);
  auto set = [this](CURLMoption option, const char* name, long value) {
    if (const CURLMcode code = curl_multi_setopt(multi_, option, value); code != CURLM_OK) {
      curl_multi_cleanup(multi_);
      throw std::runtime_error(std::string("libcurl refused ") + name + " (" +
                               curl_multi_strerror(code) + ")");
    }
  };
  set(CURLMOPT_PIPELINING, "CURLMOPT_PIPELINING", CURLPIPE_MULTIPLEX);
  set(CURLMOPT_MAX_HOST_CONNECTIONS, "CURLMOPT_MAX_HOST_CONNECTIONS",
      static_cast<long>(options_.scheduler.max_per_origin));
  set(CURLMOPT_MAX_CONCURRENT_STREAMS, "CURLMOPT_MAX_CONCURRENT_STREAMS",
      static_cast<long>(
          std::max(1u, (options_.scheduler.max_per_origin + connections - 1) / connections)));
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

Client::Impl::~Impl() {
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
  // Demands still waiting are cancelled: each gets its one terminal, and a
  // recording says so (the caller's program let them go), so that the
  // simulator of it does not wait for them.
  {
    CoreLock core(*this);
    const double t = now();
    const std::vector<DemandHandle> cancelled = core_.cancel_all(t);
    if (recording_) {
      for (DemandHandle h : cancelled)
        recording_->cancel(t, h);
    }
    core.dispatch();
  }
  {
    std::lock_guard lock(delivery_mutex_);
    delivery_stop_ = true;
  }
  delivery_cv_.notify_all();
  delivery_thread_.join();
  curl_multi_cleanup(multi_);
  end_recording();  // With what was measured.
}

DemandHandle Client::Impl::subscribe(const ArtifactRef& artifact, const DemandOptions& options,
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
  CoreLock core(*this);
  const double t = now();
  const DemandHandle h = core_.subscribe(t, artifact, options, std::move(on_terminal),
                                         std::move(on_disk), std::move(held));
  core.dispatch();
  return h;
}

void Client::Impl::cancel(DemandHandle h) {
  CoreLock core(*this);
  const double t = now();
  core_.cancel(t, h);
  if (recording_ && h != DemandHandle{}) recording_->cancel(t, h);
  core.dispatch();
}

void Client::Impl::set_priority(DemandHandle h, Priority p) {
  CoreLock core(*this);
  const double t = now();
  core_.set_priority(t, h, p);
  if (recording_ && h != DemandHandle{}) recording_->set_priority(t, h, p);
  core.dispatch();
}

void Client::Impl::end_owner(OwnerId owner, std::optional<OwnerGeneration> generation) {
  CoreLock core(*this);
  const double t = now();
  core_.end_owner(t, owner, generation);
  if (recording_) recording_->end_owner(t, owner, generation);
  core.dispatch();
}

SchedulerStats Client::Impl::stats() const {
  std::lock_guard lock(mutex_);
  return core_.stats();
}

bool Client::Impl::idle() const {
  std::lock_guard lock(mutex_);
  // The core's work, and what it handed the I/O thread: an abort's bytes
  // and time to first byte reach the metrics when the I/O thread handles it.
  return core_.no_work() && io_jobs_pending_ == 0;
}

std::vector<TransferSnapshot> Client::Impl::transfers() const {
  std::lock_guard lock(progress_mutex_);
  return snapshot_;
}

std::optional<DemandProgress> Client::Impl::progress(DemandHandle h) const {
  std::lock_guard lock(mutex_);
  return core_.progress_of(h);
}
std::vector<DemandProgress> Client::Impl::progress() const {
  std::lock_guard lock(mutex_);
  return core_.progress_all();
}
OwnerProgress Client::Impl::owner_progress(OwnerId owner) const {
  std::lock_guard lock(mutex_);
  return core_.owner_progress(owner);
}

void Client::Impl::set_throttle(const ThrottleConfig& config) {
  CoreLock core(*this);
  if (core_.set_throttle(config)) {
    if (recording_) recording_->throttle(now(), config);
    core.dispatch();
  }
}

void Client::Impl::pause(std::optional<Priority> at_or_below) {
  CoreLock core(*this);
  if (core_.pause(now(), at_or_below)) core.dispatch();
}

void Client::Impl::resume() {
  CoreLock core(*this);
  if (core_.resume(now())) core.dispatch();
}

MeasuredPlatform Client::Impl::measured_platform() const {
  std::lock_guard lock(mutex_);
  return core_.measured();
}

RecordStatus Client::Impl::record_status() const {
  std::lock_guard lock(mutex_);
  return recording_ ? recording_->status() : RecordStatus{};
}

RecordStatus Client::Impl::end_recording() {
  std::unique_ptr<Recording> recording;
  {
    std::lock_guard lock(mutex_);
    if (tee_) tee_->second = nullptr;
    recording = std::move(recording_);
  }
  if (!recording) return {};
  const MeasuredPlatform measured = measured_platform();
  return recording->close(&measured);
}

ThrottleConfig Client::Impl::throttle() const {
  std::lock_guard lock(mutex_);
  return core_.throttle_rule().config();
}

ClientMetrics Client::Impl::metrics() {
  ClientMetrics out;
  {
    std::lock_guard lock(mutex_);
    out = core_.metrics();
  }
  out.cache_bytes = cache_.installed_bytes();
  return out;
}

double Client::Impl::now() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

// The core's jobs to their threads, in its order: each queue sees them as
// the engine emitted them.
Client::Impl::Wakes Client::Impl::dispatch_locked() {
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
      deliveries_.push_back(std::move(*d));
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
  // The I/O thread fires the engine's timers: it reads when, without the lock.
  const double wake = core_.next_wakeup_s().value_or(kNever);
  if (const double before = next_wakeup_s_.exchange(wake, std::memory_order_acq_rel);
      wake < before) {
    io = true;  // Perhaps sooner than the I/O thread's wait ends.
  }
  return Wakes{io, finalize, delivery};
}

namespace {
// The client whose I/O thread this is, if any.
thread_local const void* io_thread_of = nullptr;
}  // namespace

void Client::Impl::mark_io_thread() { io_thread_of = this; }

void Client::Impl::wake(Wakes wakes) {
  if (wakes.io) {
    // The I/O thread's own events go round its loop once more before it
    // waits, with no byte through libcurl's wakeup socket.
    if (io_thread_of == this) {
      io_again_ = true;
    } else {
      curl_multi_wakeup(multi_);
    }
  }
  if (wakes.finalize) finalize_cv_.notify_one();
  if (wakes.delivery) delivery_cv_.notify_one();
}

void Client::Impl::push_io(IoJob job) {
  std::lock_guard lock(io_mutex_);
  io_jobs_.push_back(std::move(job));
  ++io_jobs_pending_;
}

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
void Client::pause(std::optional<Priority> at_or_below) { impl_->pause(at_or_below); }
void Client::resume() { impl_->resume(); }
RecordStatus Client::record_status() const { return impl_->record_status(); }
MeasuredPlatform Client::measured_platform() const { return impl_->measured_platform(); }
RecordStatus Client::end_recording() { return impl_->end_recording(); }
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
std::optional<DemandProgress> Client::progress(DemandHandle demand) const {
  return impl_->progress(demand);
}
std::vector<DemandProgress> Client::progress() const { return impl_->progress(); }
OwnerProgress Client::owner_progress(OwnerId owner) const { return impl_->owner_progress(owner); }

}  // namespace dfl::backend
