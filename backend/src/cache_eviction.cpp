// CacheDir's eviction: removing objects nobody holds, least recently used
// first, to keep within the capacity or to free room on a full file system.
#include "demandflight/backend/cache_dir.h"

#include <fcntl.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "cache_dir_detail.h"
#include "platform.h"

namespace dfl::backend {

namespace fs = std::filesystem;
using cache_detail::same_file;

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
  if (platform::lock_file(fd, platform::FileLock::exclusive, false) != 0 ||
      !same_file(fd, path)) {
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

bool CacheDir::remove(const ArtifactKey& key) {
  const std::string name = object_name(key);
  {
    std::lock_guard lock(mutex_);
    if (index_.count(name) == 0) return false;
  }
  return try_evict(name);
}

}  // namespace dfl::backend
