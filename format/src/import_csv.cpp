#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <queue>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "demandflight/format/trace.h"
#include "import_sink.h"

namespace dfl::format::import_detail {
namespace {

// One CSV record (RFC 4180: fields in double quotes may hold the delimiter,
// newlines and doubled quotes). Returns false at the end of the input.
// `line` counts physical lines; `first_line` is where the record began.
bool read_record(std::istream& in, char delimiter, std::vector<std::string>& fields,
                 std::size_t& line, std::size_t& first_line, const std::string& file) {
  fields.clear();
  std::string text;
  if (!std::getline(in, text)) return false;
  ++line;
  first_line = line;
  std::string field;
  bool quoted = false, was_quoted = false;
  for (std::size_t i = 0;; ++i) {
    if (i == text.size()) {
      if (!quoted) break;
      // A quoted field goes on on the next line.
      std::string more;
      if (!std::getline(in, more)) {
        throw TraceError(file, first_line, "-", "a quoted field is not closed");
      }
      ++line;
      field.push_back('\n');
      text = std::move(more);
      i = static_cast<std::size_t>(-1);
      continue;
    }
    const char c = text[i];
    if (quoted) {
      if (c == '"') {
        if (i + 1 < text.size() && text[i + 1] == '"') {
          field.push_back('"');
          ++i;
        } else {
          quoted = false;
        }
      } else {
        field.push_back(c);
      }
    } else if (c == '"' && field.empty() && !was_quoted) {
      quoted = was_quoted = true;
    } else if (c == delimiter) {
      fields.push_back(std::move(field));
      field.clear();
      was_quoted = false;
    } else if (c == '\r' && i + 1 == text.size()) {
      // CRLF line ends.
    } else {
      field.push_back(c);
    }
  }
  fields.push_back(std::move(field));
  return true;
}

// A column the options name: its option, the name or number given, and where it is.
struct Column {
  const char* flag;
  std::optional<std::string> name;
  std::size_t index = 0;
};
enum { kTime, kKey, kSize, kPriority, kOwner, kOrigin, kEnd, kPriorityBy };

// The columns, in the order above; --time, --key and --size are required.
std::vector<Column> read_columns(OptionReader& options) {
  std::vector<Column> columns = {
      {"time", options.text("time")},   {"key", options.text("key")},
      {"size", options.text("size")},   {"priority", options.text("priority")},
      {"owner", options.text("owner")}, {"origin", options.text("origin")},
      {"end", options.text("end")},     {"priority-by", std::nullopt}};
  for (std::size_t i = 0; i < 3; ++i) {
    if (!columns[i].name || columns[i].name->empty()) {
      throw std::invalid_argument(std::string("--") + columns[i].flag + " COLUMN is required");
    }
  }
  return columns;
}

// Reads the files' rows, in time order, into requests for the sink.
class CsvReader {
 public:
  CsvReader(std::vector<Column> columns, bool header, char delimiter, double unit,
            std::optional<double> given_start, Sink& sink)
      : columns_(std::move(columns)),
        header_(header),
        delimiter_(delimiter),
        unit_(unit),
        start_(given_start),
        sink_(sink) {}

  // One file: its header row (the columns found), then its rows up to --limit.
  void read_file(const std::string& file) {
    std::ifstream in(file);
    if (!in) throw TraceError::unreadable(file);
    file_ = &file;
    line_ = 0;
    first_line_ = 0;
    // Where each column is, from the header row or the numbers given.
    std::vector<std::string> names;
    if (header_ && !read_record(in, delimiter_, names, line_, first_line_, file)) {
      throw TraceError(file, 1, "-", "is empty: no header row");
    }
    locate_columns(names, file);
    while (!sink_.full() && read_record(in, delimiter_, fields_, line_, first_line_, file)) {
      ++rows_;
      if (fields_.size() == 1 && fields_[0].empty()) {
        sink_.skip("empty line");
        continue;
      }
      read_row();
    }
  }

