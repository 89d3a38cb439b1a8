// The backend's one platform file: every call the cache directory makes that
// is not plain POSIX, with the POSIX fallback the portable build uses
// (-DDFL_PORTABLE=ON, and on every system other than Linux). platform.cpp
// holds both sides; docs/backend.md ("A portable build") says what a macOS,
// Windows or console port puts in place of each.
//
//   call                  Linux build                    portable build
//   sync_file_system      syncfs                         none: each file fsynced
//   data_sync             fdatasync                      fsync
//   start_writeback,      sync_file_range,               none: the install's
//   write_back_and_drop   posix_fadvise(DONTNEED)        sync writes it all
//   set/get_attribute     fsetxattr / fgetxattr          none: digests hashed
//                                                        again after a restart
//   lock_file             flock                          flock (BSD; every Unix)
//   try_lock_byte         F_OFD_SETLK                    F_SETLK on one shared
//                                                        descriptor per file, and
//                                                        a table of this
//                                                        process's bytes
//   DirectWrites          O_DIRECT through io_uring      none: page cache
//                         (-DDFL_WITH_URING=ON)
//   modified_time         st_mtim                        st_mtim (st_mtimespec
//                                                        on macOS)
#pragma once

#include <sys/stat.h>
#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>

namespace dfl::backend::platform {

// What this build does with the platform's own calls (the rest falls back).
struct Capabilities {
  bool file_system_sync = false;   // sync_file_system does something
  bool writeback_control = false;  // start_writeback, write_back_and_drop do
  bool attributes = false;         // set_attribute, get_attribute do
  bool direct_writes = false;      // built with them (the kernel may still refuse)
};
Capabilities capabilities();

// A file's modification time (POSIX's st_mtim; macOS names it st_mtimespec).
inline struct timespec modified_time(const struct stat& st) {
#if defined(__APPLE__)
  return st.st_mtimespec;
#else
  return st.st_mtim;
#endif
}

// --- Durability ------------------------------------------------------------------

// Writes back every file of the file system `fd` lies on; false (errno set)
// when it failed or the platform has no such call: then sync each file.
bool sync_file_system(int fd);

// The data and size of `fd` on the disk (timestamps need not be); 0 or -1
// with errno, as fsync.
int data_sync(int fd);

// Starts writing back [from, from + length) of `fd` without waiting.
void start_writeback(int fd, std::uint64_t from, std::uint64_t length);

// Waits until [from, from + length) of `fd` is on the disk, then drops it
// from the page cache; false (errno set) when the write-back failed. Without
// write-back control, true and nothing done.
bool write_back_and_drop(int fd, std::uint64_t from, std::uint64_t length);

// --- File attributes ---------------------------------------------------------------

// Best effort: false when the platform or the file system keeps none.
bool set_attribute(int fd, const char* name, const void* value, std::size_t size);
// The attribute's size, copied into `value`; nullopt when there is none.
std::optional<std::size_t> get_attribute(int fd, const char* name, void* value,
                                         std::size_t capacity);

// --- Locks -------------------------------------------------------------------------

// A whole-file lock held by the open file description (released when the
// last descriptor of it closes): exclusive or shared, waiting or not. 0 or
// -1 with errno (EWOULDBLOCK: held elsewhere), as flock.
enum class FileLock { shared, exclusive };
int lock_file(int fd, FileLock kind, bool wait);

// An exclusive lock on one byte of the file at `path` (created if absent),
// held against other processes and against this process's other locks of
// the byte alike, until unlock_byte.
struct ByteLock {
  enum class Status { locked, busy, unsupported } status = Status::unsupported;
  int handle = -1;  // For unlock_byte, when locked.
};
ByteLock try_lock_byte(const std::filesystem::path& path, std::uint64_t offset);
void unlock_byte(int handle, std::uint64_t offset);

// --- Direct writes -----------------------------------------------------------------

// Writes that go around the page cache, several in flight: O_DIRECT through
// io_uring where the build has liburing and the kernel allows it; nowhere
// else (available() false). Used by one thread.
class DirectWrites {
 public:
  explicit DirectWrites(unsigned depth);  // depth 0: none (available() false).
  ~DirectWrites();
  DirectWrites(const DirectWrites&) = delete;
  DirectWrites& operator=(const DirectWrites&) = delete;

  bool available() const { return ring_ != nullptr; }

  // `path` opened for direct writes; -1 with errno (EINVAL: the file system
  // refuses them).
  static int open(const std::filesystem::path& path);

  // Queues a write of `size` bytes of `data` at `offset` of `fd`, which
  // complete() returns with `tag`; false when it was not taken (nothing of it
  // is in flight). `data` must stay until then.
  bool submit(int fd, const void* data, unsigned size, std::uint64_t offset, void* tag);

  struct Completion {
    void* tag = nullptr;
    int result = 0;  // Bytes written, or -errno.
  };
  // The next completed write; with `wait`, waits for one (there must be one
  // in flight), else nullopt when none is ready.
  std::optional<Completion> complete(bool wait);

 private:
  struct Ring;
  std::unique_ptr<Ring> ring_;
};

}  // namespace dfl::backend::platform
