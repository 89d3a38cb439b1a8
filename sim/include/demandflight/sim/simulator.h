// The simulator: the scheduler core on SimGrid virtual time.
//
// simulate() builds the platform from the trace header (the client's link,
// one link per origin, the client's CPU for hashing and its disk), replays the
// trace's records at their times, runs every transfer as a SimGrid
// communication of the bytes still missing, models finalize as hashing at
// hash_Bps then a disk write at disk_write_Bps, injects the trace's faults, and
// drives the very same dfl::Scheduler as the production backend.
//
// SimGrid allows one engine per process: simulate() may be called once per
// process (Python and `compare` run each simulation in its own process).
// Deterministic: the same trace, options and seed give the same Result.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "demandflight/engine/config.h"
#include "demandflight/engine/orphan_policy.h"
#include "demandflight/policies/registry.h"
#include "demandflight/format/result.h"
#include "demandflight/format/trace.h"

namespace dfl::sim {

// How a link is shared among flows whose round trips differ, under the tcp
// network model. `round_trip`: CM02's weights, a flow's share in inverse
// proportion to its route's latency (Reno's bias against long round trips).
// `equal`: every flow the same share (CUBIC grows its window by the clock,
// not by round trips); the route's latency is then charged as a delay before
// the bytes flow (CM02's window bound, TCP-gamma / RTT, goes with it).
enum class TcpSharing { round_trip, equal };
// "rtt" | "equal". Inline: the CLI must not link SimGrid (prepare_ns3_environment).
inline std::optional<TcpSharing> parse_tcp_sharing(std::string_view name) {
  if (name == "rtt") return TcpSharing::round_trip;
  if (name == "equal") return TcpSharing::equal;
  return std::nullopt;
}

struct SimOptions {
  Model model = Model::demand;
  std::string policy = "always-abort";         // NAME[:k=v,...], see policies/registry.h.
  std::optional<std::uint64_t> seed;           // Overrides the trace's seed.
  std::optional<std::uint32_t> max_transfers;  // Override the trace header.
  std::optional<std::uint32_t> max_per_origin;
  std::optional<format::NetworkModel> network_model;  // Overrides platform.network_model.
  // Overrides platform.server_congestion_control (the `tcp` model's idle rule).
  std::optional<format::ServerCongestionControl> server_congestion_control;
  // How the tcp model shares a link among flows from origins at different
  // round trips (TcpSharing); the default when unset.
  std::optional<TcpSharing> tcp_sharing;
  std::vector<std::string> simgrid_config;    // KEY:VALUE, applied after the model's.
  std::string timeline_path;                  // Chrome/Perfetto trace-event JSON, when set.
  // Comms started and cancelled, and under the tcp model each transfer's
  // connection (for bench/; cli --transfer-log says the lines).
  std::string transfer_log_path;
  // Every orphan decision, its view and the key's next subscribe (JSON lines;
  // docs/trace-format.md), when set; a key "came back" within the horizon.
  std::string decisions_path;
  double decision_horizon_s = 60;
  // Run every finalize stage as a SimGrid Exec (the default computes the
  // fair sharing of the CPU and the disk itself, on timers; the times are
  // the same): for tests.
  bool finalize_execs = false;
  // The oracle's bases besides its defaults (policy specs; sim/oracle.h).
  std::vector<std::string> oracle_bases;
  // A policy object to use instead of `policy` (which then only names it in
  // the result): Python-defined policies, `demandflight train`'s recorder.
  std::shared_ptr<OrphanPolicy> policy_object;
  // Called now and then as the run goes (every few thousand records, at
  // most every 0.2 s of wall time; never in an oracle's children): the
  // virtual time reached and the records applied. For a progress display.
  std::function<void(double now_s, std::uint64_t records)> progress;
};

format::Result simulate(const format::Trace& trace, const SimOptions& options);

// A streamed run (`sim --stream`), for traces too large to hold: records are
// read from `stream` as the simulation reaches their time, and each demand
// and task row goes to `rows` as it ends (in the order simulate() lists
// them), so that memory holds what is running, not what has been. The
// summary is exact and the same as simulate()'s (latency percentiles
// included: format::LatencySpill). The returned Result has no rows (its
// streamed_demands and streamed_tasks count them). Throws
// std::invalid_argument for what needs the whole trace: a timeline, a
// decision log, and the hindsight policies (lookahead, oracle).
format::Result simulate_streamed(format::TraceStream& stream, const SimOptions& options,
                                 format::RowSink& rows);
// Whether a policy spec can run streamed (not lookahead or oracle). Inline:
// the CLI asks before it loads the simulator's module.
inline bool streamable_policy(std::string_view spec) {
  const std::string_view name = spec.substr(0, spec.find(':'));
  return name != "lookahead" && name != "oracle";
}

// Settings of `options` on `trace` that cannot take effect, in words (a
// max_transfers above max_per_origin x the origins the artifacts use). The
// simulator puts them into Result::warnings; the CLI prints them on stderr.
std::vector<std::string> setting_warnings(const format::Trace& trace, const SimOptions& options);

// ns-3's TCP sockets keep 128 KiB buffers, which cap a transfer at 128 KiB per
// round trip (on a 10 MB/s, 100 ms path, about an eighth of the link); Linux grows them up to tcp_wmem's and tcp_rmem's maxima (4 MiB
// and 6 MiB), so that its transfers are limited by the congestion window and
// the link. SimGrid offers no setting for them, and ns-3 reads its attribute
// defaults from the environment (NS_ATTRIBUTE_DEFAULT) once, as SimGrid's
// library is loaded: the ns3 network model needs this set before then.
// SimGrid's glue also closes the receiving socket as soon as the sender has
// buffered a flow's last byte; a receiver that still holds out-of-order data
// (after a loss) then resets the connection and SimGrid aborts ("total_bytes
// is not sent_bytes"). So the send buffer stays at 1 MiB (a flow's window up
// to 1 MiB per round trip) and the links' queues are deep enough never to
// drop: ns-3 here models slow start, the window, fair sharing and queueing
// delay, not loss (docs/cli.md, *Network model*).
inline constexpr const char* kNs3AttributeDefaults =
    "ns3::TcpSocket::SndBufSize=1048576;ns3::TcpSocket::RcvBufSize=6291456;"
    "ns3::DropTailQueue<Packet>::MaxSize=100000p";
// Sets NS_ATTRIBUTE_DEFAULT to kNs3AttributeDefaults unless it is set. Inline:
// the CLI calls it before it loads the simulator's module.
inline void prepare_ns3_environment() {
  ::setenv("NS_ATTRIBUTE_DEFAULT", kNs3AttributeDefaults, /*overwrite=*/0);
}

// The SimGrid settings (KEY:VALUE, for Engine::set_config) that make `model`;
// none for lv08, SimGrid's own default.
std::vector<std::string> simgrid_settings(format::NetworkModel model);

}  // namespace dfl::sim
