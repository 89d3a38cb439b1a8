// CacheDir: installed artifacts on disk, crash-safe.
//
// Layout under the root:
//   objects/<64 hex>   one installed artifact; the name is the SHA-256 of the
//                      ArtifactKey's canonical encoding, so no resource name,
//                      however hostile ("../../etc/passwd"), can reach a path
//                      outside the root; its digest is kept in the extended
//                      attribute user.demandflight.sha256 where the file
//                      system has them (else it is hashed when first asked);
//   staging/<object>.<owner>.<n>.part  bytes still arriving or being verified,
//                      written by the CacheDir whose owner id is <owner>;
//   locks/owner-<owner> held (flock, exclusive) by that CacheDir while it is
//                      open: the kernel releases it when its process dies;
//   locks/keys         one byte per object (at the first 60 bits of its
//                      name) held (open file description lock, exclusive)
//                      by whichever CacheDir is fetching that object, in
//                      any process (KeyLock).
//
// Several processes, and several CacheDirs in one process, may open one root
// at once. What they share is on disk: the objects, the staging files and
// the locks. What each keeps for itself is the in-memory index (which objects
// it knows, their sizes and their order of use), rebuilt from objects/ when
// it opens and corrected from the disk whenever a lookup or an eviction
// finds it stale. Opening removes only the staging files whose owner is gone
// (its owner lock can be taken, or does not exist); a live owner's are left.
// An object that anybody holds (Hold: a shared flock on the object, which
// is what a caller's pin is) is never evicted, by any CacheDir: eviction
// takes an exclusive flock without waiting and skips the object if that
// fails.
//
// Install protocol: bytes go to a staging file (buffered, hashed while they
// stream); commit() checks the size and digest, makes the file durable,
// renames it into objects/ (atomic on POSIX), then fsyncs objects/ so that
// the rename itself is durable. A process killed at any point therefore
// leaves either no object or the complete, verified one: never a partial or
// corrupt object.
//
// Durability comes in two modes (SyncMode). per_file: an fdatasync of each
// staging file before its rename. batched (the default): the installs handed
// over together (commit_all) are made durable together, and when there are
// at least kSyncfsMinBatch of them, by one syncfs of the cache's file system
// before their renames, instead of an fdatasync each: on a disk where a cache
// flush is the price of an fsync, many small installs then pay one flush per
// batch (what it buys: docs/benchmarks.md, *Mechanisms kept and removed*). The price of syncfs is its scope: it also writes back
// other programs' dirty data on that file system, so a batch may wait for
// theirs; per_file is for caches that share a file system with heavy writers.
// A full file system (ENOSPC) while staging or installing first evicts
// objects nobody holds to make room and tries once more; if it still fails,
// the error says "disk full" and the staging file is removed.
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
#include <list>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

#include "demandflight/backend/sha256.h"
#include "demandflight/engine/artifact_key.h"

