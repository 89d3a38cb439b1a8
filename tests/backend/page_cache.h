// What of a file is in the page cache (mincore), for the drop-behind tests.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/magic.h>
#include <sys/mman.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <cstddef>
#include <filesystem>
#include <vector>

#include "../../backend/src/platform.h"

namespace dfl::testing {

inline std::size_t page_bytes() {
  return static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
}

// How many of the pages of [from, to) of `path` are in the page cache.
inline std::size_t resident_pages(const std::filesystem::path& path, std::size_t from,
                                  std::size_t to) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  EXPECT_GE(fd, 0) << path;
  if (fd < 0) return 0;
  void* map = ::mmap(nullptr, to, PROT_READ, MAP_SHARED, fd, 0);  // Maps; touches nothing.
  ::close(fd);
  EXPECT_NE(map, MAP_FAILED);
  if (map == MAP_FAILED) return 0;
  const std::size_t page = page_bytes();
  std::vector<unsigned char> in_core((to + page - 1) / page);
  EXPECT_EQ(::mincore(map, to, in_core.data()), 0);
  ::munmap(map, to);
  std::size_t resident = 0;
  for (std::size_t i = from / page; i < in_core.size(); ++i)
    resident += in_core[i] & 1;
  return resident;
}

// tmpfs keeps every page: there is no disk to leave the page cache for.
inline bool on_tmpfs(const std::filesystem::path& path) {
  struct statfs fs_info {};
  return ::statfs(path.c_str(), &fs_info) == 0 && fs_info.f_type == TMPFS_MAGIC;
}

// Whether this build, this kernel and the file system under `dir` take
// direct writes, as the cache's need (a portable build or one without
// liburing has none; a container may forbid io_uring; tmpfs before Linux 6.6
// refuses O_DIRECT).
inline bool direct_writes_possible(const std::filesystem::path& dir) {
  if (!backend::platform::DirectWrites(2).available()) return false;
  std::filesystem::create_directories(dir);
  const std::filesystem::path probe = dir / "direct-probe";
  const int created = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  if (created >= 0) ::close(created);
  const int fd = backend::platform::DirectWrites::open(probe);
  std::error_code ec;
  std::filesystem::remove(probe, ec);
  if (fd < 0) return false;
  ::close(fd);
  return true;
}

}  // namespace dfl::testing
