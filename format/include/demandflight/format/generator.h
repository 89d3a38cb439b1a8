// Trace generators: one per bundled scenario kind, for `demandflight gen`.
//
// Each writes a complete trace (header, artifact lines, timed records) in the
// trace format to `out`, line by line, so that 1,000,000 demands and more are
// written in constant memory. Output depends only on (kind, options): the same
// seed gives the same bytes.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace dfl::format {

struct GenOptions {
  std::uint64_t seed = 1;
  std::uint64_t demands = 1000;                // Number of subscribe records to write.
  std::optional<std::uint32_t> max_transfers;  // Overrides the kind's header value.
  // Every catalogue artifact lists the kind's other origins as mirrors after
  // its own (`origins`): failover to study against the same trace without.
  bool mirrors = false;
};

// The kinds and a one-line description of each.
std::vector<std::pair<std::string, std::string>> generator_kinds();

// Throws std::invalid_argument for an unknown kind.
void generate(std::string_view kind, const GenOptions& options, std::ostream& out);

// A generated trace named as `compare` and Python's sweep take it:
// `gen:KIND[:demands=N]`. Throws std::invalid_argument naming the spec (an
// unknown kind, parameter or a bad number).
struct GenSpec {
  std::string kind;
  std::optional<std::uint64_t> demands;
};
GenSpec parse_gen_spec(std::string_view spec);

}  // namespace dfl::format
