// Client: the scheduler core on the real clock, real HTTP and a real disk.
//
// The same dfl::Scheduler as the simulator's, inside a ClientCore (the
// client's rules without I/O: backend/src/client_core.h) behind one mutex.
// Threads:
// - callers: subscribe / cancel / set_priority / end_owner, from any thread;
// - one I/O thread runs every transfer on a libcurl multi handle (Range and
//   If-Range resume, status and Content-Range judged by us, SHA-256 while
//   streaming, the expected size enforced, a per-origin connection limit,
//   TLS verification on) and fires the engine's timers;
// - a small finalize pool verifies and installs (fsync costs about a
//   millisecond a file: it stays off the I/O thread);
// - a delivery thread (or the executor you pass) runs terminal callbacks,
//   outside every lock: a callback may call back into the client.
// The core's jobs are handed to those queues while the lock is held, so they
// reach each thread in the order the engine emitted the commands behind them.
//
// DemandOptions::deadline_s is on the client's clock (clock_s()).
//
// Expectations belong to the demand: the size and digest of an ArtifactRef
// are that caller's, not the key's. Callers of one key share one transfer
// whatever they expect; the body is judged once (its size and SHA-256), and
// installed when it meets the expectation of at least one of the task's
// demands (ClientCore::decide_install in backend/src/client_core.cpp has the
// whole rule); then each demand gets its own verdict: one whose expectation
// the installed bytes contradict fails ("sha256 mismatch: expected X, got Y"), the
// others succeed. A cache hit is judged the same way against the object.
//
// Several processes (and several Clients) may share one cache directory
// (CacheDir): a key one of them is fetching is not fetched again by the
// others, which wait for its install and take over if it dies.
//
// Every demand gets exactly one terminal callback; destroying the client
// cancels the demands still waiting (their callbacks run before ~Client
// returns).
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "demandflight/backend/cache_dir.h"
#include "demandflight/backend/metrics.h"
#include "demandflight/backend/transfer_bounds.h"
#include "demandflight/engine/artifact_key.h"
#include "demandflight/engine/command.h"
#include "demandflight/engine/config.h"
#include "demandflight/engine/ids.h"
#include "demandflight/engine/orphan_policy.h"
#include "demandflight/engine/outcome.h"
#include "demandflight/engine/scheduler.h"
#include "demandflight/engine/throttle.h"

namespace dfl::backend {

// Where an artifact comes from, and what this caller expects it to be.
struct ArtifactRef {
  ArtifactKey key;
  OriginId origin = 0;
  std::uint64_t size_bytes = 0;       // Expected size; 0 when unknown.
  std::optional<std::string> sha256;  // Expected digest (64 hex digits), when known.
  // Further origins, in order of preference after `origin` (mirrors): a
  // failed attempt moves to the next (docs/backend.md, *Mirrors*). Last, so
  // that {key, origin, size, sha256} still names the others in order.
  std::vector<OriginId> mirrors;
};

// Maps an artifact to its URL.
using UrlResolver = std::function<std::string(const ArtifactKey&, OriginId)>;

// A template with {resource}, {revision}, {target} and {generation}, e.g.
// "http://127.0.0.1:8080/{revision}/{target}/{resource}". Each value is
// percent-encoded as a URL path segment (RFC 3986: unreserved characters
// and sub-delimiters stay, UTF-8 bytes and everything else become %XX); a
// "/" in the resource stays a path separator. A resolver of your own can
// build any URL.
UrlResolver url_template(std::string pattern);

// `value` percent-encoded for a URL path (RFC 3986 pchar; "/" kept when
// `keep_slash`).
std::string percent_encode_path(std::string_view value, bool keep_slash);

// A caller's hold on an installed artifact: while any pin (in any process)
// holds an object, no eviction removes it, so the file at path() stays
// there for as long as the pin lives. Move-only. Released by release(), by
// destruction, or when its owner ends (Client::end_owner with that owner and
// a generation at or above the demand's). It may outlive the Client.
class Pin {
 public:
  Pin() = default;
  Pin(Pin&&) noexcept = default;
  Pin& operator=(Pin&& other) noexcept;
  Pin(const Pin&) = delete;
  Pin& operator=(const Pin&) = delete;
  ~Pin() { release(); }
  void release();
  explicit operator bool() const;  // Still holding.
  // Where the object is (empty for an empty pin).
  const std::filesystem::path& path() const;

