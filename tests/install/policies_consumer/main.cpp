// A policy by name from the installed policies component, deciding in a
// scheduler of the installed engine.
#include <cstdio>
#include <string>

#include "demandflight/engine/scheduler.h"
#include "demandflight/policies/registry.h"

int main() {
  const auto policy = dfl::policies::make_orphan_policy("keep-partial");
  dfl::Scheduler scheduler({}, policy);
  scheduler.subscribe(0.0, dfl::ArtifactKey{"props/rock.ktx2", "r7", "pc", 0}, {.owner = 1});
  std::printf("policies consumer: %s decides for %zu task\n", std::string(policy->name()).c_str(),
              scheduler.live_tasks());
  return policy->name() == "keep-partial" && scheduler.live_tasks() == 1 ? 0 : 1;
}
