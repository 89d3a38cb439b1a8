// CacheDir: installed artifacts on disk, crash-safe.
//
// Layout under the root:
//   objects/<64 hex>   one installed artifact; the name is the SHA-256 of the
//                      ArtifactKey's canonical encoding, so no resource name,
//                      however hostile ("../../etc/passwd"), can reach a path
//                      outside the root;
//   staging/<...>.part bytes still arriving or being verified.
//
// Install protocol: bytes go to a staging file (buffered, hashed while they
// stream); commit() checks the size and digest, makes the file durable,
// renames it into objects/ (atomic on POSIX), then fsyncs objects/ so that
// the rename itself is durable. A process killed at any point therefore
// leaves either no object or the complete, verified one: never a partial or
// corrupt object.
//
// Durability comes in two modes (SyncMode). per_file: an fdatasync of each
// staging file before its rename. batched (the default): installs that wait
// together are made durable by the cache's committer thread, and when at
// least kSyncfsMinBatch wait, by one syncfs of the cache's file system before
// their renames, instead of an fdatasync each: on a disk where a cache flush
// is the price of an fsync, many small installs then pay one flush per batch
// (2,000 x 64 KiB installs: about a third of the time; bench/install_floor).
// The price of syncfs is its scope: it also writes back other programs' dirty
// data on that file system, so a batch may wait for theirs; per_file is for
// caches that share a file system with heavy writers.
// Opening a CacheDir removes staging leftovers and rebuilds the index from
// objects/.
//
// Thread safety: a Staging belongs to one thread at a time; commit(), remove()
// and the queries may be called from any thread (the index has a mutex), so
// that fsync, which costs about a millisecond per file, can run on a small
// pool instead of the transfer thread.
//
// Operating errors (disk full, permissions, a digest mismatch) are returned as
// values with a message; nothing is thrown for them after construction.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <string>
#include <thread>
#include <type_traits>
#include <unordered_map>
#include <variant>
#include <vector>

#include "demandflight/backend/sha256.h"
#include "demandflight/engine/artifact_key.h"

