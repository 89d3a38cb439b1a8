#include "demandflight/policies/registry.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <initializer_list>
#include <limits>

#include "demandflight/policies/builtin.h"
#include "demandflight/policies/expected_value.h"
#include "demandflight/policies/learned.h"
#include "demandflight/policies/ski_rental.h"

namespace dfl::policies {

PolicySpec parse_policy_spec(std::string_view spec) {
  PolicySpec out;
  const std::size_t colon = spec.find(':');
  out.name = std::string(spec.substr(0, colon));
  if (out.name.empty()) throw std::invalid_argument("policy: empty name");
  if (colon == std::string_view::npos) return out;
  std::string_view rest = spec.substr(colon + 1);
  while (!rest.empty()) {
    const std::size_t comma = rest.find_first_of(",;");
    const std::string_view item = rest.substr(0, comma);
    const std::size_t eq = item.find('=');
    if (eq == std::string_view::npos || eq == 0) {
      throw std::invalid_argument("policy " + out.name + ": parameter \"" + std::string(item) +
                                  "\" is not k=v");
    }
    out.params[std::string(item.substr(0, eq))] = std::string(item.substr(eq + 1));
    rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
  }
  return out;
}

std::vector<std::string> split_policy_list(std::string_view list) {
  std::vector<std::string> out;
  while (!list.empty()) {
    const std::size_t comma = list.find(',');
    std::string item(list.substr(0, comma));
    list = comma == std::string_view::npos ? std::string_view{} : list.substr(comma + 1);
    if (item.empty()) continue;
    std::replace(item.begin(), item.end(), ';', ',');
    const bool parameter = item.find('=') != std::string::npos &&
                           (item.find(':') == std::string::npos || item.find(':') > item.find('='));
    if (parameter) {
      if (out.empty()) {
        throw std::invalid_argument("policy parameter \"" + item + "\" comes before any policy");
      }
      out.back() += (out.back().find(':') == std::string::npos ? ":" : ",") + item;
    } else {
      out.push_back(std::move(item));
    }
  }
  return out;
}

std::vector<std::pair<std::string, std::string>> list_orphan_policies() {
  return {{"always-abort", "abort every orphaned transfer at once (the default)"},
          {"always-complete", "complete every orphaned transfer below every real priority"},
          {"squid",
           "Squid's quick_abort: complete if at most min_bytes remain or pct% is in, abort if "
           "more than max_bytes remain (min_bytes=16384,max_bytes=16384,pct=95)"},
          {"low-priority",
           "Fresco's keepCancelledFetchAsLowPriority: complete at the orphan level, abort when a "
           "queued task waits for the slot"},
          {"keep-partial",
           "Chromium's HTTP cache: stop, but keep the bytes received so that the next request "
           "of the key resumes after them"},
          {"expected-value",
           "complete iff P(reuse within horizon) x size > remaining x (1 + queue_weight if a task "
           "waits for the slot); P learned online per key and class "
           "(horizon_s=60,prior_weight=2,queue_weight=1,keep=0)"},
          {"learned",
           "logistic regression of P(reuse) on the view, fitted by demandflight train; "
           "decides like expected-value (model=FILE,queue_weight=1,keep=0)"},
          {"ski-rental",
           "ski rental's break-even rule (2-competitive): keep an orphan running until the bytes "
           "it received since orphaned equal those it had then, then stop (stop=abort|keep_partial)"},
          {"ski-rental-random",
           "randomized ski rental (e/(e-1)-competitive): stop once the bytes since orphaned reach "
           "z x those it had, z drawn with density e^z/(e-1) on [0,1] (seed=1,stop=abort)"},
          {"linger",
           "keep an orphan running for delay_s (a demand back in time re-attaches), then decide "
           "`then` (delay_s=0.1,then=abort|keep_partial|complete)"},
          {"lookahead",
           "simulator only: reads the rest of the trace; completes exactly when the key is asked "
           "for again before it would be evicted, keeps the partial when it would be evicted first"},
          {"oracle",
           "simulator only: the hindsight bound; tries every choice at every orphan by running the "
           "simulation on in a forked child, keeps the best score (weights as parameters: "
           "gb,wasted_gb,p95_critical_s,deadline_miss,pollution_s)"}};
}

namespace {

// Reads the parameters a policy accepts; anything else is an error.
class Params {
 public:
  explicit Params(const PolicySpec& spec) : spec_(spec) {}

  template <typename T>
  T number(const std::string& key, T fallback, T lo, T hi) {
    auto it = spec_.params.find(key);
    if (it == spec_.params.end()) return fallback;
    used_.push_back(key);
    const std::string& text = it->second;
    T value{};
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec != std::errc{} || end != text.data() + text.size()) {
      throw std::invalid_argument("policy " + spec_.name + ": " + key + "=\"" + text +
                                  "\" is not a number");
    }
    if (!(value >= lo && value <= hi)) {
      throw std::invalid_argument("policy " + spec_.name + ": " + key + "=" + text +
                                  " is out of range [" + std::to_string(lo) + ", " +
                                  std::to_string(hi) + "]");
    }
    return value;
  }

  const std::string* text(const std::string& key) {
    auto it = spec_.params.find(key);
    if (it == spec_.params.end()) return nullptr;
    used_.push_back(key);
    return &it->second;
  }

