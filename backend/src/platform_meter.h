// What the simulator needs to know of the network and the disk, measured
// from the client's own transfers (ClientCore feeds it; no I/O here). The
// estimators (docs/backend.md, *The measured platform*):
// - an origin's round trip: the least TCP connect time of the attempts that
//   opened a connection (libcurl's connect time less its name lookup): the
//   path's own delay, which a busy client's queueing only adds to (as BBR's
//   min_rtt);
// - the bandwidth a lone transfer reaches from an origin: the highest body
//   rate (bytes over first byte to end) of the complete attempts of at least
//   1 MiB that had no other transfer in flight at any moment of their life;
// - the client link: the highest rate of body bytes received by every
//   transfer together over a window of at least half a second (windows close
//   at the I/O thread's progress ticks; the last one, open when the figures
//   are read, counts once it is a fifth of a second long);
// - the finalize: bytes installed over the time at least one finalize ran.
#pragma once

#include <cstdint>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "demandflight/backend/client.h"

namespace dfl::backend {

class PlatformMeter {
 public:
  static constexpr std::uint64_t kLoneMinBytes = 1u << 20;
  static constexpr double kWindowS = 0.5;
  static constexpr double kLastWindowS = 0.2;

  void transfer_started(std::uint64_t transfer, OriginId origin);
  // An attempt is over (ended, failed, or aborted): `rate_Bps` for a complete
  // one, `connect_s` when it opened a connection.
  void transfer_ended(std::uint64_t transfer, std::uint64_t bytes, std::optional<double> rate_Bps,
                      std::optional<double> connect_s);
  // Body bytes received by every transfer so far (ended ones and those in flight).
  void received(double now, std::uint64_t total_bytes);
  void finalize_started(double now);
  void finalize_ended(double now, std::uint64_t bytes);

  MeasuredPlatform measured() const;

 private:
  struct Origin {
    double rtt_s = 0;  // The least connect time.
    std::uint64_t rtt_samples = 0;
    double lone_Bps = 0;
    std::uint64_t lone_samples = 0;
  };
  struct InFlight {
    OriginId origin = 0;
    bool shared = false;  // Another transfer was in flight at some moment of its life.
  };
  std::unordered_map<OriginId, Origin> origins_;
  std::unordered_map<std::uint64_t, InFlight> in_flight_;
  // The client link's windows.
  double window_start_s_ = -1;
  std::uint64_t window_start_bytes_ = 0;
  double last_s_ = 0;  // The last tick.
  std::uint64_t last_bytes_ = 0;
  double busiest_Bps_ = 0;
  std::uint64_t windows_ = 0;
  // The finalize stage.
  unsigned finalizing_ = 0;
  double busy_since_s_ = 0;
  double busy_s_ = 0;
  std::uint64_t finalized_bytes_ = 0;
  std::uint64_t finalizes_ = 0;
};

}  // namespace dfl::backend
