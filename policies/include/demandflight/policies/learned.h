// learned: a logistic regression of P(reuse within a horizon) on features of
// the orphan view, fitted offline by `demandflight train` and loaded with
// `--policy learned:model=model.json`.
//
// The decision is expected-value's (expected_value.h) with the learned
// probability: complete iff P * size > remaining * (1 + queue_weight while a
// task waits for the slot). One of the features is expected-value's own online
// estimate for the key and its class, so the model learns how far to trust
// it next to the rest of the view.
//
// model.json: {"format": "demandflight-learned-policy", "version": 1,
//   "features": [names, in kFeatureNames order], "mean": [...], "scale": [...],
//   "weights": [...], "horizon_s": 60, "examples": N, "positives": K, ...}
// Features are standardised with mean/scale before the weights apply (the
// bias feature has mean 0 and scale 1).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "demandflight/engine/orphan_policy.h"
#include "demandflight/policies/expected_value.h"

namespace dfl::policies {

inline constexpr std::size_t kLearnedFeatures = 10;
inline constexpr std::array<std::string_view, kLearnedFeatures> kFeatureNames = {
    "bias",           // 1
    "log_size_mb",    // log(1 + size / 1e6)
    "done_fraction",  // bytes done / size
    "log_key_demands",   // log(1 + subscribes of the key so far)
    "log_since_last_s",  // log(1 + seconds since the key's last subscribe)
    "recent_repeat",     // 1 if the key's previous gap was within the horizon
    "blocked",           // 1 if a task is queued and no slot is free
    "log_queued",        // log(1 + queued tasks)
    "cache_fill",        // cache used / capacity
    "online_logit",      // logit of expected-value's online P(reuse), clipped to ±8
};
using Features = std::array<double, kLearnedFeatures>;

// The features of a view; `online_p` is expected-value's estimate for its key.
Features learned_features(const OrphanView& view, double online_p, double horizon_s);

struct LearnedModel {
  std::array<double, kLearnedFeatures> mean{};
  std::array<double, kLearnedFeatures> scale{};
  std::array<double, kLearnedFeatures> weights{};
  double horizon_s = 60;
  std::uint64_t examples = 0;
  std::uint64_t positives = 0;
  double train_log_loss = 0;
  std::vector<std::string> trained_on;

  double probability(const Features& x) const;
  std::string to_json() const;
  // Throws std::invalid_argument naming the file and the field.
  static LearnedModel load(const std::string& path);
};

// Fits the model by Newton's method (IRLS) with an L2 penalty `l2` on every
// weight but the bias, on standardised features. Throws std::invalid_argument
// on no examples.
LearnedModel fit_logistic(const std::vector<Features>& x, const std::vector<bool>& reused,
                          double horizon_s, double l2 = 1e-3);

class LearnedPolicy final : public OrphanPolicy {
 public:
  struct Params {
    double queue_weight = 1;
    bool keep = false;
  };
  LearnedPolicy(LearnedModel model, Params params);

  OrphanDecision decide(const OrphanView& view) override;
  void observe_request(const ArtifactKey& key, double now_s) override;
  std::string_view name() const override { return "learned"; }
  bool uses_key_history() const override { return true; }

  double reuse_probability(const OrphanView& view) const;
  const LearnedModel& model() const { return model_; }

 private:
  LearnedModel model_;
  Params params_;
  ExpectedValuePolicy online_;  // Its P(reuse) estimate is a feature.
};

}  // namespace dfl::policies
