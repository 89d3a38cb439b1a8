// Resampling a trace file, so that replications of it differ in their
// workload and not only in the retry jitter (`demandflight sim --resample`,
// `compare --resample`, Python's `resample=`).
//
// owners: a bootstrap of the trace's owners (its callers, sessions, pages):
// as many owners as the trace has are drawn with replacement, seeded, and
// each drawn owner brings all of its records (subscribes, cancels and
// set_priority of its demands, its end_owner) at their own times. An owner
// drawn twice appears twice, its copies named `NAME#2`, `NAME#3` (demands
// likewise); an owner not drawn is absent. Artifacts, the header and the
// faults stay as they are. The same seed gives the same resample.
#pragma once

#include <cstdint>
#include <string_view>

#include "demandflight/format/trace.h"

namespace dfl::format {

enum class Resample : std::uint8_t { none, owners };

// "none" or "owners"; throws std::invalid_argument naming the known ones.
Resample parse_resample(std::string_view name);

Trace resample(Trace trace, Resample how, std::uint64_t seed);

}  // namespace dfl::format
