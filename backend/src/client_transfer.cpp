// One transfer on libcurl: its start (resume, validators, priority), its
// headers judged, its body staged, its end reported to the core (client_impl.h).
#include "client_impl.h"

#include <algorithm>
#include <cctype>
#include <limits>

#include "curl_seam.h"

namespace dfl::backend {
namespace {

// One transfer's libcurl options, set in order: the first that libcurl
// refuses is kept (its name and libcurl's words), and none after it is set.
class EasyOptions {
 public:
  struct Refusal {
    CURLcode code;
    std::string what;
  };
  explicit EasyOptions(CURL* easy) : easy_(easy) {}
  template <typename T>
  void set(CURLoption option, const char* name, T value) {
    if (refused_) return;
    CURLcode code = CURLE_OK;
    if (auto hook = curl_seam::calls().before_setopt) code = hook(option);
    if (code == CURLE_OK) code = curl_easy_setopt(easy_, option, value);
    if (code != CURLE_OK) refused_ = Refusal{code, std::string(name) + " (" + curl_easy_strerror(code) + ")"};
  }
  const std::optional<Refusal>& refused() const { return refused_; }

 private:
  CURL* easy_;
  std::optional<Refusal> refused_;
};
#define DFL_SETOPT(options, option, value) (options).set(option, #option, value)

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

// libcurl's options for the connection: no signals, TLS checked, http(s)
// only, redirects followed, its timeout, error buffer, buffer size and CA file.
void set_connection_options(EasyOptions& set, CURL* e, const ClientOptions& options,
                            char* error_detail, const std::optional<std::uint64_t>& expected_size) {
  DFL_SETOPT(set, CURLOPT_NOSIGNAL, 1L);
  // libcurl's defaults, stated: an artifact is only as trustworthy as its origin.
  DFL_SETOPT(set, CURLOPT_SSL_VERIFYPEER, 1L);
  DFL_SETOPT(set, CURLOPT_SSL_VERIFYHOST, 2L);
  DFL_SETOPT(set, CURLOPT_PROTOCOLS_STR, "http,https");
  DFL_SETOPT(set, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
  DFL_SETOPT(set, CURLOPT_FOLLOWLOCATION, 1L);
  DFL_SETOPT(set, CURLOPT_MAXREDIRS, 5L);
  DFL_SETOPT(set, CURLOPT_CONNECTTIMEOUT_MS, options.connect_timeout_ms);
  // Slow and stalled servers: enforce_bounds(), not libcurl's low-speed
  // limit, which cannot tell our own throttle's pauses from the server's.
  DFL_SETOPT(set, CURLOPT_ERRORBUFFER, error_detail);
  // Large bodies arrive in fewer, larger pieces with a large buffer. A small
  // body's stays under 64 KiB: libcurl allocates it for each transfer, and
  // glibc's free of a chunk of 64 KiB or more consolidates the whole heap.
  curl_easy_setopt(e, CURLOPT_BUFFERSIZE,
                   expected_size && *expected_size < 256 * 1024 ? 60L * 1024 : 256L * 1024);
  if (!options.ca_file.empty()) DFL_SETOPT(set, CURLOPT_CAINFO, options.ca_file.c_str());
}

// The HTTP version to ask for, and whether to wait for a connection that
// may multiplex (where HTTP/2 may come).
void set_http_version(EasyOptions& set, CURL* e, const ClientOptions& options,
                      const std::string& url) {
  switch (options.http) {
    case HttpVersion::negotiate:
      DFL_SETOPT(set, CURLOPT_HTTP_VERSION, static_cast<long>(CURL_HTTP_VERSION_2TLS));
      break;
    case HttpVersion::http1_1:
      DFL_SETOPT(set, CURLOPT_HTTP_VERSION, static_cast<long>(CURL_HTTP_VERSION_1_1));
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
      options.http == HttpVersion::h2_prior_knowledge ||
      (options.http == HttpVersion::negotiate && url.rfind("https://", 0) == 0);
  if (h2_possible) DFL_SETOPT(set, CURLOPT_PIPEWAIT, 1L);
}

}  // namespace

void Client::Impl::start(const StartTransfer& c, const Limits& limits, bool held) {
  TaskIo& io = io_tasks_[c.task.value];
  io.start = c;
  io.limits = limits;
  io.state = TaskIo::State::between_attempts;
  if (held) {  // Client::pause: no request until the resume (refresh_throttle).
    io.state = TaskIo::State::held;
    return;
  }
  TaskFiles& files = io.files;
  if (!files.lock) {
    auto lock = cache_.try_lock_key(*c.key);
    if (!lock) {  // Another fetch of the key, in this process or another.
      io.state = TaskIo::State::waiting;
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
  find_partial(c, limits, size, files);
  const bool if_range = vouch_for_staged(c, limits, files);
  if (!begin_staging(c, size, files)) return;  // The task is gone.
  std::unique_ptr<Transfer> t = new_transfer(c, limits, files);
  if (t->easy == nullptr) {
    fail_to_start(c, *t, "libcurl could not make a transfer handle (out of memory)");
    return;
  }
  if (!set_options(c, *t, files, if_range)) return;
  launch(c, io, std::move(t));
}

// A first attempt's bytes to resume, when none are staged: the key's kept
// partial, or (digest checked) what a fetch that died left.
void Client::Impl::find_partial(const StartTransfer& c, const Limits& limits, std::uint64_t size,
                                TaskFiles& files) {
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
}

// Whether the request may send If-Range with the staged bytes' ETag; staged
// bytes that nothing vouches for are dropped.
bool Client::Impl::vouch_for_staged(const StartTransfer& c, const Limits& limits,
                                    TaskFiles& files) {
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
  return if_range;
}

// A staging file for the body when none is kept; false when the cache could
// not begin one (the task's record erased, its failure reported).
bool Client::Impl::begin_staging(const StartTransfer& c, std::uint64_t size, TaskFiles& files) {
  if (!files.staging) {
    auto begun = cache_.begin(c.key, size);
    if (auto* error = std::get_if<IoError>(&begun)) {
      const std::string reason = error->message;
      io_tasks_.erase(c.task.value);
      report(c.transfer, c.task, TransferStatus::permanent_error, 0, std::nullopt, &*c.key,
             reason);
      return false;
    }
    files.staging.emplace(std::move(std::get<CacheDir::Staging>(begun)));
  }
  return true;
}

// The attempt's record: what it fetches, from which offset, its URL and its
// libcurl handle (null when libcurl could not make one).
std::unique_ptr<Client::Impl::Transfer> Client::Impl::new_transfer(const StartTransfer& c,
                                                                  const Limits& limits,
                                                                  const TaskFiles& files) {
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
  return t;
}

// The transfer's libcurl options and request headers, in order; false when
// libcurl could not take them (the attempt's failure to start reported).
bool Client::Impl::set_options(const StartTransfer& c, Transfer& t, const TaskFiles& files,
                               bool if_range) {
  CURL* e = t.easy;
  EasyOptions set(e);
  DFL_SETOPT(set, CURLOPT_URL, t.url.c_str());
  DFL_SETOPT(set, CURLOPT_PRIVATE, &t);
  DFL_SETOPT(set, CURLOPT_WRITEFUNCTION, &Impl::on_body);
  DFL_SETOPT(set, CURLOPT_WRITEDATA, &t);
  DFL_SETOPT(set, CURLOPT_HEADERFUNCTION, &Impl::on_header);
  DFL_SETOPT(set, CURLOPT_HEADERDATA, &t);
  set_connection_options(set, e, options_, t.error_detail, t.expected_size);
  set_http_version(set, e, options_, t.url);
  // The task's effective priority as the engine started it (an orphan's is
  // the lowest), as an RFC 9218 header and, on HTTP/2, a stream weight.
  const Priority priority = c.priority.value_or(std::numeric_limits<Priority>::min());
  bool headers_made =
      add_header(t, "Priority: u=" + std::to_string(rfc9218_urgency(priority)));
  DFL_SETOPT(set, CURLOPT_STREAM_WEIGHT, static_cast<long>(h2_stream_weight(priority)));
  if (t.offset > 0) {
    const std::string range = std::to_string(t.offset) + "-";
    DFL_SETOPT(set, CURLOPT_RANGE, range.c_str());  // libcurl copies the string.
    if (!files.etag.empty() && if_range) {
      headers_made = headers_made && add_header(t, "If-Range: " + files.etag);
    }
  }
  if (!headers_made) {
    fail_to_start(c, t, "libcurl could not make the request's headers (out of memory)");
    return false;
  }
  DFL_SETOPT(set, CURLOPT_HTTPHEADER, t.headers);
  if (set.refused()) {
    // Out of memory may pass; an option this libcurl lacks will not.
    fail_to_start(c, t, "libcurl refused " + set.refused()->what,
                  set.refused()->code == CURLE_OUT_OF_MEMORY ? TransferStatus::retryable_error
                                                              : TransferStatus::permanent_error);
    return false;
  }
  return true;
}

// The request on its way: its watch started, the transfer handed to
// libcurl's loop, and the task transferring.
void Client::Impl::launch(const StartTransfer& c, TaskIo& io, std::unique_ptr<Transfer> t) {
  t->requested_s = now();
  t->watch = AttemptWatch(options_.bounds, t->requested_s);
  if (t->expected_size)
    t->watch.set_to_move(*t->expected_size - std::min(*t->expected_size, t->offset));
  if (throttling_) throttle_seen_ = 0;  // Its class is read before its first byte.
  if (const CURLMcode added = curl_seam::calls().multi_add_handle(multi_, t->easy);
      added != CURLM_OK) {
    fail_to_start(c, *t,
                  std::string("libcurl refused the transfer (") + curl_multi_strerror(added) + ")");
    return;
  }
  io.transfer = std::move(t);
  io.state = TaskIo::State::transferring;
}

// Appends a request header; false (the list as it was) when libcurl could not.
bool Client::Impl::add_header(Transfer& t, const std::string& line) {
  curl_slist* longer = curl_slist_append(t.headers, line.c_str());
  if (longer == nullptr) return false;
  t.headers = longer;
  return true;
}

// A transfer that libcurl could not start: a retryable failure of this
// attempt (a later one may find memory), its staged bytes kept for it, the
// key's lock given up meanwhile as in any backoff.
void Client::Impl::fail_to_start(const StartTransfer& c, Transfer& t, const std::string& why,
                                 TransferStatus status) {
  const std::string url = t.url;
  if (t.easy != nullptr) release(t);  // Frees the headers too (none without a handle).
  if (auto it = io_tasks_.find(c.task.value); it != io_tasks_.end()) it->second.files.lock.reset();
  report(c.transfer, c.task, status, 0, std::nullopt, &*c.key,
         why + " for " + url + " (" + c.key->resource + ")", {}, url);
}

// libcurl's loop failed as a whole: every transfer in it ends as a
// retryable failure, with the bytes it staged kept for its next attempt.
void Client::Impl::fail_all_in_flight(const std::string& why) {
  std::vector<std::unique_ptr<Transfer>> failed;
  for (auto& [task, io] : io_tasks_) {
    if (io.state != TaskIo::State::transferring) continue;
    io.files.lock.reset();
    io.state = TaskIo::State::between_attempts;
    failed.push_back(std::move(io.transfer));
  }
  for (auto& t : failed) {
    release(*t);  // Its handle and headers; the record lives on here.
    report(t->id, t->task, TransferStatus::retryable_error, t->appended, std::nullopt, &t->key,
           why + " during " + t->url, {}, t->url);
  }
}

std::size_t Client::Impl::on_header(char* data, std::size_t size, std::size_t n, void* user) {
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
void Client::Impl::judge(Transfer& t) {
  if (t.judged) return;
  t.judged = true;
  if (curl_easy_getinfo(t.easy, CURLINFO_RESPONSE_CODE, &t.status) != CURLE_OK) t.status = 0;
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
  TaskFiles& files = io_tasks_.at(t.task.value).files;
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

std::size_t Client::Impl::on_body(char* data, std::size_t size, std::size_t n, void* user) {
  auto* t = static_cast<Transfer*>(user);
  Impl& self = *t->impl;
  self.judge(*t);
  if (t->verdict.plan == BodyPlan::reject || t->write_error) return 0;  // Nothing is kept.
  const std::size_t bytes = size * n;
  if (t->held) return CURL_WRITEFUNC_PAUSE;  // Client::pause: kept by libcurl until resume.
  if (!self.admit(*t, bytes)) {
    // libcurl keeps the piece and hands it over again once unpaused.
    t->paused = true;
    ++self.paused_;
    t->watch.hold(self.now());  // Held back by us: no stall.
    return CURL_WRITEFUNC_PAUSE;
  }
  TaskFiles& files = self.io_tasks_.at(t->task.value).files;
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

void Client::Impl::finish(CURL* easy, CURLcode code) {
  Transfer* found = nullptr;
  if (curl_easy_getinfo(easy, CURLINFO_PRIVATE, &found) != CURLE_OK || found == nullptr) {
    for_each_transfer([&](Transfer& transfer) {  // Found the long way.
      if (transfer.easy == easy) found = &transfer;
    });
    if (found == nullptr) return;  // Not ours.
  }
  // The attempt leaves its task's record, which stays for the next one (or
  // goes to finalize, or ends).
  TaskIo& io = io_tasks_.at(found->task.value);
  const std::unique_ptr<Transfer> owned = std::move(io.transfer);
  io.state = TaskIo::State::between_attempts;
  Transfer* const t = owned.get();
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
    if (t->write_error->no_space) io.files.staging.reset();
  } else if (code != CURLE_OK) {
    status = judge_transport_error(code);
    reason = transport();
  } else if (t->expected_size && io.files.staging->bytes() != *t->expected_size) {
    status = TransferStatus::retryable_error;  // A short body the server called complete.
    reason = "short body: " + std::to_string(io.files.staging->bytes()) + " of " +
             std::to_string(*t->expected_size) + " bytes from " + t->url;
  }
  if (status == TransferStatus::ok) {
    // The body goes to finalize, with the key's lock; this task's files
    // leave the I/O thread.
    Ready ready;
    ready.staging = std::move(io.files.staging);
    ready.lock = std::move(io.files.lock);
    io_tasks_.erase(t->task.value);
    std::lock_guard lock(ready_mutex_);
    ready_.insert_or_assign(t->task.value, std::move(ready));
  } else if (status == TransferStatus::permanent_error) {
    io_tasks_.erase(t->task.value);
  } else {
    io.files.lock.reset();  // In backoff: another process may fetch the key meanwhile.
  }
  const TransferId id = t->id;
  const TaskId task = t->task;
  const std::uint64_t appended = t->appended;
  const std::optional<double> retry_after =
      status == TransferStatus::retryable_error ? t->verdict.retry_after_s : std::nullopt;
  const ArtifactKey key = t->key;
  Timing timing;
  // A new connection's TCP handshake: about one round trip to the origin.
  long connects = 0;
  curl_off_t lookup_us = 0, connect_us = 0;
  if (curl_easy_getinfo(easy, CURLINFO_NUM_CONNECTS, &connects) == CURLE_OK && connects > 0 &&
      curl_easy_getinfo(easy, CURLINFO_NAMELOOKUP_TIME_T, &lookup_us) == CURLE_OK &&
      curl_easy_getinfo(easy, CURLINFO_CONNECT_TIME_T, &connect_us) == CURLE_OK &&
      connect_us > lookup_us) {
    timing.connect_s = static_cast<double>(connect_us - lookup_us) / 1e6;
  }
  if (t->first_byte_s) {
    timing.first_byte_s = *t->first_byte_s - t->requested_s;
    const double body_s = now() - *t->first_byte_s;
    if (status == TransferStatus::ok && body_s > 0 && appended > 0)
      timing.rate_Bps = static_cast<double>(appended) / body_s;
  }
  const std::string url = t->url;
  release(*t);
  report(id, task, status, appended, retry_after, &key,
         reason.empty() ? "transfer failed" : reason, timing, url);
}

void Client::Impl::report(TransferId id, TaskId task, TransferStatus status, std::uint64_t bytes,
            std::optional<double> retry_after_s, const ArtifactKey* key,
            const std::string& reason, Timing timing, const std::string& url) {
  TransferEnd end{id, task, status, bytes, retry_after_s, std::nullopt, reason, url,
                  timing.first_byte_s, timing.rate_Bps, timing.connect_s};
  if (key != nullptr) end.key = *key;
  CoreLock core(*this);
  core_.transfer_ended(now(), end);
  core.dispatch();
}

// Easy handles are reused (reset between transfers): a fresh one costs
// allocations and page faults per transfer, which small artifacts feel.
CURL* Client::Impl::easy_handle() {
  if (idle_handles_.empty()) return curl_seam::calls().easy_init();
  CURL* e = idle_handles_.back();
  idle_handles_.pop_back();
  return e;
}

void Client::Impl::release(Transfer& t) {
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

}  // namespace dfl::backend