  // The rows read, empty lines included.
  std::uint64_t rows() const { return rows_; }
  // --start, or the first row's time.
  std::optional<double> start() const { return start_; }

 private:
  // Each named column's index: its number, or its place in the header row.
  void locate_columns(const std::vector<std::string>& names, const std::string& file) {
    for (Column& c : columns_) {
      if (!c.name) continue;
      const std::string& wanted = *c.name;
      std::size_t number = 0;
      const auto [end, error] =
          std::from_chars(wanted.data(), wanted.data() + wanted.size(), number);
      if (error == std::errc{} && end == wanted.data() + wanted.size() && number >= 1) {
        c.index = number - 1;
        continue;
      }
      if (!header_) {
        throw std::invalid_argument(std::string("--") + c.flag + " " + wanted +
                                    ": without a header row, columns are numbers from 1");
      }
      auto it = std::find(names.begin(), names.end(), wanted);
      if (it == names.end()) {
        std::string known;
        for (const std::string& n : names)
          known += (known.empty() ? "" : ", ") + n;
        throw TraceError(file, 1, c.flag,
                         "no column \"" + wanted + "\" (the header has: " + known + ")");
      }
      c.index = static_cast<std::size_t>(it - names.begin());
    }
  }

  // The refusal of the row's `which` column.
  TraceError row_error(int which, const std::string& message) const {
    return TraceError(*file_, first_line_, *columns_[static_cast<std::size_t>(which)].name,
                      message);
  }

  // The row's text in column `which`.
  const std::string& field(int which) const {
    const Column& c = columns_[static_cast<std::size_t>(which)];
    if (c.index >= fields_.size()) {
      throw TraceError(*file_, first_line_, *c.name,
                       "missing: the row has " + std::to_string(fields_.size()) + " fields");
    }
    return fields_[c.index];
  }

  // The row's number in column `which`.
  double number_in(int which) const {
    const std::string& text = field(which);
    double value = 0;
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (error != std::errc{} || end != text.data() + text.size() || !std::isfinite(value)) {
      throw row_error(which, "\"" + text + "\" is not a number");
    }
    return value;
  }

  // A row that is not empty: a request, or a counted skip (size 0).
  void read_row() {
    const double t = row_time();
    const double bytes = number_in(kSize);
    if (bytes < 0 || bytes != std::floor(bytes) || bytes > kMaxImportSize) {
      throw row_error(kSize, "\"" + field(kSize) + "\" is not a size in bytes");
    }
    if (bytes == 0) {
      sink_.skip("size 0");
      return;
    }
    Request r;
    r.t = t;
    r.object = field(kKey);
    if (r.object.empty()) throw row_error(kKey, "empty");
    r.size = static_cast<std::uint64_t>(bytes);
    if (columns_[kPriority].name) r.priority = row_priority();
    if (columns_[kEnd].name && !field(kEnd).empty()) r.end = row_end(t);
    if (columns_[kOwner].name) r.owner = field(kOwner);
    if (columns_[kOrigin].name) r.origin = field(kOrigin);
    // Names go into JSON text: they must be UTF-8.
    for (const int which : {kKey, kOwner, kOrigin}) {
      const Column& c = columns_[static_cast<std::size_t>(which)];
      if (c.name && !valid_utf8(field(which))) {
        throw TraceError(*file_, first_line_, *c.name, "not valid UTF-8");
      }
    }
    if (columns_[kPriorityBy].name) r.priority_value = field(kPriorityBy);
    r.demand = "r" + std::to_string(rows_);
    sink_.request(r);
  }

  // The row's time from the start (the first row's, without --start), in
  // seconds; the rows must be in time order.
  double row_time() {
    const double raw_t = number_in(kTime);
    if (!start_) start_ = raw_t;
    const double t = (raw_t - *start_) * unit_;
    if (taken_ > 0 && t < last_t_) {
      throw row_error(kTime, "goes backwards (the log must be in time order)");
    }
    if (t < 0) throw row_error(kTime, "before the start (" + std::to_string(*start_) + ")");
    if (t > kMaxRecordTime) {
      throw row_error(kTime, "more than 10^12 s after the first row (the trace format's limit)");
    }
    last_t_ = t;
    ++taken_;
    return t;
  }

