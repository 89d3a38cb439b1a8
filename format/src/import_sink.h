// What every importer shares (format/import.h): the options' parsing, the
// demand model, and the writer that turns requests into trace records.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <queue>
#include <random>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "demandflight/format/import.h"
#include "demandflight/format/trace_writer.h"

namespace dfl::format::import_detail {

using ojson = nlohmann::ordered_json;

// The options of one import, read by name; every option read is marked, and
// those never read are refused (a typo must not pass silently).
class OptionReader {
 public:
  explicit OptionReader(const ImportOptions& options) : options_(options) {}
  std::optional<std::string> text(const std::string& name);
  std::string text_or(const std::string& name, const std::string& fallback);
  std::optional<double> number(const std::string& name);
  bool flag(const std::string& name);
  // Throws std::invalid_argument naming the first option not read.
  void check_all_read(const std::string& format) const;
  // Every option given, as given (for the header's x-import).
  ojson as_json() const;

 private:
  const ImportOptions& options_;
  std::map<std::string, bool> read_;
};

// `p=0.2,dist=exponential,mean_s=2`: a demand is abandoned with probability p,
// after a patience time drawn from the distribution (exponential: mean_s;
// lognormal: median_s, sigma; uniform: min_s, max_s; fixed: after_s).
struct Abandon {
  double p = 0;
  std::string dist = "exponential";
  double a = 0, b = 0;  // The distribution's parameters, in the order above.
  ojson params;
};
Abandon parse_abandon(const std::string& spec);

// `VALUE=PRIORITY,...,*=PRIORITY`; for the field `size`, VALUEs are byte
// thresholds (a size at most the smallest threshold at or above it).
struct PriorityMap {
  std::string field;
  std::vector<std::pair<std::string, std::int64_t>> by_value;
  std::vector<std::pair<double, std::int64_t>> by_size;  // Ascending thresholds.
  std::optional<std::int64_t> otherwise;
};
PriorityMap parse_priority_map(const std::string& field, const std::string& spec);

// `SECONDS` for every demand, or `PRIORITY=SECONDS,...,*=SECONDS`.
struct Deadlines {
  std::optional<double> all;
  std::map<std::int64_t, double> by_priority;
};
Deadlines parse_deadlines(const std::string& spec);

struct DemandModel {
  std::optional<double> session_gap_s;
  std::optional<Abandon> abandon;
  std::optional<PriorityMap> priority_by;
  std::optional<Deadlines> deadlines;
  std::uint64_t seed = 1;
  std::optional<std::uint64_t> limit;  // --limit: the first N requests only.
};
// Reads --sessions, --abandon, --priority-by, --priority-map, --deadline,
// --seed, --limit.
DemandModel read_demand_model(OptionReader& options);

// The options every format has (import_options() appends them).
std::vector<ImportOption> shared_options();

// One request of the log, as an importer read it.
struct Request {
  double t = 0;            // Seconds from the start; non-decreasing across calls.
  std::string demand;      // Unique in the trace.
  std::string object;      // The artifact's identity in the log.
  std::string origin;      // Empty: "origin".
  std::uint64_t size = 0;  // Bytes, > 0.
  std::int64_t priority = 1;
  std::string owner;          // Empty: "log".
  std::optional<double> end;  // The log says it was abandoned then: a cancel.
  std::vector<std::pair<double, std::int64_t>> priority_changes;  // set_priority, in order.
  // The value of the --priority-by field (a column, a resource type ...);
  // `size` is read from `size`.
  std::string priority_value;
};

// Turns requests into records and writes the trace (see import.h).
class Sink {
 public:
  Sink(std::string format, std::vector<std::string> inputs, DemandModel model);
  ~Sink();

  // A request, or a counted skip ("beyond --limit") once --limit are in.
  void request(const Request& r);
  // Whether --limit requests are in: a format that reads in time order
  // stops reading there.
  bool full() const { return model_.limit && demands_ >= *model_.limit; }
  void skip(const std::string& why) { ++skipped_[why]; }
  // A request skipped with its events: its cancel and priority changes are
  // counted too, so that x-import's inputs equal its records plus its skips.
  void skip_request(const std::string& why, bool cancelled, std::size_t priority_changes) {
    skip(why);
    if (cancelled) skip("cancel of a skipped request");
    if (priority_changes > 0) skipped_["priority change of a skipped request"] += priority_changes;
  }
  // A count of the format's own for x-import (rows, entries, events ...).
  void count(const std::string& what, std::uint64_t n = 1) { counts_[what] += n; }
  // Writes the header (name, seed, x-import with `options`) and the records.
  void finish(const std::string& name, ojson options, std::ostream& out);

 private:
  struct Pending {
    double t;
    std::uint64_t seq;
    enum Kind : std::uint8_t { cancel, set_priority, end_owner } kind;
    std::string who;  // Demand, or owner.
    std::int64_t priority;
    bool operator>(const Pending& o) const { return t != o.t ? t > o.t : seq > o.seq; }
  };
  struct Session {
    std::uint64_t number = 0;
    double last_t = 0;
  };
  struct Known {
    std::string id;
    std::uint64_t size;
    std::uint32_t revision;
  };

  void flush(double up_to);
  void close_sessions(double before);
  std::string owner_of(const std::string& base, double t);
  std::int64_t mapped_priority(const Request& r);
  double draw();  // Uniform in (0, 1).
  double patience();

