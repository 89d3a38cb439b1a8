// The orphan policies by name, as the command line and Python name them.
//
// A spec is `NAME` or `NAME:k=v,k=v`. Unknown names and unknown or malformed
// parameters are errors with a message that lists what is accepted. The full
// set (squid, low-priority, keep-partial, expected-value, learned, oracle)
// comes with the policy issue; these are the two the simulator needs first.
#pragma once

#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "demandflight/engine/orphan_policy.h"

namespace dfl::policies {

// The default when no policy is named: never spend a slot on work nobody
// asked for.
inline constexpr std::string_view kDefaultPolicy = "always-abort";

struct PolicySpec {
  std::string name;
  std::map<std::string, std::string> params;
};

// Parses `NAME[:k=v,...]` (`;` between parameters is accepted too, as
// `compare --policies` once required); throws std::invalid_argument.
PolicySpec parse_policy_spec(std::string_view spec);

// A comma-separated list of policy specs, as `compare --policies` takes it:
// an item `k=v` (no `:`) is one more parameter of the policy before it, so
// "squid:pct=80,min_bytes=0,always-abort" is two policies. Each comes back
// with `,` between its parameters. Throws std::invalid_argument for a
// parameter before any policy.
std::vector<std::string> split_policy_list(std::string_view list);

// Builds the named policy; throws std::invalid_argument for an unknown name or
// parameter.
std::shared_ptr<OrphanPolicy> make_orphan_policy(std::string_view spec);

// Names and one-line descriptions, for --help and errors.
std::vector<std::pair<std::string, std::string>> list_orphan_policies();

}  // namespace dfl::policies
