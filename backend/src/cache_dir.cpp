// CacheDir: opening a cache directory (its owner lock, the sweep of dead owners'
// staging, the index rescan) and the index of installed objects.
#include "demandflight/backend/cache_dir.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <system_error>
#include <unordered_map>
#include <utility>
#include <vector>

#include "cache_dir_detail.h"
#include "cache_write_behind.h"

namespace dfl::backend {

namespace fs = std::filesystem;
using cache_detail::errno_text;
using cache_detail::hash_file;
using cache_detail::is_object_name;
using cache_detail::random_owner_id;
using cache_detail::read_digest_attribute;
using cache_detail::write_digest_attribute;

// --- CacheDir --------------------------------------------------------------------

namespace {
// The cache's directory, absolute: a relative one is taken from the current
// directory now, so that a later chdir moves nothing; an empty one is refused
// (it would have made the cache in whatever the current directory is).
fs::path cache_root(const fs::path& root) {
  if (root.empty()) {
    throw std::invalid_argument(
        "the cache directory is empty (ClientOptions.cache_dir, or CacheDir's root): give the "
        "directory the cache lives in");
  }
  std::error_code ec;
  fs::path absolute = fs::absolute(root, ec);
  if (ec) throw std::runtime_error("cannot resolve " + root.string() + ": " + ec.message());
  return absolute;
}
}  // namespace

CacheDir::CacheDir(fs::path root, CacheOptions options)
    : root_(cache_root(root)),
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
  locks_mtime_ = platform::modified_time(locks_stat);
  remove_dead_staging();
  rescan_objects(/*at_open=*/true);

  objects_fd_ = ::open(objects_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (objects_fd_ < 0) throw std::runtime_error(errno_text("cannot open", objects_));
  early_sync_ = std::make_unique<EarlySync>();
  if (options.write_behind) writer_ = std::make_unique<WriteBehind>(direct_writes_);
}

CacheDir::~CacheDir() {
  if (objects_fd_ >= 0) ::close(objects_fd_);
  if (locks_fd_ >= 0) ::close(locks_fd_);
  if (owner_fd_ >= 0) {
    // Gone: a later start-up may remove what this owner left in staging/.
    ::unlink((locks_ / ("owner-" + owner_)).c_str());
    ::close(owner_fd_);
  }
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
                          std::int64_t{platform::modified_time(st).tv_sec} * 1'000'000'000 +
                              platform::modified_time(st).tv_nsec});
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

std::size_t CacheDir::installed_count() const {
  std::lock_guard lock(mutex_);
  return index_.size();
}

std::uint64_t CacheDir::installed_bytes() const {
  std::lock_guard lock(mutex_);
  return index_bytes_;
}

}  // namespace dfl::backend
