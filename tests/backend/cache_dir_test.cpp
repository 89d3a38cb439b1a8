// The cache directory: what is visible, when, and under which name.
#include "demandflight/backend/cache_dir.h"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <csignal>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <random>
#include <sstream>
#include <thread>
#include <vector>

#include "../../backend/src/platform.h"
#include "page_cache.h"

namespace dfl::backend {
namespace {

namespace fs = std::filesystem;

fs::path scratch(const char* name) {
  const fs::path dir =
      fs::temp_directory_path() / ("dfl-cache-" + std::to_string(::getpid()) + "-" + name);
  fs::remove_all(dir);
  return dir;
}

ArtifactKey key(const std::string& resource, const std::string& revision = "r1") {
  return ArtifactKey{resource, revision, "pc", 0};
}

std::string read(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

CacheDir::Staging begin(CacheDir& cache, const ArtifactKey& k) {
  auto begun = cache.begin(k);
  EXPECT_TRUE(std::holds_alternative<CacheDir::Staging>(begun));
  return std::move(std::get<CacheDir::Staging>(begun));
}

TEST(Sha256, MatchesTheStandardTestVectors) {
  EXPECT_EQ(Sha256::hex_of(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(Sha256::hex_of("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  Sha256 streamed;
  streamed.update("a", 1);
  streamed.update("bc", 2);
  EXPECT_EQ(Sha256::hex(streamed.finish()), Sha256::hex_of("abc"));
}

TEST(CacheDir, AnObjectBecomesVisibleOnlyAtCommit) {
  const fs::path root = scratch("visible");
  CacheDir cache(root);
  const ArtifactKey rock = key("props/rock.ktx2");
  const std::string body(3 * CacheDir::kBufferBytes + 123, 'x');
  CacheDir::Staging staging = begin(cache, rock);
  ASSERT_FALSE(staging.write(body.data(), body.size()));
  EXPECT_FALSE(cache.installed_size(rock));
  EXPECT_FALSE(fs::exists(cache.object_path(rock))) << "nothing visible before commit";
  EXPECT_TRUE(fs::exists(staging.path()));
  const fs::path staged = staging.path();
  ASSERT_FALSE(cache.commit(std::move(staging), body.size(), Sha256::hex_of(body)));
  EXPECT_EQ(cache.installed_size(rock), body.size());
  EXPECT_EQ(read(cache.object_path(rock)), body);
  EXPECT_FALSE(fs::exists(staged)) << "the staging file was renamed, not copied";
}

TEST(CacheDir, ACommitReplacesAnInstalledObjectAtomically) {
  const fs::path root = scratch("replace");
  CacheDir cache(root);
  const ArtifactKey rock = key("props/rock.ktx2");
  for (const std::string body : {"first body", "second, longer body"}) {
    CacheDir::Staging staging = begin(cache, rock);
    ASSERT_FALSE(staging.write(body.data(), body.size()));
    ASSERT_FALSE(cache.commit(std::move(staging), body.size(), Sha256::hex_of(body)));
    EXPECT_EQ(read(cache.object_path(rock)), body);
    EXPECT_EQ(cache.installed_size(rock), body.size());
  }
  EXPECT_EQ(cache.installed_count(), 1u);
  EXPECT_EQ(cache.installed_bytes(), std::string("second, longer body").size());
  EXPECT_TRUE(fs::is_empty(root / "staging"));
}

TEST(CacheDir, AWrongDigestOrSizeIsNeverInstalled) {
  const fs::path root = scratch("corrupt");
  CacheDir cache(root);
  const ArtifactKey rock = key("props/rock.ktx2");
  CacheDir::Staging staging = begin(cache, rock);
  ASSERT_FALSE(staging.write("wrong bytes", 11));
  const fs::path staged = staging.path();
  auto error = cache.commit(std::move(staging), 11, Sha256::hex_of("right bytes"));
  ASSERT_TRUE(error);
  EXPECT_NE(error->message.find("sha256 mismatch"), std::string::npos) << error->message;
  EXPECT_FALSE(cache.installed_size(rock));
  EXPECT_FALSE(fs::exists(cache.object_path(rock)));
  EXPECT_FALSE(fs::exists(staged)) << "the corrupt bytes are deleted";

  CacheDir::Staging short_body = begin(cache, rock);
  ASSERT_FALSE(short_body.write("abc", 3));
  error = cache.commit(std::move(short_body), 4, std::nullopt);
  ASSERT_TRUE(error);
  EXPECT_NE(error->message.find("size mismatch"), std::string::npos) << error->message;
  EXPECT_FALSE(fs::exists(cache.object_path(rock)));
}

TEST(CacheDir, AnAbandonedStagingFileIsRemoved) {
  const fs::path root = scratch("abandoned");
  CacheDir cache(root);
  fs::path staged;
  {
    CacheDir::Staging staging = begin(cache, key("a"));
    ASSERT_FALSE(staging.write("abc", 3));
    staged = staging.path();
  }
  EXPECT_FALSE(fs::exists(staged));
}

TEST(CacheDir, NamesDeriveFromTheWholeKeySoNoResourceNameEscapesTheRoot) {
  const fs::path root = scratch("names");
  CacheDir cache(root);
  const ArtifactKey hostile = key("../../../../etc/passwd");
  const fs::path path = cache.object_path(hostile);
  EXPECT_EQ(path.parent_path(), root / "objects");
  EXPECT_EQ(path.filename().string().size(), 64u);
  EXPECT_NE(CacheDir::object_name(key("a", "r1")), CacheDir::object_name(key("a", "r2")));
  EXPECT_NE(CacheDir::object_name(ArtifactKey{"ab", "c", "t", 0}),
            CacheDir::object_name(ArtifactKey{"a", "bc", "t", 0}))
      << "length-prefixed fields cannot run into each other";
  EXPECT_NE(CacheDir::object_name(ArtifactKey{"a", "r", "t", 0}),
            CacheDir::object_name(ArtifactKey{"a", "r", "t", 1}));
}

TEST(CacheDir, ReopeningRebuildsTheIndexAndRemovesStagingLeftovers) {
  const fs::path root = scratch("reopen");
  {
    CacheDir cache(root);
    CacheDir::Staging staging = begin(cache, key("kept"));
    ASSERT_FALSE(staging.write("12345", 5));
    ASSERT_FALSE(cache.commit(std::move(staging), 5, std::nullopt));
  }
  std::ofstream(root / "staging" / "leftover.part") << "half an artifact";
  CacheDir reopened(root);
  EXPECT_EQ(reopened.installed_size(key("kept")), 5u);
  EXPECT_EQ(reopened.installed_count(), 1u);
  EXPECT_EQ(reopened.installed_bytes(), 5u);
  EXPECT_EQ(reopened.staging_leftovers_removed(), 1u);
  EXPECT_TRUE(fs::is_empty(root / "staging"));
  EXPECT_TRUE(reopened.remove(key("kept")));
  EXPECT_FALSE(fs::exists(reopened.object_path(key("kept"))));
  EXPECT_FALSE(reopened.remove(key("kept")));
}

// Another process that opens `root`, does `work` with its CacheDir, says
// so, and then waits to be killed (SIGKILL: no destructor runs, as in a
// crash). Forked before the test starts any thread of its own (TSan cannot
// follow a fork of a process with threads).
class OtherProcess {
 public:
  OtherProcess(const fs::path& root, const std::function<bool(CacheDir&)>& work) {
    int ready[2];
    if (::pipe(ready) != 0) throw std::runtime_error("pipe");
    pid_ = ::fork();
    if (pid_ == 0) {
      ::close(ready[0]);
      CacheDir cache(root);
      const char ok = work(cache) ? 'y' : 'n';
      if (::write(ready[1], &ok, 1) != 1) ::_exit(1);
      for (;;)
        ::pause();
    }
    ::close(ready[1]);
    char ok = 'n';
    worked_ = ::read(ready[0], &ok, 1) == 1 && ok == 'y';
    ::close(ready[0]);
  }
  ~OtherProcess() { kill(); }
  bool worked() const { return worked_; }
  void kill() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }

 private:
  pid_t pid_ = -1;
  bool worked_ = false;
};

std::size_t files_in(const fs::path& dir) {
  std::size_t n = 0;
  for ([[maybe_unused]] const auto& entry : fs::directory_iterator(dir))
    ++n;
  return n;
}

TEST(CacheDir, CacheDirsOpeningTogetherNeverTakeEachOthersOwnerLock) {
  // A start-up removes the owner files it can lock; one that another
  // CacheDir has just created and not yet locked must not make that one fail.
  const fs::path root = scratch("open-together");
  std::atomic<int> failures{0};
  std::string first_error;
  std::mutex error_mutex;
  auto open_many = [&] {
    for (int i = 0; i < 300; ++i) {
      try {
        CacheDir cache(root);
      } catch (const std::exception& e) {
        std::lock_guard lock(error_mutex);
        if (failures++ == 0) first_error = e.what();
      }
    }
  };
  std::thread a(open_many), b(open_many), c(open_many);
  a.join();
  b.join();
  c.join();
  EXPECT_EQ(failures.load(), 0) << first_error;
  EXPECT_EQ(files_in(root / "locks"), 1u) << "only the key locks' file is left";
}

TEST(CacheDir, StartUpRemovesOnlyTheStagingOfOwnersThatAreGone) {
  const fs::path root = scratch("owners");
  // Another process, mid-download.
  OtherProcess other(root, [](CacheDir& cache) {
    static std::optional<CacheDir::Staging> staging;  // Alive until the process dies.
    auto begun = cache.begin(key("theirs"));
    if (!std::holds_alternative<CacheDir::Staging>(begun)) return false;
    staging.emplace(std::move(std::get<CacheDir::Staging>(begun)));
    return true;
  });
  ASSERT_TRUE(other.worked());
  ASSERT_EQ(files_in(root / "staging"), 1u);
  CacheDir live(root);  // This process starts while the other one lives.
  EXPECT_EQ(live.staging_leftovers_removed(), 0u) << "a live owner's file is left alone";
  CacheDir::Staging staging = begin(live, key("alive"));
  ASSERT_FALSE(staging.write("12345", 5));
  const fs::path live_file = staging.path();
  ASSERT_EQ(files_in(root / "staging"), 2u);

  other.kill();           // It dies: its file stays, its owner lock goes.
  CacheDir second(root);  // A third process starting on the same cache.
  EXPECT_EQ(second.staging_leftovers_removed(), 1u) << "the dead owner's file";
  EXPECT_TRUE(fs::exists(live_file)) << "a live owner's staging file is left alone";
  ASSERT_FALSE(live.commit(std::move(staging), 5, std::nullopt));
  EXPECT_EQ(read(live.object_path(key("alive"))), "12345");
  EXPECT_TRUE(fs::is_empty(root / "staging"));
}

TEST(CacheDir, AKeyLockIsExclusiveAcrossCacheDirsAndFreedWithItsProcess) {
  const fs::path root = scratch("keylock");
  OtherProcess other(root, [](CacheDir& cache) {
    static std::optional<CacheDir::KeyLock> held;  // Held until the process dies.
    held = cache.try_lock_key(key("d"));
    return held.has_value();
  });
  ASSERT_TRUE(other.worked());
  CacheDir a(root), b(root);
  EXPECT_FALSE(a.try_lock_key(key("d"))) << "held by the other process";
  other.kill();
  EXPECT_TRUE(a.try_lock_key(key("d"))) << "the kernel released it with its process";
  auto held = a.try_lock_key(key("k"));
  ASSERT_TRUE(held);
  EXPECT_FALSE(b.try_lock_key(key("k"))) << "one fetch of a key at a time";
  EXPECT_TRUE(b.try_lock_key(key("other")));
  held.reset();
  EXPECT_TRUE(b.try_lock_key(key("k"))) << "released";
}

TEST(CacheDir, AHeldObjectIsNeverEvictedByAnyCacheDirAndAFullCacheRefusesTheInstall) {
  const fs::path root = scratch("holds");
  CacheOptions options;
  options.capacity_bytes = 10;
  CacheDir cache(root, options);
  auto install = [&](const std::string& name, const std::string& bytes) {
    CacheDir::Staging staging = begin(cache, key(name));
    EXPECT_FALSE(staging.write(bytes.data(), bytes.size()));
    return cache.commit(std::move(staging), bytes.size(), std::nullopt);
  };
  ASSERT_FALSE(install("a", "aaaaa"));
  ASSERT_FALSE(install("b", "bbbbb"));
  auto held = cache.hold(key("a"));
  ASSERT_TRUE(held);
  ASSERT_FALSE(install("c", "ccccc"));  // b, not the held a, makes room.
  EXPECT_TRUE(fs::exists(cache.object_path(key("a"))));
  EXPECT_FALSE(fs::exists(cache.object_path(key("b"))));
  CacheDir other(root);
  EXPECT_FALSE(other.remove(key("a"))) << "held in another CacheDir";
  auto held_c = cache.hold(key("c"));
  const auto refused = install("d", "ddddd");
  ASSERT_TRUE(refused);
  EXPECT_NE(refused->message.find("cache full"), std::string::npos) << refused->message;
  EXPECT_FALSE(fs::exists(cache.object_path(key("d"))));
  EXPECT_TRUE(fs::is_empty(root / "staging"));
  held->release();
  EXPECT_FALSE(install("d", "ddddd")) << "released: a can go now";
  EXPECT_FALSE(fs::exists(cache.object_path(key("a"))));
}

TEST(CacheDir, AnObjectsDigestIsKeptWithItAndReadByAnotherCacheDir) {
  const fs::path root = scratch("digest");
  {
    CacheDir cache(root);
    CacheDir::Staging staging = begin(cache, key("x"));
    ASSERT_FALSE(staging.write("hello", 5));
    ASSERT_FALSE(cache.commit(std::move(staging), 5, std::nullopt));
  }
  CacheDir reopened(root);
  const auto info = reopened.stat_object(key("x"), /*with_digest=*/true);
  ASSERT_TRUE(info);
  EXPECT_EQ(info->size, 5u);
  EXPECT_EQ(info->sha256, Sha256::hex_of("hello"));
  // Without the attribute (a file system without them), hashed from the bytes.
  ::removexattr(reopened.object_path(key("x")).c_str(), "user.demandflight.sha256");
  CacheDir third(root);
  EXPECT_EQ(third.stat_object(key("x"), true)->sha256, Sha256::hex_of("hello"));
  EXPECT_FALSE(third.stat_object(key("missing"), true));
}

TEST(CacheDir, TheDigestIsKeptAsItsThirtyTwoBytesAndOldHexAttributesAreStillRead) {
  const fs::path root = scratch("digest-bytes");
  {
    CacheDir cache(root);
    CacheDir::Staging staging = begin(cache, key("x"));
    ASSERT_FALSE(staging.write("hello", 5));
    ASSERT_FALSE(cache.commit(std::move(staging), 5, std::nullopt));
  }
  const std::string path = CacheDir(root).object_path(key("x")).string();
  char value[80] = {};
  const ssize_t n = ::getxattr(path.c_str(), "user.demandflight.sha256", value, sizeof value);
  if (!platform::capabilities().attributes) {
    EXPECT_LT(n, 0) << "a portable build keeps no attribute";
    return;
  }
  if (n < 0) GTEST_SKIP() << "no extended attributes on this file system";
  // 32 bytes: on ext4 with 256-byte inodes the attribute fits in the inode
  // (64 hex digits took a 4 KiB block of their own per object).
  ASSERT_EQ(n, 32);
  EXPECT_EQ(Sha256::hex([&] {
              Sha256::Digest raw{};
              std::memcpy(raw.data(), value, raw.size());
              return raw;
            }()),
            Sha256::hex_of("hello"));
  // What a cache written by an earlier version holds: the 64 hex digits.
  const std::string hex = Sha256::hex_of("hello");
  ASSERT_EQ(::setxattr(path.c_str(), "user.demandflight.sha256", hex.data(), hex.size(), 0), 0);
  CacheDir reopened(root);
  EXPECT_EQ(reopened.stat_object(key("x"), true)->sha256, hex);
  // A damaged attribute is not believed: the bytes are hashed.
  ASSERT_EQ(::setxattr(path.c_str(), "user.demandflight.sha256", "zz", 2, 0), 0);
  CacheDir third(root);
  EXPECT_EQ(third.stat_object(key("x"), true)->sha256, hex);
}

TEST(CacheDir, ADeadOwnersPartialIsAdoptedUpToItsLastWholeBuffer) {
  const fs::path root = scratch("adopt");
  const std::string bytes(CacheDir::kBufferBytes * 2 + 1000, 'z');
  // A fetch in another process, mid-body: two whole buffers are in its file.
  OtherProcess other(root, [&](CacheDir& cache) {
    static std::optional<CacheDir::Staging> staging;  // Alive until the process dies.
    auto begun = cache.begin(key("big"));
    staging.emplace(std::move(std::get<CacheDir::Staging>(begun)));
    return !staging->write(bytes.data(), bytes.size());
  });
  ASSERT_TRUE(other.worked());
  CacheDir cache(root);
  EXPECT_FALSE(cache.adopt_partial(key("big"))) << "its owner lives";
  other.kill();
  auto adopted = cache.adopt_partial(key("big"));
  ASSERT_TRUE(adopted);
  EXPECT_EQ(adopted->bytes(), 2 * CacheDir::kBufferBytes);
  EXPECT_FALSE(cache.adopt_partial(key("big"))) << "taken once";
  ASSERT_FALSE(adopted->write(bytes.data() + adopted->bytes(), 1000));
  EXPECT_FALSE(cache.commit(std::move(*adopted), bytes.size(), Sha256::hex_of(bytes)));
  EXPECT_EQ(read(cache.object_path(key("big"))), bytes);
  EXPECT_TRUE(fs::is_empty(root / "staging"));
}

TEST(CacheDir, APartialOfAnOwnerThatOpenedLaterAndDiedIsAdoptedToo) {
  // adopt_partial lists staging/ only once locks/ has shown another owner;
  // one that arrives after this CacheDir looked must still be noticed. The
  // other process is forked first (a fork after this CacheDir's threads
  // start is refused by TSan) and opens its CacheDir when told to.
  const fs::path root = scratch("adopt-later");
  const std::string bytes(CacheDir::kBufferBytes + 10, 'y');
  int go[2], ready[2];
  ASSERT_EQ(::pipe(go), 0);
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t pid = ::fork();
  if (pid == 0) {
    char c = 0;
    if (::read(go[0], &c, 1) != 1) ::_exit(1);
    CacheDir theirs(root);
    auto begun = theirs.begin(key("late"));
    static std::optional<CacheDir::Staging> staging;  // Alive until the process dies.
    staging.emplace(std::move(std::get<CacheDir::Staging>(begun)));
    const char ok = staging->write(bytes.data(), bytes.size()) ? 'n' : 'y';
    if (::write(ready[1], &ok, 1) != 1) ::_exit(1);
    for (;;)
      ::pause();
  }
  ::close(go[0]);
  ::close(ready[1]);
  struct KillOnExit {  // Also when an assertion returns early.
    pid_t pid;
    ~KillOnExit() {
      if (pid <= 0) return;
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
  } reaper{pid};
  std::optional<CacheDir::Staging> adopted;
  {
    CacheDir cache(root);
    EXPECT_FALSE(cache.adopt_partial(key("late"))) << "nobody else has been here";
    ASSERT_EQ(::write(go[1], "g", 1), 1);
    char ok = 'n';
    ASSERT_EQ(::read(ready[0], &ok, 1), 1);
    EXPECT_EQ(ok, 'y');
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    reaper.pid = 0;
    adopted = cache.adopt_partial(key("late"));
    ASSERT_TRUE(adopted) << "the owner that came and died was not noticed";
    EXPECT_EQ(adopted->bytes(), CacheDir::kBufferBytes);
    adopted.reset();
  }
  ::close(go[1]);
  ::close(ready[0]);
}

std::string body_of(std::size_t i) {
  return "artifact " + std::to_string(i) + std::string(100 + i, static_cast<char>('a' + i % 26));
}

// body_of(i) staged under `k`, to commit with its own digest unless another is given.
CacheDir::Commit staged_body(CacheDir& cache, const ArtifactKey& k, std::size_t i,
                             std::optional<std::string> digest = std::nullopt) {
  CacheDir::Staging staging = begin(cache, k);
  EXPECT_FALSE(staging.write(body_of(i).data(), body_of(i).size()));
  return CacheDir::Commit{std::move(staging), body_of(i).size(),
                          digest ? *digest : Sha256::hex_of(body_of(i))};
}

TEST(CacheDir, InstallsCommittedTogetherAreMadeDurableByOneSyncfs) {
  const fs::path root = scratch("batched");
  CacheDir cache(root, CacheOptions{.sync = SyncMode::batched});
  constexpr std::size_t kTogether = 20;
  std::vector<CacheDir::Commit> commits;
  for (std::size_t i = 0; i < kTogether; ++i)
    commits.push_back(staged_body(cache, key("together-" + std::to_string(i)), i));
  std::vector<CacheDir::Committed> results = cache.commit_all(std::move(commits));
  ASSERT_EQ(results.size(), kTogether);
  CacheDir::SyncCounts counts = cache.sync_counts();
  // A portable build has no syncfs: each file is synced, and objects/ once
  // after the renames.
  const bool syncfs = platform::capabilities().file_system_sync;
  EXPECT_EQ(counts.file_syncs, syncfs ? 0u : kTogether);
  EXPECT_EQ(counts.fs_syncs, syncfs ? 1u : 0u) << "the 20 committed together: one syncfs";
  // One fsync of objects/ before the renames (the flush that covers what
  // syncfs wrote last) and one after them.
  EXPECT_EQ(counts.dir_syncs, syncfs ? 2u : 1u);
  for (std::size_t i = 0; i < kTogether; ++i) {
    EXPECT_FALSE(results[i].error) << results[i].error->message;
    EXPECT_TRUE(results[i].hold) << "held from before its rename: " << i;
    EXPECT_EQ(read(cache.object_path(key("together-" + std::to_string(i)))), body_of(i));
  }
  // A lone install is not worth a syncfs: an fdatasync.
  ASSERT_FALSE(cache.commit(staged_body(cache, key("alone"), kTogether).staging,
                            body_of(kTogether).size(), Sha256::hex_of(body_of(kTogether))));
  counts = cache.sync_counts();
  EXPECT_EQ(counts.file_syncs, syncfs ? 1u : kTogether + 1);
  EXPECT_EQ(counts.fs_syncs, syncfs ? 1u : 0u);
  EXPECT_EQ(counts.dir_syncs, syncfs ? 3u : 2u);
  EXPECT_EQ(cache.installed_count(), kTogether + 1);
  EXPECT_TRUE(fs::is_empty(root / "staging"));
}

TEST(CacheDir, AnInstallThatFailsItsChecksFailsAloneAndTheOthersOfItsBatchInstall) {
  const fs::path root = scratch("batched-bad");
  CacheDir cache(root, CacheOptions{.sync = SyncMode::batched});
  std::vector<CacheDir::Commit> commits;
  for (std::size_t i = 0; i < 8; ++i) {
    commits.push_back(staged_body(cache, key("b" + std::to_string(i)), i,
                                  i == 3 ? std::optional(Sha256::hex_of("other bytes"))
                                         : std::nullopt));
  }
  std::vector<CacheDir::Committed> results = cache.commit_all(std::move(commits));
  for (std::size_t i = 0; i < 8; ++i) {
    EXPECT_EQ(fs::exists(cache.object_path(key("b" + std::to_string(i)))), i != 3) << i;
    EXPECT_EQ(results[i].error.has_value(), i == 3) << i;
    EXPECT_EQ(static_cast<bool>(results[i].hold), i != 3) << i;
  }
  ASSERT_TRUE(results[3].error);
  EXPECT_NE(results[3].error->message.find("sha256 mismatch"), std::string::npos);
  EXPECT_EQ(cache.installed_count(), 7u);
  EXPECT_TRUE(fs::is_empty(root / "staging")) << "the wrong bytes' staging file is gone";
}

TEST(CacheDir, PerFileModeSyncsEachFile) {
  const fs::path root = scratch("per-file");
  CacheDir cache(root, CacheOptions{.sync = SyncMode::per_file});
  std::vector<CacheDir::Commit> commits;
  for (std::size_t i = 0; i < 6; ++i)
    commits.push_back(staged_body(cache, key("p" + std::to_string(i)), i));
  for (const CacheDir::Committed& result : cache.commit_all(std::move(commits)))
    EXPECT_FALSE(result.error);
  const CacheDir::SyncCounts counts = cache.sync_counts();
  EXPECT_EQ(counts.file_syncs, 6u);
  EXPECT_EQ(counts.fs_syncs, 0u);
  EXPECT_EQ(counts.dir_syncs, 6u);
  EXPECT_EQ(cache.installed_count(), 6u);
}

// Large files: what stays in the page cache, and early syncs.

constexpr std::size_t kMiB = std::size_t{1} << 20;

// Bytes that do not compress or repeat, so that a misplaced stretch shows.
std::string large_body(std::size_t size) {
  std::mt19937_64 random(size);
  std::string body(size, '\0');
  for (std::size_t i = 0; i + 8 <= size; i += 8) {
    const std::uint64_t v = random();
    std::memcpy(body.data() + i, &v, 8);
  }
  return body;
}

// Writes `body` in 64 KiB pieces (as transfers arrive) and commits it.
void install_large(CacheDir& cache, const ArtifactKey& k, const std::string& body) {
  CacheDir::Staging staging = begin(cache, k);
  for (std::size_t at = 0; at < body.size(); at += 64 << 10) {
    ASSERT_FALSE(
        staging.write(body.data() + at, std::min<std::size_t>(64 << 10, body.size() - at)));
  }
  ASSERT_FALSE(cache.commit(std::move(staging), body.size(), Sha256::hex_of(body)));
}

using testing::direct_writes_possible;
using testing::on_tmpfs;
using testing::page_bytes;
using testing::resident_pages;

TEST(CacheDir, ALargeFileLeavesThePageCacheBehindItsEndOnceOnTheDisk) {
  const std::string body = large_body(24 * kMiB);
  for (const bool write_behind : {false, true}) {
    SCOPED_TRACE(write_behind ? "write-behind" : "written by the caller");
    const fs::path root = scratch(write_behind ? "drop-behind-wb" : "drop-behind");
    fs::create_directories(root);
    if (on_tmpfs(root)) GTEST_SKIP() << "tmpfs has no disk to leave the page cache for";
    // Through the page cache (direct writes bypass it: tested below).
    CacheDir cache(root, CacheOptions{.write_behind = write_behind,
                                      .drop_behind_bytes = 4 * kMiB,
                                      .early_sync_bytes = 0,
                                      .direct_writes = false});
    install_large(cache, key("big"), body);
    EXPECT_EQ(cache.sync_counts().direct_bytes, 0u);
    const fs::path object = cache.object_path(key("big"));
    const std::size_t page = page_bytes();
    if (!platform::capabilities().writeback_control) {
      // A portable build cannot drop what is not yet on the disk: it all
      // stays (unless the machine is short of memory).
      EXPECT_GT(resident_pages(object, 0, 20 * kMiB), 20 * kMiB / page * 9 / 10);
      EXPECT_EQ(read(object), body);
      continue;
    }
    // Writeback starts every 2 MiB; each time, what lies more than 4 MiB
    // behind the end leaves: the first 20 MiB, and the last 4 MiB stay.
    EXPECT_EQ(resident_pages(object, 0, 20 * kMiB), 0u);
    // The tail stays (all of it, unless the machine is short of memory).
    EXPECT_GT(resident_pages(object, 20 * kMiB, 24 * kMiB), 4 * kMiB / page * 9 / 10);
    EXPECT_EQ(read(object), body) << "the bytes read back from the disk";
  }
}

TEST(CacheDir, WithoutDropBehindALargeFileStaysInThePageCache) {
  const fs::path root = scratch("keep-pages");
  // With write-behind too: direct writes are for files that drop behind.
  CacheDir cache(root,
                 CacheOptions{.write_behind = true, .drop_behind_bytes = 0, .early_sync_bytes = 0});
  const std::string body = large_body(24 * kMiB);
  install_large(cache, key("big"), body);
  EXPECT_EQ(cache.sync_counts().direct_bytes, 0u);
  const std::size_t page = page_bytes();
  // All of it, unless the machine is short of memory.
  EXPECT_GT(resident_pages(cache.object_path(key("big")), 0, 20 * kMiB), 20 * kMiB / page * 9 / 10);
}

TEST(CacheDir, ALargeFileIsSyncedInStretchesWhileItIsWritten) {
  const std::string body = large_body(24 * kMiB);
  for (const std::uint64_t every : {std::uint64_t{0}, std::uint64_t{4 * kMiB}}) {
    const fs::path root = scratch("early-sync");
    CacheDir cache(root, CacheOptions{.write_behind = true, .early_sync_bytes = every});
    install_large(cache, key("big"), body);
    const CacheDir::SyncCounts counts = cache.sync_counts();
    if (every == 0) {
      EXPECT_EQ(counts.early_syncs, 0u);
    } else {
      // Requested at 4, 8, ... 24 MiB; one that comes while the file's last
      // one waits or runs is dropped, and commit waits for the last.
      EXPECT_GE(counts.early_syncs, 1u);
      EXPECT_LE(counts.early_syncs, 6u);
    }
    EXPECT_EQ(counts.file_syncs, 1u) << "the install's own sync still runs";
    EXPECT_EQ(read(cache.object_path(key("big"))), body);
    EXPECT_TRUE(fs::is_empty(root / "staging"));
  }
}

TEST(CacheDir, AnAbandonedLargeFileIsRemovedWhileItsEarlySyncMayRun) {
  const fs::path root = scratch("early-abandon");
  CacheDir cache(root, CacheOptions{.write_behind = true, .early_sync_bytes = 2 * kMiB});
  const std::string body = large_body(16 * kMiB);
  {
    CacheDir::Staging staging = begin(cache, key("big"));
    ASSERT_FALSE(staging.write(body.data(), body.size()));
  }  // Dropped without commit: its file goes, whatever the sync thread does.
  EXPECT_TRUE(fs::is_empty(root / "staging"));
  install_large(cache, key("big"), body);  // The cache goes on working.
  EXPECT_EQ(read(cache.object_path(key("big"))), body);
}

// Writes `body` in pieces of the given sizes, in turn, and commits it.
void install_in_pieces(CacheDir& cache, const ArtifactKey& k, const std::string& body,
                       const std::vector<std::size_t>& pieces) {
  CacheDir::Staging staging = begin(cache, k);
  std::size_t at = 0;
  for (std::size_t i = 0; at < body.size(); ++i) {
    const std::size_t n = std::min(pieces[i % pieces.size()], body.size() - at);
    ASSERT_FALSE(staging.write(body.data() + at, n));
    at += n;
  }
  ASSERT_FALSE(cache.commit(std::move(staging), body.size(), Sha256::hex_of(body)));
}

TEST(CacheDir, ALargeFilesFullBuffersGoAroundThePageCache) {
  const fs::path root = scratch("direct");
  fs::create_directories(root);
  if (on_tmpfs(root)) GTEST_SKIP() << "tmpfs keeps every page";
  if (!direct_writes_possible(root)) GTEST_SKIP() << "no io_uring or no O_DIRECT here";
  CacheDir cache(root, CacheOptions{.write_behind = true, .drop_behind_bytes = 4 * kMiB});
  // 24 full buffers and a 300 KiB tail, in pieces that straddle buffer ends.
  const std::string body = large_body(24 * kMiB + 300 * 1024);
  install_in_pieces(cache, key("big"), body, {64 << 10, 1, 777'777, 3 * kMiB});
  EXPECT_EQ(cache.sync_counts().direct_bytes, 24 * kMiB);
  const fs::path object = cache.object_path(key("big"));
  const std::size_t page = page_bytes();
  // The full buffers never entered the page cache; the tail was written
  // through it and stays (unless the machine is short of memory).
  EXPECT_EQ(resident_pages(object, 0, 24 * kMiB), 0u);
  EXPECT_GT(resident_pages(object, 24 * kMiB, body.size()), 300 * 1024 / page * 9 / 10);
  EXPECT_EQ(read(object), body) << "the bytes read back from the disk";
  EXPECT_TRUE(fs::is_empty(root / "staging"));
}

TEST(CacheDir, DirectWritesOfFilesStagedTogetherKeepEachFilesBytes) {
  const fs::path root = scratch("direct-many");
  fs::create_directories(root);
  if (!direct_writes_possible(root)) GTEST_SKIP() << "no io_uring or no O_DIRECT here";
  CacheDir cache(root, CacheOptions{.write_behind = true, .drop_behind_bytes = 2 * kMiB});
  // Three files (one of whole buffers only, one smaller than a buffer)
  // written in turn, so that the disk has several files' writes at once.
  const std::vector<std::string> bodies = {large_body(9 * kMiB + 12345), large_body(8 * kMiB),
                                           large_body(kMiB - 1)};
  std::vector<CacheDir::Staging> stagings;
  for (std::size_t i = 0; i < bodies.size(); ++i)
    stagings.push_back(begin(cache, key("f" + std::to_string(i))));
  std::vector<std::size_t> at(bodies.size(), 0);
  for (bool more = true; more;) {
    more = false;
    for (std::size_t i = 0; i < bodies.size(); ++i) {
      const std::size_t n = std::min<std::size_t>(300'000, bodies[i].size() - at[i]);
      if (n == 0) continue;
      ASSERT_FALSE(stagings[i].write(bodies[i].data() + at[i], n));
      at[i] += n;
      more = true;
    }
  }
  for (std::size_t i = 0; i < bodies.size(); ++i) {
    ASSERT_FALSE(cache.commit(std::move(stagings[i]), bodies[i].size(), Sha256::hex_of(bodies[i])));
  }
  EXPECT_EQ(cache.sync_counts().direct_bytes, 17 * kMiB);
  for (std::size_t i = 0; i < bodies.size(); ++i)
    EXPECT_EQ(read(cache.object_path(key("f" + std::to_string(i)))), bodies[i]) << i;
}

TEST(CacheDir, ADirectWriteOfAWrongBodyIsNeverInstalled) {
  const fs::path root = scratch("direct-wrong");
  CacheDir cache(root, CacheOptions{.write_behind = true, .drop_behind_bytes = 2 * kMiB});
  const std::string body = large_body(6 * kMiB + 5);
  std::string wrong = body;
  wrong[3 * kMiB + 17] ^= 1;  // In a buffer that goes around the page cache.
  CacheDir::Staging staging = begin(cache, key("big"));
  ASSERT_FALSE(staging.write(wrong.data(), wrong.size()));
  EXPECT_TRUE(cache.commit(std::move(staging), body.size(), Sha256::hex_of(body)).has_value());
  if (direct_writes_possible(root)) {
    EXPECT_EQ(cache.sync_counts().direct_bytes, 6 * kMiB) << "the wrong bytes went direct";
  }
  EXPECT_FALSE(cache.installed_size(key("big")).has_value());
  EXPECT_FALSE(fs::exists(cache.object_path(key("big"))));
  EXPECT_TRUE(fs::is_empty(root / "staging"));
}

// The kernel refuses a direct write (here: past the process's file size
// limit, whose aligned part it cannot write either): the page cache takes it
// over, its error reaches commit, and no short file is installed (the size
// and digest are of the bytes handed in, not of the file, so they would not
// catch it). In a child process, since the limit is the whole process's:
// returns its exit code, 0 when all went as it should.
int stage_past_the_file_size_limit(const fs::path& root, const std::string& body) {
  std::signal(SIGXFSZ, SIG_IGN);  // EFBIG instead of a signal.
  const rlimit limit{3 * kMiB + 100, 3 * kMiB + 100};
  if (::setrlimit(RLIMIT_FSIZE, &limit) != 0) return 3;
  CacheDir cache(root, CacheOptions{.write_behind = true, .drop_behind_bytes = 2 * kMiB});
  auto begun = cache.begin(key("big"));
  auto& staging = std::get<CacheDir::Staging>(begun);
  (void)staging.write(body.data(), body.size());  // The error may show here or at commit.
  const auto error = cache.commit(std::move(staging), body.size(), Sha256::hex_of(body));
  if (!error || error->message.find("cannot write") == std::string::npos) return 4;
  if (cache.installed_size(key("big")) || fs::exists(cache.object_path(key("big")))) return 5;
  if (!fs::is_empty(root / "staging")) return 6;
  // The first three buffers went direct (a file system that finishes a cut
  // direct write through its page cache may count the last 100 bytes too).
  const std::uint64_t direct = cache.sync_counts().direct_bytes;
  if (direct < 3 * kMiB || direct > 3 * kMiB + 100) return 7;
  return 0;
}

TEST(CacheDir, ARefusedDirectWriteFailsTheInstallInsteadOfLeavingAShortFile) {
  const fs::path root = scratch("direct-refused");
  fs::create_directories(root);
  if (on_tmpfs(root)) GTEST_SKIP() << "tmpfs writes direct writes through its page cache";
  if (!direct_writes_possible(root)) GTEST_SKIP() << "no io_uring or no O_DIRECT here";
  const std::string body = large_body(6 * kMiB);
  EXPECT_EXIT(std::_Exit(stage_past_the_file_size_limit(root, body)), ::testing::ExitedWithCode(0),
              "");
}

}  // namespace
}  // namespace dfl::backend
