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
    case NetworkModel::tcp:  // The same links; the connections add their delays (tcp_connections.h).
      // Calibration: docs/validation.md (bench/fidelity.py against the backend).
      return {"network/model:CM02", "network/crosstraffic:0",
              "network/latency-factor:" + std::to_string(defaults::calibrated_latency_factor),
              "network/bandwidth-factor:" + std::to_string(defaults::calibrated_bandwidth_factor)};
    case NetworkModel::cm02:
      return {"network/model:CM02", "network/crosstraffic:0"};
    case NetworkModel::lv08:
      break;
    case NetworkModel::ns3:
      // TCP as ns-3 ships it (CUBIC, SimGrid's 1000-byte segments), no seed:
      // the same trace gives the same packets.
      return {"network/model:ns-3"};
  }
  return {};
}

}  // namespace dfl::sim
