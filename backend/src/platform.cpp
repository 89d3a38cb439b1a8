// The platform calls of platform.h: Linux's own (DFL_LINUX_CALLS) or their
// POSIX fallbacks, and io_uring's direct writes (DFL_WITH_URING) or none.
#include "platform.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <utility>

#ifndef DFL_LINUX_CALLS
#define DFL_LINUX_CALLS 0
#endif
#ifndef DFL_WITH_URING
#define DFL_WITH_URING 0
#endif

#if DFL_LINUX_CALLS
#include <sys/xattr.h>
#endif
#if DFL_WITH_URING
#include <liburing.h>
#endif

namespace dfl::backend::platform {

Capabilities capabilities() {
  constexpr bool kLinux = DFL_LINUX_CALLS != 0;
  return Capabilities{kLinux, kLinux, kLinux, DFL_WITH_URING != 0};
}

// --- Durability ------------------------------------------------------------------

bool sync_file_system(int fd) {
#if DFL_LINUX_CALLS
  return ::syncfs(fd) == 0;
#else
  (void)fd;
  errno = ENOSYS;
  return false;
#endif
}

int data_sync(int fd) {
#if DFL_LINUX_CALLS
  return ::fdatasync(fd);
#else
  return ::fsync(fd);
#endif
}

void start_writeback(int fd, std::uint64_t from, std::uint64_t length) {
#if DFL_LINUX_CALLS
  ::sync_file_range(fd, static_cast<off_t>(from), static_cast<off_t>(length),
                    SYNC_FILE_RANGE_WRITE);
#else
  (void)fd, (void)from, (void)length;
#endif
}

bool write_back_and_drop(int fd, std::uint64_t from, std::uint64_t length) {
#if DFL_LINUX_CALLS
  const auto start = static_cast<off_t>(from);
  const auto size = static_cast<off_t>(length);
  if (::sync_file_range(fd, start, size,
                        SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE |
                            SYNC_FILE_RANGE_WAIT_AFTER) != 0)
    return false;
  ::posix_fadvise(fd, start, size, POSIX_FADV_DONTNEED);
#else
  (void)fd, (void)from, (void)length;
#endif
  return true;
}

// --- File attributes ---------------------------------------------------------------

bool set_attribute(int fd, const char* name, const void* value, std::size_t size) {
#if DFL_LINUX_CALLS
  return ::fsetxattr(fd, name, value, size, 0) == 0;
#else
  (void)fd, (void)name, (void)value, (void)size;
  return false;
#endif
}

std::optional<std::size_t> get_attribute(int fd, const char* name, void* value,
                                         std::size_t capacity) {
#if DFL_LINUX_CALLS
  const ssize_t n = ::fgetxattr(fd, name, value, capacity);
  if (n < 0) return std::nullopt;
  return static_cast<std::size_t>(n);
#else
  (void)fd, (void)name, (void)value, (void)capacity;
  return std::nullopt;
#endif
}

// --- Locks -------------------------------------------------------------------------

int lock_file(int fd, FileLock kind, bool wait) {
  const int operation = (kind == FileLock::shared ? LOCK_SH : LOCK_EX) | (wait ? 0 : LOCK_NB);
  int rc;
  do {
    rc = ::flock(fd, operation);
  } while (rc != 0 && errno == EINTR);
  return rc;
}

namespace {

struct flock byte_range(short type, std::uint64_t offset) {
  struct flock range {};
  range.l_type = type;
  range.l_whence = SEEK_SET;
  range.l_start = static_cast<off_t>(offset);
  range.l_len = 1;
  return range;
}

ByteLock::Status refusal(int error) {
  return error == EAGAIN || error == EACCES ? ByteLock::Status::busy
                                            : ByteLock::Status::unsupported;
}

#if !DFL_LINUX_CALLS
// POSIX record locks belong to the process, not to a descriptor: the
// process's second lock of a byte succeeds, and closing any descriptor of the
// file drops all of its locks there. So the fallback keeps one descriptor per
// file, open while any byte of it is locked, and the bytes this process holds.
struct ProcessByteLocks {
  struct File {
    int fd = -1;
    std::set<std::uint64_t> held;
  };
  std::mutex mutex;
  std::map<std::pair<dev_t, ino_t>, File> files;

  static ProcessByteLocks& instance() {
    static ProcessByteLocks* locks = new ProcessByteLocks;  // Never destroyed: used to exit.
    return *locks;
  }

  ByteLock lock(const std::filesystem::path& path, std::uint64_t offset) {
    std::lock_guard guard(mutex);
    struct stat st {};
    int opened = -1;
    if (::stat(path.c_str(), &st) != 0) {
      // Not there yet: create it. Nothing of this process is locked in it.
      opened = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
      if (opened < 0 || ::fstat(opened, &st) != 0) {
        if (opened >= 0) ::close(opened);
        return {};
      }
    }
    File& file = files[{st.st_dev, st.st_ino}];
    if (file.fd < 0) {
      file.fd = opened >= 0 ? opened : ::open(path.c_str(), O_RDWR | O_CLOEXEC);
      if (file.fd < 0) {
        files.erase({st.st_dev, st.st_ino});
        return {};
      }
    }
    // (A file this created is new: no entry of it had a descriptor already.)
    if (file.held.count(offset) != 0) return {ByteLock::Status::busy, -1};
    struct flock range = byte_range(F_WRLCK, offset);
    if (::fcntl(file.fd, F_SETLK, &range) != 0) {
      const ByteLock::Status status = refusal(errno);
      if (file.held.empty()) {
        ::close(file.fd);
        files.erase({st.st_dev, st.st_ino});
      }
      return {status, -1};
    }
    file.held.insert(offset);
    return {ByteLock::Status::locked, file.fd};
  }

