// The bounds on one attempt (transfer_bounds.h), on a clock the test turns.
#include "demandflight/backend/transfer_bounds.h"

#include <gtest/gtest.h>

#include <stdexcept>

#include "demandflight/backend/http_outcome.h"

namespace dfl::backend {
namespace {

// Feeds the watch `rate_Bps` from `from` to `to`, checking every 0.25 s as
// the client does; the time of the first breach, or nullopt.
std::optional<double> run(AttemptWatch& w, std::uint64_t& received, double from, double to,
                          double rate_Bps, BoundBreach* breach = nullptr) {
  for (double t = from; t <= to + 1e-9; t += 0.25) {
    received = static_cast<std::uint64_t>(rate_Bps * t);
    if (auto b = w.check(t, received)) {
      if (breach != nullptr) *breach = *b;
      return t;
    }
  }
  return std::nullopt;
}

TEST(AttemptWatch, ADripBelowTheFloorIsStalledWhenTheFirstWindowIsFull) {
  const TransferBounds defaults;
  for (const double drip : {0.0, 1.0, 2.0, 99.0}) {
    AttemptWatch w(defaults, 0);
    std::uint64_t received = 0;
    BoundBreach breach;
    const auto at = run(w, received, 0, 100, drip, &breach);
    ASSERT_TRUE(at) << drip;
    EXPECT_GE(*at, 30.0) << drip;
    EXPECT_LE(*at, 31.25) << drip;
    EXPECT_EQ(breach.kind, BoundBreach::Kind::stalled);
    EXPECT_LT(breach.bytes, 3000u);
  }
}

TEST(AttemptWatch, ATransferAtTheFloorOrAboveIsNotStalled) {
  AttemptWatch w(TransferBounds{}, 0);
  std::uint64_t received = 0;
  EXPECT_FALSE(run(w, received, 0, 300, 101.0));
}

TEST(AttemptWatch, ATransferThatStopsIsStalledAWindowAfterItsLastByte) {
  AttemptWatch w(TransferBounds{}, 0);
  std::uint64_t received = 0;
  ASSERT_FALSE(run(w, received, 0, 50, 1e6));  // 50 MB in 50 s, then nothing.
  for (double t = 50.25;; t += 0.25) {
    if (w.check(t, received)) {
      EXPECT_GE(t, 80.0);
      EXPECT_LE(t, 81.25);
      break;
    }
    ASSERT_LT(t, 200);
  }
}

TEST(AttemptWatch, TimeHeldBackByTheClientsThrottleIsNotCounted) {
  AttemptWatch w(TransferBounds{}, 0);
  // Held for 100 s straight, no bytes: no stall, and the readable time stands still.
  w.hold(1);
  for (double t = 1; t <= 101; t += 0.25)
    ASSERT_FALSE(w.check(t, 0)) << t;
  EXPECT_DOUBLE_EQ(w.readable_s(101), 1.0);
  w.release(101);
  EXPECT_DOUBLE_EQ(w.readable_s(111), 11.0);
  // Released and still nothing: stalled 30 readable seconds in.
  std::optional<double> at;
  for (double t = 101; t <= 200 && !at; t += 0.25)
    if (w.check(t, 0)) at = t;
  ASSERT_TRUE(at);
  EXPECT_GE(w.readable_s(*at), 30.0);
  EXPECT_LE(w.readable_s(*at), 31.25);
}

TEST(AttemptWatch, TheDeadlineIsTheBasePlusTheBytesAtTheFloor) {
  TransferBounds b;
  b.attempt_base_s = 1;
  b.attempt_floor_Bps = 100'000;
  AttemptWatch w(b, 10);
  w.set_to_move(300'000);  // 1 s + 3 s.
  std::uint64_t received = 0;
  BoundBreach breach;
  std::optional<double> at;
  for (double t = 10; t <= 20 && !at; t += 0.25) {
    received = static_cast<std::uint64_t>(50'000 * (t - 10));
    if (auto x = w.check(t, received)) {
      at = t;
      breach = *x;
    }
  }
  ASSERT_TRUE(at);
  EXPECT_DOUBLE_EQ(*at, 14.25);
  EXPECT_EQ(breach.kind, BoundBreach::Kind::deadline);
  EXPECT_EQ(breach.expected, 300'000u);
  EXPECT_EQ(describe(breach, "http://h/x"), "deadline: 212.5 kB of 300.0 kB in 4 s from http://h/x");
}

TEST(AttemptWatch, ZeroTurnsEachRuleOff) {
  TransferBounds b;
  b.stall_window_s = 0;
  b.attempt_floor_Bps = 0;
  AttemptWatch w(b, 0);
  w.set_to_move(1);
  for (double t = 0; t < 1000; t += 1)
    ASSERT_FALSE(w.check(t, 0));
}

TEST(AttemptWatch, BadBoundsAreRefusedNamingTheField) {
  TransferBounds b;
  b.stall_floor_Bps = -1;
  try {
    check_bounds(b, "ClientOptions.bounds");
    FAIL() << "accepted a negative floor";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("ClientOptions.bounds.stall_floor_Bps"),
              std::string::npos);
  }
}

TEST(TransferWords, BytesAndBreachesReadAsPeopleWriteThem) {
  EXPECT_EQ(human_bytes(1), "1 byte");
  EXPECT_EQ(human_bytes(60), "60 bytes");
  EXPECT_EQ(human_bytes(1'500'000), "1.5 MB");
  EXPECT_EQ(human_bytes(999'999), "1.0 MB");
  EXPECT_EQ(describe(BoundBreach{BoundBreach::Kind::stalled, 30, 30.4, 0}, "http://h/a"),
            "stalled: 30 bytes in 30 s from http://h/a");
}

TEST(TransferWords, TransportErrorsSayWhatHappened) {
  EXPECT_EQ(describe_transport_error(56 /*CURLE_RECV_ERROR*/, "Recv failure: Connection reset by peer",
                                     104 /*ECONNRESET*/),
            "connection reset by peer");
  EXPECT_EQ(describe_transport_error(7 /*CURLE_COULDNT_CONNECT*/, "Failed to connect", 111),
            "connection refused");
  EXPECT_NE(describe_transport_error(27 /*CURLE_OUT_OF_MEMORY*/, "", 0)
                .find("response header too large"),
            std::string::npos);
  EXPECT_EQ(describe_transport_error(28 /*CURLE_OPERATION_TIMEDOUT*/,
                                     "Connection timed out after 10001 milliseconds", 0),
            "connection timed out after 10001 milliseconds");
}

}  // namespace
}  // namespace dfl::backend
