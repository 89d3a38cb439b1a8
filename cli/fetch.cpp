// demandflight fetch --base-url URL --cache DIR MANIFEST
//
// Fetches every artifact of a manifest (a trace's artifact lines) into a
// cache directory through the production Client: shared transfers, Range
// resume, SHA-256 verification, atomic installs. Progress bars per file (its
// stage and bytes) and in total on a terminal, one plain line per artifact otherwise; a final
// summary; exit code 1 if any artifact failed.
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <fstream>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <unordered_map>
#include <vector>

#include "backend_commands.h"
#include "demandflight/policies/registry.h"

namespace dfl::cli {
namespace {

using Clock = std::chrono::steady_clock;

std::string human_bytes(double b) {
  char buffer[32];
  if (b >= 1024.0 * 1024 * 1024) {
    std::snprintf(buffer, sizeof buffer, "%.2f GiB", b / (1024.0 * 1024 * 1024));
  } else if (b >= 1024.0 * 1024) {
    std::snprintf(buffer, sizeof buffer, "%.1f MiB", b / (1024.0 * 1024));
  } else if (b >= 1024.0) {
    std::snprintf(buffer, sizeof buffer, "%.1f KiB", b / 1024.0);
  } else {
    std::snprintf(buffer, sizeof buffer, "%.0f B", b);
  }
  return buffer;
}

std::string bar(double fraction, int width) {
  const int full = static_cast<int>(std::clamp(fraction, 0.0, 1.0) * width);
  return std::string(static_cast<std::size_t>(full), '#') +
         std::string(static_cast<std::size_t>(width - full), '.');
}

// One frame of the terminal display: a line per file in flight, its demand's
// stage and bytes (Client::progress), how many more are in flight or wait,
// and the total. `names`: the demands to show (one caller's), by handle.
std::string progress_frame(const backend::Client& client,
                           const std::map<DemandHandle, std::string>& names,
                           std::size_t finished, std::size_t demands, std::uint64_t total_bytes,
                           double elapsed_s) {
  constexpr std::size_t kShown = 10;
  std::string frame;
  std::size_t shown = 0, more = 0, queued = 0;
  for (const backend::DemandProgress& p : client.progress()) {
    auto name = names.find(p.demand);
    if (name == names.end()) continue;
    if (p.stage == backend::Stage::queued) {
      ++queued;
      continue;
    }
    if (shown == kShown) {
      ++more;
      continue;
    }
    const auto done = static_cast<double>(p.received);
    const auto size = static_cast<double>(p.expected);
    char line[256];
    std::snprintf(line, sizeof line, "  %-24.24s [%s] %5.1f%% %-10s %s\n", name->second.c_str(),
                  bar(size > 0 ? done / size : 0, 30).c_str(), size > 0 ? 100 * done / size : 0.0,
                  human_bytes(done).c_str(), std::string(to_string(p.stage)).c_str());
    frame += line;
    ++shown;
  }
  if (more + queued > 0) {
    char line[128];
    std::snprintf(line, sizeof line, "  ... %zu more in flight, %zu queued\n", more, queued);
    frame += line;
  }
  std::uint64_t in_flight = 0;
  for (const backend::TransferSnapshot& s : client.transfers()) in_flight += s.received;
  const auto received = static_cast<double>(client.metrics().bytes_received + in_flight);
  char line[256];
  std::snprintf(line, sizeof line, "  %-24s [%s] %zu/%zu demands, %s, %s/s\n", "total",
                bar(total_bytes > 0 ? received / static_cast<double>(total_bytes) : 0, 30).c_str(),
                finished, demands, human_bytes(received).c_str(),
                human_bytes(elapsed_s > 0 ? received / elapsed_s : 0).c_str());
  return frame + line;
}

// Why each key's last attempt failed; called under the client's engine lock.
// (What the client did, in numbers, is Client::metrics().)
class Counter : public backend::ClientObserver {
 public:
  void on_attempt_failed(double, TaskId, const ArtifactKey& key,
                         const std::string& reason) override {
    std::lock_guard lock(mutex_);
    last_failure[key] = reason;
  }
  std::string why(const ArtifactKey& key) const {
    std::lock_guard lock(mutex_);
    auto it = last_failure.find(key);
    return it == last_failure.end() ? std::string() : it->second;
  }

