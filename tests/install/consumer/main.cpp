// Uses the installed headers and libraries: the core shares one task between
// two callers, and the backend installs an artifact atomically.
#include <cstdio>
#include <variant>

#include "demandflight/backend/cache_dir.h"
#include "demandflight/engine/scheduler.h"
#include "demandflight/policies/registry.h"

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  dfl::Scheduler scheduler({}, dfl::policies::make_orphan_policy("always-complete"));
  const dfl::ArtifactKey rock{"props/rock.ktx2", "r7", "pc", 0};
  scheduler.subscribe(0.0, rock, {.owner = 1, .priority = 0});
  scheduler.subscribe(0.1, rock, {.owner = 2, .priority = 3});
  if (scheduler.live_tasks() != 1) return 1;

  dfl::backend::CacheDir cache(argv[1]);
  auto begun = cache.begin(rock);
  auto staging = std::move(std::get<dfl::backend::CacheDir::Staging>(begun));
  if (staging.write("rock bytes", 10)) return 1;
  if (cache.commit(std::move(staging), 10, dfl::backend::Sha256::hex_of("rock bytes"))) return 1;
  std::printf("consumer: one task for two callers; installed %s\n",
              cache.object_path(rock).string().c_str());
  return cache.installed_size(rock) == 10u ? 0 : 1;
}
