// The entry point of libdemandflight_simgrid.so: see sim_module.h.
#include <cstring>

#include "sim_module.h"

// Null unless `build_id` is this module's: the types passed across are only
// known to match when the CLI was compiled by the same build.
extern "C" __attribute__((visibility("default"))) SimulateFn dfl_sim_simulate(
    const char* build_id) {
  return std::strcmp(build_id, DFL_BUILD_ID) == 0 ? &dfl::sim::simulate : nullptr;
}
