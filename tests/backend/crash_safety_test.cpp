// The crash-safety test: a process installing artifacts is killed with
// SIGKILL at random moments, over and over; after each kill the cache is
// reopened and every visible object must be complete and correct, with no
// staging leftovers; then an uninterrupted run installs everything.
// One kill is at a point the helper stops at itself (part of an artifact's
// bytes in its staging file, the rest still to write), so the
// test always covers an interrupted install whatever the machine's speed.
// The seed of the kill times is printed; DFL_SEED reproduces it.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>
#include <vector>

#include "artifact_content.h"
#include "page_cache.h"
#include "demandflight/backend/cache_dir.h"

namespace dfl::testing {
namespace {

namespace fs = std::filesystem;
constexpr std::uint32_t kArtifacts = 40;

// A running helper: its pid and the read end of its stdout.
struct Installer {
  pid_t pid = -1;
  int out = -1;
};

// `batched`: the helper commits its installs eight at a time (commit_all), so
// that they are made durable in batches.
Installer spawn_installer(const fs::path& root, long stop_at = -1, bool batched = false) {
  int fds[2];
  if (::pipe(fds) != 0) return {};
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(fds[1], STDOUT_FILENO);
    ::close(fds[0]);
    ::close(fds[1]);
    const std::string n = std::to_string(kArtifacts);
    const std::string stop = std::to_string(stop_at);
    ::execl(DFL_INSTALL_CRASH_HELPER, DFL_INSTALL_CRASH_HELPER, root.c_str(), n.c_str(),
            stop.c_str(), batched ? "batched" : static_cast<char*>(nullptr),
            static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::close(fds[1]);
  return {pid, fds[0]};
}

// Blocks until the helper has opened the cache and said "ready".
bool wait_ready(const Installer& installer) {
  std::string said;
  char c = 0;
  while (said != "ready" && ::read(installer.out, &c, 1) == 1) {
    if (c != '\n') said += c;
  }
  return said == "ready";
}

int reap(Installer& installer, int options = 0) {
  int status = 0;
  ::waitpid(installer.pid, &status, options);
  return status;
}

// The whole file into `out`, a buffer reused across calls (fresh buffers of
// megabytes each round are most of this test's time under sanitizers).
void read(const fs::path& path, std::string& out) {
  out.clear();
  std::ifstream in(path, std::ios::binary);
  char chunk[1 << 16];
  while (in.read(chunk, sizeof chunk) || in.gcount() > 0)
    out.append(chunk, static_cast<std::size_t>(in.gcount()));
}

// The expected bytes of artifact `i`, made once (made byte by byte, they cost
// more than the check itself, many times more under sanitizers).
const std::string& expected_content(std::uint32_t i) {
  static std::vector<std::string> made(kArtifacts);
  if (made[i].empty()) made[i] = crash_content(i);
  return made[i];
}

// Every object in the cache is one of ours, complete and byte-exact.
std::uint32_t check_visible_objects(backend::CacheDir& cache) {
  std::uint32_t complete = 0;
  for (std::uint32_t i = 0; i < kArtifacts; ++i) {
    const fs::path path = cache.object_path(crash_key(i));
    if (!fs::exists(path)) continue;
    static std::string body;
    read(path, body);
    EXPECT_EQ(body.size(), crash_size(i)) << "partial object " << i;
    EXPECT_TRUE(body == expected_content(i)) << "corrupt object " << i;
    ++complete;
  }
  std::size_t files = 0;
  for (const auto& entry : fs::directory_iterator(cache.root() / "objects")) {
    (void)entry;
    ++files;
  }
  EXPECT_EQ(files, complete) << "an object that is not one of ours";
  return complete;
}

// The seed of the kill times: DFL_SEED, or a fresh one; printed either way.
std::uint64_t kill_seed(const char* test) {
  std::uint64_t seed = std::random_device{}();
  if (const char* env = std::getenv("DFL_SEED")) seed = std::strtoull(env, nullptr, 10);
  std::printf("%s: DFL_SEED=%llu\n", test, static_cast<unsigned long long>(seed));
  return seed;
}

// How long a whole uninterrupted run takes here (sanitizers make it several
// times longer), counted from "ready": kill times are drawn from that span.
// The run must install every artifact, complete and byte-exact.
std::chrono::microseconds uninterrupted_run(const fs::path& root, bool batched) {
  const fs::path scratch = root.string() + "-timing";
  fs::remove_all(scratch);
  Installer installer = spawn_installer(scratch, -1, batched);
  EXPECT_GT(installer.pid, 0);
  EXPECT_TRUE(wait_ready(installer));
  const auto start = std::chrono::steady_clock::now();
  const int status = reap(installer);
  const auto span = std::chrono::duration_cast<std::chrono::microseconds>(
      std::chrono::steady_clock::now() - start);
  std::string said;
  char c = 0;
  while (::read(installer.out, &c, 1) == 1)
    said += c;
  ::close(installer.out);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  if (batched && testing::direct_writes_possible(scratch)) {
    // The kills below land in direct writes too (artifacts of up to 3 MiB).
    EXPECT_NE(said.find("direct "), std::string::npos) << said;
    EXPECT_EQ(said.find("direct 0\n"), std::string::npos) << said;
  }
  {
    backend::CacheDir cache(scratch);
    EXPECT_EQ(check_visible_objects(cache), kArtifacts);
  }
  fs::remove_all(scratch);
  return span;
}

// After the kills, one more run completes everything that was missing.
void next_run_completes(const fs::path& root, bool batched) {
  Installer installer = spawn_installer(root, -1, batched);
  ASSERT_TRUE(wait_ready(installer));
  const int status = reap(installer);
  ::close(installer.out);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  backend::CacheDir cache(root);
  EXPECT_EQ(check_visible_objects(cache), kArtifacts);
  EXPECT_EQ(cache.installed_count(), kArtifacts);
  fs::remove_all(root);
}

TEST(CrashSafety, AProcessKilledDuringInstallsNeverLeavesAPartialOrCorruptObject) {
  const std::uint64_t seed = kill_seed("crash safety");
  std::mt19937_64 rng(seed);
  const fs::path root = fs::temp_directory_path() / ("dfl-crash-" + std::to_string(::getpid()));
  fs::remove_all(root);

  const std::chrono::microseconds span = uninterrupted_run(root, /*batched=*/false);
  ASSERT_FALSE(HasFailure());

  // Round 0 kills the helper where it stopped itself, in the middle of writing
  // one artifact (some of its bytes in its staging file): a kill mid-install
  // that does not depend on timing. The other rounds kill at random moments of
  // what is left of the run.
  std::size_t random_kills_mid_install = 0;
  std::uint32_t missing = kArtifacts;
  for (int round = 0; round < 12; ++round) {
    if (missing == 0) {  // All installed: start again from an empty cache.
      fs::remove_all(root);
      missing = kArtifacts;
    }
    long stop_at = -1;
    if (round == 0) {  // One larger than a staging buffer, so bytes reach its file early.
      do {
        stop_at = static_cast<long>(rng() % kArtifacts);
      } while (crash_size(static_cast<std::uint32_t>(stop_at)) <= backend::CacheDir::kBufferBytes);
    }
    Installer installer = spawn_installer(root, stop_at);
    ASSERT_GT(installer.pid, 0);
    ASSERT_TRUE(wait_ready(installer));
    if (round == 0) {
      const int status = reap(installer, WUNTRACED);
      ASSERT_TRUE(WIFSTOPPED(status)) << "the helper did not stop at artifact " << stop_at;
    } else {
      // Within the time the missing artifacts take to install.
      const auto left = span.count() * missing / kArtifacts;
      std::this_thread::sleep_for(std::chrono::microseconds(rng() % (left + 1)));
    }
    ::kill(installer.pid, SIGKILL);
    reap(installer);
    ::close(installer.out);
    if (round == 0) {  // The kill left a staging file with part of the artifact.
      std::vector<std::uintmax_t> staged;
      for (const auto& entry : fs::directory_iterator(root / "staging"))
        staged.push_back(fs::file_size(entry.path()));
      ASSERT_EQ(staged.size(), 1u);
      EXPECT_GT(staged[0], 0u);
      EXPECT_LT(staged[0], crash_size(static_cast<std::uint32_t>(stop_at)));
    }

    backend::CacheDir cache(root);  // Restart: cleans staging, rebuilds the index.
    EXPECT_TRUE(fs::is_empty(root / "staging"));
    const std::uint32_t complete = check_visible_objects(cache);
    missing = kArtifacts - complete;
    if (round == 0) {
      // Everything before the stopped artifact is installed, it and all after are not.
      EXPECT_EQ(cache.staging_leftovers_removed(), 1u) << "the half-written artifact";
      EXPECT_EQ(complete, static_cast<std::uint32_t>(stop_at));
      EXPECT_FALSE(fs::exists(cache.object_path(crash_key(static_cast<std::uint32_t>(stop_at)))));
    } else {
      random_kills_mid_install += cache.staging_leftovers_removed();
    }
    if (HasFailure()) {
      ADD_FAILURE() << "round " << round << ", replay with DFL_SEED=" << seed;
      return;
    }
  }
  std::printf("crash safety: a run takes %lld us; %zu of 11 random kills landed mid-install\n",
              static_cast<long long>(span.count()), random_kills_mid_install);

  next_run_completes(root, /*batched=*/false);
}

// The same with installs committed eight at a time: kills land
// while a batch is staged, during its syncfs, between its renames and
// before the fsync of objects/.
TEST(CrashSafety, AProcessKilledDuringBatchedInstallsNeverLeavesAPartialOrCorruptObject) {
  const std::uint64_t seed = kill_seed("batched crash safety");
  std::mt19937_64 rng(seed);
  const fs::path root = fs::temp_directory_path() / ("dfl-crash-b-" + std::to_string(::getpid()));
  fs::remove_all(root);

  const std::chrono::microseconds span = uninterrupted_run(root, /*batched=*/true);
  ASSERT_FALSE(HasFailure());

  std::uint32_t missing = kArtifacts;
  std::size_t kills_with_staged_files = 0;
  for (int round = 0; round < 12; ++round) {
    if (missing == 0) {
      fs::remove_all(root);
      missing = kArtifacts;
    }
    Installer installer = spawn_installer(root, -1, /*batched=*/true);
    ASSERT_GT(installer.pid, 0);
    ASSERT_TRUE(wait_ready(installer));
    const auto left = span.count() * missing / kArtifacts;
    std::this_thread::sleep_for(std::chrono::microseconds(rng() % (left + 1)));
    ::kill(installer.pid, SIGKILL);
    reap(installer);
    ::close(installer.out);

    backend::CacheDir cache(root);
    EXPECT_TRUE(fs::is_empty(root / "staging"));
    missing = kArtifacts - check_visible_objects(cache);
    kills_with_staged_files += cache.staging_leftovers_removed() > 0;
    if (HasFailure()) {
      ADD_FAILURE() << "round " << round << ", replay with DFL_SEED=" << seed;
      return;
    }
  }
  std::printf("batched crash safety: a run takes %lld us; %zu of 12 kills left staged files\n",
              static_cast<long long>(span.count()), kills_with_staged_files);

  next_run_completes(root, /*batched=*/true);
}

}  // namespace
}  // namespace dfl::testing
