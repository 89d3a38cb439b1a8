// The backend's subcommands of the `demandflight` CLI: `fetch` and `replay`.
//
// Each add_*_command() registers its subcommand on the app and returns what
// to run when it was chosen: the process exit code (0 success; 1 something
// failed; 2 bad input). TraceError and std::invalid_argument escape to main,
// which reports them with exit code 2.
#pragma once

#include <CLI/CLI.hpp>

#include <optional>
#include <string>

#include "demandflight/backend/client.h"
#include "demandflight/format/trace.h"
#include "subcommand.h"

namespace dfl::cli {

Subcommand add_fetch_command(CLI::App& app);
Subcommand add_replay_command(CLI::App& app);

// --base-url: a URL the artifact's resource is appended to ("URL/RESOURCE"),
// or, when it contains '{', a template with {resource}, {revision}, {target},
// {generation} and {origin}. The resource, revision and target are
// percent-encoded as url_template does ("a b.bin" is "a%20b.bin"); the
// origin's name is substituted as it is (it is a host).
backend::UrlResolver base_url_resolver(const std::string& base_url, const format::Trace& trace);

// What the subcommands that talk to a server share: --base-url and --cache
// (both required), --http, --h2-connections and --cacert.
struct ServerArgs {
  std::string base_url, cache_dir, http = "negotiate", cacert;
  unsigned h2_connections = 1;
  std::optional<double> max_rate_Bps;  // --max-rate: the overall cap (ThrottleConfig::overall_Bps).
  backend::TransferBounds bounds;      // --stall-window, --stall-floor, --attempt-base, --attempt-floor.
  double connect_timeout_s = 10;       // --connect-timeout.
  std::string record;                  // --record FILE: the callers' demand stream as a trace.
  std::uint64_t record_rotate = 0;     // --record-rotate SIZE: a new part past this size.
  std::string record_hash_key;         // --record-hash-key FILE: resource names as keyed hashes.
  bool record_outcomes = false;        // --record-outcomes: the result's rows beside it.
};
void add_server_options(CLI::App& command, ServerArgs& args);
// Sets the client's HTTP and recording options from them (the resolver is
// the caller's); the recording names the trace's origins as it does. Throws
// std::runtime_error naming the hash key's file if it cannot be read.
void apply_server_options(const ServerArgs& args, const format::Trace& trace,
                          backend::ClientOptions& options);
// After the run: the recording's figures on standard error, or its error;
// false when it failed.
bool report_recording(const char* command, const ServerArgs& args,
                      const backend::RecordStatus& status);

backend::ArtifactRef artifact_ref(const format::Artifact& artifact);

}  // namespace dfl::cli
