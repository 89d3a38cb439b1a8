// CacheDir's installs: a staging file verified, made durable and renamed into
// objects/, one at a time (per_file) or many together (batched: commit_all).
#include "demandflight/backend/cache_dir.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "cache_dir_detail.h"
#include "platform.h"
#include "cache_write_behind.h"

namespace dfl::backend {

namespace fs = std::filesystem;
using cache_detail::errno_text;
using cache_detail::write_digest_attribute;

std::optional<IoError> CacheDir::verify(Staging& staging,
                                        std::optional<std::uint64_t> expected_size,
                                        const std::optional<std::string>& expected_sha256) {
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
  return std::nullopt;
}

int CacheDir::take_descriptor(Staging::Core& core) {
  if (core.direct_fd >= 0) ::close(std::exchange(core.direct_fd, -1));
  return std::exchange(core.fd, -1);
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
  std::vector<Commit> one;
  one.push_back(Commit{std::move(staging), expected_size, expected_sha256});
  return std::move(commit_all(std::move(one)).front().error);
}

std::optional<IoError> CacheDir::commit_per_file(Staging staging,
                                                 std::optional<std::uint64_t> expected_size,
                                                 const std::optional<std::string>& expected_sha256,
                                                 Hold& held) {
  if (auto error = verify(staging, expected_size, expected_sha256)) return error;
  Staging::Core& core = *staging.core_;
  // Durable bytes first, then the name: a crash between the two leaves only a
  // staging file, which the next start removes.
  // fdatasync: the data and the size; the timestamps need not be durable.
  if (platform::data_sync(core.fd) != 0) return IoError{errno_text("cannot fsync", core.path)};
  ++file_syncs_;
  // Its own descriptor holds it (a shared flock) from before its rename
  // until the caller has what it needs: no eviction, here or elsewhere, can
  // take the new object meanwhile.
  held = hold_fd(take_descriptor(core));
  if (auto error = make_room(staging.bytes_)) {
    ::unlink(core.path.c_str());
    return error;
  }
  if (auto error = publish(core.path, core.object_name)) return error;
  if (auto error = sync_objects_after_rename()) return error;
  add_to_index(core.object_name, staging.bytes_, *core.digest);
  return std::nullopt;
}

std::vector<CacheDir::Committed> CacheDir::commit_all(std::vector<Commit> commits) {
  std::vector<Committed> results(commits.size());
  if (sync_mode_ == SyncMode::per_file) {
    for (std::size_t i = 0; i < commits.size(); ++i) {
      Commit& c = commits[i];
      results[i].error = commit_per_file(std::move(c.staging), c.expected_size,
                                         c.expected_sha256, results[i].hold);
    }
    return results;
  }
  std::vector<PendingCommit> batch;
  batch.reserve(commits.size());
  for (std::size_t i = 0; i < commits.size(); ++i) {
    Commit& c = commits[i];
    if (auto error = verify(c.staging, c.expected_size, c.expected_sha256)) {
      { const Staging dropped = std::move(c.staging); }  // Its file is gone.
      results[i].error = std::move(error);
      continue;
    }
    // Verified: the file and its descriptor are the batch's (dropping the
    // Staging without its descriptor leaves the file).
    Staging::Core& core = *c.staging.core_;
    batch.push_back(PendingCommit{core.path, core.object_name, c.staging.bytes_, *core.digest, i,
                                  take_descriptor(core)});
  }
  if (!batch.empty()) commit_batch(batch, results);
  return results;
}

CacheDir::SyncCounts CacheDir::sync_counts() const {
  return SyncCounts{file_syncs_, fs_syncs_, dir_syncs_, early_sync_->count(),
                    writer_ ? writer_->direct_bytes() : 0};
}

void CacheDir::commit_batch(std::vector<PendingCommit>& batch, std::vector<Committed>& results) {
  std::vector<std::optional<IoError>> errors(batch.size());
  // Durable bytes first, then the names (see commit()).
  bool synced = false;
  if (batch.size() >= kSyncfsMinBatch && platform::capabilities().file_system_sync) {
    // One syncfs writes back every staged file of the batch. On ext4 without
    // a journal it flushes the disk's cache before its last step, which
    // writes (and waits for) inode table blocks: the fsync of objects/ after
    // it flushes again, so that sizes and extents are durable before any
    // name points at them. If either reports an error (which may be another
    // program's), each file is synced alone below, which says whose it was.
    synced = platform::sync_file_system(objects_fd_) && ::fsync(objects_fd_) == 0;
    ++fs_syncs_;
    ++dir_syncs_;
  }
  if (!synced) {
    for (std::size_t i = 0; i < batch.size(); ++i) {
      if (platform::data_sync(batch[i].fd) != 0) {
        errors[i] = IoError{errno_text("cannot fsync", batch[i].staged)};
        ::unlink(batch[i].staged.c_str());
      }
      ++file_syncs_;
    }
  }
  // Each new object is held by its own descriptor from before its rename
  // (see commit_per_file), and room is made for the whole batch before any
  // of it becomes visible.
  std::vector<Hold> holds(batch.size());
  std::uint64_t incoming = 0;
  for (std::size_t i = 0; i < batch.size(); ++i) {
    const int fd = std::exchange(batch[i].fd, -1);
    if (errors[i]) {
      ::close(fd);
      continue;
    }
    holds[i] = hold_fd(fd);
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
    Committed& result = results[batch[i].result];
    result.error = std::move(errors[i]);
    if (!result.error) result.hold = std::move(holds[i]);
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

}  // namespace dfl::backend