namespace dfl::backend {

// An operating error, with a message that names the file and the cause.
struct IoError {
  std::string message;
};

// How commit() makes a staging file durable before its rename (see above).
enum class SyncMode { per_file, batched };

struct CacheOptions {
  // Staged bytes are hashed and written by a writer thread of the cache, off
  // the thread that receives them.
  bool write_behind = false;
  SyncMode sync = SyncMode::batched;
  // A staging file's bytes more than this far behind its end are dropped from
  // the page cache as soon as they are on the disk (0: keep every page).
  // Through the page cache, only large files are concerned (a file up to this
  // size plus kWritebackBytes keeps all its pages, and every file its last
  // bytes); with direct_writes (below), no full buffer enters it at all: a
  // large download does not push the rest of the system's files out of
  // memory, and writing it reuses a few warm pages instead of taking a new
  // page for every 4 KiB. On a VM whose free memory goes back to the host
  // (virtio-balloon free page reporting) each new page costs a host fault:
  // on this project's development machine 1 GiB written into fresh pages
  // took 1.9-2.5 s of system time, through a 16 MiB window 0.2 s
  // (README, "Fetch"). The price: a large artifact read right after its
  // install comes from the disk.
  std::uint64_t drop_behind_bytes = 16 << 20;
  // A staging file is made durable in stretches while it is written: every
  // this many bytes an fdatasync of it runs on a thread of the cache (0:
  // never), so that the disk (on a VM, the host's cache of it) is flushed
  // while the download goes on and the install's own sync waits for the last
  // stretch only. On the development machine the final fdatasync of a 1 GiB
  // install took 0.4-0.7 s without them, and a 1 GiB fetch took 1.60-1.86 s
  // with one per 64 MiB against 1.81-1.97 s without.
  std::uint64_t early_sync_bytes = 64 << 20;
  // With write-behind and drop-behind (drop_behind_bytes > 0), full staging
  // buffers go around the page cache: O_DIRECT writes submitted through
  // io_uring, several in flight while the writer hashes the next buffer.
  // A large file's bytes would leave the page cache soon anyway, and copying
  // them in costs the writer thread as much as the disk needs to take them: on the
  // development machine, hashing and writing 1 GiB took 0.84-0.88 s this way
  // against 1.07-1.11 s through the page cache with drop-behind, and 0.17
  // CPU-s of system time less (README, "Fetch"). A file's last partial buffer
  // is written through the page cache, so an artifact of less than a buffer
  // (1 MiB) keeps its pages, and a larger one only its tail: a 4 MiB
  // artifact read right after its install comes from the disk (the 200 x
  // 4 MiB set: 0.5-0.6 s of system time against 1.2 s, since every new
  // page-cache page was a host fault). Where the kernel or the file system
  // refuses (no io_uring, no O_DIRECT), the writes go through the page cache
  // as before; so do they when this is false.
  bool direct_writes = true;
};

// Page-aligned storage for staging buffers, which O_DIRECT writes need.
template <class T>
struct PageAlignedAllocator {
  using value_type = T;
  static constexpr std::align_val_t kAlignment{4096};
  PageAlignedAllocator() = default;
  template <class U>
  PageAlignedAllocator(const PageAlignedAllocator<U>&) noexcept {}  // NOLINT: rebinding.
  T* allocate(std::size_t n) { return static_cast<T*>(::operator new(n * sizeof(T), kAlignment)); }
  void deallocate(T* p, std::size_t) noexcept { ::operator delete(p, kAlignment); }
  // What resize() adds is default-initialized, not zeroed: a staging buffer
  // grows by what is then copied into it (CacheDir::Staging::write). Other
  // constructions have no member to call and get std::allocator_traits' own.
  template <class U>
  void construct(U* p) noexcept(std::is_nothrow_default_constructible_v<U>) {
    ::new (static_cast<void*>(p)) U;
  }
  friend bool operator==(const PageAlignedAllocator&, const PageAlignedAllocator&) { return true; }
};

class CacheDir {
 public:
  using Buffer = std::vector<char, PageAlignedAllocator<char>>;
  // Bytes of one artifact on their way in. Move-only; a Staging destroyed
  // without commit removes its file.
  class WriteBehind;
  class EarlySync;
  struct EarlySyncState;

  class Staging {
   public:
    Staging(Staging&& other) noexcept = default;
    Staging& operator=(Staging&& other) noexcept;
    Staging(const Staging&) = delete;
    Staging& operator=(const Staging&) = delete;
    ~Staging();

    // Appends bytes. They are buffered up to kBufferBytes; each full buffer
    // is hashed and written at once, or, with write-behind, by the cache's
    // writer thread while the caller goes on receiving. A write error is
    // returned by this call or, with write-behind, by a later one.
    std::optional<IoError> write(const void* data, std::size_t size);
    std::uint64_t bytes() const { return bytes_; }
    const std::filesystem::path& path() const { return core_->path; }