namespace dfl::backend {

// An operating error, with a message that names the file and the cause.
struct IoError {
  std::string message;
  // The file system was full (ENOSPC, EDQUOT) even after eviction: another
  // attempt may find room, once other downloads have ended.
  bool no_space = false;
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
  // (virtio-balloon free page reporting) each new page costs a host fault
  // (what the window buys: docs/benchmarks.md, *Mechanisms kept and removed*). The price: a
  // large artifact read right after its install comes from the disk.
  std::uint64_t drop_behind_bytes = 16 << 20;
  // A staging file is made durable in stretches while it is written: every
  // this many bytes an fdatasync of it runs on a thread of the cache (0:
  // never), so that the disk (on a VM, the host's cache of it) is flushed
  // while the download goes on and the install's own sync waits for the last
  // stretch only (what it buys: docs/benchmarks.md, *Mechanisms kept and removed*).
  std::uint64_t early_sync_bytes = 64 << 20;
  // With write-behind and drop-behind (drop_behind_bytes > 0), full staging
  // buffers go around the page cache: O_DIRECT writes submitted through
  // io_uring, several in flight while the writer hashes the next buffer.
  // A large file's bytes would leave the page cache soon anyway, and copying
  // them in costs the writer thread as much as the disk needs to take them
  // (what it buys: docs/benchmarks.md, *Mechanisms kept and removed*). A file's last
  // partial buffer is written through the page cache, so an artifact of less
  // than a buffer (1 MiB) keeps its pages, and a larger one only its tail: a
  // 4 MiB artifact read right after its install comes from the disk (every
  // new page-cache page would be a host fault on a VM that returns free
  // memory). Where the kernel or the file system
  // refuses (no io_uring, no O_DIRECT), the writes go through the page cache
  // as before; so do they when this is false.
  bool direct_writes = true;
  // Bytes of installed objects this CacheDir keeps (the objects in its own
  // index): past it, the least recently used objects that nobody holds are
  // evicted before an install is published. An install that cannot fit
  // because the rest is held fails ("cache full"), and leaves nothing.
  std::uint64_t capacity_bytes = ~std::uint64_t{0};
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
      std::size_t pending = 0;            // Buffers handed to the writer, not yet written.
      std::optional<IoError> error;       // The first write error; sticky.
      CacheDir* cache = nullptr;          // Makes room when the file system is full.
      std::uint64_t size_hint = 0;        // The expected size of the whole file; 0 when unknown.
      std::optional<std::string> digest;  // Set by seal(): the hash is finished.
      std::atomic<bool> failed{false};    // `error` is set (read without the mutex).
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

  // Writing in small pieces costs the client as much CPU as receiving, and
  // each full buffer is a hand-off between the receiving thread and the
  // writer (a wakeup when one of them waits, dear on a VM); with drop-behind
  // the page cache does not make larger writes dearer. Why 1 MiB:
  // docs/benchmarks.md, *Mechanisms kept and removed*.
  static constexpr std::size_t kBufferBytes = 1 << 20;
  // Writeback of a staging file starts every this many bytes (Linux
  // sync_file_range), so that a large install's fsync is short.
  static constexpr std::uint64_t kWritebackBytes = 2 << 20;

  // A batch of at least this many installs is made durable by one syncfs;
  // a smaller one by an fdatasync each.
  static constexpr std::size_t kSyncfsMinBatch = 4;

  // Opens or creates the cache at `root`; throws std::invalid_argument if
  // `root` is empty, std::runtime_error if the directories cannot be created
  // or read (a configuration error at start-up). A relative `root` is taken
  // from the current directory now: a later chdir does not move the cache.
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
  // Staging files removed when this CacheDir was opened (the leftovers of
  // owners that are gone).
  std::size_t staging_leftovers_removed() const { return staging_leftovers_removed_; }

  // A staging file for `key`; `size_hint` (the expected size, 0 if unknown)
  // says how much room to make when the file system turns out to be full.
  std::variant<Staging, IoError> begin(const ArtifactKey& key, std::uint64_t size_hint = 0);

  // Takes over the staged bytes of `key` that a CacheDir which is gone (its
  // process died) left behind: renamed to this CacheDir's own name, cut
  // back to the last whole buffer before any hole (direct writes may land
  // out of order), and hashed. Nullopt when there are none. Only for a
  // caller that verifies the digest of the whole body: nothing vouches for
  // the dead owner's bytes but that.
  std::optional<Staging> adopt_partial(const ArtifactKey& key, std::uint64_t size_hint = 0);

  // What the staged bytes are: all written, the hash finished. commit() and
  // commit_all() of a sealed staging use this digest.
  struct Sealed {
    std::uint64_t bytes = 0;
    std::string sha256;  // 64 hex digits.
  };
  std::variant<Sealed, IoError> seal(Staging& staging);

  // A shared lock on one installed object: while any process holds one, no
  // CacheDir evicts it. Move-only; released by release() or destruction.
  class Hold {
   public:
    Hold() = default;
    Hold(Hold&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
    Hold& operator=(Hold&& other) noexcept;
    Hold(const Hold&) = delete;
    Hold& operator=(const Hold&) = delete;
    ~Hold() { release(); }
    void release();
    explicit operator bool() const { return fd_ >= 0; }

   private:
    friend class CacheDir;
    explicit Hold(int fd) : fd_(fd) {}
    int fd_ = -1;
  };
  // Holds `key`'s installed object; nullopt when it is not installed.
  std::optional<Hold> hold(const ArtifactKey& key) const;

