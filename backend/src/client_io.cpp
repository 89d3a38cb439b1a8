// The I/O thread's loop: the core's jobs, starts waiting on another fetch,
// the throttle's buckets, progress and the transfers' bounds (client_impl.h).
#include "client_impl.h"

#include <algorithm>
#include <utility>

#include "curl_seam.h"

namespace dfl::backend {
void Client::Impl::io_loop() {
  mark_io_thread();
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
    const bool waiting = poll_waiting();
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
    // The engine's next timer, as the last dispatch published it: the lock
    // only when one is due.
    if (const double wake = next_wakeup_s_.load(std::memory_order_acquire); wake < kNever) {
      const double wait_s = wake - now();
      if (wait_s <= 0) {
        CoreLock core(*this);
        core_.on_timer(now());
        core.dispatch();
        timeout_ms = 0;
      } else {
        timeout_ms = std::min(timeout_ms, static_cast<int>(wait_s * 1000) + 1);
      }
    }
    // Another process's install is seen by looking: often enough not to add to its latency.
    if (waiting) timeout_ms = std::min(timeout_ms, kWaitPollMs);
    // A paused transfer goes on when its class has tokens again.
    if (paused_ > 0) timeout_ms = std::min(timeout_ms, throttle_wait_ms());
    if (std::exchange(io_again_, false)) timeout_ms = 0;
    if (timeout_ms > 0 && curl_multi_poll(multi_, nullptr, 0, timeout_ms, nullptr) != CURLM_OK) {
      // No wait for the sockets (libcurl out of memory): a short sleep, so
      // that the loop neither spins nor stalls the transfers for long.
      std::this_thread::sleep_for(std::chrono::milliseconds(std::min(timeout_ms, 10)));
    }
  }
  for_each_transfer([this](Transfer& t) { release(t); });
  io_tasks_.clear();
  partials_.clear();
  for (CURL* e : idle_handles_)
    curl_easy_cleanup(e);
  idle_handles_.clear();
  std::lock_guard lock(progress_mutex_);
  snapshot_.clear();
}

// The rule's answers, copied when they may have changed (a command moved a
// task across the level, a demand above it came or went, set_throttle, a
// new transfer): each transfer's class and the buckets' rates.
void Client::Impl::refresh_throttle() {
  const std::uint64_t generation = throttle_generation_.load(std::memory_order_acquire);
  if (generation == throttle_seen_) return;
  throttle_seen_ = generation;
  ThrottleConfig config;
  std::vector<std::pair<Transfer*, bool>> holds;  // Client::pause's, changed.
  std::vector<std::uint64_t> go_on;               // Held starts let go.
  {
    std::lock_guard lock(mutex_);
    const ThrottleRule& rule = core_.throttle_rule();
    config = rule.config();
    background_limited_ = rule.background_limited();
    for_each_transfer([&](Transfer& t) {
      t.background = rule.is_background(t.task);
      if (const bool held = core_.held(t.task); held != t.held) holds.emplace_back(&t, held);
    });
    for (const auto& [task, io] : io_tasks_) {
      if (io.state == TaskIo::State::held && !core_.held(TaskId{task})) go_on.push_back(task);
    }
  }
  for (auto [t, held] : holds)
    hold(*t, held);
  std::sort(go_on.begin(), go_on.end());  // Oldest task first.
  for (std::uint64_t task : go_on) {
    auto it = io_tasks_.find(task);
    if (it != io_tasks_.end()) start(StartTransfer(it->second.start), Limits(it->second.limits));
  }
  throttling_ = config.background_at_or_below.has_value() || config.overall_Bps > 0;
  const double t = now();
  background_bucket_.set_rate(background_limited_ ? config.background_Bps : 0, t);
  overall_bucket_.set_rate(config.overall_Bps, t);
}