  struct State;  // Defined by the client, which keeps a record of each owner's pins.
  explicit Pin(std::shared_ptr<State> state) : state_(std::move(state)) {}

 private:
  std::shared_ptr<State> state_;
};

// The one terminal a demand receives.
struct DemandResult {
  DemandOutcome outcome = DemandOutcome::failed;
  // Why, for a demand that did not succeed: "sha256 mismatch: expected X,
  // got Y", "HTTP 404", "disk full: ...", "cache full: ...", a transport
  // error; the outcome's name for cancelled, timed_out and owner_ended.
  std::string reason;
  // On success, with ClientOptions::pin_on_success: the artifact, held.
  Pin pin;
  // A result reads as its outcome: callbacks written for DemandOutcome work.
  operator DemandOutcome() const { return outcome; }  // NOLINT(google-explicit-constructor)
};

// Sees what the client does, in the order the engine does it: for result
// recording (`demandflight replay`) and instrumentation. Every call is made
// with the client's engine lock held, from whichever thread caused it: keep it
// quick and never call into the client from it. Times are seconds since the
// client was made (steady clock).
class ClientObserver {
 public:
  virtual ~ClientObserver() = default;
  // A demand was made; `task` serves it (none for a cache hit or a refusal).
  // Called before the commands of its call go to on_command (among them, the
  // terminals of demands whose deadline had passed, which may have had the
  // new handle's slot, with an older generation).
  virtual void on_subscribe(double /*t*/, DemandHandle /*demand*/, const ArtifactRef& /*artifact*/,
                            const DemandOptions& /*options*/, std::optional<TaskId> /*task*/) {}
  // A demand asked for a new priority and is still live (called before the
  // commands of that call).
  virtual void on_set_priority(double /*t*/, DemandHandle /*demand*/, Priority /*priority*/) {}
  // Every command the engine emitted, in its order.
  virtual void on_command(double /*t*/, const Command& /*command*/) {}
  // A transfer attempt is over: the body bytes it received, and whether it
  // was aborted by the engine (its bytes then thrown away).
  virtual void on_transfer_ended(double /*t*/, TaskId /*task*/, TransferId /*transfer*/,
                                 std::uint64_t /*bytes*/, bool /*aborted*/) {}
  // The commands of one call into the engine have all been passed on.
  virtual void on_settled(double /*t*/) {}
  // An attempt at `key` failed (a transfer error or a body that failed its
  // check), and why, in words: "HTTP 404", "sha256 mismatch ...", ...
  virtual void on_attempt_failed(double /*t*/, TaskId /*task*/, const ArtifactKey& /*key*/,
                                 const std::string& /*reason*/) {}
  // A demand's one terminal, as its caller gets it (the outcome and the
  // reason), just before the Deliver command that carries it.
  virtual void on_delivered(double /*t*/, DemandHandle /*demand*/, const DemandResult& /*result*/) {}
  // A verify-and-install is over, for a body of `bytes`.
  virtual void on_finalize_ended(double /*t*/, TaskId /*task*/, FinalizeStatus /*status*/,
                                 std::uint64_t /*bytes*/) {}
};

// One transfer in flight, for progress displays.
struct TransferSnapshot {
  TransferId transfer;
  TaskId task;
  ArtifactKey key;
  std::uint64_t offset = 0;    // Resumed from this byte.
  std::uint64_t received = 0;  // Bytes of body received by this attempt.
  std::uint64_t size = 0;      // Expected size; 0 when unknown.
};

// Where a demand stands before its terminal (Client::progress).
enum class Stage : std::uint8_t {
  queued,             // Its task waits for a transfer slot.
  transferring,       // Its task's attempt is receiving the body.
  retrying,           // Between attempts: a retryable failure's backoff.
  waiting_elsewhere,  // Another fetch of the key (another process, or another
                      // Client on the cache) has it: waiting for that install.
  paused,             // Client::pause holds its task (queued or in flight).
  finalizing,         // The body is whole: being verified and installed.
};
inline constexpr std::size_t kStages = 6;
std::string_view to_string(Stage stage);

// One live demand's progress: its task's, as of the last progress interval
// (ClientOptions::progress_interval_s). Demands that share a task share it.
struct DemandProgress {
  DemandHandle demand;
  OwnerId owner = 0;
  TaskId task;
  Stage stage = Stage::queued;
  std::uint64_t received = 0;  // Bytes of the body in hand, a resumed partial's included.
  std::uint64_t expected = 0;  // The body's size; 0 while unknown.
};

// An owner's live demands together (a loading screen's bar): the bytes over
// their distinct tasks, counted once however many of its demands share one.
struct OwnerProgress {
  std::uint32_t demands = 0;                   // Live demands.
  std::array<std::uint32_t, kStages> by_stage{};  // Of them, by Stage.
  std::uint64_t received = 0;
  std::uint64_t expected = 0;      // Of the tasks whose size is known,
  std::uint32_t unknown_size = 0;  // and how many tasks' is not yet.
};

// Which HTTP the requests speak (ClientOptions::http).
enum class HttpVersion {
  // HTTP/2 where the server offers it in TLS's ALPN (https://), HTTP/1.1
  // otherwise, and always over http://.
  negotiate,
  http1_1,  // HTTP/1.1 only.
  // HTTP/2 without negotiation, over http:// too: for servers known to speak
  // it (internal mirrors, loopback tests). A server that does not fails.
  h2_prior_knowledge,
};

// The RFC 9218 urgency (0, most urgent, to 7) a request of a task at
// `priority` carries in its `Priority: u=N` header: 3 (the RFC's default)
// for priority 0, the DemandOptions default; one less per priority level
// above it, one more per level below; clamped to 0..7. So priority 3 and
// above is u=0, and -4 and below (background prefetch) is u=7.
int rfc9218_urgency(Priority priority);
// The HTTP/2 stream weight (RFC 7540, 1 to 256) sent with it: 256 >> u.
int h2_stream_weight(Priority priority);

// Recording (ClientOptions::record): the client writes what its callers ask
// for as a trace (docs/trace-format.md) that `demandflight sim` replays:
// `artifact` on a key's first use (in each file), `subscribe`, `cancel`,
// `set_priority`, `end_owner` and `throttle`, timed on the client's clock
// (clock_s()). Calls append a line to a buffer under the client's lock; a
// thread of the recording writes it (every `flush_interval_s`, or sooner
// when half the buffer is full). Memory is bounded: when the disk falls so
// far behind that `buffer_bytes` are waiting, callers wait for it (a record
// is never dropped). A process killed loses what was not written yet; what
// was written is whole lines. docs/backend.md, *Recording*.
struct RecordOptions {
  std::filesystem::path path;  // The first file; a part k > 0 is PATH's stem + ".k" + extension.
  // A new part, with its own header, once a part holds this many bytes (0: one file).
  std::uint64_t rotate_bytes = 0;
  // Non-empty: each resource name is written as its HMAC-SHA256 under this
  // key (32 hex digits): the same name gives the same hash in every run with
  // the key; sizes, times and sharing are kept; digests are not written.
  std::string hash_key;
  // The trace's name for each OriginId (by index); "origin<N>" past the end.
  std::vector<std::string> origin_names;
  std::string name = "recording";  // The header's `name`.
  // Also write what happened: each demand's terminal, reason and latency, and
  // each task's times, attempts and bytes, as the result's rows
  // (docs/trace-format.md, *Result rows: CSV*) in PATH's stem + ".demands.csv"
  // and ".tasks.csv", a row as each ends.
  bool outcomes = false;
  std::size_t buffer_bytes = 4u << 20;
  double flush_interval_s = 0.2;
};

// The network and the disk as the client's own transfers measured them
// (Client::measured_platform(); a recording's header holds it under
// `x-measured`, with the platform derived from it). The estimators:
// docs/backend.md, *The measured platform*.
struct MeasuredPlatform {
  struct Origin {
    OriginId origin = 0;
    double rtt_s = 0;               // Least TCP connect time of new connections.
    std::uint64_t rtt_samples = 0;  // Connections opened.
    // The path's rate from lone complete attempts of 1 MiB or more: with
    // lone_fit, the median of the link rates at which the simulator's tcp
    // model (its slow start) takes each one's time on a new connection;
    // else the best body rate of any (a lower bound).
    double lone_Bps = 0;
    std::uint64_t lone_samples = 0;
    bool lone_fit = false;
    // Its transfers together: the busiest window of half a second or more
    // (a lower bound of its path).
    double busiest_Bps = 0;
    std::uint64_t windows = 0;
    // The path's bandwidth the platform takes: the larger of the two.
    double bandwidth_Bps() const { return std::max(lone_Bps, busiest_Bps); }
  };
  std::vector<Origin> origins;  // By OriginId; those some attempt went to.
  double client_Bps = 0;        // Busiest window of half a second or more, all transfers together.
  std::uint64_t client_windows = 0;
  std::uint64_t finalize_bytes = 0;  // Bytes finalized (verified and installed, or refused).
  double finalize_busy_s = 0;        // Time at least one finalize ran.
  std::uint64_t finalizes = 0;
};

// The file of part `part` of a recording whose first file is `first`: the
// first itself, then its stem + ".k" + its extension (rec.jsonl, rec.1.jsonl, ...).
std::filesystem::path record_part_path(const std::filesystem::path& first, std::uint32_t part);

// The outcome rows beside a recording (RecordOptions::outcomes): the demands'
// (`tasks` false) or the tasks' file: rec.jsonl -> rec.demands.csv, rec.tasks.csv.
std::filesystem::path record_outcome_path(const std::filesystem::path& first, bool tasks);

// What a recording has written, and whether it failed (Client::record_status()).
struct RecordStatus {
  std::uint64_t records = 0;        // Lines given to it, headers and artifact lines included.
  std::uint64_t bytes_written = 0;  // On disk, all parts.
  std::uint32_t parts = 0;          // Files begun.
  std::uint64_t waits = 0;          // Calls that waited for the disk (a full buffer).
  std::string error;                // The first write error (path and reason); then nothing more is written.
};

struct ClientOptions {
  SchedulerConfig scheduler;
  std::string orphan_policy = "always-abort";  // NAME[:k=v,...]
  // A policy of your own (engine/include/demandflight/engine/orphan_policy.h),
  // used instead of the name above when set. The client's engine calls it
  // with the client's lock held, from whichever thread caused the decision:
  // keep it quick and never call into the client from it. A policy chosen
  // in the simulator runs here by the same spec string (the name above).
  std::shared_ptr<OrphanPolicy> orphan_policy_object;
  // Required: the client throws std::invalid_argument when it is empty. A
  // relative path is taken from the current directory when the client is
  // made (a later chdir does not move the cache).
  std::filesystem::path cache_dir;
  UrlResolver resolver;
  // Verification and install threads; 0 chooses by install_sync. With
  // SyncMode::per_file an install waits on an fdatasync and a (shared)
  // directory fsync, about a millisecond each, so small artifacts need many
  // in flight: 0 means 16 (docs/benchmarks.md, *Mechanisms kept and removed*).
  // With SyncMode::batched a finalize thread takes every body waiting and
  // makes them durable together (CacheDir::commit_all), so threads beyond
  // the cores only contend for the staging directory: 0 means one per core,
  // at least 2 and at most 8.
  unsigned finalize_threads = 0;
  // How installs are made durable (CacheDir, cache_dir.h): batched by default.
  SyncMode install_sync = SyncMode::batched;
  // Staged bytes this far behind a file's end leave the page cache once on
  // the disk (CacheOptions::drop_behind_bytes; 0 keeps every page).
  std::uint64_t drop_behind_bytes = CacheOptions{}.drop_behind_bytes;
  // Full staging buffers of such files go around the page cache (O_DIRECT
  // through io_uring) where the kernel allows (CacheOptions::direct_writes).
  bool direct_writes = CacheOptions{}.direct_writes;
  HttpVersion http = HttpVersion::negotiate;
  // HTTP/2: an origin's transfers are streams over this many connections
  // (a transfer slot is a stream; scheduler.max_per_origin streams in all).
  // Over HTTP/1.1 each transfer has a connection of its own.
  unsigned h2_connections_per_origin = 1;
  // Certificates to trust instead of the system's (PEM); empty: the system's.
  std::filesystem::path ca_file;
  long connect_timeout_ms = 10'000;
  // Each attempt's stall rule and deadline (transfer_bounds.h): with the
  // defaults a server that drips a byte a second is cut off after 30 s.
  TransferBounds bounds;
  // Where terminal callbacks run; by default a delivery thread of the client,
  // one for all, which runs them one after another: a slow callback delays
  // every other demand's terminal. An executor that hands each to a pool of
  // your own (or your main loop) is the way out.
  std::function<void(std::function<void()>)> executor;
  // Optional; must outlive the client.
  ClientObserver* observer = nullptr;
  // How often the I/O thread tells the engine (and snapshots) what transfers received.
  double progress_interval_s = 0.1;
  // Optional: every progress interval while some demand waits, every live
  // demand's progress, on the delivery thread (or the executor) in order
  // with the terminals (a demand's reports come before its terminal).
  std::function<void(const std::vector<DemandProgress>&)> on_progress;
  // A successful demand's result carries a Pin on the artifact. Off for
  // callers that only download (`demandflight fetch` and `replay`).
  bool pin_on_success = true;
  // Background throttling (docs/backend.md, *Throttling*): the transfers of
  // tasks at or below a priority share a cap while a demand above it waits,
  // and every transfer shares an overall cap. Client::set_throttle changes it.
  ThrottleConfig throttle;
  // Record the callers' demand stream to a trace file (RecordOptions); off
  // when empty. The constructor throws std::runtime_error naming the path if
  // it cannot be created.
  std::optional<RecordOptions> record;
  // scheduler.cache_bytes is the cache directory's capacity (CacheOptions::
  // capacity_bytes): eviction, least recently used first, skips what any
  // process pins; an install that cannot fit because the rest is pinned
  // fails with "cache full" (nothing waits for a pin to go).
};

class Client {
 public:
  // Called once per demand, on the delivery thread (or the executor).
  using Callback = std::function<void(DemandResult)>;

