// Trace: a workload in the demandflight trace format, version 1
// (docs/trace-format.md), read and validated strictly.
//
// read_trace() refuses bad input whole: the first problem is reported as
// `FILE:LINE: field: message` and nothing of the trace is used. Names (demand
// ids, owners, artifact ids, origins) are interned into dense indices so that a
// trace of millions of records stays compact.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "demandflight/engine/artifact_key.h"
#include "demandflight/engine/ids.h"
#include "demandflight/engine/throttle.h"
#include "demandflight/format/defaults.h"

namespace dfl::format {

// A problem with the input, located precisely.
class TraceError : public std::runtime_error {
 public:
  TraceError(std::string file, std::size_t line, std::string field, const std::string& message);
  // In binary input, the place is a record's number (from 1):
  // `FILE: record N: field: message`; line() is then N.
  struct Record {
    std::uint64_t number;
  };
  TraceError(std::string file, Record record, std::string field, const std::string& message);
  // The file cannot be opened or read, with the system's reason (errno as
  // the failed call left it): `FILE: cannot open: No such file or directory`.
  static TraceError unreadable(const std::string& file, const std::string& what = "cannot open");
  // The same error with a note after its message: `... message (note)`.
  TraceError with_note(const std::string& note) const;
  const std::string& file() const { return file_; }
  std::size_t line() const { return line_; }
  const std::string& field() const { return field_; }

 private:
  struct Text {};
  TraceError(Text, const std::string& what, std::string file, std::size_t line, std::string field);
  std::string file_;
  std::size_t line_;
  std::string field_;
};

struct OriginSpec {
  std::string name;
  double bandwidth_Bps = 0;
  double latency_s = 0;
};

enum class NetworkModel : std::uint8_t {
  // CM02 calibrated against the real backend over a shaped link
  // (bench/fidelity.py; docs/validation.md): a transfer pays a full round trip
  // (latency factor 2: the request goes out before the first byte comes
  // back on a kept-alive connection) and moves payload at 95.6% of the link
  // rate (TCP/IP headers in 1514-byte frames), shared fairly. The flow model
  // under `tcp`.
  calibrated,
  // CM02 without cross-traffic: a lone transfer takes exactly size / bandwidth
  // + latency. For tests and hand calculations.
  cm02,
  // SimGrid's own default (LV08: latency x13.01 for TCP slow start of fresh
  // connections, bandwidth x0.97, ACK cross-traffic): far slower than the
  // backend, whose connections are kept alive.
  lv08,
  // The default ("default" names it): `calibrated` plus TCP state per
  // connection (sim/src/tcp_connections.cpp): per
  // origin a pool of kept-alive connections, as the backend keeps them; a new
  // connection pays its handshake, a connection idle for longer than its
  // retransmission timeout restarts slow start, and a transfer's first round
  // trips run at the slow-start window until it reaches the transfer's share.
  tcp,
  // ns-3, the packet-level simulator SimGrid is built with (network/model:ns-3):
  // TCP (CUBIC) with its handshake, slow start, congestion control and drop-tail
  // queues on every link. Each transfer is a new TCP connection. The reference
  // for the flow models, about a thousand times slower.
  ns3,
};

// "tcp", "calibrated", "cm02", "lv08" or "ns3", and "default" for tcp
// (to_string never says "default"); parse_network_model also takes
// the trace header's spellings ("CM02", "LV08", "TCP", "ns-3": case does not
// matter), and returns nullopt for any other name.
std::string_view to_string(NetworkModel model);
std::optional<NetworkModel> parse_network_model(std::string_view name);
// "default, tcp, calibrated, cm02, lv08, ns3": for help texts and errors.
const std::vector<std::string>& network_model_names();
std::string network_model_names_text();

// The origins' TCP congestion control, which the `tcp` network model follows
// after a connection's idle period: CUBIC (and every loss-based one) restarts
// slow start after an idle retransmission timeout (Linux's
// tcp_slow_start_after_idle); BBR does not (Linux skips that restart for a
// congestion control of its own, which BBR is) and sends at the bandwidth it
// measured before.
enum class ServerCongestionControl { cubic, bbr };
// "cubic" or "bbr", in any case; nullopt for any other name.
std::optional<ServerCongestionControl> parse_server_congestion_control(std::string_view name);

struct Platform {
  // platform.network_model: a name parse_network_model takes (an optional field).
  NetworkModel network_model = NetworkModel::tcp;
  // platform.server_congestion_control (optional, "cubic" by default).
  ServerCongestionControl server_congestion_control = ServerCongestionControl::cubic;
  double client_bandwidth_Bps = 0;
  double client_latency_s = 0;
  std::vector<OriginSpec> origins;  // Declared ones first, then those first named by artifacts.
  double disk_write_Bps = 0;
  double hash_Bps = 0;
};

struct SchedulerSpec {
  std::uint32_t max_transfers = 0;
  std::uint32_t max_per_origin = 0;
  std::uint64_t cache_bytes = 0;
  std::uint32_t retry_max_attempts = 0;
  double retry_base_s = 0;
  double retry_cap_s = 0;
  double retry_jitter = 0;
  std::uint32_t breaker_failures = defaults::breaker_failures;  // 0: never opens.
  double breaker_open_s = defaults::breaker_open_s;
  // scheduler.throttle: the caps at the start (throttle records change them).
  ThrottleConfig throttle{};
};

struct Artifact {
  std::string id;
  ArtifactKey key;
  std::uint64_t size_bytes = 0;
  std::uint32_t origin = 0;  // Index into Platform::origins: the first choice.
  std::vector<std::uint32_t> mirrors;  // `origins` after the first, in order.
  std::optional<std::string> sha256;
};

enum class Op : std::uint8_t { subscribe, cancel, set_priority, end_owner, fault, throttle };
enum class FaultKind : std::uint8_t { transfer_error, corrupt, origin_down };

// The fields of a fault record. Faults are rare: they live in a table of
// their own so that Record, of which a trace has millions, stays small.
struct FaultSpec {
  FaultKind kind = FaultKind::transfer_error;
  std::uint32_t origin = 0;   // origin_down
  std::uint32_t count = 0;    // transfer_error, corrupt
  double after_fraction = 0;  // transfer_error
  bool retryable = true;      // transfer_error
  double duration_s = 0;      // origin_down
};

// The largest time a record may carry (`t`, and timeout_s, duration_s), in
// seconds: about 31,700 years. The reader refuses more; importers refuse a
// log whose times go further.
inline constexpr double kMaxRecordTime = 1e12;

// One timed record. Indices refer to the Trace's tables. 56 bytes: a trace of
// two million records is read and replayed from about 110 MB of them.
struct Record {
  static constexpr double kNoTimeout = std::numeric_limits<double>::infinity();