   private:
    friend class CacheDir;
    friend class WriteBehind;
    // What the writer thread may touch, on the heap so that a Staging can
    // move while writes are in flight.
    struct Core {
      std::filesystem::path path;
      int fd = -1;
      bool opened = false;  // With write-behind the file is created by the first write_out.
      int open_errno = 0;   // Why it could not be created, if it could not.
      int direct_fd = -1;   // The same file opened with O_DIRECT, once a direct write is due.
      bool direct_refused = false;  // The file system refused O_DIRECT for this file.
      std::string object_name;
      Sha256 hash;
      std::uint64_t written = 0;              // Bytes written to the file.
      std::uint64_t writeback_started = 0;    // Bytes handed to sync_file_range.
      std::uint64_t drop_behind = 0;          // CacheOptions::drop_behind_bytes.
      std::uint64_t dropped = 0;              // Bytes dropped from the page cache.
      EarlySync* early_sync = nullptr;        // Null: no early syncs.
      std::uint64_t early_sync_bytes = 0;     // CacheOptions::early_sync_bytes.
      std::shared_ptr<EarlySyncState> early;  // Once one was requested.
      std::uint64_t early_requested = 0;      // Bytes written at the last request.
      std::mutex mutex;
      std::condition_variable done;
      std::size_t pending = 0;       // Buffers handed to the writer, not yet written.
      std::optional<IoError> error;  // The first write error; sticky.
      std::atomic<bool> failed{false};  // `error` is set (read without the mutex).
    };
    // `cache` supplies the writer and the large-file settings.
    Staging(std::filesystem::path path, int fd, std::string object_name, CacheDir& cache);
    // Creates the file if no write has yet.
    static std::optional<IoError> open_file(Core& core);
    // Hashes and writes one buffer on this thread, through the page cache.
    static std::optional<IoError> write_out(Core& core, const char* data, std::size_t size);
    // Writes all of data at `offset` through the page cache (the file is open).
    static std::optional<IoError> pwrite_all(Core& core, const char* data, std::size_t size,
                                             std::uint64_t offset);
    // Asks for an early sync when enough was written since the last one.
    static void request_early_sync(Core& core);
    // Waits for the writer, then writes what is buffered: all bytes are in the file.
    std::optional<IoError> flush();
    void wait_for_writer();
    void discard();

    std::unique_ptr<Core> core_;
    WriteBehind* writer_ = nullptr;
    Buffer buffer_;
    std::uint64_t bytes_ = 0;
  };

  // Writing in small pieces costs the client as much CPU as receiving
  // (shared/loopback-baseline.md), and each full buffer is a hand-off between
  // the receiving thread and the writer (a wakeup when one of them waits,
  // dear on a VM): 1 MiB buffers fetched 1 GiB in 1.29-1.47 s where 256 KiB
  // ones took 1.37-1.59 s (2 MiB: no better). With drop-behind, the page
  // cache no longer makes larger writes dearer (it did before: 256 KiB writes
  // then cost less system time than 1 MiB ones).
  static constexpr std::size_t kBufferBytes = 1 << 20;
  // Writeback of a staging file starts every this many bytes (Linux
  // sync_file_range), so that a large install's fsync is short.
  static constexpr std::uint64_t kWritebackBytes = 2 << 20;

  // A batch of at least this many installs is made durable by one syncfs;
  // a smaller one by an fdatasync each.
  static constexpr std::size_t kSyncfsMinBatch = 4;

  // Opens or creates the cache at `root`; throws std::runtime_error if the
  // directories cannot be created or read (a configuration error at start-up).
  explicit CacheDir(std::filesystem::path root, CacheOptions options = {});
  ~CacheDir();
  CacheDir(const CacheDir&) = delete;
  CacheDir& operator=(const CacheDir&) = delete;

  // The object name of a key: SHA-256 of a length-prefixed encoding of its
  // four fields, in hex.
  static std::string object_name(const ArtifactKey& key);

  std::filesystem::path object_path(const ArtifactKey& key) const;
  // The installed size of `key`, or nullopt when it is not installed.
  std::optional<std::uint64_t> installed_size(const ArtifactKey& key) const;
  std::size_t installed_count() const;
  std::uint64_t installed_bytes() const;
  // Staging files removed when this CacheDir was opened (a crash's leftovers).
  std::size_t staging_leftovers_removed() const { return staging_leftovers_removed_; }

  std::variant<Staging, IoError> begin(const ArtifactKey& key);

  // Verifies (size, and digest when given as 64 hex digits), makes durable
  // and publishes the staged bytes. On any error the staging file is removed
  // and nothing becomes visible.
  std::optional<IoError> commit(Staging staging, std::optional<std::uint64_t> expected_size,
                                const std::optional<std::string>& expected_sha256);

