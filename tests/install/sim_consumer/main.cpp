// Reads a two-caller trace with the installed format library and simulates it
// with the installed simulator: both callers succeed, from one transfer.
#include <cstdio>
#include <sstream>

#include "../two_callers_trace.h"
#include "demandflight/format/trace.h"
#include "demandflight/sim/simulator.h"

int main() {
  std::istringstream text(kTwoCallersTrace);
  const dfl::format::Trace trace = dfl::format::read_trace(text, "two-callers");
  const dfl::format::Result result = dfl::sim::simulate(trace, dfl::sim::SimOptions{});
  const auto succeeded = result.summary.outcomes[0];
  std::printf("simulated %zu demands: %llu succeeded, %llu transfers\n", result.demands.size(),
              static_cast<unsigned long long>(succeeded),
              static_cast<unsigned long long>(result.summary.transfers_started));
  return result.demands.size() == 2 && succeeded == 2 && result.summary.transfers_started == 1 ? 0
                                                                                                : 1;
}
