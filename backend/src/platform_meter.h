// What the simulator needs to know of the network and the disk, measured
// from the client's own transfers (ClientCore feeds it; no I/O here). The
// estimators (docs/backend.md, *The measured platform*):
// - an origin's round trip: the least TCP connect time of the attempts that
//   opened a connection (libcurl's connect time less its name lookup): the
//   path's own delay, which a busy client's queueing only adds to (as BBR's
//   min_rtt);
// - the bandwidth of an origin's path: from the complete attempts of at
//   least 1 MiB that had no other transfer in flight at any moment of their
//   life (lone), those that opened their connection: the link rate at which
//   the simulator's tcp model (slow start from 10 segments at that
//   connection's round trip, format/tcp.h) takes the attempt's time from its
//   first byte to its last; the median of those. Without such an attempt
//   (every lone one ran on a kept connection, whose window is not known
//   here), the highest body rate of a lone attempt (a lower bound);
// - the client link: the highest rate of body bytes received by every
//   transfer together over a window of at least half a second (windows close
//   at the I/O thread's progress ticks; the last one, open when the figures
//   are read, counts once it is a fifth of a second long); and the same of
//   each origin's transfers, a lower bound of that origin's path;
// - the finalize: bytes installed over the time at least one finalize ran.
#pragma once

#include <cstdint>
#include <optional>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

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
  // A progress tick: body bytes received by every transfer so far (ended
  // ones and those in flight), and the attempts in flight.
  void received(double now, std::uint64_t total_bytes,
                const std::vector<TransferSnapshot>& in_flight);
  void finalize_started(double now);
  void finalize_ended(double now, std::uint64_t bytes);

  MeasuredPlatform measured() const;

  // The link rate at which a lone transfer of `bytes` on a new connection of
  // round trip `rtt_s` takes `body_s` from its first byte to its last under
  // the tcp model's slow start; nullopt where slow start alone takes longer
  // (a larger initial window than the model's) or explains nearly all of it.
  static std::optional<double> path_rate(double bytes, double body_s, double rtt_s);

 private:
  static constexpr std::size_t kMaxPathSamples = 1024;  // The last ones.

  // The busiest window of a byte count read at each tick.
  struct BusiestWindow {
    double start_s = -1;
    std::uint64_t start_bytes = 0;
    double last_s = 0;  // The last tick.
    std::uint64_t last_bytes = 0;
    double busiest_Bps = 0;
    std::uint64_t windows = 0;
    void tick(double now, std::uint64_t bytes);
    // The busiest rate and the windows, the open one counted if long enough.
    std::pair<double, std::uint64_t> best() const;
  };

  struct Origin {
    double rtt_s = 0;  // The least connect time.
    std::uint64_t rtt_samples = 0;
    double lone_Bps = 0;  // The highest body rate of a lone attempt.
    std::uint64_t lone_samples = 0;
    std::vector<double> path_Bps;  // Lone attempts on new connections, inverted.
    std::uint64_t path_samples = 0;
    std::uint64_t ended_bytes = 0;  // Of its attempts that have ended.
    BusiestWindow window;
  };
  struct InFlight {
    OriginId origin = 0;
    bool shared = false;  // Another transfer was in flight at some moment of its life.
  };
  std::unordered_map<OriginId, Origin> origins_;
  std::unordered_map<std::uint64_t, InFlight> in_flight_;
  BusiestWindow client_;
  // The finalize stage.
  unsigned finalizing_ = 0;
  double busy_since_s_ = 0;
  double busy_s_ = 0;
  std::uint64_t finalized_bytes_ = 0;
  std::uint64_t finalizes_ = 0;
};

}  // namespace dfl::backend