  // The same, without waiting for durability: the size and digest are
  // checked on the calling thread; `done` is called exactly once with the
  // outcome, on this thread when the install fails its checks or the mode is
  // per_file, else on the committer thread once the object is durable and
  // published. `done` must not wait for a later commit of this cache (the
  // committer runs one batch at a time).
  using CommitDone = std::function<void(std::optional<IoError>)>;
  void commit_async(Staging staging, std::optional<std::uint64_t> expected_size,
                    const std::optional<std::string>& expected_sha256, CommitDone done);

  // Waits until every commit_async handed over so far has called its `done`.
  void drain();

  // How durability was paid for since the cache was opened.
  struct SyncCounts {
    std::uint64_t file_syncs = 0;   // fdatasync of a staging file
    std::uint64_t fs_syncs = 0;     // syncfs covering a batch of staging files
    std::uint64_t dir_syncs = 0;    // fsync of objects/
    std::uint64_t early_syncs = 0;  // fdatasync of a large staging file still being written
    std::uint64_t direct_bytes = 0;  // Staged bytes written around the page cache (O_DIRECT)
  };
  SyncCounts sync_counts() const;

  // Removes an installed object (eviction). False if it was not installed.
  bool remove(const ArtifactKey& key);

  const std::filesystem::path& root() const { return root_; }

 private:
  std::filesystem::path root_;
  std::filesystem::path objects_;
  std::filesystem::path staging_;
  int objects_fd_ = -1;  // For fsync after each rename.
  SyncMode sync_mode_;
  std::uint64_t drop_behind_;
  std::uint64_t early_sync_bytes_;
  bool direct_writes_;
  std::unique_ptr<EarlySync> early_sync_;  // Outlives the writer, which uses it.
  std::unique_ptr<WriteBehind> writer_;

  // Checks size and digest and closes the staging file: the checks every
  // mode shares. Returns the error, or nullopt and leaves `staging` closed.
  std::optional<IoError> verify(Staging& staging, std::optional<std::uint64_t> expected_size,
                                const std::optional<std::string>& expected_sha256, bool close);
  // Closes a staging file; on failure removes it.
  static std::optional<IoError> close_staged(Staging::Core& core);
  // Renames a durable staging file into objects/; on failure removes it.
  std::optional<IoError> publish(const std::filesystem::path& staged,
                                 const std::string& object_name);
  void add_to_index(const std::string& object_name, std::uint64_t bytes);

  // The committer (batched mode): closed, verified staging files wait in
  // `committing_` until the committer thread takes all of them at once.
  struct PendingCommit {
    std::filesystem::path staged;
    std::string object_name;
    std::uint64_t bytes = 0;
    CommitDone done;
  };
  void commit_loop();
  void commit_batch(std::vector<PendingCommit>& batch);
  std::mutex commit_mutex_;
  std::condition_variable commit_cv_;   // Work for the committer, or stop.
  std::condition_variable drained_cv_;  // A batch finished.
  std::vector<PendingCommit> committing_;
  std::size_t in_flight_ = 0;  // Commits of the batch the committer is running.
  bool commit_stop_ = false;
  std::thread committer_;

  std::atomic<std::uint64_t> file_syncs_{0}, fs_syncs_{0}, dir_syncs_{0};

  // Group commit of objects/: a rename is durable once an fsync of the
  // directory that began after it has returned, so concurrent installs share
  // one directory fsync instead of queueing one each.
  std::optional<IoError> sync_objects_after_rename();
  std::mutex sync_mutex_;
  std::condition_variable sync_cv_;
  std::uint64_t renames_ = 0;  // Renames done, numbered.
  std::uint64_t synced_ = 0;   // Renames made durable by a finished fsync.
  bool syncing_ = false;
  std::size_t staging_leftovers_removed_ = 0;

  mutable std::mutex mutex_;
  std::unordered_map<std::string, std::uint64_t> index_;  // Object name -> size.
  std::uint64_t index_bytes_ = 0;
  std::uint64_t next_staging_ = 0;
};

}  // namespace dfl::backend
