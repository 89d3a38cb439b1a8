// Uses the installed engine alone: two callers share one task, the first
// one's cancel leaves the second's wait, and the task's priority falls back.
#include <cstdio>

#include "demandflight/engine/scheduler.h"

int main(int, char**) {
  dfl::Scheduler scheduler;
  const dfl::ArtifactKey rock{"props/rock.ktx2", "r7", "pc", 0};
  const dfl::DemandHandle camera = scheduler.subscribe(0.0, rock, {.owner = 1, .priority = 3});
  scheduler.subscribe(0.1, rock, {.owner = 2, .priority = 0});
  if (scheduler.live_tasks() != 1) return 1;
  scheduler.cancel(0.2, camera);
  const auto task = scheduler.task_for(rock);
  if (!task || task->active_demands != 1 || task->effective_priority != 0) return 1;
  std::printf("engine consumer: one task for two callers; after a cancel it runs at %d\n",
              *task->effective_priority);
  return 0;
}
