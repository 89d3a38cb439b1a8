// Reads a two-caller trace with the installed format library and simulates it
// with the installed simulator: both callers succeed, from one transfer.
#include <cstdio>
#include <sstream>

#include "demandflight/format/trace.h"
#include "demandflight/sim/simulator.h"

int main() {
  std::istringstream text(
      R"({"format": "demandflight-trace", "version": 1, "name": "two-callers"})"
      "\n"
      R"({"op": "artifact", "id": "rock", "resource": "props/rock.ktx2", "revision": "r1", )"
      R"("target": "pc", "generation": 0, "size": 1000000, "origin": "cdn"})"
      "\n"
      R"({"op": "subscribe", "t": 0.0, "demand": "a", "owner": "x", "artifact": "rock", "priority": 1})"
      "\n"
      R"({"op": "subscribe", "t": 0.1, "demand": "b", "owner": "y", "artifact": "rock", "priority": 2})"
      "\n");
  const dfl::format::Trace trace = dfl::format::read_trace(text, "two-callers");
  const dfl::format::Result result = dfl::sim::simulate(trace, dfl::sim::SimOptions{});
  const auto succeeded = result.summary.outcomes[0];
  std::printf("simulated %zu demands: %llu succeeded, %llu transfers\n", result.demands.size(),
              static_cast<unsigned long long>(succeeded),
              static_cast<unsigned long long>(result.summary.transfers_started));
  return result.demands.size() == 2 && succeeded == 2 && result.summary.transfers_started == 1 ? 0
                                                                                                : 1;
}
