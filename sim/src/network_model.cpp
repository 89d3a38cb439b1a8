// The SimGrid settings of each network model of the trace format.
#include <string>
#include <vector>

#include "demandflight/format/defaults.h"
#include "demandflight/format/trace.h"
#include "demandflight/sim/simulator.h"

namespace dfl::sim {

std::vector<std::string> simgrid_settings(format::NetworkModel model) {
  using format::NetworkModel;
  namespace defaults = format::defaults;
  switch (model) {
    case NetworkModel::calibrated:
      // Calibration: docs/testing.md, "Fidelity" (bench/fidelity.py against the backend).
      return {"network/model:CM02", "network/crosstraffic:0",
              "network/latency-factor:" + std::to_string(defaults::calibrated_latency_factor),
              "network/bandwidth-factor:" + std::to_string(defaults::calibrated_bandwidth_factor)};
    case NetworkModel::cm02:
      return {"network/model:CM02", "network/crosstraffic:0"};
    case NetworkModel::lv08:
      break;
  }
  return {};
}

}  // namespace dfl::sim
