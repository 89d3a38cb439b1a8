// CacheDir's writer thread (WriteBehind), which hashes and writes full staging
// buffers, and the thread that syncs large staging files early (EarlySync).
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "demandflight/backend/cache_dir.h"
#include "platform.h"

namespace dfl::backend {

// --- Write-behind ----------------------------------------------------------------

// One thread that hashes and writes full staging buffers, in the order they
// were handed over (so each file's bytes stay in order). A Staging has at
// most kMaxPending buffers in flight; more makes its writer wait (memory
// stays bounded when the disk is slower than the network).
//
// Direct writes (CacheOptions::direct_writes): a full buffer of a file that
// drops behind is submitted as a direct write (platform::DirectWrites: O_DIRECT
// through io_uring, in a build with liburing) and hashed
// while the disk takes it; up to kMaxInFlight such writes are queued, and a
// buffer counts as pending until its write completes, so a Staging's flush()
// (which waits for its pending buffers) sees every byte in the file. A
// direct write the kernel refuses or cuts short is written again, or its
// rest, through the page cache; a file system that refuses O_DIRECT turns
// direct writes off.
class CacheDir::WriteBehind {
 public:
  static constexpr std::size_t kMaxPending = 8;
  static constexpr std::size_t kMaxFree = 64;
  static constexpr unsigned kMaxInFlight = 4;  // 4 and 8 did alike; 1 stalls on the disk.

  explicit WriteBehind(bool direct) : ring_(direct ? kMaxInFlight : 0) {
    direct_ = direct && ring_.available();
    thread_ = std::thread([this] { run(); });
  }
  ~WriteBehind() {
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
    }
    cv_.notify_one();
    thread_.join();
  }

  void submit(Staging::Core& core, Buffer buffer) {
    {
      std::unique_lock lock(core.mutex);
      core.done.wait(lock, [&] { return core.pending < kMaxPending; });
      ++core.pending;
    }
    {
      std::lock_guard lock(mutex_);
      jobs_.push_back(Job{&core, std::move(buffer)});
    }
    cv_.notify_one();
  }

  // Takes back a buffer that is no longer needed, for buffer() to hand out
  // again: small artifacts never fill one, and fresh ones cost page faults.
  void recycle(Buffer buffer) {
    if (buffer.capacity() < kBufferBytes) return;
    buffer.clear();
    std::lock_guard lock(mutex_);
    if (free_.size() < kMaxFree) free_.push_back(std::move(buffer));
  }

  // An empty buffer with the capacity of a full one, recycled when possible.
  Buffer buffer() {
    std::lock_guard lock(mutex_);
    if (free_.empty()) {
      Buffer fresh;
      fresh.reserve(kBufferBytes);
      return fresh;
    }
    Buffer recycled = std::move(free_.back());
    free_.pop_back();
    return recycled;
  }

  std::uint64_t direct_bytes() const { return direct_bytes_.load(std::memory_order_relaxed); }

 private:
  struct Job {
    Staging::Core* core;
    Buffer buffer;
  };
  struct InFlight {  // A direct write the kernel has.
    Staging::Core* core = nullptr;
    Buffer buffer;
    std::uint64_t offset = 0;
  };

  void run() {
    for (;;) {
      Job job;
      {
        std::unique_lock lock(mutex_);
        if (in_flight_ == 0) cv_.wait(lock, [this] { return stop_ || !jobs_.empty(); });
        if (jobs_.empty()) {
          if (in_flight_ == 0) return;  // Stopped, and nothing left to complete.
          lock.unlock();
          reap(/*wait=*/true);  // Nothing else to do meanwhile.
          continue;
        }
        job = std::move(jobs_.front());
        jobs_.pop_front();
      }
      // Completions first: once direct writes are off (a refusal), nothing
      // else would reap those still in flight while jobs keep coming.
      if (in_flight_ > 0) reap(/*wait=*/false);
      process(std::move(job));
    }
  }

  void process(Job job) {
    Staging::Core& core = *job.core;
    bool failed = false;
    {
      std::lock_guard lock(core.mutex);
      failed = core.error.has_value();
    }
    std::optional<IoError> error;
    if (!failed) {
      if (write_direct(core, job.buffer)) return;  // Completes later (reap).
      error = Staging::write_out(core, job.buffer.data(), job.buffer.size());
    }
    finish(core, std::move(job.buffer), std::move(error));
  }

  // Submits `buffer` as a direct write and hashes it meanwhile; false (and
  // `buffer` untouched) when it must go through the page cache instead.
  bool write_direct(Staging::Core& core, Buffer& buffer) {
    if (!direct_ || core.drop_behind == 0 || core.direct_refused || buffer.size() != kBufferBytes ||
        core.written % kBufferBytes != 0)
      return false;
    if (core.direct_fd < 0) {
      if (Staging::open_file(core)) return false;  // write_out reports it.
      core.direct_fd = platform::DirectWrites::open(core.path);
      if (core.direct_fd < 0) {
        core.direct_refused = true;
        if (errno == EINVAL) direct_ = false;  // The file system has no O_DIRECT.
        return false;
      }
    }
    while (in_flight_ >= kMaxInFlight)
      reap(/*wait=*/true);
    auto write = std::make_unique<InFlight>(InFlight{&core, std::move(buffer), core.written});
    if (!ring_.submit(core.direct_fd, write->buffer.data(),
                      static_cast<unsigned>(write->buffer.size()), write->offset, write.get())) {
      buffer = std::move(write->buffer);
      direct_ = false;  // A ring that cannot submit will not later.
      return false;
    }
    InFlight* const submitted = write.release();  // The ring's until reap().
    ++in_flight_;
    core.hash.update(submitted->buffer.data(), submitted->buffer.size());  // While the disk reads it.
    core.written += submitted->buffer.size();
    // Nothing of it is in the page cache: nothing to write back or drop.
    core.writeback_started = core.dropped = core.written;
    Staging::request_early_sync(core);
    reap(/*wait=*/false);
    return true;
  }

