// CacheDir's locks: its owner lock and the removal of dead owners' staging
// files at start-up, holds on installed objects, and the per-key fetch locks.
#include "demandflight/backend/cache_dir.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>
#include <system_error>
#include <unordered_map>
#include <utility>

#include "cache_dir_detail.h"
#include "platform.h"

namespace dfl::backend {

namespace fs = std::filesystem;
using cache_detail::errno_text;
using cache_detail::owner_of_lock;
using cache_detail::owner_of_staging;
using cache_detail::same_file;

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
    const bool locked = platform::lock_file(owner_fd_, platform::FileLock::exclusive, false) == 0;
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
  const bool alive =
      platform::lock_file(fd, platform::FileLock::shared, false) != 0 && errno == EWOULDBLOCK;
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
    if (platform::lock_file(fd, platform::FileLock::exclusive, false) == 0 &&
        same_file(fd, entry.path())) {
      ::unlink(entry.path().c_str());  // Moves locks/'s time: not alone().
    } else {
      alone_.store(false, std::memory_order_relaxed);  // Another owner is open.
    }
    ::close(fd);
  }
  if (ec) alone_.store(false, std::memory_order_relaxed);
}

bool CacheDir::alone() const {
  if (!alone_.load(std::memory_order_relaxed)) return false;
  struct stat st {};
  if (::fstat(locks_fd_, &st) != 0 ||
      platform::modified_time(st).tv_sec != locks_mtime_.tv_sec ||
      platform::modified_time(st).tv_nsec != locks_mtime_.tv_nsec) {
    alone_.store(false, std::memory_order_relaxed);
    return false;
  }
  return true;
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
  return hold_fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
}

CacheDir::Hold CacheDir::hold_fd(int fd) {
  if (fd < 0) return Hold{};
  if (platform::lock_file(fd, platform::FileLock::shared, true) != 0) {
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
    offset_ = other.offset_;
  }
  return *this;
}

void CacheDir::KeyLock::release() {
  if (fd_ == -2) fd_ = -1;  // A lock that held nothing.
  if (fd_ < 0) return;
  // Nothing is left on the disk to remove.
  platform::unlock_byte(std::exchange(fd_, -1), offset_);
}

std::optional<CacheDir::KeyLock> CacheDir::try_lock_key(const ArtifactKey& key) {
  // One lock file for every key, one byte of it per key (at the first 60
  // bits of the object's name, itself a SHA-256: the same in every build): a
  // fetch creates and removes no lock file of its own, which on ext4 cost
  // two inode changes in a shared directory per artifact. Two fetches in
  // one process exclude each other as two processes do (platform.h). Two
  // keys whose hashes meet only wait for each other.
  const std::uint64_t offset = std::stoull(object_name(key).substr(0, 15), nullptr, 16);
  const platform::ByteLock lock = platform::try_lock_byte(locks_ / "keys", offset);
  switch (lock.status) {
    case platform::ByteLock::Status::locked:
      return KeyLock{lock.handle, offset};
    case platform::ByteLock::Status::busy:
      return std::nullopt;  // Another fetch of the key.
    case platform::ByteLock::Status::unsupported:
      break;
  }
  // No lock file to be had (a read-only locks/), or a file system without
  // such locks: fetch unguarded.
  return KeyLock{-2, offset};
}

}  // namespace dfl::backend
