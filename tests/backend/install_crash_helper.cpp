// Installs artifacts 0..N-1 into a cache, in order, skipping those already
// installed; the crash-safety test kills it with SIGKILL at random moments.
// It prints "ready" once the cache is open, so that kill times count from the
// start of the installs, not from a process start that sanitizers slow down.
// With STOP_AT, it stops itself (SIGSTOP) once artifact STOP_AT has bytes in
// its staging file and more to write, a kill point the test can count on.
// With "batched" it stages eight installs and commits them together
// (commit_all: one syncfs for them), as the Client's finalize threads do.
// Then the cache has a write-behind thread, as the Client's does (so full
// buffers go around the page cache), and the helper prints "direct BYTES".
// Usage: install_crash_helper ROOT N [STOP_AT|-1] [batched]
#include <signal.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "artifact_content.h"
#include "demandflight/backend/cache_dir.h"

int main(int argc, char** argv) {
  if (argc < 3 || argc > 5 || (argc == 5 && std::string(argv[4]) != "batched")) {
    std::fprintf(stderr, "usage: %s ROOT N [STOP_AT|-1] [batched]\n", argv[0]);
    return 2;
  }
  const bool batched = argc == 5;
  // batched: as the Client installs (batched commits, a write-behind thread,
  // direct writes of full buffers), so that kills land in those too.
  dfl::backend::CacheDir cache(argv[1], dfl::backend::CacheOptions{.write_behind = batched});
  std::vector<dfl::backend::CacheDir::Commit> staged;
  // Commits what is staged; false (having said why) if any failed.
  auto commit_staged = [&]() {
    bool ok = true;
    for (auto& result : cache.commit_all(std::exchange(staged, {}))) {
      if (!result.error) continue;
      std::fprintf(stderr, "%s\n", result.error->message.c_str());
      ok = false;
    }
    return ok;
  };
  const auto n = static_cast<std::uint32_t>(std::strtoul(argv[2], nullptr, 10));
  const long stop_at = argc >= 4 ? std::strtol(argv[3], nullptr, 10) : -1;
  std::printf("ready\n");
  std::fflush(stdout);
  for (std::uint32_t i = 0; i < n; ++i) {
    const dfl::ArtifactKey key = dfl::testing::crash_key(i);
    if (cache.installed_size(key)) continue;
    auto begun = cache.begin(key);
    if (auto* error = std::get_if<dfl::backend::IoError>(&begun)) {
      std::fprintf(stderr, "%s\n", error->message.c_str());
      return 1;
    }
    auto staging = std::move(std::get<dfl::backend::CacheDir::Staging>(begun));
    // Small pieces, made as they are written, as a network delivers them:
    // the process spends its time inside installs, where kills matter.
    const std::uint64_t size = dfl::testing::crash_size(i);
    dfl::backend::Sha256 hash;
    std::string piece;
    bool stopped = false;
    for (std::uint64_t offset = 0; offset < size; offset += 16384) {
      piece.resize(std::min<std::uint64_t>(16384, size - offset));
      dfl::testing::crash_bytes(i, offset, piece.data(), piece.size());
      hash.update(piece.data(), piece.size());
      if (auto error = staging.write(piece.data(), piece.size())) {
        std::fprintf(stderr, "%s\n", error->message.c_str());
        return 1;
      }
      // Staged bytes are buffered (a CacheDir buffer at a time): stop once
      // some have reached the staging file, with more still to come.
      std::error_code ec;
      if (static_cast<long>(i) == stop_at && !stopped && offset + piece.size() < size &&
          std::filesystem::file_size(staging.path(), ec) > 0 && !ec) {
        stopped = true;
        ::raise(SIGSTOP);
      }
    }
    if (static_cast<long>(i) == stop_at && !stopped) {
      std::fprintf(stderr, "artifact %u had no bytes in its staging file before its last piece\n",
                   i);
      return 3;
    }
    if (batched) {
      staged.push_back(dfl::backend::CacheDir::Commit{
          std::move(staging), size, dfl::backend::Sha256::hex(hash.finish())});
      if (staged.size() == 8 && !commit_staged()) return 1;
    } else if (auto error = cache.commit(std::move(staging), size,
                                         dfl::backend::Sha256::hex(hash.finish()))) {
      std::fprintf(stderr, "%s\n", error->message.c_str());
      return 1;
    }
  }
  if (!commit_staged()) return 1;
  if (batched) {  // How many staged bytes went around the page cache.
    std::printf("direct %llu\n",
                static_cast<unsigned long long>(cache.sync_counts().direct_bytes));
  }
  return 0;
}
