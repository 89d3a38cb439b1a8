// describe(): what a trace asks for, without simulating it
// (`demandflight describe TRACE`, Python's dfl.describe; docs/cli.md,
// "Describing a trace").
//
// Everything is computed from the records alone, in one pass plus sorts:
// counts, the popularity of keys and a Zipf fit, reuse times and distances,
// sizes, priorities, and two opportunities a scheduler can take: requests a
// single-flight map would merge, and demands withdrawn while their transfer
// would still be running (orphans).
//
// A key is an ArtifactKey (resource, revision, target, generation): two
// artifact ids that declare one key are one key, as in the demand model. A
// key's size is the size of the artifact id its first request named.
//
// The lone-transfer window of a demand subscribed at t, for an artifact of
// size S from origin O, is [t, end) with
//   end = min(t + lone(S, O), t + timeout_s, its cancel's t, its owner's end's t)
// where lone(S, O) is the time the trace's network model (platform.network_model)
// takes to move S bytes alone on the link min(client_bandwidth, O.bandwidth)
// with round trip 2 (client_latency + O.latency): the model's latency and
// bandwidth factors (format/defaults.h), and under `tcp` (and `ns3`) a new
// connection's handshake and slow start (format/tcp.h) as the simulator adds
// them. No queueing for a slot, no sharing, no finalize: a lower bound on how
// long a demand waits. A subscribe that the engine refuses at once (a stale
// owner generation, timeout_s = 0) has an empty window.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include "demandflight/engine/ids.h"
#include "demandflight/format/trace.h"

namespace dfl::format {

// Nearest-rank quantiles of a sample (as result.h's latencies): the q-th is
// the ceil(q * n)-th smallest value. NaN when the sample is empty.
struct Distribution {
  std::uint64_t count = 0;
  double p10 = 0, p50 = 0, p90 = 0, p99 = 0;
  double min = 0, max = 0, mean = 0;
};

// One key of the popularity ranking.
struct KeyPopularity {
  std::uint64_t rank = 0;  // From 1: the most requested.
  std::string key;         // to_string(ArtifactKey): "resource@revision/target#generation".
  std::uint64_t requests = 0;
  double share = 0;             // requests / all requests.
  double cumulative_share = 0;  // Of ranks 1..rank.
  std::uint64_t size_bytes = 0;
};

struct PriorityDemands {
  Priority priority = 0;
  std::uint64_t demands = 0;  // Subscribes at this priority.
  double share = 0;           // Of all subscribes.
};

struct Description {
  std::string trace;  // The header's name.
  // The network model whose lone transfer the windows assume (platform.network_model).
  std::string network_model;

  // --- Counts
  std::uint64_t requests = 0;         // subscribe records.
  std::uint64_t keys = 0;             // Distinct keys requested.
  std::uint64_t artifact_ids = 0;     // artifact records (ids; several may alias one key).
  std::uint64_t aliased_keys = 0;     // Requested keys named by more than one artifact id.
  std::uint64_t requested_bytes = 0;  // Sum over requests of their artifact's size.
  std::uint64_t unique_bytes = 0;     // Sum over requested keys of the key's size.
  std::uint64_t cancels = 0;          // cancel records.
  std::uint64_t set_priorities = 0;   // set_priority records.
  std::uint64_t end_owners = 0;       // end_owner records.
  std::uint64_t faults = 0;           // fault records.
  std::uint64_t owners = 0;           // Distinct owners named.
  double duration_s = 0;              // Last record's t minus the first's (0 without records).

  // --- Popularity
  // Every requested key, most requested first (ties: by key text).
  std::vector<KeyPopularity> ranking;
  // Least squares of ln(requests) on ln(rank) over every rank 1..keys:
  // alpha = -slope; r2 = 1 - SS_res / SS_tot (1 when every key has the same
  // count). NaN with fewer than two keys.
  double zipf_alpha = 0;
  double zipf_r2 = 0;
  std::uint64_t zipf_ranks = 0;  // The ranks fitted.
  // Share of the requests that go to the ceil(keys / 100) and ceil(keys / 10)
  // most requested keys (0 without keys).
  double top_1pct_share = 0;
  double top_10pct_share = 0;
  std::uint64_t one_hit_wonders = 0;  // Keys requested exactly once.
  double one_hit_wonder_share = 0;    // Of the keys.

  // --- Reuse: each request of a key after its first (a re-request).
  std::uint64_t cold_requests = 0;  // First requests of their key (= keys).
  Distribution reuse_time_s;        // t minus the key's previous request's t.
  // Distinct other keys requested between the key's previous request and this
  // one (0: nothing else in between), in record order.
  Distribution reuse_distance;

  // --- Sizes
  Distribution key_size_bytes;      // One value per requested key.
  Distribution request_size_bytes;  // One value per request.

  // --- Single-flight opportunity: requests that come while an earlier
  // demand of the same key is inside its lone-transfer window (t_earlier <=
  // t < end_earlier; an earlier record at the same t counts).
  std::uint64_t overlapping_requests = 0;
  double overlapping_share = 0;                 // Of the requests.
  std::uint64_t single_flight_saved_bytes = 0;  // Sum of those requests' sizes.

  // --- Orphan opportunity: demands whose cancel, or whose owner's end,
  // comes while their own lone-transfer window (without that end) is open:
  // t_end < min(t + transfer, t + timeout_s). Whether another demand of the
  // key still waits is not asked: an upper bound on the orphans.
  std::uint64_t cancelled_demands = 0;    // Demands ended by their cancel, in flight or not.
  std::uint64_t owner_ended_demands = 0;  // ... by their owner's end (not stale subscribes).
  std::uint64_t cancelled_in_flight = 0;
  std::uint64_t owner_ended_in_flight = 0;
  double orphan_share = 0;  // (cancelled + owner_ended) in flight / requests.
  // Of those, how many have their key requested again by a later record, and
  // after how long (that subscribe's t minus the end's t).
  std::uint64_t came_back = 0;
  Distribution came_back_s;

  // --- Priorities
  std::vector<PriorityDemands> priorities;  // By subscribe priority, ascending.
  std::uint64_t demands_reprioritized = 0;  // Demands with a set_priority to another value.
  std::uint64_t priority_raises = 0;        // set_priority records above the demand's current.
  std::uint64_t priority_lowers = 0;        // ... below it.
  std::uint64_t priority_unchanged = 0;     // ... equal to it.
};

// Describes a parsed trace (read_trace()).
Description describe(const Trace& trace);

// The description as one JSON object (deterministic: the same trace gives the
// same bytes), with the `top` most requested keys in popularity.top (0: all).
void write_description_json(const Description& d, std::ostream& out, std::size_t top = 10);

// A readable summary in aligned sections, with the `top` most requested keys.
void print_description(const Description& d, std::ostream& out, std::size_t top = 10);

}  // namespace dfl::format
