// The simulator, loaded when a subcommand needs it. SimGrid (and the ns-3
// libraries it links) costs every process that loads it ~20 ms at start-up,
// which `fetch`, `replay`, `validate` and `gen` have no use for; so the CLI
// does not link it: `simulate` is in a module next to the executable
// (libdemandflight_simgrid.so, sim/CMakeLists.txt), opened on first use.
#pragma once

#include "demandflight/sim/simulator.h"

// The module's one entry point, `dfl_sim_simulate(build_id)`, returns this
// (dfl::sim::simulate), or null when the CLI is of another build.
using SimulateFn = dfl::sim::Result (*)(const dfl::sim::Trace&, const dfl::sim::SimOptions&);

namespace dfl::cli {

// Loads the module (once; later calls do nothing). Throws std::runtime_error
// when it cannot be loaded (the message names the file and why).
void load_simulator();

// dfl::sim::simulate, from the module (loaded first if need be).
sim::Result simulate(const sim::Trace& trace, const sim::SimOptions& options);

}  // namespace dfl::cli
