// Bounds on one transfer attempt, against an origin that drips, stalls or
// never finishes (docs/backend.md, *Bounds on a slow or hostile origin*).
//
// Pure: the client feeds an AttemptWatch the times and byte counts it sees,
// and ends the attempt when the watch says so; the tests feed it every case.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <string_view>

namespace dfl::backend {

struct TransferBounds {
  // The stall rule. An attempt is stalled when, over the last stall_window_s
  // seconds of the time it could read, fewer than stall_floor_Bps x
  // stall_window_s bytes of body arrived (the time to the first byte
  // counts: a server that answers nothing stalls too). Time the client's own
  // throttle held the transfer back is not counted, so a capped or paused
  // transfer never stalls. A stall ends the attempt, as a retryable failure:
  // "stalled: 30 bytes in 30 s from URL". With the defaults a server that
  // drips 1 or 2 bytes a second is cut off 30 s into the attempt, and one
  // that stops mid-body within 30 s of its last byte. 0 for either: no rule.
  double stall_window_s = 30;
  double stall_floor_Bps = 100;
  // The attempt's deadline: attempt_base_s plus the bytes it has to move at
  // attempt_floor_Bps, on the same clock (time held back by the throttle is
  // not counted). The bytes are the expected size less the resume offset,
  // or, where no size is expected, the response's Content-Length; with
  // neither, only the stall rule bounds the attempt. It ends the attempt, as
  // a retryable failure: "deadline: 1.2 MB of 9.0 MB in 2257 s from URL".
  // With the defaults a 10 MB artifact has 60 s + 2441 s; a server that
  // keeps just above the stall floor is cut off there. 0 for
  // attempt_floor_Bps: no deadline.
  double attempt_base_s = 60;
  double attempt_floor_Bps = 4096;
};

// Throws std::invalid_argument naming the field ("NAME.stall_window_s: ...")
// for a negative or non-finite value.
void check_bounds(const TransferBounds& bounds, const std::string& name);

// Why an attempt was ended.
struct BoundBreach {
  enum class Kind : std::uint8_t { stalled, deadline } kind = Kind::stalled;
  std::uint64_t bytes = 0;  // stalled: in the window; deadline: received in all.
  double seconds = 0;       // stalled: the window; deadline: the attempt's readable time.
  std::uint64_t expected = 0;  // deadline: the bytes the attempt had to move.
};

// In words, naming the URL: "stalled: 30 bytes in 30 s from URL",
// "deadline: 1.2 MB of 9.0 MB in 2257 s from URL".
std::string describe(const BoundBreach& breach, std::string_view url);

// "60 bytes", "1.5 MB", "2.1 GB" (decimal units, as link rates are).
std::string human_bytes(std::uint64_t bytes);

// One attempt under its bounds. Times are seconds on one clock.
class AttemptWatch {
 public:
  AttemptWatch() = default;
  AttemptWatch(const TransferBounds& bounds, double start_s);

  // The client's throttle holds the transfer back from `t` (a no-op while
  // held), and lets it go at `t`.
  void hold(double t);
  void release(double t);
  // The bytes this attempt has to move, once known: sets its deadline.
  void set_to_move(std::uint64_t bytes);
  // Checked now and then: nullopt while within bounds. `received` is the
  // attempt's body bytes so far.
  std::optional<BoundBreach> check(double t, std::uint64_t received);

  // Seconds the attempt could read, by `t`.
  double readable_s(double t) const;

 private:
  struct Sample {
    double readable_s;
    std::uint64_t received;
  };
  TransferBounds bounds_;
  double start_s_ = 0;
  double held_s_ = 0;                  // Closed spells held back.
  std::optional<double> held_since_;   // An open one.
  std::optional<double> deadline_s_;   // Readable seconds allowed.
  std::uint64_t to_move_ = 0;
  std::deque<Sample> samples_;  // Oldest first, about stall_window_s / 30 apart.
};

}  // namespace dfl::backend
