#include "demandflight/policies/learned.h"

#include <Eigen/Dense>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>

namespace dfl::policies {

namespace {

double sigmoid(double z) {
  if (z >= 0) return 1 / (1 + std::exp(-z));
  const double e = std::exp(z);
  return e / (1 + e);
}

}  // namespace

Features learned_features(const OrphanView& v, double online_p, double horizon_s) {
  const double size = static_cast<double>(v.size_bytes);
  const double p = std::clamp(online_p, 1e-6, 1 - 1e-6);
  Features f{};
  f[0] = 1;
  f[1] = std::log1p(size / 1e6);
  f[2] = v.size_bytes > 0 ? static_cast<double>(v.bytes_done) / size : 0;
  f[3] = std::log1p(static_cast<double>(v.key_demands));
  f[4] = std::log1p(std::max(0.0, v.since_last_demand_s));
  f[5] = v.previous_gap_s && *v.previous_gap_s <= horizon_s ? 1 : 0;
  f[6] = v.queued_tasks > 0 && v.free_slots == 0 ? 1 : 0;
  f[7] = std::log1p(static_cast<double>(v.queued_tasks));
  f[8] = v.cache_capacity_bytes > 0 ? static_cast<double>(v.cache_used_bytes) /
                                          static_cast<double>(v.cache_capacity_bytes)
                                    : 0;
  f[9] = std::clamp(std::log(p / (1 - p)), -8.0, 8.0);
  return f;
}

double LearnedModel::probability(const Features& x) const {
  double z = 0;
  for (std::size_t i = 0; i < kLearnedFeatures; ++i)
    z += weights[i] * (x[i] - mean[i]) / scale[i];
  return sigmoid(z);
}

std::string LearnedModel::to_json() const {
  nlohmann::json j;
  j["format"] = "demandflight-learned-policy";
  j["version"] = 1;
  j["features"] = std::vector<std::string>(kFeatureNames.begin(), kFeatureNames.end());
  j["mean"] = mean;
  j["scale"] = scale;
  j["weights"] = weights;
  j["horizon_s"] = horizon_s;
  j["examples"] = examples;
  j["positives"] = positives;
  j["train_log_loss"] = train_log_loss;
  j["trained_on"] = trained_on;
  return j.dump(2) + "\n";
}

LearnedModel LearnedModel::load(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::invalid_argument(path + ": cannot read the model");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {  // parse_error, or a number out of range.
    throw std::invalid_argument(path + ": not JSON: " + e.what());
  }
  auto fail = [&](const std::string& field, const std::string& what) {
    return std::invalid_argument(path + ": " + field + ": " + what);
  };
  if (!j.is_object() || j.value("format", "") != "demandflight-learned-policy") {
    throw fail("format", "expected \"demandflight-learned-policy\" (write it with demandflight train)");
  }
  if (j.value("version", 0) != 1) throw fail("version", "expected 1");
  const auto names = j.value("features", std::vector<std::string>{});
  if (names.size() != kLearnedFeatures ||
      !std::equal(names.begin(), names.end(), kFeatureNames.begin())) {
    throw fail("features", "not the features this build computes (retrain the model)");
  }
  LearnedModel m;
  auto vector = [&](const char* field, std::array<double, kLearnedFeatures>& out) {
    if (!j.contains(field) || !j[field].is_array() || j[field].size() != kLearnedFeatures) {
      throw fail(field, "expected " + std::to_string(kLearnedFeatures) + " numbers");
    }
    for (std::size_t i = 0; i < kLearnedFeatures; ++i) {
      if (!j[field][i].is_number() || !std::isfinite(j[field][i].get<double>())) {
        throw fail(std::string(field) + "[" + std::to_string(i) + "]", "not a finite number");
      }
      out[i] = j[field][i].get<double>();
    }
  };
  vector("mean", m.mean);
  vector("scale", m.scale);
  vector("weights", m.weights);
  for (std::size_t i = 0; i < kLearnedFeatures; ++i) {
    if (!(m.scale[i] > 0)) throw fail("scale[" + std::to_string(i) + "]", "must be positive");
  }
  if (!j.contains("horizon_s") || !j["horizon_s"].is_number() || !(j["horizon_s"].get<double>() > 0)) {
    throw fail("horizon_s", "expected a positive number");
  }
  m.horizon_s = j["horizon_s"].get<double>();
  m.examples = j.value("examples", std::uint64_t{0});
  m.positives = j.value("positives", std::uint64_t{0});
  m.train_log_loss = j.value("train_log_loss", 0.0);
  m.trained_on = j.value("trained_on", std::vector<std::string>{});
  return m;
}

LearnedModel fit_logistic(const std::vector<Features>& x, const std::vector<bool>& reused,
                          double horizon_s, double l2) {
  if (x.empty() || x.size() != reused.size()) {
    throw std::invalid_argument("train: no examples (no transfer was orphaned in the traces)");
  }
  const auto n = static_cast<Eigen::Index>(x.size());
  const auto d = static_cast<Eigen::Index>(kLearnedFeatures);
  LearnedModel m;
  m.horizon_s = horizon_s;
  m.examples = x.size();
  m.positives = static_cast<std::uint64_t>(std::count(reused.begin(), reused.end(), true));
  // Standardise every feature but the bias.
  m.mean.fill(0);
  m.scale.fill(1);
  for (std::size_t i = 1; i < kLearnedFeatures; ++i) {
    double sum = 0, sq = 0;
    for (const Features& f : x)
      sum += f[i];
    const double mean = sum / static_cast<double>(n);
    for (const Features& f : x)
      sq += (f[i] - mean) * (f[i] - mean);
    const double sd = std::sqrt(sq / static_cast<double>(n));
    m.mean[i] = mean;
    m.scale[i] = sd > 1e-12 ? sd : 1.0;  // A constant feature: weight goes to 0 by the penalty.
  }
  Eigen::MatrixXd X(n, d);
  Eigen::VectorXd y(n);
  for (Eigen::Index r = 0; r < n; ++r) {
    const Features& f = x[static_cast<std::size_t>(r)];
    for (Eigen::Index c = 0; c < d; ++c) {
      const auto i = static_cast<std::size_t>(c);
      X(r, c) = (f[i] - m.mean[i]) / m.scale[i];
    }
    y(r) = reused[static_cast<std::size_t>(r)] ? 1.0 : 0.0;
  }
  Eigen::VectorXd penalty = Eigen::VectorXd::Constant(d, l2 * static_cast<double>(n));
  penalty(0) = 0;
  Eigen::VectorXd w = Eigen::VectorXd::Zero(d);
  for (int iteration = 0; iteration < 50; ++iteration) {
    const Eigen::VectorXd z = X * w;
    Eigen::VectorXd p(n), s(n);
    for (Eigen::Index r = 0; r < n; ++r) {
      p(r) = sigmoid(z(r));
      s(r) = std::max(p(r) * (1 - p(r)), 1e-9);
    }
    const Eigen::VectorXd gradient = X.transpose() * (p - y) + penalty.cwiseProduct(w);
    Eigen::MatrixXd hessian = X.transpose() * s.asDiagonal() * X;
    hessian.diagonal() += penalty + Eigen::VectorXd::Constant(d, 1e-9);
    const Eigen::VectorXd step = hessian.ldlt().solve(gradient);
    w -= step;
    if (step.lpNorm<Eigen::Infinity>() < 1e-8) break;
  }
  double loss = 0;
  const Eigen::VectorXd z = X * w;
  for (Eigen::Index r = 0; r < n; ++r) {
    const double p = std::clamp(sigmoid(z(r)), 1e-12, 1 - 1e-12);
    loss -= y(r) > 0.5 ? std::log(p) : std::log(1 - p);
  }
  m.train_log_loss = loss / static_cast<double>(n);
  for (std::size_t i = 0; i < kLearnedFeatures; ++i)
    m.weights[i] = w(static_cast<Eigen::Index>(i));
  return m;
}

LearnedPolicy::LearnedPolicy(LearnedModel model, Params params)
    : model_(std::move(model)),
      params_(params),
      online_(ExpectedValuePolicy::Params{model_.horizon_s, 2, 1, false, 1u << 18}) {}

double LearnedPolicy::reuse_probability(const OrphanView& view) const {
  const double online = view.key != nullptr ? online_.reuse_probability(*view.key, &view) : 0.5;
  return model_.probability(learned_features(view, online, model_.horizon_s));
}

void LearnedPolicy::observe_request(const ArtifactKey& key, double now_s) {
  online_.observe_request(key, now_s);
}

OrphanDecision LearnedPolicy::decide(const OrphanView& view) {
  const double p = reuse_probability(view);
  online_.decide(view);  // Opens its reuse event (its own answer is not used).
  const OrphanDecision give_up = params_.keep ? OrphanDecision::keep_partial : OrphanDecision::abort;
  if (view.size_bytes == 0) return give_up;
  const bool blocked = view.queued_tasks > 0 && view.free_slots == 0;
  const double cost =
      static_cast<double>(view.bytes_remaining) * (1 + (blocked ? params_.queue_weight : 0.0));
  return p * static_cast<double>(view.size_bytes) > cost ? OrphanDecision::complete : give_up;
}

}  // namespace dfl::policies
