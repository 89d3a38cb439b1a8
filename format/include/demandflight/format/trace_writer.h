// TraceWriter: the one writer of the trace format (docs/trace-format.md).
//
// The generators, the importers, the production client's recording and
// Python's TraceBuilder (through the bindings) all write their lines here, so
// a field is added in one place and every writer spells it the same way:
// `{"op": "cancel", "t": 1.5, "demand": "d7"}`. A line's fields are typed:
// integers are written as integers, other numbers in their shortest form
// that reads back as the same double (an integral one without a fraction),
// and strings escaped as JSON needs (a byte that is not UTF-8 becomes
// U+FFFD). A number that is not finite is refused (std::invalid_argument
// naming the field).
//
// The names of the record kinds and fault kinds are the table below, which
// the reader and the bindings use too.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <ostream>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "demandflight/format/trace.h"

namespace dfl::format {

// --- Names -------------------------------------------------------------------------

// "subscribe", "cancel", "set_priority", "end_owner", "fault", "throttle".
std::string_view to_string(Op op);
std::optional<Op> parse_op(std::string_view name);
// "transfer_error", "corrupt", "origin_down".
std::string_view to_string(FaultKind kind);
std::optional<FaultKind> parse_fault_kind(std::string_view name);
// Every record kind's name, with "artifact" (the one untimed record) first.
const std::vector<std::string_view>& record_kind_names();
const std::vector<std::string_view>& fault_kind_names();

// --- Lines -------------------------------------------------------------------------

struct HeaderOrigin {
  std::string name;
  std::optional<double> bandwidth_Bps;
  std::optional<double> latency_s;
};

// The caps of a throttle record, or of the header's scheduler.throttle; an
// absent one is written as absent (no cap).
struct ThrottleCaps {
  std::optional<std::int64_t> background_at_or_below;
  std::optional<double> background_Bps;
  std::optional<double> overall_Bps;
};

// The first line. A member left empty is not written (the reader's default
// holds); a section with no member set is not written either.
struct TraceHeader {
  std::string name = "trace";
  std::uint64_t seed = 0;
  struct Platform {
    std::optional<double> client_bandwidth_Bps;
    std::optional<double> client_latency_s;
    std::optional<std::vector<HeaderOrigin>> origins;
    std::optional<double> disk_write_Bps;
    std::optional<double> hash_Bps;
    std::optional<std::string> network_model;
    std::optional<std::string> server_congestion_control;
  } platform;
  struct Retry {
    std::optional<std::uint64_t> max_attempts;
    std::optional<double> base_s;
    std::optional<double> cap_s;
    std::optional<double> jitter;
  };
  struct Breaker {
    std::optional<std::uint64_t> failures;
    std::optional<double> open_s;
  };
  struct Scheduler {
    std::optional<std::uint64_t> max_transfers;
    std::optional<std::uint64_t> max_per_origin;
    std::optional<std::uint64_t> cache_bytes;
    std::optional<Retry> retry;
    std::optional<Breaker> breaker;
    std::optional<ThrottleCaps> throttle;
  } scheduler;
  // Members whose names begin with "x-" (an importer's x-import, a
  // recording's x-recording and x-measured), written last, in order: each a
  // name and its value as JSON text (written again in the writer's style;
  // std::invalid_argument if it is not JSON).
  std::vector<std::pair<std::string, std::string>> extensions;
};

struct ArtifactLine {
  std::string_view id;
  std::string_view resource;
  std::string_view revision;
  std::string_view target;
  std::int64_t generation = 0;
  std::uint64_t size = 0;
  // One: `origin`; more: `origins`, in order of preference.
  std::span<const std::string_view> origins;
  std::optional<std::string_view> sha256;
};

struct SubscribeLine {
  double t = 0;
  std::string_view demand;
  std::string_view owner;
  std::string_view artifact;
  std::int64_t priority = 1;
  std::optional<std::int64_t> owner_generation;
  std::optional<double> timeout_s;
};

struct CancelLine {
  double t = 0;
  std::string_view demand;
};

struct SetPriorityLine {
  double t = 0;
  std::string_view demand;
  std::int64_t priority = 0;
};

struct EndOwnerLine {
  double t = 0;
  std::string_view owner;
  std::optional<std::int64_t> owner_generation;
};

struct ThrottleLine {
  double t = 0;
  ThrottleCaps caps;
};

// transfer_error and corrupt name an artifact, origin_down an origin.
struct FaultLine {
  double t = 0;
  FaultKind kind = FaultKind::transfer_error;
  std::string_view artifact;
  std::string_view origin;
  std::optional<std::uint64_t> count;
  std::optional<double> after_fraction;
  std::optional<bool> retryable;
  std::optional<double> duration_s;
};

// --- The writer --------------------------------------------------------------------

class TraceWriter {
 public:
  using Output = std::function<void(std::string_view)>;

  // Lines stay in text() until take() (or clear()).
  TraceWriter();
  // Lines go to `output` in blocks of about 64 KiB, and at finish().
  explicit TraceWriter(Output output);
  // The same to a stream; finish() throws std::runtime_error if it failed.
  explicit TraceWriter(std::ostream& out);

  void header(const TraceHeader& h);
  void artifact(const ArtifactLine& a);
  // A timed record (SubscribeLine, CancelLine, ...), after every held record
  // due by its time.
  template <class Line>
  void write(const Line& line) {
    before(line.t);
    render(buffer_, line);
    end_line(line.t);
  }
  // A timed record decided now for a later time: written (in the order held,
  // for equal times) just before the first record written at a later time, or
  // at finish(). A held record's time is not before the last one written
  // (std::logic_error otherwise).
  template <class Line>
  void hold(const Line& line) {
    std::string text;
    render(text, line);
    hold_text(line.t, std::move(text));
  }

  // Writes every held record, then hands out what is buffered.
  void finish();
  // The lines written so far (the string writer).
  const std::string& text() const { return buffer_; }
  std::string take();
  void clear() { buffer_.clear(); }

  // A string as JSON text (quoted and escaped) after `out`'s end.
  static void append_string(std::string& out, std::string_view value);
  // A number as the writer writes it.
  static void append_number(std::string& out, double value, std::string_view field);

 private:
  struct Held {
    double t;
    std::uint64_t sequence;  // Ties keep the order in which records were held.
    std::string text;
  };
  static void render(std::string& out, const SubscribeLine& line);
  static void render(std::string& out, const CancelLine& line);
  static void render(std::string& out, const SetPriorityLine& line);
  static void render(std::string& out, const EndOwnerLine& line);
  static void render(std::string& out, const ThrottleLine& line);
  static void render(std::string& out, const FaultLine& line);
  void hold_text(double t, std::string text);
  void before(double t);  // Writes the held records due by t.
  void end_line(double t);
  void maybe_output();

  Output output_;
  std::ostream* stream_ = nullptr;
  std::string buffer_;
  std::vector<Held> held_;  // A min-heap on (t, sequence).
  std::uint64_t next_sequence_ = 0;
  double last_t_ = 0;
};

}  // namespace dfl::format
