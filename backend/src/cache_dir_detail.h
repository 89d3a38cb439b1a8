// Helpers of CacheDir's source files: error messages, the names of staging
// and lock files, hashing a file and the digest kept with an object.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "demandflight/backend/sha256.h"
#include "platform.h"

namespace dfl::backend::cache_detail {

namespace fs = std::filesystem;

// "cannot write PATH: No space left on device", with "disk full: " before a
// full file system's errors, so that a user sees the cause first.
inline std::string errno_text(const std::string& what, const fs::path& path) {
  const bool full = errno == ENOSPC || errno == EDQUOT;
  return (full ? "disk full: " : "") + what + " " + path.string() + ": " + std::strerror(errno);
}

constexpr const char* kDigestAttribute = "user.demandflight.sha256";

inline bool is_digest(std::string_view s) {
  return s.size() == 64 && s.find_first_not_of("0123456789abcdef") == std::string_view::npos;
}

inline bool same_file(int fd, const fs::path& path) {
  struct stat a {
  }, b{};
  return ::fstat(fd, &a) == 0 && ::stat(path.c_str(), &b) == 0 && a.st_dev == b.st_dev &&
         a.st_ino == b.st_ino;
}

// The owner id in a staging file's name "<object>.<owner>.<n>.part".
inline std::string owner_of_staging(const std::string& name) {
  const std::size_t first = name.find('.');
  if (first == std::string::npos) return {};
  const std::size_t second = name.find('.', first + 1);
  if (second == std::string::npos) return {};
  return name.substr(first + 1, second - first - 1);
}

inline std::string random_owner_id() {
  std::random_device device;
  std::uint64_t bits = (std::uint64_t{device()} << 32) ^ device();
  bits ^= static_cast<std::uint64_t>(::getpid()) << 17;
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(bits));
  return text;
}

// Feeds a file's first `length` bytes (all of it if nullopt) to `hash`;
// false if they cannot all be read.
inline bool hash_file(int fd, Sha256& hash, std::optional<std::uint64_t> length = std::nullopt) {
  std::vector<char> buffer(1 << 20);
  std::uint64_t offset = 0;
  for (;;) {
    std::size_t want = buffer.size();
    if (length) want = static_cast<std::size_t>(std::min<std::uint64_t>(want, *length - offset));
    if (want == 0) break;
    const ssize_t n = ::pread(fd, buffer.data(), want, static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return false;
    if (n == 0) break;
    hash.update(buffer.data(), static_cast<std::size_t>(n));
    offset += static_cast<std::uint64_t>(n);
  }
  return !length || offset == *length;
}

inline int open_staging(const fs::path& path) {
  return ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
}

// The digest kept with an object: its 32 bytes, which ext4 keeps inside a
// 256-byte inode beside the attribute's name (64 hex digits do not fit and
// cost a block of their own per object). Attributes of 64 hex digits, as
// earlier versions wrote them, are read too.
inline void write_digest_attribute(int fd, const std::string& hex) {
  if (!is_digest(hex)) return;
  Sha256::Digest raw{};
  for (std::size_t i = 0; i < raw.size(); ++i) {
    raw[i] = static_cast<std::uint8_t>(std::stoi(hex.substr(2 * i, 2), nullptr, 16));
  }
  platform::set_attribute(fd, kDigestAttribute, raw.data(), raw.size());  // Best effort.
}

inline std::optional<std::string> read_digest_attribute(int fd) {
  char value[64] = {};
  const std::size_t n = platform::get_attribute(fd, kDigestAttribute, value, sizeof value).value_or(0);
  if (n == 32) {
    Sha256::Digest raw{};
    std::memcpy(raw.data(), value, raw.size());
    return Sha256::hex(raw);
  }
  if (n == 64 && is_digest(std::string_view(value, 64))) return std::string(value, 64);
  return std::nullopt;
}

// The owner id in a locks/ file name (owner-<owner>, or .new-<owner> while
// it is being made); empty for any other file.
inline std::string owner_of_lock(const std::string& name) {
  if (name.rfind("owner-", 0) == 0) return name.substr(6);
  if (name.rfind(".new-", 0) == 0) return name.substr(5);
  return {};
}

inline bool is_object_name(const std::string& name) {
  if (name.size() != 64) return false;
  for (char c : name) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

}  // namespace dfl::backend::cache_detail