  std::string format_;
  std::vector<std::string> inputs_;
  DemandModel model_;
  std::mt19937_64 rng_;
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> body_;
  TraceWriter writer_;  // Into body_; the header goes first at finish().
  std::unordered_map<std::string, Known> artifacts_;
  std::priority_queue<Pending, std::vector<Pending>, std::greater<>> pending_;
  std::uint64_t seq_ = 0;
  std::unordered_map<std::string, Session> sessions_;  // Open sessions, by owner.
  std::unordered_map<std::string, std::uint64_t> session_numbers_;
  // Sessions by when they close (last_t + gap), checked lazily against sessions_.
  std::priority_queue<std::pair<double, std::string>, std::vector<std::pair<double, std::string>>,
                      std::greater<>>
      closing_;
  double last_t_ = 0;
  std::map<std::string, std::uint64_t> skipped_;
  std::map<std::string, std::uint64_t> counts_;
  // Origins in the order artifacts first name them, declared in the header
  // (a streamed run builds its platform before the first record).
  std::vector<std::string> origins_;
  std::uint64_t demands_ = 0, revisions_ = 0, size_changes_ = 0, cancels_ = 0, abandons_ = 0,
                set_priorities_ = 0, sessions_made_ = 0, owner_ends_ = 0, unmapped_ = 0,
                deadlines_ = 0, changes_after_end_ = 0;
  std::map<std::int64_t, std::uint64_t> by_priority_;
};

// Strings of many requests (URLs, owners), kept once, by number.
class Names {
 public:
  std::uint32_t id(std::string_view s) {
    auto [it, fresh] = index_.try_emplace(std::string(s), static_cast<std::uint32_t>(names_.size()));
    if (fresh) names_.push_back(it->first);
    return it->second;
  }
  const std::string& operator[](std::uint32_t i) const { return names_[i]; }

 private:
  std::unordered_map<std::string, std::uint32_t> index_;
  std::vector<std::string> names_;
};

// A finite number, all of `text`, or nullopt.
std::optional<double> parse_double(std::string_view text);

// The largest size an import accepts, 2^53 bytes (8 PiB): sizes are read as
// doubles from text, and every integer up to it is exact.
inline constexpr double kMaxImportSize = 9007199254740992.0;

// Whether `text` is valid UTF-8 (a trace is JSON text: its names must be).
bool valid_utf8(std::string_view text);

// Seconds per unit of a log's times: s, ms, us, ns (std::invalid_argument
// naming --time-unit otherwise).
double seconds_per_unit(const std::string& unit);

// What har and cdp share: which requests are downloads (--methods), what
// becomes of those the browser's cache served (--cached), and the fields
// --priority-by may name.
struct BrowserOptions {
  std::string cached;   // "skip" or "demand".
  std::string pushed;   // "demand" or "skip": resources the server pushed (HTTP/2).
  std::string methods;  // As given: "GET,HEAD".
  std::vector<std::string> method_list;
  bool is_download(const std::string& method) const;
};
std::vector<ImportOption> browser_options(const std::string& what);  // "entries", "requests"
BrowserOptions read_browser_options(OptionReader& options);
// The --priority-by field ("" when none): type, mime, method, host or size.
std::string browser_priority_field(const DemandModel& model, const std::string& format);

// A response header's bytes when it is `Content-Length` (any case) with a
// number up to kMaxImportSize; otherwise nullopt, as if absent.
std::optional<std::uint64_t> content_length(std::string_view name, const std::string& value);

// Chrome's resource priorities (HAR `_priority`, CDP `initialPriority` and
// `newPriority`): VeryLow 0, Low 1, Medium 2, High 3, VeryHigh 4.
std::optional<std::int64_t> chrome_priority(std::string_view name);

// The scheme, host and port of a URL ("https://cdn.example.com:8443"), or "".
std::string url_origin(std::string_view url);
// The host of a URL.
std::string url_host(std::string_view url);

// What a file that one importer cannot read looks like, from its first
// bytes: "it looks like a HAR capture (import har)", or "" when it is not
// plainly another format.
std::string looks_like(std::string_view start, const std::string& format);
// The first `n` bytes of a file ("" if it cannot be read).
std::string first_bytes(const std::string& file, std::size_t n = 4096);

}  // namespace dfl::format::import_detail

namespace dfl::format::import_detail {

// The formats, each in its own file: its options, and the import itself
// (reading its own options from `options`, then the demand model's).
std::vector<ImportOption> csv_options();
void import_csv(const std::vector<std::string>& inputs, OptionReader& options, std::ostream& out);
std::vector<ImportOption> oracle_general_options();
void import_oracle_general(const std::vector<std::string>& inputs, OptionReader& options,
                           std::ostream& out);
std::vector<ImportOption> har_options();
void import_har(const std::vector<std::string>& inputs, OptionReader& options, std::ostream& out);
std::vector<ImportOption> cdp_options();
void import_cdp(const std::vector<std::string>& inputs, OptionReader& options, std::ostream& out);
std::vector<ImportOption> access_log_options();
void import_access_log(const std::vector<std::string>& inputs, OptionReader& options,
                       std::ostream& out);

}  // namespace dfl::format::import_detail