// May this piece of `t`'s body be taken now? Takes its bytes from its buckets.
bool Client::Impl::admit(const Transfer& t, std::size_t bytes) {
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
void Client::Impl::resume_paused() {
  if (paused_ == 0) return;
  const double at = now();
  background_bucket_.refill(at);
  overall_bucket_.refill(at);
  std::vector<std::pair<CURL*, CURLcode>> failed;
  for_each_transfer([&](Transfer& t) {
    if (!t.paused || t.held) return;  // Held by Client::pause: its resume goes on.
    const bool in_background = t.background && background_limited_;
    if ((in_background && !background_bucket_.ready()) || !overall_bucket_.ready()) return;
    t.paused = false;
    --paused_;
    t.watch.release(at);
    if (const CURLcode code = curl_easy_pause(t.easy, CURLPAUSE_CONT); code != CURLE_OK)
      failed.emplace_back(t.easy, code);  // It cannot go on: ended with libcurl's words.
  });
  for (auto [easy, code] : failed)
    finish(easy, code);
}

// Client::pause holds `t` (it stops reading; its watch stands still), or
// lets it go on: unless the throttle paused it meanwhile, libcurl goes on at
// once, from the byte it stopped at.
void Client::Impl::hold(Transfer& t, bool held) {
  t.held = held;
  const double at = now();
  if (held) {
    t.watch.hold(at);
    if (!t.paused) curl_easy_pause(t.easy, CURLPAUSE_RECV);
    return;
  }
  if (t.paused) return;  // The throttle's: resume_paused() lets it go.
  t.watch.release(at);
  if (const CURLcode code = curl_easy_pause(t.easy, CURLPAUSE_CONT); code != CURLE_OK)
    finish(t.easy, code);
}

int Client::Impl::throttle_wait_ms() const {
  const double wait_s = std::max(background_limited_ ? background_bucket_.wait_s() : 0.0,
                                 overall_bucket_.wait_s());
  return std::max(1, static_cast<int>(wait_s * 1000) + 1);
}

// Every progress interval: the engine learns what each transfer received
// (orphan policies weigh it) and displays get a fresh snapshot.
void Client::Impl::publish_progress() {
  const double t = now();
  if (t < next_progress_s_) return;
  next_progress_s_ = t + options_.progress_interval_s;
  std::vector<TransferSnapshot> snapshot;
  for_each_transfer([&](const Transfer& transfer) {
    snapshot.push_back(TransferSnapshot{transfer.id, transfer.task, transfer.key, transfer.offset,
                                        transfer.appended, transfer.expected_size.value_or(0)});
  });
  std::sort(snapshot.begin(), snapshot.end(),
            [](const auto& a, const auto& b) { return a.transfer.value < b.transfer.value; });
  std::vector<TaskId> waiting;
  for (const auto& [task, io] : io_tasks_) {
    if (io.state == TaskIo::State::waiting) waiting.push_back(TaskId{task});
  }
  if (!snapshot.empty() || !waiting.empty() || told_waiting_ || options_.on_progress) {
    told_waiting_ = !waiting.empty();
    CoreLock core(*this);
    core_.progress(now(), snapshot, waiting);  // Read under the lock: time never goes backwards.
    if (options_.on_progress) core_.report_progress(options_.on_progress);
    core.dispatch();
  }
  std::lock_guard lock(progress_mutex_);
  snapshot_ = std::move(snapshot);
}

// Now and then: ends the attempts that broke their bounds
// (ClientOptions::bounds): a stall or a deadline, a retryable failure.
void Client::Impl::enforce_bounds() {
  const double t = now();
  if (t < next_bounds_check_s_) return;
  next_bounds_check_s_ = t + kBoundsCheckS;
  std::vector<CURL*> ended;
  for_each_transfer([&](Transfer& transfer) {
    if (auto breach = transfer.watch.check(t, transfer.appended)) {
      transfer.breach = describe(*breach, transfer.url);
      ended.push_back(transfer.easy);
    }
  });
  for (CURL* e : ended)
    finish(e, CURLE_OPERATION_TIMEDOUT);
}

void Client::Impl::handle(IoJob& job) {
  std::visit([this](auto& j) { handle(j); }, job);
}

void Client::Impl::handle(LimitsJob& job) {
  auto it = io_tasks_.find(job.task.value);
  if (it == io_tasks_.end()) return;
  TaskIo& io = it->second;
  io.limits = job.limits;
  if (io.state == TaskIo::State::transferring) {
    io.transfer->expected_size = job.limits.exact;
    io.transfer->size_cap = job.limits.cap;
  }
}

void Client::Impl::handle(AbortJob& job) {
  auto it = io_tasks_.find(job.task.value);
  if (it == io_tasks_.end()) return;
  TaskIo& io = it->second;
  if ((io.state == TaskIo::State::waiting || io.state == TaskIo::State::held) &&
      io.start.transfer.value == job.transfer.value) {
    std::lock_guard lock(mutex_);
    core_.transfer_aborted(now(), job.task, job.transfer, 0, -1.0);
  } else if (io.state == TaskIo::State::transferring &&
             io.transfer->id.value == job.transfer.value) {
    const Transfer& t = *io.transfer;
    const std::uint64_t received = t.appended;
    // Time to first byte, or -1 if no body byte came.
    const double first_byte_s = t.first_byte_s ? *t.first_byte_s - t.requested_s : -1.0;
    release(*io.transfer);
    io.transfer.reset();
    if (job.keep_partial && io.files.staging && io.files.staging->bytes() > 0) {
      // Kept for the key: the next task of it resumes after these bytes.
      io.files.lock.reset();  // Others may fetch the key meanwhile.
      partials_.insert_or_assign(*io.start.key, std::move(io.files));
    }
    std::lock_guard lock(mutex_);
    core_.transfer_aborted(now(), job.task, job.transfer, received, first_byte_s);
  }
  io_tasks_.erase(job.task.value);  // Aborted: its bytes are not kept.
}

void Client::Impl::handle(ForgetJob& job) {
  io_tasks_.erase(job.task.value);
  std::lock_guard lock(ready_mutex_);
  ready_.erase(job.task.value);
}

// Each waiting start looks for the object another fetch is installing,
// then tries the key's lock: the fetch it waited for failed, or died.
// Oldest task first. Whether any still waits.
bool Client::Impl::poll_waiting() {
  std::vector<std::uint64_t> waiting;
  for (const auto& [task, io] : io_tasks_) {
    if (io.state == TaskIo::State::waiting) waiting.push_back(task);
  }
  std::sort(waiting.begin(), waiting.end());
  for (std::uint64_t task : waiting) {
    TaskIo& io = io_tasks_.at(task);
    const StartTransfer start = io.start;
    const Limits limits = io.limits;
    if (cache_.stat_object(*start.key, false)) {
      installed_elsewhere(start);
    } else if (auto lock = cache_.try_lock_key(*start.key)) {
      io.files.lock = std::move(*lock);
      this->start(start, limits);
    }
  }
  return std::any_of(waiting.begin(), waiting.end(), [this](std::uint64_t task) {
    auto it = io_tasks_.find(task);
    return it != io_tasks_.end() && it->second.state == TaskIo::State::waiting;
  });
}

// The key is installed (by another fetch): no bytes to move; finalize
// checks the object and holds it.
void Client::Impl::installed_elsewhere(const StartTransfer& c) {
  io_tasks_.erase(c.task.value);  // Whatever it staged is not needed.
  {
    std::lock_guard lock(ready_mutex_);
    Ready ready;
    ready.installed_elsewhere = true;
    ready_.insert_or_assign(c.task.value, std::move(ready));
  }
  report(c.transfer, c.task, TransferStatus::ok, 0);
}

}  // namespace dfl::backend
