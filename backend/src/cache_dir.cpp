#include "demandflight/backend/cache_dir.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <system_error>
#include <utility>

namespace dfl::backend {
namespace {

namespace fs = std::filesystem;

std::string errno_text(const std::string& what, const fs::path& path) {
  return what + " " + path.string() + ": " + std::strerror(errno);
}

bool is_object_name(const std::string& name) {
  if (name.size() != 64) return false;
  for (char c : name) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

}  // namespace

// --- Staging -----------------------------------------------------------------

CacheDir::Staging::Staging(fs::path path, int fd, std::string object_name)
    : path_(std::move(path)), fd_(fd), object_name_(std::move(object_name)) {
  buffer_.reserve(kBufferBytes);
}

CacheDir::Staging::Staging(Staging&& other) noexcept
    : path_(std::move(other.path_)),
      fd_(std::exchange(other.fd_, -1)),
      object_name_(std::move(other.object_name_)),
      buffer_(std::move(other.buffer_)),
      bytes_(other.bytes_),
      hash_(std::move(other.hash_)) {}

CacheDir::Staging& CacheDir::Staging::operator=(Staging&& other) noexcept {
  if (this != &other) {
    discard();
    path_ = std::move(other.path_);
    fd_ = std::exchange(other.fd_, -1);
    object_name_ = std::move(other.object_name_);
    buffer_ = std::move(other.buffer_);
    bytes_ = other.bytes_;
    hash_ = std::move(other.hash_);
  }
  return *this;
}

CacheDir::Staging::~Staging() {
  discard();
}

void CacheDir::Staging::discard() {
  if (fd_ < 0) return;
  ::close(fd_);
  fd_ = -1;
  ::unlink(path_.c_str());
}

std::optional<IoError> CacheDir::Staging::write(const void* data, std::size_t size) {
  if (fd_ < 0) return IoError{"write to a closed staging file " + path_.string()};
  hash_.update(data, size);
  bytes_ += size;
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    const std::size_t room = kBufferBytes - buffer_.size();
    const std::size_t take = std::min(room, size);
    buffer_.insert(buffer_.end(), p, p + take);
    p += take;
    size -= take;
    if (buffer_.size() == kBufferBytes) {
      if (auto error = flush()) return error;
    }
  }
  return std::nullopt;
}

std::optional<IoError> CacheDir::Staging::flush() {
  const char* p = buffer_.data();
  std::size_t left = buffer_.size();
  while (left > 0) {
    const ssize_t n = ::write(fd_, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      return IoError{errno_text("cannot write", path_)};
    }
    p += n;
    left -= static_cast<std::size_t>(n);
  }
  buffer_.clear();
  return std::nullopt;
}

// --- CacheDir --------------------------------------------------------------------

CacheDir::CacheDir(fs::path root)
    : root_(std::move(root)), objects_(root_ / "objects"), staging_(root_ / "staging") {
  std::error_code ec;
  fs::create_directories(objects_, ec);
  if (ec) throw std::runtime_error("cannot create " + objects_.string() + ": " + ec.message());
  fs::create_directories(staging_, ec);
  if (ec) throw std::runtime_error("cannot create " + staging_.string() + ": " + ec.message());

  // A crash leaves at most staging files behind: none of them was published.
  for (const auto& entry : fs::directory_iterator(staging_, ec)) {
    fs::remove(entry.path(), ec);
    if (ec)
      throw std::runtime_error("cannot remove " + entry.path().string() + ": " + ec.message());
    ++staging_leftovers_removed_;
  }
  if (ec) throw std::runtime_error("cannot list " + staging_.string() + ": " + ec.message());

  for (const auto& entry : fs::directory_iterator(objects_, ec)) {
    const std::string name = entry.path().filename().string();
    if (!is_object_name(name) || !entry.is_regular_file()) continue;
    const std::uint64_t size = entry.file_size();
    index_.emplace(name, size);
    index_bytes_ += size;
  }
  if (ec) throw std::runtime_error("cannot list " + objects_.string() + ": " + ec.message());

  objects_fd_ = ::open(objects_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (objects_fd_ < 0) throw std::runtime_error(errno_text("cannot open", objects_));
}

CacheDir::~CacheDir() {
  if (objects_fd_ >= 0) ::close(objects_fd_);
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
  return it->second;
}

std::size_t CacheDir::installed_count() const {
  std::lock_guard lock(mutex_);
  return index_.size();
}

std::uint64_t CacheDir::installed_bytes() const {
  std::lock_guard lock(mutex_);
  return index_bytes_;
}

std::variant<CacheDir::Staging, IoError> CacheDir::begin(const ArtifactKey& key) {
  std::string name = object_name(key);
  std::uint64_t serial = 0;
  {
    std::lock_guard lock(mutex_);
    serial = ++next_staging_;
  }
  const fs::path path =
      staging_ / (name + "." + std::to_string(::getpid()) + "." + std::to_string(serial) + ".part");
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return IoError{errno_text("cannot create", path)};
  return Staging(path, fd, std::move(name));
}

std::optional<IoError> CacheDir::commit(Staging staging, std::optional<std::uint64_t> expected_size,
                                        const std::optional<std::string>& expected_sha256) {
  if (staging.fd_ < 0) return IoError{"commit of a closed staging file"};
  if (auto error = staging.flush()) return error;  // `staging` removes its file on return.
  if (expected_size && staging.bytes_ != *expected_size) {
    return IoError{"size mismatch for " + staging.object_name_ + ": expected " +
                   std::to_string(*expected_size) + " bytes, got " +
                   std::to_string(staging.bytes_)};
  }
  const std::string digest = Sha256::hex(staging.hash_.finish());
  if (expected_sha256 && digest != *expected_sha256) {
    return IoError{"sha256 mismatch for " + staging.object_name_ + ": expected " +
                   *expected_sha256 + ", got " + digest};
  }
  // Durable bytes first, then the name: a crash between the two leaves only a
  // staging file, which the next start removes.
  if (::fsync(staging.fd_) != 0) return IoError{errno_text("cannot fsync", staging.path_)};
  if (::close(std::exchange(staging.fd_, -1)) != 0) {
    ::unlink(staging.path_.c_str());
    return IoError{errno_text("cannot close", staging.path_)};
  }
  const fs::path target = objects_ / staging.object_name_;
  if (::rename(staging.path_.c_str(), target.c_str()) != 0) {
    const IoError error{errno_text("cannot rename into", target)};
    ::unlink(staging.path_.c_str());
    return error;
  }
  if (::fsync(objects_fd_) != 0) return IoError{errno_text("cannot fsync", objects_)};
  std::lock_guard lock(mutex_);
  auto [it, inserted] = index_.try_emplace(staging.object_name_, staging.bytes_);
  if (!inserted) {
    index_bytes_ -= it->second;
    it->second = staging.bytes_;
  }
  index_bytes_ += staging.bytes_;
  return std::nullopt;
}

bool CacheDir::remove(const ArtifactKey& key) {
  const std::string name = object_name(key);
  {
    std::lock_guard lock(mutex_);
    auto it = index_.find(name);
    if (it == index_.end()) return false;
    index_bytes_ -= it->second;
    index_.erase(it);
  }
  ::unlink((objects_ / name).c_str());
  return true;
}

}  // namespace dfl::backend
