// Installs artifacts 0..N-1 into a cache, in order, skipping those already
// installed; the crash-safety test kills it with SIGKILL at random moments.
// Usage: install_crash_helper ROOT N
#include <cstdio>
#include <cstdlib>
#include <variant>

#include "artifact_content.h"
#include "demandflight/backend/cache_dir.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s ROOT N\n", argv[0]);
    return 2;
  }
  dfl::backend::CacheDir cache(argv[1]);
  const auto n = static_cast<std::uint32_t>(std::strtoul(argv[2], nullptr, 10));
  for (std::uint32_t i = 0; i < n; ++i) {
    const dfl::ArtifactKey key = dfl::testing::crash_key(i);
    if (cache.installed_size(key)) continue;
    auto begun = cache.begin(key);
    if (auto* error = std::get_if<dfl::backend::IoError>(&begun)) {
      std::fprintf(stderr, "%s\n", error->message.c_str());
      return 1;
    }
    auto staging = std::move(std::get<dfl::backend::CacheDir::Staging>(begun));
    const std::string content = dfl::testing::crash_content(i);
    // Small pieces, as a network delivers them.
    for (std::size_t offset = 0; offset < content.size(); offset += 16384) {
      const std::size_t piece = std::min<std::size_t>(16384, content.size() - offset);
      if (auto error = staging.write(content.data() + offset, piece)) {
        std::fprintf(stderr, "%s\n", error->message.c_str());
        return 1;
      }
    }
    if (auto error = cache.commit(std::move(staging), content.size(),
                                  dfl::backend::Sha256::hex_of(content))) {
      std::fprintf(stderr, "%s\n", error->message.c_str());
      return 1;
    }
  }
  return 0;
}
