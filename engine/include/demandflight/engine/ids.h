// Identifiers shared by the engine and its runtimes.
//
// Demand handles are slot references with a generation, so a stale handle (one
// whose demand already ended) can never reach a newer demand that reuses the
// slot. Task, transfer and finalize ids come from monotonically increasing
// counters and are never reused: a late event for an aborted transfer can be
// recognised and ignored.
#pragma once

#include <compare>
#include <cstdint>
#include <limits>

namespace dfl {

// Higher is more urgent. The bundled scenarios use 0 background, 1 normal,
// 2 high, 3 critical, but any int32 is allowed.
using Priority = std::int32_t;

// Who may end demands together (a subsystem, a session slot). Runtimes map
// their own names onto these numbers.
using OwnerId = std::uint64_t;

// Incarnation of an owner. end_owner(owner, g) ends every demand of that owner
// whose generation is <= g, and later subscribes with such a generation are
// stale: they end owner_ended at once.
using OwnerGeneration = std::int64_t;

// Index of an origin (server) in the runtime's origin table; per-origin slot
// limits apply to it.
using OriginId = std::uint32_t;

// Absolute times are seconds on the runtime's clock (virtual or real).
inline constexpr double kNoDeadline = std::numeric_limits<double>::infinity();

struct DemandHandle {
  std::uint32_t slot = std::numeric_limits<std::uint32_t>::max();
  std::uint32_t generation = 0;

  friend auto operator<=>(const DemandHandle&, const DemandHandle&) = default;
};

struct TaskId {
  std::uint64_t value = 0;  // 0 means "no task" (e.g. a cache hit).
  friend auto operator<=>(const TaskId&, const TaskId&) = default;
};

struct TransferId {
  std::uint64_t value = 0;
  friend auto operator<=>(const TransferId&, const TransferId&) = default;
};

struct FinalizeId {
  std::uint64_t value = 0;
  friend auto operator<=>(const FinalizeId&, const FinalizeId&) = default;
};

}  // namespace dfl