  void unlock(int fd, std::uint64_t offset) {
    std::lock_guard guard(mutex);
    for (auto it = files.begin(); it != files.end(); ++it) {
      if (it->second.fd != fd) continue;
      struct flock range = byte_range(F_UNLCK, offset);
      ::fcntl(fd, F_SETLK, &range);
      it->second.held.erase(offset);
      if (it->second.held.empty()) {
        ::close(fd);  // The last of this process's locks in the file.
        files.erase(it);
      }
      return;
    }
  }
};
#endif

}  // namespace

ByteLock try_lock_byte(const std::filesystem::path& path, std::uint64_t offset) {
#if DFL_LINUX_CALLS
  // An open file description lock: each lock opens the file anew, so two
  // locks in one process exclude each other as two processes' do, and
  // closing the descriptor releases it.
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return {};
  struct flock range = byte_range(F_WRLCK, offset);
  if (::fcntl(fd, F_OFD_SETLK, &range) == 0) return {ByteLock::Status::locked, fd};
  const ByteLock::Status status = refusal(errno);
  ::close(fd);
  return {status, -1};
#else
  return ProcessByteLocks::instance().lock(path, offset);
#endif
}

void unlock_byte(int handle, std::uint64_t offset) {
  if (handle < 0) return;
#if DFL_LINUX_CALLS
  (void)offset;
  ::close(handle);
#else
  ProcessByteLocks::instance().unlock(handle, offset);
#endif
}

// --- Direct writes -----------------------------------------------------------------

#if DFL_WITH_URING
struct DirectWrites::Ring {
  io_uring ring{};
};

DirectWrites::DirectWrites(unsigned depth) {
  if (depth == 0) return;  // None asked for (CacheOptions::direct_writes false): no ring made.
  auto ring = std::make_unique<Ring>();
  if (::io_uring_queue_init(depth, &ring->ring, 0) != 0) return;
  // io_uring's plain write came with Linux 5.6.
  io_uring_probe* probe = ::io_uring_get_probe_ring(&ring->ring);
  const bool writes = probe != nullptr && ::io_uring_opcode_supported(probe, IORING_OP_WRITE) != 0;
  if (probe != nullptr) ::io_uring_free_probe(probe);
  if (!writes) {
    ::io_uring_queue_exit(&ring->ring);
    return;
  }
  ring_ = std::move(ring);
}

DirectWrites::~DirectWrites() {
  if (ring_) ::io_uring_queue_exit(&ring_->ring);
}

int DirectWrites::open(const std::filesystem::path& path) {
  return ::open(path.c_str(), O_WRONLY | O_DIRECT | O_CLOEXEC);
}

bool DirectWrites::submit(int fd, const void* data, unsigned size, std::uint64_t offset,
                          void* tag) {
  if (!ring_) return false;
  io_uring_sqe* sqe = ::io_uring_get_sqe(&ring_->ring);
  if (sqe == nullptr) return false;
  ::io_uring_prep_write(sqe, fd, data, size, offset);
  ::io_uring_sqe_set_data(sqe, tag);
  if (::io_uring_submit(&ring_->ring) == 1) return true;
  // The entry stays in the ring; should anything ever submit it, it is a
  // no-op with nothing attached, not a write of a buffer reused meanwhile.
  ::io_uring_prep_nop(sqe);
  ::io_uring_sqe_set_data(sqe, nullptr);
  return false;
}

std::optional<DirectWrites::Completion> DirectWrites::complete(bool wait) {
  if (!ring_) return std::nullopt;
  for (;;) {
    io_uring_cqe* cqe = nullptr;
    const int rc = wait ? ::io_uring_wait_cqe(&ring_->ring, &cqe)
                        : ::io_uring_peek_cqe(&ring_->ring, &cqe);
    if (rc == -EINTR) continue;
    if (rc != 0 && !wait) return std::nullopt;  // None ready.
    if (rc != 0) {
      // The kernel still holds the buffers of the writes in flight: they
      // can be neither reused nor freed, nor their files completed.
      std::fprintf(stderr, "demandflight: io_uring wait failed: %s\n", std::strerror(-rc));
      std::abort();
    }
    Completion done{::io_uring_cqe_get_data(cqe), cqe->res};
    ::io_uring_cqe_seen(&ring_->ring, cqe);
    if (done.tag != nullptr) return done;  // Else the no-op of a refused submission.
  }
}
#else
struct DirectWrites::Ring {};
DirectWrites::DirectWrites(unsigned) {}
DirectWrites::~DirectWrites() = default;
int DirectWrites::open(const std::filesystem::path&) {
  errno = EINVAL;
  return -1;
}
bool DirectWrites::submit(int, const void*, unsigned, std::uint64_t, void*) { return false; }
std::optional<DirectWrites::Completion> DirectWrites::complete(bool) { return std::nullopt; }
#endif

}  // namespace dfl::backend::platform
