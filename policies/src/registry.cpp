#include "demandflight/policies/registry.h"

namespace dfl::policies {

PolicySpec parse_policy_spec(std::string_view spec) {
  PolicySpec out;
  const std::size_t colon = spec.find(':');
  out.name = std::string(spec.substr(0, colon));
  if (out.name.empty()) throw std::invalid_argument("policy: empty name");
  if (colon == std::string_view::npos) return out;
  std::string_view rest = spec.substr(colon + 1);
  while (!rest.empty()) {
    const std::size_t comma = rest.find(',');
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

std::vector<std::pair<std::string, std::string>> list_orphan_policies() {
  return {{"always-abort", "abort every orphaned transfer at once (the default)"},
          {"always-complete", "complete every orphaned transfer below every real priority"}};
}

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
  std::string known;
  for (const auto& [name, what] : list_orphan_policies())
    known += (known.empty() ? "" : ", ") + name;
  throw std::invalid_argument("unknown policy \"" + parsed.name + "\" (known: " + known + ")");
}

}  // namespace dfl::policies
