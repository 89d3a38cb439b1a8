#include "demandflight/policies/ski_rental.h"

#include <algorithm>
#include <cmath>

namespace dfl::policies {
namespace {

// SplitMix64: the randomized rule's draw per orphaning, from its seed.
std::uint64_t mix(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Asked again no sooner than this: a rate that creeps towards the
// threshold must not flood the engine with re-asks.
constexpr double kMinStep_s = 1e-3;

// Bytes received since the orphaning: the rent paid so far.
double rent(const OrphanView& view, std::uint64_t bytes_at_orphaning) {
  return static_cast<double>(view.bytes_done - std::min(view.bytes_done, bytes_at_orphaning));
}

}  // namespace

OrphanDecision SkiRentalPolicy::decide(const OrphanView& view) {
  const std::uint64_t task = view.task.value;
  if (view.first_decision || !orphans_.contains(task)) {
    Orphan o;
    o.bytes_at_orphaning = view.bytes_done;
    double z = 1;
    if (params_.randomized) {
      // Inverse of the CDF (e^z - 1) / (e - 1) at a uniform u in [0, 1).
      const std::uint64_t draw =
          mix(params_.seed ^ mix(task) ^ mix(++orphanings_));
      const double u = static_cast<double>(draw >> 11) * 0x1.0p-53;
      z = std::log1p(u * (std::exp(1.0) - 1));
    }
    o.threshold_bytes = z * static_cast<double>(view.bytes_done);
    orphans_[task] = o;
  }
  const Orphan& o = orphans_.at(task);
  if (rent(view, o.bytes_at_orphaning) >= o.threshold_bytes) {  // Also with nothing to lose (D = 0).
    orphans_.erase(task);
    return params_.stop;
  }
  return OrphanDecision::complete;
}

std::optional<double> SkiRentalPolicy::ask_again_at_s(const OrphanView& view) {
  auto it = orphans_.find(view.task.value);
  if (it == orphans_.end()) return std::nullopt;
  const double left = it->second.threshold_bytes - rent(view, it->second.bytes_at_orphaning);
  // At this attempt's rate so far; without one, after as long again.
  const double wait = view.throughput_Bps > 0 ? left / view.throughput_Bps : view.elapsed_s;
  return view.now_s + std::max(kMinStep_s, wait);
}

OrphanDecision LingerPolicy::decide(const OrphanView& view) {
  const std::uint64_t task = view.task.value;
  if (view.first_decision || !until_s_.contains(task)) {
    until_s_[task] = view.now_s + params_.delay_s;
  }
  if (view.now_s >= until_s_.at(task)) {
    until_s_.erase(task);
    return params_.then;
  }
  return OrphanDecision::complete;
}

std::optional<double> LingerPolicy::ask_again_at_s(const OrphanView& view) {
  auto it = until_s_.find(view.task.value);
  if (it == until_s_.end()) return std::nullopt;
  return it->second;
}

}  // namespace dfl::policies