  // Every parameter given must have been read.
  void finish(const std::string& accepted) const {
    for (const auto& [key, value] : spec_.params) {
      if (std::find(used_.begin(), used_.end(), key) == used_.end()) {
        throw std::invalid_argument("policy " + spec_.name + ": unknown parameter \"" + key +
                                    "\" (accepted: " + accepted + ")");
      }
    }
  }

 private:
  const PolicySpec& spec_;
  std::vector<std::string> used_;
};

// A parameter naming a decision ("abort", "keep_partial", "complete"), one of `allowed`.
OrphanDecision decision_param(Params& p, const std::string& policy, const std::string& key,
                              OrphanDecision fallback, std::initializer_list<OrphanDecision> allowed) {
  const std::string* text = p.text(key);
  if (text == nullptr) return fallback;
  std::string names;
  for (OrphanDecision d : allowed) {
    if (*text == to_string(d)) return d;
    names += (names.empty() ? "" : ", ") + std::string(to_string(d));
  }
  throw std::invalid_argument("policy " + policy + ": " + key + "=\"" + *text +
                              "\" is not one of " + names);
}

}  // namespace

std::shared_ptr<OrphanPolicy> make_orphan_policy(std::string_view spec) {
  const PolicySpec parsed = parse_policy_spec(spec);
  auto no_params = [&] {
    if (!parsed.params.empty()) {
      throw std::invalid_argument("policy " + parsed.name + " takes no parameters (got \"" +
                                  parsed.params.begin()->first + "\")");
    }
  };
  if (parsed.name == "always-abort") {
    no_params();
    return std::make_shared<AlwaysAbortPolicy>();
  }
  if (parsed.name == "always-complete") {
    no_params();
    return std::make_shared<AlwaysCompletePolicy>();
  }
  if (parsed.name == "squid") {
    Params p(parsed);
    SquidPolicy::Params params;
    constexpr std::int64_t kMax = std::int64_t{1} << 50;
    params.min_bytes = p.number<std::int64_t>("min_bytes", params.min_bytes, -1, kMax);
    params.max_bytes = p.number<std::int64_t>("max_bytes", params.max_bytes, 0, kMax);
    params.pct = p.number<double>("pct", params.pct, 0.0, 100.0);
    p.finish("min_bytes, max_bytes, pct");
    return std::make_shared<SquidPolicy>(params);
  }
  if (parsed.name == "keep-partial") {
    no_params();
    return std::make_shared<KeepPartialPolicy>();
  }
  if (parsed.name == "expected-value") {
    Params p(parsed);
    ExpectedValuePolicy::Params params;
    params.horizon_s = p.number<double>("horizon_s", params.horizon_s, 0.0, 1e9);
    params.prior_weight = p.number<double>("prior_weight", params.prior_weight, 1e-6, 1e9);
    params.queue_weight = p.number<double>("queue_weight", params.queue_weight, 0.0, 1e9);
    params.keep = p.number<int>("keep", params.keep ? 1 : 0, 0, 1) == 1;
    p.finish("horizon_s, prior_weight, queue_weight, keep");
    return std::make_shared<ExpectedValuePolicy>(params);
  }
  if (parsed.name == "learned") {
    Params p(parsed);
    const std::string* model = p.text("model");
    LearnedPolicy::Params params;
    params.queue_weight = p.number<double>("queue_weight", params.queue_weight, 0.0, 1e9);
    params.keep = p.number<int>("keep", params.keep ? 1 : 0, 0, 1) == 1;
    p.finish("model, queue_weight, keep");
    if (model == nullptr || model->empty()) {
      throw std::invalid_argument(
          "policy learned needs model=FILE (a model.json written by demandflight train)");
    }
    return std::make_shared<LearnedPolicy>(LearnedModel::load(*model), params);
  }
  if (parsed.name == "oracle" || parsed.name == "lookahead") {
    throw std::invalid_argument("policy " + parsed.name +
                                " reads the rest of the trace: it exists only in the simulator "
                                "(demandflight sim / compare)");
  }
  if (parsed.name == "ski-rental" || parsed.name == "ski-rental-random") {
    Params p(parsed);
    SkiRentalPolicy::Params params;
    params.randomized = parsed.name == "ski-rental-random";
    if (params.randomized) {
      params.seed = p.number<std::uint64_t>("seed", params.seed, 0,
                                            std::numeric_limits<std::uint64_t>::max());
    }
    params.stop = decision_param(p, parsed.name, "stop", params.stop,
                                 {OrphanDecision::abort, OrphanDecision::keep_partial});
    p.finish(params.randomized ? "seed, stop" : "stop");
    return std::make_shared<SkiRentalPolicy>(params);
  }
  if (parsed.name == "linger") {
    Params p(parsed);
    LingerPolicy::Params params;
    params.delay_s = p.number<double>("delay_s", params.delay_s, 0.0, 1e9);
    params.then = decision_param(p, parsed.name, "then", params.then,
                                 {OrphanDecision::abort, OrphanDecision::keep_partial,
                                  OrphanDecision::complete});
    p.finish("delay_s, then");
    return std::make_shared<LingerPolicy>(params);
  }
  if (parsed.name == "low-priority") {
    no_params();
    return std::make_shared<LowPriorityPolicy>();
  }
  std::string known;
  for (const auto& [name, what] : list_orphan_policies())
    known += (known.empty() ? "" : ", ") + name;
  throw std::invalid_argument("unknown policy \"" + parsed.name + "\" (known: " + known + ")");
}

}  // namespace dfl::policies
