// Runs the `demandflight` CLI on a trace written from a string, in a scratch
// directory of its own, and returns what it printed and the result JSON.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace dfl::testing {

struct CliRun {
  int exit_code = -1;
  std::string out;
  std::string err;
  nlohmann::json result;  // Null unless --out was written.
  std::string result_text;
  std::string dir;  // The scratch directory (trace.jsonl, result.json, ...).
};

// Writes `trace` to DIR/trace.jsonl and runs `demandflight ARGS...` with
// "TRACE" in ARGS replaced by that path, "OUT" by DIR/result.json, and a
// leading "DIR/" by the scratch directory.
CliRun run_cli(const std::string& trace, const std::vector<std::string>& args);

// Runs `demandflight sim TRACE --out OUT --network-model cm02 --quiet EXTRA...`.
CliRun simulate(const std::string& trace, const std::vector<std::string>& extra = {});

// A header with a known platform: client 10 MB/s + 10 ms, origin "cdn" 40 MB/s +
// 40 ms, hashing and disk effectively instant unless overridden.
std::string header(const std::string& scheduler = R"({"max_transfers": 2, "max_per_origin": 2})",
                   const std::string& extra_platform = "");

std::string artifact(const std::string& id, std::uint64_t size, const std::string& resource = "",
                     const std::string& revision = "r1");

// The record of `demand` in a result, or fails the test.
const nlohmann::json& demand_record(const nlohmann::json& result, const std::string& demand);

std::string read_file(const std::string& path);

// Each line of JSON Lines text (a trace), parsed.
std::vector<nlohmann::json> lines_of(const std::string& text);

}  // namespace dfl::testing