  // The exclusive right to fetch one key, across processes: whoever holds it
  // transfers and installs the key, the others wait for its object.
  // Released by release() or destruction, and by the kernel when the
  // process dies.
  class KeyLock {
   public:
    KeyLock() = default;
    KeyLock(KeyLock&& other) noexcept
        : fd_(std::exchange(other.fd_, -1)), offset_(other.offset_) {}
    KeyLock& operator=(KeyLock&& other) noexcept;
    KeyLock(const KeyLock&) = delete;
    KeyLock& operator=(const KeyLock&) = delete;
    ~KeyLock() { release(); }
    void release();
    explicit operator bool() const { return fd_ >= 0; }

   private:
    friend class CacheDir;
    KeyLock(int fd, std::uint64_t offset) : fd_(fd), offset_(offset) {}
    int fd_ = -1;              // -2: a lock that holds nothing.
    std::uint64_t offset_ = 0;  // The key's byte in locks/keys.
  };
  // The key's lock, or nullopt while another holder has it. Where the lock
  // file cannot be opened (a read-only locks/) or its file system has no
  // byte-range locks, a KeyLock that holds nothing is
  // returned: the fetch goes on without cross-process exclusion.
  std::optional<KeyLock> try_lock_key(const ArtifactKey& key);

  // What is installed for `key`, read from the disk (the in-memory index is
  // corrected by it). `with_digest`: also its SHA-256 (kept with the object,
  // or hashed from its bytes once); else sha256 may be empty.
  struct ObjectInfo {
    std::uint64_t size = 0;
    std::string sha256;
  };
  std::optional<ObjectInfo> stat_object(const ArtifactKey& key, bool with_digest);

  // Whether this CacheDir has had the root to itself since it opened: no
  // other owner was open then, and none has opened or closed since (locks/
  // is as this CacheDir left it: owners coming and going are its only
  // changes). Then nothing but this CacheDir has installed, evicted or
  // staged anything here. One fstat; once false, false for good.
  bool alone() const;

  // This CacheDir's owner id (the <owner> of its staging files and lock).
  const std::string& owner_id() const { return owner_; }

  // Verifies (size, and digest when given as 64 hex digits), makes durable
  // and publishes the staged bytes. On any error the staging file is removed
  // and nothing becomes visible.
  std::optional<IoError> commit(Staging staging, std::optional<std::uint64_t> expected_size,
                                const std::optional<std::string>& expected_sha256);

  // Many installs at once, on the calling thread, each checked as commit()
  // checks it: with SyncMode::batched made durable together (see above),
  // with per_file one at a time. Result i is commits[i]'s; its Hold (set
  // when it installed) holds the new object from before its rename, so that
  // no eviction takes it before the caller has what it needs.
  struct Commit {
    Staging staging;
    std::optional<std::uint64_t> expected_size;
    std::optional<std::string> expected_sha256;
  };
  struct Committed {
    std::optional<IoError> error;
    Hold hold;
  };
  std::vector<Committed> commit_all(std::vector<Commit> commits);

  // How durability was paid for since the cache was opened.
  struct SyncCounts {
    std::uint64_t file_syncs = 0;    // fdatasync of a staging file
    std::uint64_t fs_syncs = 0;      // syncfs covering a batch of staging files
    std::uint64_t dir_syncs = 0;     // fsync of objects/
    std::uint64_t early_syncs = 0;   // fdatasync of a large staging file still being written
    std::uint64_t direct_bytes = 0;  // Staged bytes written around the page cache (O_DIRECT)
  };
  SyncCounts sync_counts() const;

  // Removes an installed object (eviction) unless somebody holds it. False
  // if it was not installed or is held.
  bool remove(const ArtifactKey& key);

  // Objects evicted, and installs refused for want of room, since opening.
  std::uint64_t evictions() const { return evictions_.load(std::memory_order_relaxed); }

  const std::filesystem::path& root() const { return root_; }