  // Throws std::runtime_error if the cache directory or libcurl cannot be set up.
  explicit Client(ClientOptions options);
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // The artifact (origins, size, digest) is `artifact`'s; `options` says
  // who waits and how (owner, generation, priority, deadline). The engine's
  // DemandOptions also has origin, mirrors and size_bytes, which the client
  // fills from `artifact`: given there too, they must be the same.
  // Throws std::invalid_argument naming the field for a malformed
  // expectation (a sha256 that is not 64 hex digits), an origin beyond
  // max_origins, or a DemandOptions field that contradicts `artifact`.
  DemandHandle subscribe(const ArtifactRef& artifact, const DemandOptions& options,
                         Callback on_terminal);
  // The future-style form of subscribe.
  std::future<DemandResult> fetch(const ArtifactRef& artifact, const DemandOptions& options);

  void cancel(DemandHandle demand);
  void set_priority(DemandHandle demand, Priority priority);
  // Ends the owner's demands (see Scheduler::end_owner) and releases the pins
  // its demands were given (those of generations up to `generation`).
  void end_owner(OwnerId owner, std::optional<OwnerGeneration> generation = std::nullopt);

  // Where an installed artifact lives (whether or not it is installed).
  std::filesystem::path path_of(const ArtifactKey& key) const;
  // How the installs so far were made durable.
  CacheDir::SyncCounts sync_counts() const;
  SchedulerStats stats() const;
  // Seconds on the client's clock (the `t` of ClientObserver and of deadlines).
  double clock_s() const;
  // True when no demand waits, no task lives (orphans completing included) and the
  // I/O thread has handled every job they gave it: the metrics then count all of it.
  bool idle() const;
  // The transfers in flight, as of the last progress interval.
  std::vector<TransferSnapshot> transfers() const;
  // A demand's progress; nullopt once it has ended (its terminal is on its
  // way or delivered) or for a handle this client did not give.
  std::optional<DemandProgress> progress(DemandHandle demand) const;
  // Every live demand's, in subscribe order.
  std::vector<DemandProgress> progress() const;
  // An owner's live demands together.
  OwnerProgress owner_progress(OwnerId owner) const;
  // What the client has done and holds (metrics.h); write_prometheus() writes it.
  ClientMetrics metrics() const;
  // Pauses the tasks at or below `at_or_below` (every task, orphans
  // included, when nullopt): a transfer in flight stops reading (held back
  // by the client: not a stall, its attempt's deadline stands still), one
  // about to start waits before its request; a task whose priority rises
  // above the level goes on. Demands' deadlines still run. A later pause
  // replaces the level. resume() lets every held task go on where it was:
  // the same request, from the byte it stopped at.
  void pause(std::optional<Priority> at_or_below = std::nullopt);
  void resume();
  // The throttle caps, effective at once, transfers in flight included.
  // Throws std::invalid_argument naming the field for a negative rate.
  void set_throttle(const ThrottleConfig& config);
  ThrottleConfig throttle() const;
  // What the client measured of its network and disk so far.
  MeasuredPlatform measured_platform() const;
  // The recording's figures (ClientOptions::record); all zero without one.
  RecordStatus record_status() const;
  // Writes what the recording holds, closes it and returns its final figures;
  // calls from then on are not recorded. ~Client does the same.
  RecordStatus end_recording();

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace dfl::backend