  // Completes the direct writes that are done; with `wait`, at least one.
  void reap(bool wait) {
    while (in_flight_ > 0) {
      const auto done = ring_.complete(wait);
      if (!done) return;  // None ready.
      std::unique_ptr<InFlight> write(static_cast<InFlight*>(done->tag));
      --in_flight_;
      finish(*write->core, std::move(write->buffer), complete(*write, done->result));
      wait = false;
    }
  }

  // What a direct write left undone goes through the page cache.
  std::optional<IoError> complete(InFlight& write, int res) {
    const std::size_t size = write.buffer.size();
    if (res >= 0 && static_cast<std::size_t>(res) == size) {
      direct_bytes_.fetch_add(size, std::memory_order_relaxed);
      return std::nullopt;
    }
    if (res == -EINVAL || res == -EOPNOTSUPP) direct_ = false;
    const std::size_t done = res > 0 ? static_cast<std::size_t>(res) : 0;
    direct_bytes_.fetch_add(done, std::memory_order_relaxed);
    return Staging::pwrite_all(*write.core, write.buffer.data() + done, size - done,
                               write.offset + done);
  }

  void finish(Staging::Core& core, Buffer buffer, std::optional<IoError> error) {
    recycle(std::move(buffer));
    std::lock_guard lock(core.mutex);
    if (error && !core.error) {
      core.error = std::move(error);
      core.failed.store(true, std::memory_order_release);
    }
    --core.pending;
    core.done.notify_all();
  }

  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<Job> jobs_;
  std::vector<Buffer> free_;
  bool stop_ = false;
  // The writer thread's alone after construction:
  platform::DirectWrites ring_;
  bool direct_ = false;
  unsigned in_flight_ = 0;
  std::atomic<std::uint64_t> direct_bytes_{0};
  std::thread thread_;  // Last: it starts with everything above in place.
};

// --- Early syncs -----------------------------------------------------------------

// One per staging file that asked for an early sync.
struct CacheDir::EarlySyncState {
  std::filesystem::path path;
  bool queued = false;  // Waiting or running (EarlySync's mutex).
  int error = 0;        // errno of a failed early sync (EarlySync's mutex).
};

// A thread, started on the first request, that fdatasyncs large staging
// files while they are still being written (CacheOptions::early_sync_bytes).
// It opens the file itself: a file description of its own, so that the
// writer never waits for it, and a removed file is simply skipped. A failed sync is kept for the
// install, which fails with it: the error is reported to one sync only, and
// the install's own sync may not see it again.
class CacheDir::EarlySync {
 public:
  ~EarlySync() {
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
    }
    cv_.notify_one();
    if (thread_.joinable()) thread_.join();
  }

  // At most one request per file waits or runs; a request meanwhile is moot.
  void request(const std::shared_ptr<EarlySyncState>& state) {
    {
      std::lock_guard lock(mutex_);
      if (state->queued) return;
      state->queued = true;
      jobs_.push_back(state);
      if (!thread_.joinable()) thread_ = std::thread([this] { run(); });
    }
    cv_.notify_one();
  }

  // Waits for the file's early sync, if one waits or runs, and returns its
  // error (0 if none failed).
  int finish(EarlySyncState& state) {
    std::unique_lock lock(mutex_);
    done_.wait(lock, [&] { return !state.queued; });
    return state.error;
  }

  std::uint64_t count() const { return count_.load(std::memory_order_relaxed); }

 private:
  void run() {
    std::unique_lock lock(mutex_);
    for (;;) {
      cv_.wait(lock, [this] { return stop_ || !jobs_.empty(); });
      if (jobs_.empty()) return;
      std::shared_ptr<EarlySyncState> state = std::move(jobs_.front());
      jobs_.pop_front();
      lock.unlock();
      int error = 0;
      const int fd = ::open(state->path.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd >= 0) {  // Else the file was removed: nothing to install.
        if (platform::data_sync(fd) != 0) error = errno;
        ::close(fd);
        count_.fetch_add(1, std::memory_order_relaxed);
      }
      lock.lock();
      state->queued = false;
      if (error != 0 && state->error == 0) state->error = error;
      done_.notify_all();
    }
  }

  std::mutex mutex_;
  std::condition_variable cv_, done_;
  std::deque<std::shared_ptr<EarlySyncState>> jobs_;
  bool stop_ = false;
  std::atomic<std::uint64_t> count_{0};
  std::thread thread_;
};

}  // namespace dfl::backend
