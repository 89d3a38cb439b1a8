// Client: the scheduler core on the real clock, real HTTP and a real disk.
//
// The same dfl::Scheduler as the simulator's, behind one mutex. Threads:
// - callers: subscribe / cancel / set_priority / end_owner, from any thread;
// - one I/O thread runs every transfer on a libcurl multi handle (Range and
//   If-Range resume, status and Content-Range judged by us, SHA-256 while
//   streaming, the expected size enforced, a per-origin connection limit,
//   TLS verification on) and fires the engine's timers;
// - a small finalize pool verifies and installs (fsync costs about a
//   millisecond a file: it stays off the I/O thread);
// - a delivery thread (or the executor you pass) runs terminal callbacks,
//   outside every lock: a callback may call back into the client.
// Commands are routed to those queues while the engine lock is held, so they
// reach each thread in the order the engine emitted them.
//
// Every demand gets exactly one terminal callback; destroying the client
// cancels the demands still waiting (their callbacks run before ~Client
// returns).
#pragma once

#include <filesystem>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <string>

#include "demandflight/engine/artifact_key.h"
#include "demandflight/engine/config.h"
#include "demandflight/engine/ids.h"
#include "demandflight/engine/outcome.h"
#include "demandflight/engine/scheduler.h"

namespace dfl::backend {

// Where an artifact comes from, and what it must be.
struct ArtifactRef {
  ArtifactKey key;
  OriginId origin = 0;
  std::uint64_t size_bytes = 0;       // Expected size; 0 when unknown.
  std::optional<std::string> sha256;  // Expected digest (64 hex), when known.
};

// Maps an artifact to its URL.
using UrlResolver = std::function<std::string(const ArtifactKey&, OriginId)>;

// A template with {resource}, {revision}, {target} and {generation}, e.g.
// "http://127.0.0.1:8080/{revision}/{target}/{resource}". Substituted as is.
UrlResolver url_template(std::string pattern);

struct ClientOptions {
  SchedulerConfig scheduler;
  std::string orphan_policy = "always-abort";  // NAME[:k=v,...]
  std::filesystem::path cache_dir;
  UrlResolver resolver;
  unsigned finalize_threads = 2;
  long connect_timeout_ms = 10'000;
  // A transfer slower than this many bytes per second for stall_time_s is a
  // (retryable) stall.
  long stall_speed_Bps = 1;
  long stall_time_s = 30;
  // Where terminal callbacks run; by default a delivery thread of the client.
  std::function<void(std::function<void()>)> executor;
};

class Client {
 public:
  using Callback = std::function<void(DemandOutcome)>;

  // Throws std::runtime_error if the cache directory or libcurl cannot be set up.
  explicit Client(ClientOptions options);
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  DemandHandle subscribe(const ArtifactRef& artifact, const DemandOptions& options,
                         Callback on_terminal);
  // The future-style form of subscribe.
  std::future<DemandOutcome> fetch(const ArtifactRef& artifact, const DemandOptions& options);

  void cancel(DemandHandle demand);
  void set_priority(DemandHandle demand, Priority priority);
  void end_owner(OwnerId owner, std::optional<OwnerGeneration> generation = std::nullopt);

  // Where an installed artifact lives (whether or not it is installed).
  std::filesystem::path path_of(const ArtifactKey& key) const;
  SchedulerStats stats() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace dfl::backend
