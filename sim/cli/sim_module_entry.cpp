// The entry point of libdemandflight_simgrid.so: see sim_module.h.
#include "demandflight/sim/simulator.h"

using SimulateFn = dfl::sim::Result (*)(const dfl::sim::Trace&, const dfl::sim::SimOptions&);

extern "C" __attribute__((visibility("default"))) SimulateFn dfl_sim_simulate() {
  return &dfl::sim::simulate;
}