  double t = 0;
  std::int64_t owner_generation = 0;  // subscribe; end_owner when has_generation
  double timeout_s = kNoTimeout;      // subscribe
  std::uint32_t line = 0;
  std::uint32_t demand = 0;    // subscribe, cancel, set_priority
  std::uint32_t artifact = 0;  // subscribe, transfer_error, corrupt
  std::uint32_t owner = 0;     // subscribe, end_owner
  std::uint32_t fault = 0;     // fault: index into Trace::faults; throttle: Trace::throttles
  Priority priority = 0;       // subscribe, set_priority
  Op op = Op::subscribe;
  bool has_generation = false;  // end_owner

  bool has_timeout() const { return timeout_s != kNoTimeout; }
};

struct Trace {
  std::string file;
  std::string name;
  std::uint64_t seed = 0;
  Platform platform;
  SchedulerSpec scheduler;
  std::vector<Artifact> artifacts;
  std::vector<std::string> demand_ids;  // By demand index, in subscribe order.
  std::vector<std::string> owners;      // By owner index.
  std::vector<Record> records;          // In file order (non-decreasing t).
  std::vector<FaultSpec> faults;        // By Record::fault.
  std::vector<ThrottleConfig> throttles;  // By Record::fault of a throttle record.
};

// Reads and validates a trace; throws TraceError on the first problem.
Trace read_trace(const std::string& path);
Trace read_trace(std::istream& in, const std::string& name_for_errors);

// Reads a manifest: a trace's artifact lines (`demandflight fetch`). The
// header line is optional (checked when present, its defaults used when not);
// other records are checked like a trace's and otherwise ignored, so a whole
// trace is a manifest of its artifacts. Throws TraceError.
Trace read_manifest(const std::string& path);

// A trace read while it is simulated (`sim --stream`), for traces too large
// to hold: the header and the artifact lines before the first timed record
// are read at once; then next() hands out the timed records one by one. Every
// line is checked as read_trace() checks it, but a problem is found when its
// line is reached (the caller stops there and writes nothing).
//
// trace() has the header, the platform (complete: an origin first named by
// an artifact line after the first timed record is an error), and the
// artifacts, owners and faults read so far; its records and demand_ids stay
// empty. A record's demand is its subscribe's number (0, 1, 2, ... in
// subscribe order, as read_trace numbers them); a cancel or set_priority of
// a demand that has ended (demand_ended) carries kEndedDemand. A demand's id
// stays until its row is written (demand_written), in subscribe order.
// Memory grows with the artifacts, owners and faults, and with the demands
// not yet written, but not with the records: ids of the form PREFIX<number>
// (what `gen` and `import` write) are remembered as one bit each once written.
class TraceStream {
 public:
  static constexpr std::uint32_t kEndedDemand = 0xffffffff;
  // Throws TraceError (an unreadable file, a bad header or artifact line).
  explicit TraceStream(const std::string& path);
  // From `in` (which must outlive this), named `name_for_errors` in errors.
  TraceStream(std::istream& in, const std::string& name_for_errors);
  ~TraceStream();
  TraceStream(const TraceStream&) = delete;
  TraceStream& operator=(const TraceStream&) = delete;

  const Trace& trace() const;
  // The next timed record; false at the end. Throws TraceError.
  bool next(Record& record);
  const std::string& demand_id(std::uint32_t demand) const;
  void demand_ended(std::uint32_t demand);
  void demand_written(std::uint32_t demand);
  std::uint64_t demands_read() const;
  std::uint64_t records_read() const;
  std::size_t demand_ids_kept() const;  // Not yet written (for tests).

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// A rotated recording's parts (rec.jsonl, rec.1.jsonl, ...; docs/backend.md,
// *Recording*) as one trace's text on `out`: the first part's header, every
// part's records in order, without a page's filler (blank lines) or an
// artifact line whose id an earlier part declared. A line is known by its
// JSON fields ("op", "id"); one that is not JSON is kept for the reader to
// refuse. Throws TraceError for a part that cannot be read or is empty.
void merge_recording_parts(const std::vector<std::string>& parts, std::ostream& out);

namespace detail {
// For tests and trace_fuzz: a record line is read by simdjson, and by
// nlohmann's parser when simdjson refuses it. This reads `line` both ways and
// says how the two results differ: nullopt when simdjson refuses the line or
// when both read the same object (the same fields, in order, of the same kinds
// and values).
std::optional<std::string> compare_line_readers(const std::string& line);
}  // namespace detail

}  // namespace dfl::format