 private:
  std::filesystem::path root_;
  std::filesystem::path objects_;
  std::filesystem::path staging_;
  std::filesystem::path locks_;
  std::string owner_;    // Random, hex: names this CacheDir's staging files.
  int owner_fd_ = -1;    // locks/owner-<owner_>, held exclusively while open.
  int objects_fd_ = -1;  // For fsync after each rename.
  std::uint64_t capacity_bytes_;
  SyncMode sync_mode_;
  std::uint64_t drop_behind_;
  std::uint64_t early_sync_bytes_;
  bool direct_writes_;
  std::unique_ptr<EarlySync> early_sync_;  // Outlives the writer, which uses it.
  std::unique_ptr<WriteBehind> writer_;

  // Checks size and digest (and a large file's early syncs): the checks
  // every mode shares. Returns the error, or nullopt with `staging` sealed.
  std::optional<IoError> verify(Staging& staging, std::optional<std::uint64_t> expected_size,
                                const std::optional<std::string>& expected_sha256);
  // commit() in per_file mode; `held` holds the new object once it is published.
  std::optional<IoError> commit_per_file(Staging staging,
                                         std::optional<std::uint64_t> expected_size,
                                         const std::optional<std::string>& expected_sha256,
                                         Hold& held);
  // A verified staging file's descriptor, for its install to own (its
  // direct-I/O twin closed): the Staging then leaves the file when dropped.
  static int take_descriptor(Staging::Core& core);
  // Renames a durable staging file into objects/; on failure removes it.
  std::optional<IoError> publish(const std::filesystem::path& staged,
                                 const std::string& object_name);
  void add_to_index(const std::string& object_name, std::uint64_t bytes, std::string sha256);

  // Start-up: takes this CacheDir's owner lock, then removes the staging
  // files (and locks) of owners that are gone.
  void take_owner_lock();
  void remove_dead_staging();
  // Whether the CacheDir with this owner id is still open (in any process).
  bool owner_alive(const std::string& owner) const;
  int locks_fd_ = -1;              // locks/, for alone().
  struct timespec locks_mtime_ {};  // locks/ as this CacheDir left it on opening.
  mutable std::atomic<bool> alone_{true};
  // (Re)reads objects/ into the index: what other processes installed or
  // evicted since becomes known. Keeps the known objects' order of use.
  // `at_open`: an error throws (else the index stays as it was).
  void rescan_objects(bool at_open);
  // Evicts `name` unless somebody holds it; true if it is gone.
  bool try_evict(const std::string& name);
  // Evicts least recently used objects nobody holds until `incoming` more
  // bytes fit the capacity; the error says what could not be done.
  std::optional<IoError> make_room(std::uint64_t incoming);
  // The file system is full: evicts least recently used objects nobody holds
  // until `needed` bytes are free (or none is left). True if any went.
  bool make_space(std::uint64_t needed);
  // A shared lock on the file at `path` (a staging file about to be renamed
  // into objects/), so that no eviction removes it before its callers hold it.
  static Hold hold_file(const std::filesystem::path& path);
  // The same on a descriptor of the file, which the Hold then owns (closed
  // if the lock cannot be had).
  static Hold hold_fd(int fd);

  // A batch of closed, verified staging files (batched mode).
  struct PendingCommit {
    std::filesystem::path staged;
    std::string object_name;
    std::uint64_t bytes = 0;
    std::string sha256;
    std::size_t result = 0;  // Its index in commit_all's result.
    int fd = -1;             // The staging file's, open (commit_batch closes it or makes it a Hold).
  };
  void commit_batch(std::vector<PendingCommit>& batch, std::vector<Committed>& results);

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

  std::atomic<std::uint64_t> evictions_{0};

  // The index: objects this CacheDir knows, least recently used first.
  struct IndexEntry {
    std::uint64_t size = 0;
    std::string sha256;  // Empty until known.
    std::list<std::string>::iterator lru;
  };
  void touch_locked(IndexEntry& entry);
  void erase_locked(const std::string& name);
  mutable std::mutex mutex_;
  std::unordered_map<std::string, IndexEntry> index_;  // Object name -> entry.
  std::list<std::string> lru_;                         // Oldest first.
  std::uint64_t index_bytes_ = 0;
  std::uint64_t next_staging_ = 0;
};

}  // namespace dfl::backend
