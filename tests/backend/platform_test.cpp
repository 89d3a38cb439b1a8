// The platform file's contracts (backend/src/platform.h) that the cache's
// correctness rests on, in whichever build this is: the Linux calls or the
// portable POSIX fallbacks (the portable build runs these tests too).
#include "../../backend/src/platform.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <string>

namespace dfl::backend::platform {
namespace {

namespace fs = std::filesystem;

fs::path scratch(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() /
                       ("dfl-platform-" + std::to_string(::getpid()) + "-" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

// Whether another process sees byte `offset` of `path` locked (F_GETLK, which
// reports both kinds of lock): asked from a child, on a descriptor of its own.
bool locked_for_another_process(const fs::path& path, std::uint64_t offset) {
  const pid_t child = ::fork();
  if (child == 0) {
    const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
    struct flock range {};
    range.l_type = F_WRLCK;
    range.l_whence = SEEK_SET;
    range.l_start = static_cast<off_t>(offset);
    range.l_len = 1;
    if (fd < 0 || ::fcntl(fd, F_GETLK, &range) != 0) std::_Exit(2);
    std::_Exit(range.l_type == F_UNLCK ? 0 : 1);
  }
  int status = 0;
  EXPECT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status));
  EXPECT_NE(WEXITSTATUS(status), 2) << "the child could not ask";
  return WEXITSTATUS(status) == 1;
}

TEST(Platform, AByteLockExcludesThisProcessesOtherLocksAndOtherProcesses) {
  const fs::path keys = scratch("bytes") / "keys";
  const ByteLock a = try_lock_byte(keys, 7);
  ASSERT_EQ(a.status, ByteLock::Status::locked) << "the file is created";
  EXPECT_EQ(try_lock_byte(keys, 7).status, ByteLock::Status::busy) << "the same byte, again";
  EXPECT_TRUE(locked_for_another_process(keys, 7));
  EXPECT_FALSE(locked_for_another_process(keys, 8));

  // Another byte locked and unlocked meanwhile: byte 7 stays locked (POSIX
  // record locks all go when any descriptor of the file closes; the portable
  // build's fallback must not close one).
  const ByteLock b = try_lock_byte(keys, 8);
  ASSERT_EQ(b.status, ByteLock::Status::locked);
  EXPECT_TRUE(locked_for_another_process(keys, 8));
  unlock_byte(b.handle, 8);
  EXPECT_FALSE(locked_for_another_process(keys, 8));
  EXPECT_TRUE(locked_for_another_process(keys, 7)) << "unlocking byte 8 released byte 7";
  EXPECT_EQ(try_lock_byte(keys, 7).status, ByteLock::Status::busy);

  unlock_byte(a.handle, 7);
  EXPECT_FALSE(locked_for_another_process(keys, 7));
  const ByteLock again = try_lock_byte(keys, 7);
  EXPECT_EQ(again.status, ByteLock::Status::locked) << "free once unlocked";
  unlock_byte(again.handle, 7);
}

TEST(Platform, AByteAnotherProcessHoldsIsBusy) {
  const fs::path keys = scratch("busy") / "keys";
  int ready[2];
  int go[2];
  ASSERT_EQ(::pipe(ready), 0);
  ASSERT_EQ(::pipe(go), 0);
  const pid_t child = ::fork();
  if (child == 0) {
    const ByteLock held = try_lock_byte(keys, 3);
    const char locked = held.status == ByteLock::Status::locked ? 'y' : 'n';
    if (::write(ready[1], &locked, 1) != 1) std::_Exit(2);
    char c = 0;
    if (::read(go[0], &c, 1) != 1) std::_Exit(3);  // Holds it until told.
    std::_Exit(0);
  }
  char locked = 0;
  ASSERT_EQ(::read(ready[0], &locked, 1), 1);
  ASSERT_EQ(locked, 'y');
  EXPECT_EQ(try_lock_byte(keys, 3).status, ByteLock::Status::busy) << "held by the child";
  const ByteLock other = try_lock_byte(keys, 4);
  EXPECT_EQ(other.status, ByteLock::Status::locked);
  unlock_byte(other.handle, 4);
  ASSERT_EQ(::write(go[1], "x", 1), 1);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_EQ(WEXITSTATUS(status), 0);
  const ByteLock freed = try_lock_byte(keys, 3);
  EXPECT_EQ(freed.status, ByteLock::Status::locked) << "the kernel released it with the child";
  unlock_byte(freed.handle, 3);
  for (int fd : {ready[0], ready[1], go[0], go[1]})
    ::close(fd);
}

TEST(Platform, AWholeFileLockIsSharedOrExclusiveAcrossDescriptions) {
  const fs::path file = scratch("file") / "object";
  const int a = ::open(file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  const int b = ::open(file.c_str(), O_RDWR | O_CLOEXEC);
  ASSERT_GE(a, 0);
  ASSERT_GE(b, 0);
  EXPECT_EQ(lock_file(a, FileLock::shared, true), 0);
  EXPECT_EQ(lock_file(b, FileLock::shared, false), 0) << "two holds at once";
  EXPECT_NE(lock_file(b, FileLock::exclusive, false), 0) << "held by a: no eviction";
  ::close(a);
  EXPECT_EQ(lock_file(b, FileLock::exclusive, false), 0) << "a's hold went with its descriptor";
  ::close(b);
}

TEST(Platform, WhatABuildWithoutACallDoesInstead) {
  const fs::path file = scratch("fallbacks") / "staged";
  const int fd = ::open(file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::write(fd, "hello", 5), 5);
  EXPECT_EQ(data_sync(fd), 0);
  start_writeback(fd, 0, 5);
  EXPECT_TRUE(write_back_and_drop(fd, 0, 5));
  const Capabilities can = capabilities();
  // Where a call is missing it says so, and the caller does without.
  EXPECT_EQ(sync_file_system(fd), can.file_system_sync);
  const bool kept = set_attribute(fd, "user.demandflight.test", "abc", 3);
  if (!can.attributes) {
    EXPECT_FALSE(kept);
  }
  char value[8] = {};
  const auto read = get_attribute(fd, "user.demandflight.test", value, sizeof value);
  EXPECT_EQ(read.has_value(), kept);
  if (read) {
    EXPECT_EQ(std::string(value, *read), "abc");
  }
  if (!can.direct_writes) {
    EXPECT_FALSE(DirectWrites(4).available());
    EXPECT_LT(DirectWrites::open(file), 0);
  }
  ::close(fd);
}

}  // namespace
}  // namespace dfl::backend::platform