  // The row's integer priority.
  std::int64_t row_priority() const {
    std::int64_t priority = 1;
    const std::string& text = field(kPriority);
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), priority);
    if (error != std::errc{} || end != text.data() + text.size()) {
      throw row_error(kPriority, "\"" + text + "\" is not an integer");
    }
    return priority;
  }

  // When the request was abandoned (a cancel then), from the start: not before `t`.
  double row_end(double t) const {
    const double end = (number_in(kEnd) - *start_) * unit_;
    if (end < t) throw row_error(kEnd, "before the request's time");
    if (end > kMaxRecordTime) {
      throw row_error(kEnd, "more than 10^12 s after the first row (the trace format's limit)");
    }
    return end;
  }

  std::vector<Column> columns_;
  const bool header_;
  const char delimiter_;
  const double unit_;
  std::optional<double> start_;
  Sink& sink_;
  std::uint64_t rows_ = 0, taken_ = 0;
  double last_t_ = 0;
  std::vector<std::string> fields_;
  // The file being read, and its lines so far (first_line_: the row's first).
  const std::string* file_ = nullptr;
  std::size_t line_ = 0, first_line_ = 0;
};

}  // namespace

std::vector<ImportOption> csv_options() {
  return {
      {"time", "the time column (a name, or a number from 1)", true, false, ""},
      {"key", "the object id column", true, false, ""},
      {"size", "the size column (bytes)", true, false, ""},
      {"priority", "an integer priority column (default: 1)", false, false, ""},
      {"owner", "the owner column (default: one owner, \"log\")", false, false, ""},
      {"origin", "the origin column (default: one, \"origin\")", false, false, ""},
      {"end", "a column with the time the request was abandoned: a cancel then (empty: never)",
       false, false, ""},
      {"no-header", "the first row is data: columns are numbers", false, true, ""},
      {"delimiter", "the field separator", false, false, ","},
      {"time-unit", "the unit of the time columns: s, ms, us or ns", false, false, "s"},
      {"start", "subtracted from every time, in the log's unit (default: the first row's time)",
       false, false, ""},
  };
}

void import_csv(const std::vector<std::string>& inputs, OptionReader& options, std::ostream& out) {
  std::vector<Column> columns = read_columns(options);
  const bool header = !options.flag("no-header");
  const std::string delimiter_text = options.text_or("delimiter", ",");
  if (delimiter_text.size() != 1) throw std::invalid_argument("--delimiter must be one character");
  const char delimiter = delimiter_text[0];
  const std::string time_unit = options.text_or("time-unit", "s");
  const double unit = seconds_per_unit(time_unit);
  const std::optional<double> start = options.number("start");
  const std::string name = options.text_or("name", "imported");
  const DemandModel model = read_demand_model(options);
  options.check_all_read("csv");
  if (model.priority_by && model.priority_by->field != "size") {
    if (columns[kPriority].name) {
      throw std::invalid_argument("--priority-by: the priorities come from --priority already");
    }
    columns[kPriorityBy].name = model.priority_by->field;
  }
  if (inputs.empty()) throw std::invalid_argument("no input file");

  Sink sink("csv", inputs, model);
  CsvReader reader(std::move(columns), header, delimiter, unit, start, sink);
  for (const std::string& file : inputs) {
    if (sink.full()) break;  // --limit: read no further.
    reader.read_file(file);
  }
  sink.count("rows", reader.rows());
  if (sink.full()) sink.count("read_up_to_the_limit");

  ojson used = options.as_json();
  used["no-header"] = !header;
  used["delimiter"] = std::string(1, delimiter);
  used["time-unit"] = time_unit;
  used["start"] = reader.start().value_or(0);
  sink.finish(name, std::move(used), out);
}

}  // namespace dfl::format::import_detail
