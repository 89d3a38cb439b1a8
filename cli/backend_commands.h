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
};
void add_server_options(CLI::App& command, ServerArgs& args);
// Sets the client's HTTP options from them (the resolver and the cache are
// the caller's).
void apply_server_options(const ServerArgs& args, backend::ClientOptions& options);

backend::ArtifactRef artifact_ref(const format::Artifact& artifact);

}  // namespace dfl::cli
