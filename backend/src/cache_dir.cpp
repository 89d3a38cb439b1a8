#include "demandflight/backend/cache_dir.h"

#include <fcntl.h>
#include <liburing.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <random>
#include <stdexcept>
#include <system_error>
#include <thread>
#include <utility>

namespace dfl::backend {
namespace {

namespace fs = std::filesystem;

// "cannot write PATH: No space left on device", with "disk full: " before a
// full file system's errors, so that a user sees the cause first.
std::string errno_text(const std::string& what, const fs::path& path) {
  const bool full = errno == ENOSPC || errno == EDQUOT;
  return (full ? "disk full: " : "") + what + " " + path.string() + ": " + std::strerror(errno);
}

constexpr const char* kDigestAttribute = "user.demandflight.sha256";

bool is_digest(std::string_view s) {
  return s.size() == 64 && s.find_first_not_of("0123456789abcdef") == std::string_view::npos;
}

// Retries a call interrupted by a signal.
template <class F>
int retry_eintr(F call) {
  int rc = 0;
  do {
    rc = call();
  } while (rc != 0 && errno == EINTR);
  return rc;
}

bool same_file(int fd, const fs::path& path) {
  struct stat a {
  }, b{};
  return ::fstat(fd, &a) == 0 && ::stat(path.c_str(), &b) == 0 && a.st_dev == b.st_dev &&
         a.st_ino == b.st_ino;
}

// The owner id in a staging file's name "<object>.<owner>.<n>.part".
std::string owner_of_staging(const std::string& name) {
  const std::size_t first = name.find('.');
  if (first == std::string::npos) return {};
  const std::size_t second = name.find('.', first + 1);
  if (second == std::string::npos) return {};
  return name.substr(first + 1, second - first - 1);
}

std::string random_owner_id() {
  std::random_device device;
  std::uint64_t bits = (std::uint64_t{device()} << 32) ^ device();
  bits ^= static_cast<std::uint64_t>(::getpid()) << 17;
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(bits));
  return text;
}

// Feeds a file's first `length` bytes (all of it if nullopt) to `hash`;
// false if they cannot all be read.
bool hash_file(int fd, Sha256& hash, std::optional<std::uint64_t> length = std::nullopt) {
  std::vector<char> buffer(1 << 20);
  std::uint64_t offset = 0;
  for (;;) {
    std::size_t want = buffer.size();
    if (length) want = static_cast<std::size_t>(std::min<std::uint64_t>(want, *length - offset));
    if (want == 0) break;
    const ssize_t n = ::pread(fd, buffer.data(), want, static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return false;
    if (n == 0) break;
    hash.update(buffer.data(), static_cast<std::size_t>(n));
    offset += static_cast<std::uint64_t>(n);
  }
  return !length || offset == *length;
}

int open_staging(const fs::path& path) {
  return ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
}

// The digest kept with an object: its 32 bytes, which ext4 keeps inside a
// 256-byte inode beside the attribute's name (64 hex digits do not fit and
// cost a block of their own per object). Attributes of 64 hex digits, as
// earlier versions wrote them, are read too.
void write_digest_attribute(int fd, const std::string& hex) {
  if (!is_digest(hex)) return;
  Sha256::Digest raw{};
  for (std::size_t i = 0; i < raw.size(); ++i) {
    raw[i] = static_cast<std::uint8_t>(std::stoi(hex.substr(2 * i, 2), nullptr, 16));
  }
  ::fsetxattr(fd, kDigestAttribute, raw.data(), raw.size(), 0);  // Best effort.
}

std::optional<std::string> read_digest_attribute(int fd) {
  char value[64] = {};
  const ssize_t n = ::fgetxattr(fd, kDigestAttribute, value, sizeof value);
  if (n == 32) {
    Sha256::Digest raw{};
    std::memcpy(raw.data(), value, raw.size());
    return Sha256::hex(raw);
  }
  if (n == 64 && is_digest(std::string_view(value, 64))) return std::string(value, 64);
  return std::nullopt;
}

// The owner id in a locks/ file name (owner-<owner>, or .new-<owner> while
// it is being made); empty for any other file.
std::string owner_of_lock(const std::string& name) {
  if (name.rfind("owner-", 0) == 0) return name.substr(6);
  if (name.rfind(".new-", 0) == 0) return name.substr(5);
  return {};
}

bool is_object_name(const std::string& name) {
  if (name.size() != 64) return false;
  for (char c : name) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

}  // namespace

// --- Write-behind ----------------------------------------------------------------

// One thread that hashes and writes full staging buffers, in the order they
// were handed over (so each file's bytes stay in order). A Staging has at
// most kMaxPending buffers in flight; more makes its writer wait (memory
// stays bounded when the disk is slower than the network).
//
// Direct writes (CacheOptions::direct_writes): a full buffer of a file that
// drops behind is submitted as an O_DIRECT write through io_uring and hashed
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

  explicit WriteBehind(bool direct) {
    ring_ok_ = direct && ::io_uring_queue_init(kMaxInFlight, &ring_, 0) == 0;
    direct_ = ring_ok_ && supports_write(ring_);
    thread_ = std::thread([this] { run(); });
  }
  ~WriteBehind() {
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
    }
    cv_.notify_one();
    thread_.join();
    if (ring_ok_) ::io_uring_queue_exit(&ring_);
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
  // Whether the kernel has io_uring's plain write (Linux 5.6 and later).
  static bool supports_write(io_uring& ring) {
    io_uring_probe* probe = ::io_uring_get_probe_ring(&ring);
    if (probe == nullptr) return false;
    const bool supported = ::io_uring_opcode_supported(probe, IORING_OP_WRITE) != 0;
    ::io_uring_free_probe(probe);
    return supported;
  }

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
      core.direct_fd = ::open(core.path.c_str(), O_WRONLY | O_DIRECT | O_CLOEXEC);
      if (core.direct_fd < 0) {
        core.direct_refused = true;
        if (errno == EINVAL) direct_ = false;  // The file system has no O_DIRECT.
        return false;
      }
    }
    while (in_flight_ >= kMaxInFlight)
      reap(/*wait=*/true);
    io_uring_sqe* sqe = ::io_uring_get_sqe(&ring_);
    if (sqe == nullptr) return false;  // Not with at most kMaxInFlight in flight.
    auto* write = new InFlight{&core, std::move(buffer), core.written};
    ::io_uring_prep_write(sqe, core.direct_fd, write->buffer.data(),
                          static_cast<unsigned>(write->buffer.size()), write->offset);
    ::io_uring_sqe_set_data(sqe, write);
    if (::io_uring_submit(&ring_) != 1) {
      // The entry stays in the ring; should anything ever submit it, it is a
      // no-op with nothing attached, not a write of a recycled buffer.
      ::io_uring_prep_nop(sqe);
      ::io_uring_sqe_set_data(sqe, nullptr);
      buffer = std::move(write->buffer);
      delete write;
      direct_ = false;  // A ring that cannot submit will not later.
      return false;
    }
    ++in_flight_;
    core.hash.update(write->buffer.data(), write->buffer.size());  // While the disk reads it.
    core.written += write->buffer.size();
    // Nothing of it is in the page cache: nothing to write back or drop.
    core.writeback_started = core.dropped = core.written;
    Staging::request_early_sync(core);
    reap(/*wait=*/false);
    return true;
  }

  // Completes the direct writes that are done; with `wait`, at least one.
  void reap(bool wait) {
    io_uring_cqe* cqe = nullptr;
    while (in_flight_ > 0) {
      const int rc = wait ? ::io_uring_wait_cqe(&ring_, &cqe) : ::io_uring_peek_cqe(&ring_, &cqe);
      if (rc == -EINTR) continue;
      if (rc != 0 && !wait) return;  // None ready.
      if (rc != 0) {
        // The kernel still holds the buffers of the writes in flight: they
        // can be neither reused nor freed, nor their files completed.
        std::fprintf(stderr, "demandflight: io_uring wait failed: %s\n", std::strerror(-rc));
        std::abort();
      }
      std::unique_ptr<InFlight> write(static_cast<InFlight*>(::io_uring_cqe_get_data(cqe)));
      const int res = cqe->res;
      ::io_uring_cqe_seen(&ring_, cqe);
      if (!write) continue;  // The no-op of a refused submission (write_direct).
      --in_flight_;
      finish(*write->core, std::move(write->buffer), complete(*write, res));
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
  io_uring ring_{};
  bool ring_ok_ = false;
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
        if (::fdatasync(fd) != 0) error = errno;
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

// --- Staging -----------------------------------------------------------------

CacheDir::Staging::Staging(fs::path path, int fd, std::string object_name, CacheDir& cache)
    : core_(std::make_unique<Core>()), writer_(cache.writer_.get()) {
  core_->path = std::move(path);
  core_->drop_behind = cache.drop_behind_;
  core_->early_sync = cache.early_sync_bytes_ > 0 ? cache.early_sync_.get() : nullptr;
  core_->early_sync_bytes = cache.early_sync_bytes_;
  core_->fd = fd;
  core_->opened = fd >= 0;
  core_->object_name = std::move(object_name);
  core_->cache = &cache;
  if (writer_ != nullptr) {
    buffer_ = writer_->buffer();
  } else {
    buffer_.reserve(kBufferBytes);
  }
}

CacheDir::Staging& CacheDir::Staging::operator=(Staging&& other) noexcept {
  if (this != &other) {
    discard();
    core_ = std::move(other.core_);
    writer_ = other.writer_;
    buffer_ = std::move(other.buffer_);
    bytes_ = other.bytes_;
  }
  return *this;
}

CacheDir::Staging::~Staging() {
  discard();
}

void CacheDir::Staging::wait_for_writer() {
  if (!core_) return;
  std::unique_lock lock(core_->mutex);
  core_->done.wait(lock, [this] { return core_->pending == 0; });
}

void CacheDir::Staging::discard() {
  if (!core_) return;
  wait_for_writer();  // The writer may still hold the descriptor.
  if (writer_ != nullptr) writer_->recycle(std::exchange(buffer_, {}));
  if (core_->direct_fd >= 0) ::close(std::exchange(core_->direct_fd, -1));
  if (core_->fd >= 0) {
    ::close(core_->fd);
    core_->fd = -1;
    ::unlink(core_->path.c_str());
  }
  core_.reset();
}

std::optional<IoError> CacheDir::Staging::open_file(Core& core) {
  if (core.opened) {
    if (core.fd >= 0) return std::nullopt;
    return IoError{"cannot create " + core.path.string() + ": " + std::strerror(core.open_errno)};
  }
  core.opened = true;
  core.fd = open_staging(core.path);
  if (core.fd < 0) {
    core.open_errno = errno;
    return IoError{errno_text("cannot create", core.path), errno == ENOSPC || errno == EDQUOT};
  }
  return std::nullopt;
}

std::optional<IoError> CacheDir::Staging::pwrite_all(Core& core, const char* data, std::size_t size,
                                                     std::uint64_t offset) {
  bool made_room = false;
  while (size > 0) {
    const ssize_t n = ::pwrite(core.fd, data, size, static_cast<off_t>(offset));
    if (n < 0) {
      if (errno == EINTR) continue;
      if ((errno == ENOSPC || errno == EDQUOT) && !made_room && core.cache != nullptr) {
        // The file system is full: evict what nobody holds, then once more.
        made_room = true;
        const std::uint64_t rest =
            core.size_hint > offset ? core.size_hint - offset : static_cast<std::uint64_t>(size);
        if (core.cache->make_space(std::max<std::uint64_t>(rest, size))) continue;
        errno = ENOSPC;
      }
      return IoError{errno_text("cannot write", core.path), errno == ENOSPC || errno == EDQUOT};
    }
    data += n;
    size -= static_cast<std::size_t>(n);
    offset += static_cast<std::uint64_t>(n);
  }
  return std::nullopt;
}

void CacheDir::Staging::request_early_sync(Core& core) {
  if (core.early_sync == nullptr || core.written - core.early_requested < core.early_sync_bytes)
    return;
  if (!core.early) {
    core.early = std::make_shared<EarlySyncState>();
    core.early->path = core.path;
  }
  core.early_sync->request(core.early);
  core.early_requested = core.written;
}

std::optional<IoError> CacheDir::Staging::write_out(Core& core, const char* data,
                                                    std::size_t size) {
  if (auto error = open_file(core)) return error;
  core.hash.update(data, size);
  // At an explicit offset: direct writes (WriteBehind) leave the file
  // position where it was.
  if (auto error = pwrite_all(core, data, size, core.written)) return error;
  core.written += size;
  // Start writing back what is written so far, without waiting: the fsync
  // of the install then waits for the tail only, not for the whole file.
  if (core.written - core.writeback_started >= kWritebackBytes) {
    ::sync_file_range(core.fd, static_cast<off_t>(core.writeback_started),
                      static_cast<off_t>(core.written - core.writeback_started),
                      SYNC_FILE_RANGE_WRITE);
    core.writeback_started = core.written;
    // Drop what lies far enough behind, once it is on the disk (a page
    // still dirty or under writeback would stay): the next writes reuse
    // those pages. Waiting here also keeps the writeback within the window
    // of the writes when the disk is slower than the network.
    if (core.drop_behind > 0 && core.written > core.dropped + core.drop_behind) {
      const auto from = static_cast<off_t>(core.dropped);
      const auto length = static_cast<off_t>(core.written - core.drop_behind - core.dropped);
      if (::sync_file_range(core.fd, from, length,
                            SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE |
                                SYNC_FILE_RANGE_WAIT_AFTER) != 0)
        return IoError{errno_text("cannot write back", core.path)};
      ::posix_fadvise(core.fd, from, length, POSIX_FADV_DONTNEED);
      core.dropped += static_cast<std::uint64_t>(length);
    }
    request_early_sync(core);
  }
  return std::nullopt;
}

std::optional<IoError> CacheDir::Staging::write(const void* data, std::size_t size) {
  if (!core_) return IoError{"write to a closed staging file"};
  // The writer's error, if any (checked without the lock on every piece of
  // a body: the lock was 3% of a 1 GiB fetch's samples).
  if (writer_ != nullptr && core_->failed.load(std::memory_order_acquire)) {
    std::lock_guard lock(core_->mutex);
    return core_->error;
  }
  bytes_ += size;
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    const std::size_t take = std::min(kBufferBytes - buffer_.size(), size);
    // Grown without zeroing, then one memcpy: vector::insert copies element
    // by element with an allocator other than std::allocator (14% of a 1 GiB
    // fetch's samples).
    const std::size_t at = buffer_.size();
    buffer_.resize(at + take);
    std::memcpy(buffer_.data() + at, p, take);
    p += take;
    size -= take;
    if (buffer_.size() < kBufferBytes) continue;
    if (writer_ != nullptr) {
      writer_->submit(*core_, std::exchange(buffer_, writer_->buffer()));
    } else {
      auto error = write_out(*core_, buffer_.data(), buffer_.size());
      buffer_.clear();
      if (error) return error;
    }
  }
  return std::nullopt;
}

std::optional<IoError> CacheDir::Staging::flush() {
  wait_for_writer();
  if (core_->error) return core_->error;
  auto error = write_out(*core_, buffer_.data(), buffer_.size());
  buffer_.clear();
  if (writer_ != nullptr) writer_->recycle(std::exchange(buffer_, {}));
  return error;
}

// --- CacheDir --------------------------------------------------------------------

CacheDir::CacheDir(fs::path root, CacheOptions options)
    : root_(std::move(root)),
      objects_(root_ / "objects"),
      staging_(root_ / "staging"),
      locks_(root_ / "locks"),
      owner_(random_owner_id()),
      capacity_bytes_(options.capacity_bytes),
      sync_mode_(options.sync),
      drop_behind_(options.drop_behind_bytes),
      early_sync_bytes_(options.early_sync_bytes),
      direct_writes_(options.direct_writes) {
  std::error_code ec;
  for (const fs::path* dir : {&objects_, &staging_, &locks_}) {
    fs::create_directories(*dir, ec);
    if (ec) throw std::runtime_error("cannot create " + dir->string() + ": " + ec.message());
  }
  take_owner_lock();
  // locks/ as this CacheDir leaves it, before it looks for other owners: one
  // arriving from now on moves its time (see alone()). The key locks' file
  // is made now, so that the first key lock changes nothing.
  if (const int keys = ::open((locks_ / "keys").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
      keys >= 0) {
    ::close(keys);
  }
  locks_fd_ = ::open(locks_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  struct stat locks_stat {};
  if (locks_fd_ < 0 || ::fstat(locks_fd_, &locks_stat) != 0) {
    alone_.store(false, std::memory_order_relaxed);
  }
  locks_mtime_ = locks_stat.st_mtim;
  remove_dead_staging();
  rescan_objects(/*at_open=*/true);

  objects_fd_ = ::open(objects_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (objects_fd_ < 0) throw std::runtime_error(errno_text("cannot open", objects_));
  early_sync_ = std::make_unique<EarlySync>();
  if (options.write_behind) writer_ = std::make_unique<WriteBehind>(direct_writes_);
  if (sync_mode_ == SyncMode::batched) committer_ = std::thread([this] { commit_loop(); });
}

CacheDir::~CacheDir() {
  if (committer_.joinable()) {
    {
      std::lock_guard lock(commit_mutex_);
      commit_stop_ = true;
    }
    commit_cv_.notify_one();
    committer_.join();  // It commits what is still waiting first.
  }
  if (objects_fd_ >= 0) ::close(objects_fd_);
  if (locks_fd_ >= 0) ::close(locks_fd_);
  if (owner_fd_ >= 0) {
    // Gone: a later start-up may remove what this owner left in staging/.
    ::unlink((locks_ / ("owner-" + owner_)).c_str());
    ::close(owner_fd_);
  }
}

void CacheDir::take_owner_lock() {
  // Locked under a temporary name, then renamed into place: no other
  // CacheDir ever sees the owner file unlocked. Another CacheDir's start-up
  // may take the temporary file for a dead owner's between its creation and
  // its lock, lock it for a moment and remove it: then the lock or the rename
  // fails, and this tries again.
  const fs::path fresh = locks_ / (".new-" + owner_);
  const fs::path final_name = locks_ / ("owner-" + owner_);
  for (int attempt = 0;; ++attempt) {
    owner_fd_ = ::open(fresh.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (owner_fd_ < 0) throw std::runtime_error(errno_text("cannot create", fresh));
    const bool locked = retry_eintr([&] { return ::flock(owner_fd_, LOCK_EX | LOCK_NB); }) == 0;
    if (locked && ::rename(fresh.c_str(), final_name.c_str()) == 0) return;
    const int error = errno;
    ::close(std::exchange(owner_fd_, -1));
    ::unlink(fresh.c_str());  // This CacheDir's own name, if it is still there.
    if (attempt < 16) continue;
    errno = error;
    throw std::runtime_error(errno_text("cannot lock", fresh));
  }
}

bool CacheDir::owner_alive(const std::string& owner) const {
  if (owner == owner_) return true;
  const int fd = ::open((locks_ / ("owner-" + owner)).c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;  // No lock: its owner is gone (or never made one).
  // The owner holds its lock exclusively for as long as it is open.
  const bool alive = ::flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK;
  ::close(fd);
  return alive;
}

void CacheDir::remove_dead_staging() {
  std::error_code ec;
  std::unordered_map<std::string, bool> alive;  // Owner id -> open somewhere.
  auto is_alive = [&](const std::string& owner) {
    auto [it, fresh] = alive.try_emplace(owner, false);
    if (fresh) it->second = owner_alive(owner);
    return it->second;
  };
  for (const auto& entry : fs::directory_iterator(staging_, ec)) {
    const std::string name = entry.path().filename().string();
    if (is_alive(owner_of_staging(name))) continue;  // Another live process's.
    fs::remove(entry.path(), ec);
    if (ec)
      throw std::runtime_error("cannot remove " + entry.path().string() + ": " + ec.message());
    ++staging_leftovers_removed_;
  }
  if (ec) throw std::runtime_error("cannot list " + staging_.string() + ": " + ec.message());
  // The owner locks of owners that are gone (a crash left them).
  for (const auto& entry : fs::directory_iterator(locks_, ec)) {
    const std::string name = entry.path().filename().string();
    const std::string owner = owner_of_lock(name);
    if (owner.empty() || owner == owner_) continue;
    const int fd = ::open(entry.path().c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;  // Gone meanwhile: its unlink moved locks/'s time.
    if (::flock(fd, LOCK_EX | LOCK_NB) == 0 && same_file(fd, entry.path())) {
      ::unlink(entry.path().c_str());  // Moves locks/'s time: not alone().
    } else {
      alone_.store(false, std::memory_order_relaxed);  // Another owner is open.
    }
    ::close(fd);
  }
  if (ec) alone_.store(false, std::memory_order_relaxed);
}

void CacheDir::rescan_objects(bool at_open) {
  struct Found {
    std::string name;
    std::uint64_t size;
    std::int64_t mtime_ns;
  };
  std::vector<Found> found;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(objects_, ec)) {
    const std::string name = entry.path().filename().string();
    struct stat st {};
    if (!is_object_name(name) || ::stat(entry.path().c_str(), &st) != 0 || !S_ISREG(st.st_mode))
      continue;
    found.push_back(Found{name, static_cast<std::uint64_t>(st.st_size),
                          std::int64_t{st.st_mtim.tv_sec} * 1'000'000'000 + st.st_mtim.tv_nsec});
  }
  if (ec && at_open)
    throw std::runtime_error("cannot list " + objects_.string() + ": " + ec.message());
  if (ec) return;  // Later: the index stays as it was.
  // Objects new to the index enter by age (installs set the time): the
  // oldest is the first to go.
  std::sort(found.begin(), found.end(),
            [](const Found& a, const Found& b) { return a.mtime_ns < b.mtime_ns; });
  std::unordered_map<std::string, std::uint64_t> on_disk;
  for (const Found& f : found)
    on_disk.emplace(f.name, f.size);
  std::lock_guard lock(mutex_);
  for (auto it = index_.begin(); it != index_.end();) {
    auto disk = on_disk.find(it->first);
    if (disk == on_disk.end()) {  // Evicted by another CacheDir.
      index_bytes_ -= it->second.size;
      lru_.erase(it->second.lru);
      it = index_.erase(it);
      continue;
    }
    if (disk->second != it->second.size) {  // Installed again meanwhile.
      index_bytes_ = index_bytes_ - it->second.size + disk->second;
      it->second.size = disk->second;
      it->second.sha256.clear();
    }
    ++it;
  }
  std::list<std::string> fresh;
  for (const Found& f : found) {
    if (index_.count(f.name) != 0) continue;
    auto at = fresh.insert(fresh.end(), f.name);
    index_.emplace(f.name, IndexEntry{f.size, {}, at});
    index_bytes_ += f.size;
  }
  lru_.splice(lru_.begin(), fresh);  // Older than anything this CacheDir used.
}

std::string CacheDir::object_name(const ArtifactKey& key) {
  // Length-prefixed, so that no two keys share an encoding.
  std::string encoding;
  for (const std::string* field : {&key.resource, &key.revision, &key.target}) {
    encoding += std::to_string(field->size());
    encoding += ':';
    encoding += *field;
  }
  encoding += std::to_string(key.generation);
  return Sha256::hex_of(encoding);
}

fs::path CacheDir::object_path(const ArtifactKey& key) const {
  return objects_ / object_name(key);
}

std::optional<std::uint64_t> CacheDir::installed_size(const ArtifactKey& key) const {
  const std::string name = object_name(key);
  std::lock_guard lock(mutex_);
  auto it = index_.find(name);
  if (it == index_.end()) return std::nullopt;
  return it->second.size;
}

void CacheDir::touch_locked(IndexEntry& entry) {
  lru_.splice(lru_.end(), lru_, entry.lru);
}

void CacheDir::erase_locked(const std::string& name) {
  auto it = index_.find(name);
  if (it == index_.end()) return;
  index_bytes_ -= it->second.size;
  lru_.erase(it->second.lru);
  index_.erase(it);
}

std::optional<CacheDir::ObjectInfo> CacheDir::stat_object(const ArtifactKey& key,
                                                          bool with_digest) {
  const std::string name = object_name(key);
  const fs::path path = objects_ / name;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    std::lock_guard lock(mutex_);
    erase_locked(name);  // Evicted by another CacheDir, if it was known.
    return std::nullopt;
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    return std::nullopt;
  }
  ObjectInfo info{static_cast<std::uint64_t>(st.st_size), {}};
  {
    std::lock_guard lock(mutex_);
    auto it = index_.find(name);
    if (it == index_.end()) {
      auto at = lru_.insert(lru_.end(), name);
      it = index_.emplace(name, IndexEntry{info.size, {}, at}).first;
      index_bytes_ += info.size;
    } else if (it->second.size != info.size) {
      index_bytes_ = index_bytes_ - it->second.size + info.size;
      it->second.size = info.size;
      it->second.sha256.clear();
    }
    touch_locked(it->second);
    info.sha256 = it->second.sha256;
  }
  if (with_digest && info.sha256.empty()) {
    if (auto kept = read_digest_attribute(fd)) {
      info.sha256 = std::move(*kept);
    } else if (Sha256 hash; hash_file(fd, hash)) {  // No attribute here: hashed once.
      info.sha256 = Sha256::hex(hash.finish());
      write_digest_attribute(fd, info.sha256);
    }
    std::lock_guard lock(mutex_);
    if (auto it = index_.find(name); it != index_.end() && it->second.size == info.size)
      it->second.sha256 = info.sha256;
  }
  ::close(fd);
  return info;
}

// --- Holds and key locks -------------------------------------------------------

CacheDir::Hold& CacheDir::Hold::operator=(Hold&& other) noexcept {
  if (this != &other) {
    release();
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}

void CacheDir::Hold::release() {
  if (fd_ >= 0) ::close(std::exchange(fd_, -1));  // Closing drops the flock.
}

CacheDir::Hold CacheDir::hold_file(const fs::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Hold{};
  if (retry_eintr([&] { return ::flock(fd, LOCK_SH); }) != 0) {
    ::close(fd);
    return Hold{};
  }
  return Hold{fd};
}

std::optional<CacheDir::Hold> CacheDir::hold(const ArtifactKey& key) const {
  const fs::path path = objects_ / object_name(key);
  for (int attempt = 0; attempt < 3; ++attempt) {
    Hold held = hold_file(path);
    if (!held) return std::nullopt;
    // An eviction that had the object locked unlinked it before we got the
    // lock; or an install replaced it: hold what the name is now.
    struct stat st {};
    if (::fstat(held.fd_, &st) == 0 && st.st_nlink > 0 && same_file(held.fd_, path)) return held;
  }
  return std::nullopt;
}

CacheDir::KeyLock& CacheDir::KeyLock::operator=(KeyLock&& other) noexcept {
  if (this != &other) {
    release();
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}

void CacheDir::KeyLock::release() {
  if (fd_ == -2) fd_ = -1;  // A lock that held nothing.
  if (fd_ < 0) return;
  // The byte's lock belongs to this open file description: closing it
  // releases the lock, and nothing is left on the disk to remove.
  ::close(std::exchange(fd_, -1));
}

std::optional<CacheDir::KeyLock> CacheDir::try_lock_key(const ArtifactKey& key) {
  // One lock file for every key, one byte of it per key (at the first 60
  // bits of the object's name, itself a SHA-256: the same in every build), locked with an open file description lock: a fetch
  // creates and removes no lock file of its own, which on ext4 cost two
  // inode changes in a shared directory per artifact. Each lock opens the
  // file anew, so two fetches in one process exclude each other as two
  // processes do. Two keys whose hashes meet only wait for each other.
  const fs::path path = locks_ / "keys";
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return KeyLock{-2};  // No lock to be had: fetch unguarded.
  const std::uint64_t offset = std::stoull(object_name(key).substr(0, 15), nullptr, 16);
  struct flock range {};
  range.l_type = F_WRLCK;
  range.l_whence = SEEK_SET;
  range.l_start = static_cast<off_t>(offset);
  range.l_len = 1;
  if (::fcntl(fd, F_OFD_SETLK, &range) == 0) return KeyLock{fd};
  const int error = errno;
  ::close(fd);
  if (error == EAGAIN || error == EACCES) return std::nullopt;  // Another fetch of the key.
  return KeyLock{-2};  // A file system without such locks: fetch unguarded.
}

// --- Eviction --------------------------------------------------------------------

bool CacheDir::try_evict(const std::string& name) {
  const fs::path path = objects_ / name;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    std::lock_guard lock(mutex_);
    erase_locked(name);  // Already gone.
    return true;
  }
  // Without waiting: an object somebody holds stays.
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0 || !same_file(fd, path)) {
    ::close(fd);
    return false;
  }
  ::unlink(path.c_str());
  ::close(fd);
  {
    std::lock_guard lock(mutex_);
    erase_locked(name);
  }
  evictions_.fetch_add(1, std::memory_order_relaxed);
  return true;
}

std::optional<IoError> CacheDir::make_room(std::uint64_t incoming) {
  if (capacity_bytes_ == ~std::uint64_t{0}) return std::nullopt;
  if (incoming > capacity_bytes_) {
    return IoError{"cache full: an object of " + std::to_string(incoming) +
                   " bytes is larger than the capacity of " + std::to_string(capacity_bytes_)};
  }
  for (int pass = 0; pass < 2; ++pass) {
    std::vector<std::string> oldest;
    {
      std::lock_guard lock(mutex_);
      if (index_bytes_ + incoming <= capacity_bytes_) return std::nullopt;
      oldest.assign(lru_.begin(), lru_.end());
    }
    for (const std::string& name : oldest) {
      {
        std::lock_guard lock(mutex_);
        if (index_bytes_ + incoming <= capacity_bytes_) return std::nullopt;
      }
      try_evict(name);
    }
    if (pass == 0)
      rescan_objects(/*at_open=*/false);  // Others may have evicted or installed meanwhile.
  }
  std::lock_guard lock(mutex_);
  if (index_bytes_ + incoming <= capacity_bytes_) return std::nullopt;
  return IoError{
      "cache full: " + std::to_string(index_bytes_) + " of " + std::to_string(capacity_bytes_) +
      " bytes are held (pinned) and cannot be evicted for " + std::to_string(incoming) + " more"};
}

bool CacheDir::make_space(std::uint64_t needed) {
  auto free_bytes = [this]() -> std::uint64_t {
    struct statvfs fsinfo {};
    if (::fstatvfs(objects_fd_, &fsinfo) != 0) return 0;
    return std::uint64_t{fsinfo.f_bavail} * fsinfo.f_frsize;
  };
  std::vector<std::string> oldest;
  {
    std::lock_guard lock(mutex_);
    oldest.assign(lru_.begin(), lru_.end());
  }
  bool evicted = false;
  for (const std::string& name : oldest) {
    if (free_bytes() >= needed) break;
    evicted = try_evict(name) || evicted;
  }
  return evicted;
}

std::size_t CacheDir::installed_count() const {
  std::lock_guard lock(mutex_);
  return index_.size();
}

std::uint64_t CacheDir::installed_bytes() const {
  std::lock_guard lock(mutex_);
  return index_bytes_;
}

std::variant<CacheDir::Staging, IoError> CacheDir::begin(const ArtifactKey& key,
                                                         std::uint64_t size_hint) {
  std::string name = object_name(key);
  std::uint64_t serial = 0;
  {
    std::lock_guard lock(mutex_);
    serial = ++next_staging_;
  }
  const fs::path path = staging_ / (name + "." + owner_ + "." + std::to_string(serial) + ".part");
  if (writer_) {
    // Created by whichever thread first writes to it: the receiving thread
    // never waits on the staging directory (a rename out of it waits for the
    // objects/ fsync while holding it).
    Staging staging(path, -1, std::move(name), *this);
    staging.core_->size_hint = size_hint;
    return staging;
  }
  const int fd = open_staging(path);
  if (fd < 0) return IoError{errno_text("cannot create", path)};
  Staging staging(path, fd, std::move(name), *this);
  staging.core_->size_hint = size_hint;
  return staging;
}

bool CacheDir::alone() const {
  if (!alone_.load(std::memory_order_relaxed)) return false;
  struct stat st {};
  if (::fstat(locks_fd_, &st) != 0 || st.st_mtim.tv_sec != locks_mtime_.tv_sec ||
      st.st_mtim.tv_nsec != locks_mtime_.tv_nsec) {
    alone_.store(false, std::memory_order_relaxed);
    return false;
  }
  return true;
}

std::optional<CacheDir::Staging> CacheDir::adopt_partial(const ArtifactKey& key,
                                                         std::uint64_t size_hint) {
  // Only an owner that was open at some time since this CacheDir opened
  // can have died and left a file: the start-up removed all the others'.
  if (alone()) return std::nullopt;
  const std::string name = object_name(key);
  std::error_code ec;
  fs::path best;
  std::uint64_t best_size = 0;
  for (const auto& entry : fs::directory_iterator(staging_, ec)) {
    const std::string file = entry.path().filename().string();
    if (file.rfind(name + ".", 0) != 0) continue;
    std::error_code size_ec;
    const std::uint64_t size = entry.file_size(size_ec);
    if (size_ec || size <= best_size || owner_alive(owner_of_staging(file))) continue;
    best = entry.path();
    best_size = size;
  }
  if (best.empty()) return std::nullopt;
  auto begun = begin(key, size_hint);
  auto* staging = std::get_if<Staging>(&begun);
  if (staging == nullptr) return std::nullopt;
  Staging::Core& core = *staging->core_;
  // Renamed first: a start-up that cleans dead owners' files cannot take it
  // from us after this, and only one adopter wins.
  if (::rename(best.c_str(), core.path.c_str()) != 0) return std::nullopt;
  const int fd = ::open(core.path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) {
    ::unlink(core.path.c_str());
    return std::nullopt;
  }
  // Bytes before the first hole, in whole buffers: every buffer but a
  // file's last was written whole, and a direct write still in flight when
  // the owner died may have left a hole before a later one.
  const off_t hole = ::lseek(fd, 0, SEEK_HOLE);
  std::uint64_t keep = hole < 0 ? 0 : static_cast<std::uint64_t>(hole);
  keep -= keep % kBufferBytes;
  Sha256 hash;
  const bool ok = ::ftruncate(fd, static_cast<off_t>(keep)) == 0 && hash_file(fd, hash, keep);
  if (!ok || keep == 0) {
    ::close(fd);
    ::unlink(core.path.c_str());
    return std::nullopt;
  }
  core.fd = fd;
  core.opened = true;
  core.hash = std::move(hash);
  core.written = core.writeback_started = core.dropped = keep;
  staging->bytes_ = keep;
  return std::move(*staging);
}

std::variant<CacheDir::Sealed, IoError> CacheDir::seal(Staging& staging) {
  if (!staging.core_) return IoError{"seal of a closed staging file"};
  Staging::Core& core = *staging.core_;
  if (!core.digest) {
    if (auto error = staging.flush()) return *error;
    core.digest = Sha256::hex(core.hash.finish());
  }
  return Sealed{staging.bytes_, *core.digest};
}

std::optional<IoError> CacheDir::verify(Staging& staging,
                                        std::optional<std::uint64_t> expected_size,
                                        const std::optional<std::string>& expected_sha256,
                                        bool close) {
  if (!staging.core_) return IoError{"commit of a closed staging file"};
  auto sealed = seal(staging);  // `staging` removes its file when dropped.
  if (auto* error = std::get_if<IoError>(&sealed)) return *error;
  Staging::Core& core = *staging.core_;
  if (expected_size && staging.bytes_ != *expected_size) {
    return IoError{"size mismatch for " + core.object_name + ": expected " +
                   std::to_string(*expected_size) + " bytes, got " +
                   std::to_string(staging.bytes_)};
  }
  const std::string& digest = *core.digest;
  if (expected_sha256 && digest != *expected_sha256) {
    return IoError{"sha256 mismatch for " + core.object_name + ": expected " + *expected_sha256 +
                   ", got " + digest};
  }
  if (core.early) {  // Only set where early syncs are on.
    if (const int error = core.early_sync->finish(*core.early); error != 0) {
      return IoError{"cannot write back " + core.path.string() + ": " + std::strerror(error)};
    }
  }
  // The digest goes with the object (best effort: without it, a later
  // CacheDir hashes the object when a caller asks for its digest).
  if (core.fd >= 0) write_digest_attribute(core.fd, digest);
  return close ? close_staged(core) : std::nullopt;
}

std::optional<IoError> CacheDir::close_staged(Staging::Core& core) {
  const bool direct_closed = core.direct_fd < 0 || ::close(std::exchange(core.direct_fd, -1)) == 0;
  if (::close(std::exchange(core.fd, -1)) != 0 || !direct_closed) {
    ::unlink(core.path.c_str());
    return IoError{errno_text("cannot close", core.path)};
  }
  return std::nullopt;
}

std::optional<IoError> CacheDir::publish(const fs::path& staged, const std::string& object_name) {
  const fs::path target = objects_ / object_name;
  if (::rename(staged.c_str(), target.c_str()) != 0) {
    const IoError error{errno_text("cannot rename into", target)};
    ::unlink(staged.c_str());
    return error;
  }
  return std::nullopt;
}

void CacheDir::add_to_index(const std::string& object_name, std::uint64_t bytes,
                            std::string sha256) {
  std::lock_guard lock(mutex_);
  auto it = index_.find(object_name);
  if (it == index_.end()) {
    auto at = lru_.insert(lru_.end(), object_name);
    index_.emplace(object_name, IndexEntry{bytes, std::move(sha256), at});
  } else {
    index_bytes_ -= it->second.size;
    it->second.size = bytes;
    it->second.sha256 = std::move(sha256);
    touch_locked(it->second);
  }
  index_bytes_ += bytes;
}

std::optional<IoError> CacheDir::commit(Staging staging, std::optional<std::uint64_t> expected_size,
                                        const std::optional<std::string>& expected_sha256) {
  if (sync_mode_ == SyncMode::batched) {
    std::mutex m;
    std::condition_variable cv;
    std::optional<std::optional<IoError>> outcome;
    commit_async(std::move(staging), expected_size, expected_sha256,
                 [&](std::optional<IoError> error) {
                   std::lock_guard lock(m);
                   outcome.emplace(std::move(error));
                   cv.notify_one();
                 });
    std::unique_lock lock(m);
    cv.wait(lock, [&] { return outcome.has_value(); });
    return std::move(*outcome);
  }
  Hold held;
  return commit_per_file(std::move(staging), expected_size, expected_sha256, held);
}

std::optional<IoError> CacheDir::commit_per_file(Staging staging,
                                                 std::optional<std::uint64_t> expected_size,
                                                 const std::optional<std::string>& expected_sha256,
                                                 Hold& held) {
  if (auto error = verify(staging, expected_size, expected_sha256, /*close=*/false)) return error;
  Staging::Core& core = *staging.core_;
  // Durable bytes first, then the name: a crash between the two leaves only a
  // staging file, which the next start removes.
  // fdatasync: the data and the size; the timestamps need not be durable.
  if (::fdatasync(core.fd) != 0) return IoError{errno_text("cannot fsync", core.path)};
  ++file_syncs_;
  if (auto error = close_staged(core)) return error;
  // Held from before its rename until the caller has what it needs: no
  // eviction, here or elsewhere, can take the new object meanwhile.
  held = hold_file(core.path);
  if (auto error = make_room(staging.bytes_)) {
    ::unlink(core.path.c_str());
    return error;
  }
  if (auto error = publish(core.path, core.object_name)) return error;
  if (auto error = sync_objects_after_rename()) return error;
  add_to_index(core.object_name, staging.bytes_, *core.digest);
  return std::nullopt;
}

void CacheDir::commit_async(Staging staging, std::optional<std::uint64_t> expected_size,
                            const std::optional<std::string>& expected_sha256, CommitDone done) {
  if (sync_mode_ == SyncMode::per_file) {
    Hold held;  // Until `done` has returned.
    done(commit_per_file(std::move(staging), expected_size, expected_sha256, held));
    return;
  }
  if (auto error = verify(staging, expected_size, expected_sha256, /*close=*/true)) {
    { const Staging dropped = std::move(staging); }  // Its file is gone before `done` runs.
    done(std::move(error));
    return;
  }
  // Closed and verified: from here the committer owns the file.
  PendingCommit pending{staging.core_->path, staging.core_->object_name, staging.bytes_,
                        *staging.core_->digest, std::move(done)};
  {
    std::lock_guard lock(commit_mutex_);
    committing_.push_back(std::move(pending));
  }
  commit_cv_.notify_one();
}

void CacheDir::drain() {
  std::unique_lock lock(commit_mutex_);
  drained_cv_.wait(lock, [this] { return committing_.empty() && in_flight_ == 0; });
}

CacheDir::SyncCounts CacheDir::sync_counts() const {
  return SyncCounts{file_syncs_, fs_syncs_, dir_syncs_, early_sync_->count(),
                    writer_ ? writer_->direct_bytes() : 0};
}

void CacheDir::commit_loop() {
  std::vector<PendingCommit> batch;
  for (;;) {
    {
      std::unique_lock lock(commit_mutex_);
      in_flight_ = 0;
      drained_cv_.notify_all();
      commit_cv_.wait(lock, [this] { return commit_stop_ || !committing_.empty(); });
      if (committing_.empty()) return;  // Stopping, and nothing is left to commit.
      batch.clear();
      batch.swap(committing_);
      in_flight_ = batch.size();
    }
    commit_batch(batch);
  }
}

void CacheDir::commit_batch(std::vector<PendingCommit>& batch) {
  std::vector<std::optional<IoError>> errors(batch.size());
  // Durable bytes first, then the names (see commit()).
  bool synced = false;
  if (batch.size() >= kSyncfsMinBatch) {
    // One syncfs writes back every staged file of the batch. On ext4 without
    // a journal it flushes the disk's cache before its last step, which
    // writes (and waits for) inode table blocks: the fsync of objects/ after
    // it flushes again, so that sizes and extents are durable before any
    // name points at them. If either reports an error (which may be another
    // program's), each file is synced alone below, which says whose it was.
    synced = ::syncfs(objects_fd_) == 0 && ::fsync(objects_fd_) == 0;
    ++fs_syncs_;
    ++dir_syncs_;
  }
  if (!synced) {
    for (std::size_t i = 0; i < batch.size(); ++i) {
      const int fd = ::open(batch[i].staged.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd < 0 || ::fdatasync(fd) != 0) {
        errors[i] = IoError{errno_text("cannot fsync", batch[i].staged)};
        ::unlink(batch[i].staged.c_str());
      }
      if (fd >= 0) ::close(fd);
      ++file_syncs_;
    }
  }
  // Each new object is held from before its rename until its `done` has
  // returned (see commit_per_file), and room is made for the whole batch
  // before any of it becomes visible.
  std::vector<Hold> holds(batch.size());
  std::uint64_t incoming = 0;
  for (std::size_t i = 0; i < batch.size(); ++i) {
    if (errors[i]) continue;
    holds[i] = hold_file(batch[i].staged);
    if (auto error = make_room(incoming + batch[i].bytes)) {
      errors[i] = std::move(error);
      ::unlink(batch[i].staged.c_str());
      continue;
    }
    incoming += batch[i].bytes;
  }
  bool renamed = false;
  for (std::size_t i = 0; i < batch.size(); ++i) {
    if (errors[i]) continue;
    errors[i] = publish(batch[i].staged, batch[i].object_name);
    renamed = renamed || !errors[i];
  }
  if (renamed) {
    if (auto error = sync_objects_after_rename()) {
      for (auto& e : errors) {
        if (!e) e = error;
      }
    }
  }
  for (std::size_t i = 0; i < batch.size(); ++i) {
    if (!errors[i]) add_to_index(batch[i].object_name, batch[i].bytes, batch[i].sha256);
  }
  for (std::size_t i = 0; i < batch.size(); ++i) {
    batch[i].done(std::move(errors[i]));
  }
}

std::optional<IoError> CacheDir::sync_objects_after_rename() {
  std::unique_lock lock(sync_mutex_);
  const std::uint64_t mine = ++renames_;
  while (synced_ < mine) {
    if (syncing_) {
      sync_cv_.wait(lock);  // An fsync is running; it may have begun before our rename.
      continue;
    }
    syncing_ = true;
    const std::uint64_t covers = renames_;  // Every rename numbered so far is done.
    lock.unlock();
    const int rc = ::fsync(objects_fd_);
    const int error = errno;
    ++dir_syncs_;
    lock.lock();
    syncing_ = false;
    if (rc == 0) synced_ = std::max(synced_, covers);
    sync_cv_.notify_all();
    if (rc != 0) {
      errno = error;
      return IoError{errno_text("cannot fsync", objects_)};
    }
  }
  return std::nullopt;
}

bool CacheDir::remove(const ArtifactKey& key) {
  const std::string name = object_name(key);
  {
    std::lock_guard lock(mutex_);
    if (index_.count(name) == 0) return false;
  }
  return try_evict(name);
}

}  // namespace dfl::backend