  mutable std::mutex mutex_;
  std::unordered_map<ArtifactKey, std::string> last_failure;  // The last reason per key.
};

struct FetchArgs {
  ServerArgs server;
  std::string manifest, policy = "always-abort", progress = "auto", sync = "batched", metrics;
  std::uint32_t max_transfers = 8, max_per_origin = 8, copies = 1, retries = 4;
  unsigned finalize_threads = 0;  // By --sync (ClientOptions::finalize_threads).
  Priority priority = 0;
  std::uint64_t cache_bytes = 0;
  std::uint64_t drop_behind = backend::CacheOptions{}.drop_behind_bytes;
  bool quiet = false;
  bool direct_io = true;
};

// Pins hold an open file each: as many as the open-file limit allows,
// raised to its hard limit. How many artifacts the run may keep pinned.
std::size_t pin_budget() {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return 0;
  if (limit.rlim_cur < limit.rlim_max) {
    rlimit raised = limit;
    raised.rlim_cur = limit.rlim_max;
    if (::setrlimit(RLIMIT_NOFILE, &raised) == 0) limit = raised;
  }
  constexpr rlim_t kSpare = 512;  // Connections, staging files, locks.
  return limit.rlim_cur == RLIM_INFINITY ? ~std::size_t{0}
         : limit.rlim_cur > kSpare       ? static_cast<std::size_t>(limit.rlim_cur - kSpare)
                                         : 0;
}

backend::ClientOptions fetch_options(const FetchArgs& args, const format::Trace& manifest) {
  backend::ClientOptions options;
  options.scheduler.max_transfers = args.max_transfers;
  options.scheduler.max_per_origin = args.max_per_origin;
  options.scheduler.max_origins =
      static_cast<std::uint32_t>(std::max<std::size_t>(manifest.platform.origins.size(), 1));
  options.scheduler.retry.max_attempts = args.retries;
  options.scheduler.breaker = BreakerConfig{manifest.scheduler.breaker_failures,
                                            manifest.scheduler.breaker_open_s};
  options.throttle = manifest.scheduler.throttle;  // --max-rate overrides its overall cap.
  // The index must not evict what this command was asked to fetch.
  options.scheduler.cache_bytes = args.cache_bytes != 0 ? args.cache_bytes : std::uint64_t{1} << 62;
  options.orphan_policy = args.policy;
  apply_server_options(args.server, manifest, options);
  options.resolver = base_url_resolver(args.server.base_url, manifest);
  options.finalize_threads = args.finalize_threads;
  options.install_sync =
      args.sync == "per-file" ? backend::SyncMode::per_file : backend::SyncMode::batched;
  options.drop_behind_bytes = args.drop_behind;
  options.direct_writes = args.direct_io;
  return options;
}

// What the run's terminals tell, gathered on the delivery thread.
struct FetchState {
  std::mutex mutex;
  std::condition_variable done_cv;
  std::size_t outstanding = 0;
  std::array<std::uint64_t, 5> outcomes{};
  std::vector<std::string> failures;
  std::unordered_map<std::string, std::string> failure_reason;  // Artifact id -> why.
  std::vector<std::string> lines;  // Plain lines waiting to be printed.
  std::unordered_map<std::string, backend::Pin> pins;  // Artifact id -> its pin, for the run.
};

// Every artifact, once per caller (--copies); the first caller's demands are
// the display's (`shown`).
void subscribe_all(backend::Client& client, const format::Trace& manifest, const FetchArgs& args,
                   const std::string& mode, const std::function<double()>& elapsed,
                   FetchState& state, std::map<DemandHandle, std::string>& shown) {
  for (std::uint32_t copy = 0; copy < args.copies; ++copy) {
    for (const format::Artifact& a : manifest.artifacts) {
      DemandOptions o;
      o.owner = copy;  // Each copy is another caller.
      o.priority = args.priority;
      const DemandHandle h = client.subscribe(
          artifact_ref(a), o,
          [&state, &mode, &elapsed, id = a.id, size = a.size_bytes,
           copy](backend::DemandResult result) {
            const DemandOutcome outcome = result.outcome;
            std::lock_guard lock(state.mutex);
            ++state.outcomes[static_cast<std::size_t>(outcome)];
            if (result.pin) state.pins.try_emplace(id, std::move(result.pin));
            if (outcome != DemandOutcome::succeeded) {
              state.failures.push_back(id);
              state.failure_reason.try_emplace(id, result.reason);
            }
            if (copy == 0 && mode == "lines") {
              char line[512];
              std::snprintf(line, sizeof line, "%-9s %s (%s) at %.3f s",
                            std::string(to_string(outcome)).c_str(), id.c_str(),
                            human_bytes(static_cast<double>(size)).c_str(), elapsed());
              state.lines.emplace_back(line);
              if (outcome != DemandOutcome::succeeded) state.lines.back() += ": " + result.reason;
            }
            if (--state.outstanding == 0) state.done_cv.notify_all();
          });
      if (copy == 0) shown.emplace(h, a.id);
    }
  }
}

// The display until every demand has its terminal: bars redrawn on a
// terminal, plain lines otherwise.
void show_until_done(backend::Client& client, const std::map<DemandHandle, std::string>& shown,
                     const std::string& mode, std::size_t demands, std::uint64_t total_bytes,
                     const std::function<double()>& elapsed, FetchState& state) {
  std::size_t drawn = 0;
  std::unique_lock lock(state.mutex);
  while (state.outstanding > 0) {
    state.done_cv.wait_for(lock, std::chrono::milliseconds(mode == "bars" ? 200 : 100));
    if (mode == "lines") {
      for (const std::string& line : state.lines)
        std::printf("%s\n", line.c_str());
      state.lines.clear();
      std::fflush(stdout);
    } else if (mode == "bars") {
      const std::size_t finished = demands - state.outstanding;
      lock.unlock();
      std::string frame;
      for (std::size_t i = 0; i < drawn; ++i)
        frame += "\x1b[1A\x1b[2K";  // Up one line and clear it.
      const std::string lines_now =
          progress_frame(client, shown, finished, demands, total_bytes, elapsed());
      drawn = static_cast<std::size_t>(std::count(lines_now.begin(), lines_now.end(), '\n'));
      std::fputs((frame + lines_now).c_str(), stdout);
      std::fflush(stdout);
      lock.lock();
    }
  }
  for (const std::string& line : state.lines)
    std::printf("%s\n", line.c_str());
}

void print_fetch_summary(const format::Trace& manifest, const FetchArgs& args, double wall,
                         const FetchState& state, const backend::ClientMetrics& metrics,
                         const backend::CacheDir::SyncCounts& syncs) {
  const std::uint64_t received = metrics.bytes_received;
  const auto& outcomes = state.outcomes;
  std::printf(
      "fetch: %zu artifacts x %u callers in %.3f s: succeeded %llu, failed %llu, cancelled %llu, "
      "timed_out %llu\n",
      manifest.artifacts.size(), args.copies, wall, static_cast<unsigned long long>(outcomes[0]),
      static_cast<unsigned long long>(outcomes[1]), static_cast<unsigned long long>(outcomes[2]),
      static_cast<unsigned long long>(outcomes[3]));
  std::printf("  transfers %llu, installs %llu, received %s (%s/s, %.0f artifacts/s)\n",
              static_cast<unsigned long long>(metrics.transfers_started),
              static_cast<unsigned long long>(metrics.installs),
              human_bytes(static_cast<double>(received)).c_str(),
              human_bytes(wall > 0 ? static_cast<double>(received) / wall : 0).c_str(),
              wall > 0 ? static_cast<double>(manifest.artifacts.size()) / wall : 0.0);
  std::printf("  made durable by %llu syncfs, %llu fdatasync, %llu fsync of objects/",
              static_cast<unsigned long long>(syncs.fs_syncs),
              static_cast<unsigned long long>(syncs.file_syncs),
              static_cast<unsigned long long>(syncs.dir_syncs));
  if (syncs.early_syncs > 0) {
    std::printf(" (and %llu fdatasync of large files while they arrived)",
                static_cast<unsigned long long>(syncs.early_syncs));
  }
  std::printf("\n");
  if (syncs.direct_bytes > 0) {
    std::printf("  %s written around the page cache (O_DIRECT)\n",
                human_bytes(static_cast<double>(syncs.direct_bytes)).c_str());
  }
}

// Up to 20 ids after `what`, on stderr.
void list_ids(const char* what, const std::vector<std::string>& ids) {
  std::fputs(what, stderr);
  for (std::size_t i = 0; i < ids.size() && i < 20; ++i)
    std::fprintf(stderr, " %s", ids[i].c_str());
  std::fprintf(stderr, ids.size() > 20 ? " ...\n" : "\n");
}

// The artifacts that failed, each with its reason, and whether the cache was
// too small for the manifest.
void report_failures(const format::Trace& manifest, const FetchArgs& args,
                     std::uint64_t total_bytes, const Counter& counter, FetchState& state) {
  std::vector<std::string>& failures = state.failures;
  std::sort(failures.begin(), failures.end());
  failures.erase(std::unique(failures.begin(), failures.end()), failures.end());
  std::string what = "fetch: ";
  what += std::to_string(failures.size());
  what += " artifacts failed:";
  list_ids(what.c_str(), failures);
  std::unordered_map<std::string, const format::Artifact*> by_id;
  for (const format::Artifact& a : manifest.artifacts)
    by_id.emplace(a.id, &a);
  for (std::size_t i = 0; i < failures.size() && i < 20; ++i) {
    std::string why = state.failure_reason[failures[i]];
    if (why.empty()) why = counter.why(by_id.at(failures[i])->key);
    std::fprintf(stderr, "  %s: %s\n", failures[i].c_str(),
                 why.empty() ? "no attempt failed (cancelled or timed out)" : why.c_str());
  }
  const std::size_t no_room =
      std::count_if(failures.begin(), failures.end(), [&](const std::string& id) {
        const std::string& why = state.failure_reason[id];
        return why.rfind("disk full", 0) == 0 || why.rfind("cache full", 0) == 0;
      });
  if (no_room > 0) {
    std::fprintf(stderr,
                 "fetch: the manifest (%s) does not fit in the cache %s: %zu artifacts found no "
                 "room; the %llu fetched stay installed%s\n",
                 human_bytes(static_cast<double>(total_bytes)).c_str(),
                 args.server.cache_dir.c_str(), no_room,
                 static_cast<unsigned long long>(manifest.artifacts.size() - failures.size()),
                 args.cache_bytes != 0 ? " (--cache-bytes is the cache's capacity)" : "");
  }
}

int run_fetch(const FetchArgs& args) {
  const format::Trace manifest = format::read_manifest(args.manifest);
  policies::make_orphan_policy(args.policy);  // std::invalid_argument on a bad spec.
  backend::ClientOptions options = fetch_options(args, manifest);
  std::unordered_map<ArtifactKey, std::string> name_of_key;
  std::uint64_t total_bytes = 0;
  for (const format::Artifact& a : manifest.artifacts) {
    if (name_of_key.emplace(a.key, a.id).second) total_bytes += a.size_bytes;
  }
  // What it fetched stays for the length of the run: each artifact is
  // pinned at its success, so that a later install cannot evict it (one that
  // does not fit fails instead, "disk full" or "cache full"). Where the
  // open-file limit is too low for that, what was evicted after its success
  // is found and reported at the end.
  options.pin_on_success = name_of_key.size() <= pin_budget();
  if (!options.pin_on_success) {
    std::fprintf(stderr,
                 "demandflight fetch: %zu artifacts are more than the open-file limit lets it "
                 "pin (ulimit -n); an artifact evicted after its success is reported at the end\n",
                 name_of_key.size());
  }
  Counter counter;
  options.observer = &counter;

  const bool tty = ::isatty(STDOUT_FILENO) != 0;
  const std::string mode =
      args.quiet ? "none" : (args.progress == "auto" ? (tty ? "bars" : "lines") : args.progress);
  const std::size_t demands = manifest.artifacts.size() * args.copies;
  FetchState state;
  state.outstanding = demands;
  std::vector<std::string> evicted;  // Succeeded, then gone from the cache before the end.
  backend::CacheDir::SyncCounts syncs;
  backend::ClientMetrics metrics;
  backend::RecordStatus record_status;
  const auto t0 = Clock::now();
  const std::function<double()> elapsed = [t0] {
    return std::chrono::duration<double>(Clock::now() - t0).count();
  };
  {
    backend::Client client(options);
    std::map<DemandHandle, std::string> shown;
    subscribe_all(client, manifest, args, mode, elapsed, state, shown);
    show_until_done(client, shown, mode, demands, total_bytes, elapsed, state);
    // Everything that succeeded is still there (pinned, or checked).
    const std::set<std::string> failed(state.failures.begin(), state.failures.end());
    for (const format::Artifact& a : manifest.artifacts) {
      if (failed.count(a.id) == 0 && !std::filesystem::exists(client.path_of(a.key)))
        evicted.push_back(a.id);
    }
    syncs = client.sync_counts();
    metrics = client.metrics();
    record_status = client.end_recording();
  }
  const double wall = elapsed();

  if (!args.metrics.empty()) {
    std::ofstream out(args.metrics);
    backend::write_prometheus(metrics, out);
    if (!out.flush()) {
      std::fprintf(stderr, "demandflight fetch: cannot write %s\n", args.metrics.c_str());
      return 1;
    }
  }
  print_fetch_summary(manifest, args, wall, state, metrics, syncs);
  const bool recorded = report_recording("fetch", args.server, record_status);
  if (!evicted.empty()) {
    std::string what = "fetch: ";
    what += std::to_string(evicted.size());
    what += " artifacts were evicted after their success, to make room for others (the "
            "manifest does not fit in the cache):";
    list_ids(what.c_str(), evicted);
  }
  if (!state.failures.empty()) {
    report_failures(manifest, args, total_bytes, counter, state);
    return 1;
  }
  return evicted.empty() && recorded ? 0 : 1;
}

}  // namespace

backend::UrlResolver base_url_resolver(const std::string& base_url, const format::Trace& trace) {
  std::vector<std::string> origins;
  for (const format::OriginSpec& o : trace.platform.origins)
    origins.push_back(o.name);
  if (base_url.find('{') == std::string::npos) {
    std::string base = base_url;
    while (!base.empty() && base.back() == '/')
      base.pop_back();
    return [base](const ArtifactKey& key, OriginId) {
      return base + "/" + backend::percent_encode_path(key.resource, /*keep_slash=*/true);
    };
  }
  auto with_key = backend::url_template(base_url);
  return [with_key, origins](const ArtifactKey& key, OriginId origin) {
    std::string url = with_key(key, origin);
    const std::string name = origin < origins.size() ? origins[origin] : std::to_string(origin);
    for (std::size_t at = url.find("{origin}"); at != std::string::npos;
         at = url.find("{origin}", at + name.size())) {
      url.replace(at, 8, name);
    }
    return url;
  };
}

void add_server_options(CLI::App& command, ServerArgs& args) {
  command
      .add_option("--base-url", args.base_url,
                  "URL/RESOURCE, or a template with {resource} {revision} {target} {generation} "
                  "{origin}")
      ->required();
  command.add_option("--cache", args.cache_dir, "cache directory (objects/ and staging/)")
      ->required();
  command
      .add_option("--http", args.http,
                  "negotiate (HTTP/2 where TLS offers it, else HTTP/1.1) | 1.1 | "
                  "h2-prior-knowledge (HTTP/2 over http:// too)")
      ->check(CLI::IsMember({"negotiate", "1.1", "h2-prior-knowledge"}))
      ->capture_default_str();
  command
      .add_option("--h2-connections", args.h2_connections,
                  "HTTP/2 connections per origin (the transfers are streams over them)")
      ->check(CLI::Range(1u, 1024u))
      ->capture_default_str();
  command.add_option("--cacert", args.cacert, "PEM certificates to trust instead of the system's")
      ->check(CLI::ExistingFile);
  command
      .add_option("--max-rate", args.max_rate_Bps,
                  "bytes per second for every transfer together (overrides the header's "
                  "scheduler.throttle.overall_Bps; 0: none)")
      ->check(CLI::Range(0.0, 1e15));
  const backend::TransferBounds defaults;
  command
      .add_option("--stall-window", args.bounds.stall_window_s,
                  "SECONDS: an attempt that receives less than --stall-floor bytes/s over this "
                  "long is stalled, and ends (retried); time our own throttle holds it back "
                  "does not count (0: no stall rule)")
      ->check(CLI::Range(0.0, 1e6))
      ->default_str(std::to_string(static_cast<int>(defaults.stall_window_s)));
  command
      .add_option("--stall-floor", args.bounds.stall_floor_Bps,
                  "BYTES/S of the stall rule (0: no stall rule)")
      ->check(CLI::Range(0.0, 1e12))
      ->default_str(std::to_string(static_cast<int>(defaults.stall_floor_Bps)));
  command
      .add_option("--attempt-base", args.bounds.attempt_base_s,
                  "SECONDS: an attempt's deadline is this plus its bytes at --attempt-floor")
      ->check(CLI::Range(0.0, 1e9))
      ->default_str(std::to_string(static_cast<int>(defaults.attempt_base_s)));
  command
      .add_option("--attempt-floor", args.bounds.attempt_floor_Bps,
                  "BYTES/S of the attempt deadline (0: no deadline)")
      ->check(CLI::Range(0.0, 1e12))
      ->default_str(std::to_string(static_cast<int>(defaults.attempt_floor_Bps)));
  command
      .add_option("--connect-timeout", args.connect_timeout_s,
                  "SECONDS a connection may take to open")
      ->check(CLI::Range(0.001, 1e6))
      ->capture_default_str();
  command.add_option("--record", args.record,
                     "FILE: write what this run asks for as a trace (docs/backend.md, *Recording*)");
  command
      .add_option("--record-rotate", args.record_rotate,
                  "SIZE: a new part of the recording (FILE.1.jsonl, ...) past this size (0: one file)")
      ->transform(CLI::AsSizeValue(false));
  command
      .add_option("--record-hash-key", args.record_hash_key,
                  "FILE: its bytes key the HMAC-SHA256 that replaces each resource name in the "
                  "recording (no digests written)")
      ->check(CLI::ExistingFile);
  command.add_flag("--record-outcomes", args.record_outcomes,
                   "also write what happened to each demand and task (FILE's stem .demands.csv, "
                   ".tasks.csv): demandflight fidelity compares a simulation of the recording "
                   "with them");
}

void apply_server_options(const ServerArgs& args, const format::Trace& trace,
                          backend::ClientOptions& options) {
  if (!args.record.empty()) {
    backend::RecordOptions record;
    record.path = args.record;
    record.rotate_bytes = args.record_rotate;
    record.outcomes = args.record_outcomes;
    record.name = trace.name.empty() ? "recording" : trace.name;
    for (const auto& origin : trace.platform.origins)
      record.origin_names.push_back(origin.name);
    if (!args.record_hash_key.empty()) {
      std::ifstream in(args.record_hash_key, std::ios::binary);
      record.hash_key.assign(std::istreambuf_iterator<char>(in), {});
      if (!in.good() && !in.eof())
        throw std::runtime_error("--record-hash-key: cannot read " + args.record_hash_key);
      if (record.hash_key.empty())
        throw std::runtime_error("--record-hash-key: " + args.record_hash_key + " is empty");
    }
    options.record = std::move(record);
  }
  options.cache_dir = args.cache_dir;
  options.http = args.http == "1.1"                  ? backend::HttpVersion::http1_1
                 : args.http == "h2-prior-knowledge" ? backend::HttpVersion::h2_prior_knowledge
                                                     : backend::HttpVersion::negotiate;
  options.h2_connections_per_origin = args.h2_connections;
  options.ca_file = args.cacert;
  if (args.max_rate_Bps) options.throttle.overall_Bps = *args.max_rate_Bps;
  options.bounds = args.bounds;
  options.connect_timeout_ms = static_cast<long>(std::ceil(args.connect_timeout_s * 1000));
}

bool report_recording(const char* command, const ServerArgs& args,
                      const backend::RecordStatus& status) {
  if (args.record.empty()) return true;
  if (!status.error.empty()) {
    std::fprintf(stderr, "demandflight %s: the recording failed: %s\n", command,
                 status.error.c_str());
    return false;
  }
  std::fprintf(stderr, "%s: recorded %llu lines (%llu bytes, %u part%s) to %s\n", command,
               static_cast<unsigned long long>(status.records),
               static_cast<unsigned long long>(status.bytes_written), status.parts,
               status.parts == 1 ? "" : "s", args.record.c_str());
  return true;
}

backend::ArtifactRef artifact_ref(const format::Artifact& artifact) {
  backend::ArtifactRef ref;
  ref.key = artifact.key;
  ref.origin = artifact.origin;
  ref.mirrors = artifact.mirrors;
  ref.size_bytes = artifact.size_bytes;
  ref.sha256 = artifact.sha256;
  return ref;
}

Subcommand add_fetch_command(CLI::App& app) {
  auto args = std::make_shared<FetchArgs>();
  auto* c = app.add_subcommand(
      "fetch", "download a manifest's artifacts into a cache directory (verified, atomic)");
  c->add_option("MANIFEST", args->manifest, "a trace's artifact lines (a whole trace works too)")
      ->required();
  add_server_options(*c, args->server);
  c->add_option("--max-transfers", args->max_transfers, "concurrent transfers")
      ->check(CLI::Range(1u, 1024u))
      ->capture_default_str();
  c->add_option("--max-per-origin", args->max_per_origin, "concurrent transfers per origin")
      ->check(CLI::Range(1u, 1024u))
      ->capture_default_str();
  c->add_option("--copies", args->copies,
                "callers asking for each artifact (they share one transfer)")
      ->check(CLI::Range(1u, 1000u))
      ->capture_default_str();
  c->add_option("--priority", args->priority, "priority of every demand")->capture_default_str();
  c->add_option("--retries", args->retries, "attempts per artifact")
      ->check(CLI::Range(1u, 100u))
      ->capture_default_str();
  c->add_option("--finalize-threads", args->finalize_threads,
                "verify+install threads (0: one per core for --sync batched, 16 for per-file)")
      ->check(CLI::Range(0u, 64u))
      ->capture_default_str();
  c->add_option("--sync", args->sync,
                "how installs are made durable: batched (one syncfs per batch of waiting "
                "installs; the default) | per-file (an fdatasync each; for a cache on a file "
                "system with other heavy writers)")
      ->check(CLI::IsMember({"batched", "per-file"}))
      ->capture_default_str();
  c->add_option("--drop-behind", args->drop_behind,
                "a large staging file's bytes this far behind its end leave the page cache "
                "once on the disk (SIZE, e.g. 16MiB; 0 keeps every page)")
      ->transform(CLI::AsSizeValue(false))
      ->capture_default_str();
  c->add_option("--direct-io", args->direct_io,
                "with drop-behind, write large files' full 1 MiB buffers around the page "
                "cache (O_DIRECT through io_uring) where the kernel allows")
      ->capture_default_str();
  c->add_option("--cache-bytes", args->cache_bytes, "cache capacity (default: unlimited)");
  c->add_option("--policy", args->policy, "orphan policy NAME[:k=v,...]")->capture_default_str();
  c->add_option("--progress", args->progress, "auto (bars on a terminal) | bars | lines | none")
      ->check(CLI::IsMember({"auto", "bars", "lines", "none"}))
      ->capture_default_str();
  c->add_flag("--quiet", args->quiet, "only the summary");
  c->add_option("--metrics", args->metrics,
                "write the client's metrics here at the end, in the Prometheus text format");
  return Subcommand{c, [args] { return run_fetch(*args); }};
}

}  // namespace dfl::cli
