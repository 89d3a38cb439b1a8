// CacheDir::Staging: the bytes of one artifact on their way into a staging
// file; and begin(), adopt_partial() and seal(), which make and finish one.
#include "demandflight/backend/cache_dir.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <system_error>
#include <utility>
#include <variant>

#include "cache_dir_detail.h"
#include "platform.h"
#include "cache_write_behind.h"

namespace dfl::backend {

namespace fs = std::filesystem;
using cache_detail::errno_text;
using cache_detail::hash_file;
using cache_detail::open_staging;
using cache_detail::owner_of_staging;

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
    platform::start_writeback(core.fd, core.writeback_started,
                              core.written - core.writeback_started);
    core.writeback_started = core.written;
    // Drop what lies far enough behind, once it is on the disk (a page
    // still dirty or under writeback would stay): the next writes reuse
    // those pages. Waiting here also keeps the writeback within the window
    // of the writes when the disk is slower than the network.
    if (core.drop_behind > 0 && core.written > core.dropped + core.drop_behind) {
      const std::uint64_t length = core.written - core.drop_behind - core.dropped;
      if (!platform::write_back_and_drop(core.fd, core.dropped, length))
        return IoError{errno_text("cannot write back", core.path)};
      core.dropped += length;
    }
    request_early_sync(core);
  }
  return std::nullopt;
}

std::optional<IoError> CacheDir::Staging::write(const void* data, std::size_t size) {
  if (!core_) return IoError{"write to a closed staging file"};
  // The writer's error, if any: an atomic flag read on every piece of a
  // body, the lock only once it is set (docs/benchmarks.md, *Mechanisms kept and removed*).
  if (writer_ != nullptr && core_->failed.load(std::memory_order_acquire)) {
    std::lock_guard lock(core_->mutex);
    return core_->error;
  }
  bytes_ += size;
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    const std::size_t take = std::min(kBufferBytes - buffer_.size(), size);
    // Grown without zeroing, then one memcpy: vector::insert copies element
    // by element with an allocator other than std::allocator.
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

}  // namespace dfl::backend
