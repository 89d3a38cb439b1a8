// Baselines from the online-algorithms literature, with the orphan decision
// cast as ski rental (docs/cli.md, "The policies"):
//
// Cost model. When a transfer becomes an orphan with D bytes received,
// keeping it running is renting: each byte it receives from then on is paid
// for (bandwidth and slot time spent on something nobody waits for).
// Stopping is buying, at the price D: the bytes thrown away, which a demand
// that comes back for the key must fetch again. The season ends when the key
// comes back (the bytes are wanted after all) or the transfer completes.
//
// - ski-rental: the deterministic break-even rule: keep renting until the
//   rent paid (bytes received since the orphaning) equals the price D, then
//   stop. Its cost is at most twice that of the best choice in hindsight
//   (Karlin, Manasse, Rudolph, Sleator, "Competitive snoopy caching", 1988).
// - ski-rental-random: stop once the rent reaches z D, z drawn per orphan
//   with density e^z / (e - 1) on [0, 1]: e / (e - 1) ~ 1.58 times the best
//   in expectation (Karlin, Manasse, McGeoch, Owicki, "Competitive randomized
//   algorithms for nonuniform problems", 1994). Seeded: a run is reproducible.
// - linger: keep the orphan running for delay_s seconds (an image loader's
//   100 ms cancel delay: a demand that comes back within it re-attaches), then
//   decide `then` (abort by default).
//
// The rules are stated in bytes and checked when the engine asks; each asks
// to be asked again (OrphanPolicy::ask_again_at_s) when its threshold should
// be reached at the transfer's rate so far.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <unordered_map>

#include "demandflight/engine/ids.h"
#include "demandflight/engine/orphan_policy.h"

namespace dfl::policies {

class SkiRentalPolicy final : public OrphanPolicy {
 public:
  struct Params {
    bool randomized = false;
    std::uint64_t seed = 1;  // For randomized.
    OrphanDecision stop = OrphanDecision::abort;  // Or keep_partial.
  };
  explicit SkiRentalPolicy(Params params) : params_(params) {}

  OrphanDecision decide(const OrphanView& view) override;
  std::optional<double> ask_again_at_s(const OrphanView& view) override;
  std::string_view name() const override {
    return params_.randomized ? "ski-rental-random" : "ski-rental";
  }

 private:
  struct Orphan {
    std::uint64_t bytes_at_orphaning = 0;
    double threshold_bytes = 0;  // Rent at which it stops: z x the price.
  };
  Params params_;
  std::uint64_t orphanings_ = 0;
  std::unordered_map<std::uint64_t, Orphan> orphans_;  // By TaskId.
};

class LingerPolicy final : public OrphanPolicy {
 public:
  struct Params {
    double delay_s = 0.1;
    OrphanDecision then = OrphanDecision::abort;
  };
  explicit LingerPolicy(Params params) : params_(params) {}

  OrphanDecision decide(const OrphanView& view) override;
  std::optional<double> ask_again_at_s(const OrphanView& view) override;
  std::string_view name() const override { return "linger"; }

 private:
  Params params_;
  std::unordered_map<std::uint64_t, double> until_s_;  // By TaskId: the linger's end.
};

}  // namespace dfl::policies
