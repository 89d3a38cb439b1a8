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
  struct Column {
    const char* flag;
    std::optional<std::string> name;
    std::size_t index = 0;
  };
  enum { kTime, kKey, kSize, kPriority, kOwner, kOrigin, kEnd, kPriorityBy };
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
  const bool header = !options.flag("no-header");
  const std::string delimiter_text = options.text_or("delimiter", ",");
  if (delimiter_text.size() != 1) throw std::invalid_argument("--delimiter must be one character");
  const char delimiter = delimiter_text[0];
  const std::string time_unit = options.text_or("time-unit", "s");
  const double unit = seconds_per_unit(time_unit);
  std::optional<double> start = options.number("start");
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
  std::uint64_t rows = 0, taken = 0;
  double last_t = 0;
  std::vector<std::string> fields;
  for (const std::string& file : inputs) {
    if (sink.full()) break;  // --limit: read no further.
    std::ifstream in(file);
    if (!in) throw TraceError::unreadable(file);
    std::size_t line = 0, first_line = 0;
    // Where each column is, from the header row or the numbers given.
    std::vector<std::string> names;
    if (header && !read_record(in, delimiter, names, line, first_line, file)) {
      throw TraceError(file, 1, "-", "is empty: no header row");
    }
    for (Column& c : columns) {
      if (!c.name) continue;
      const std::string& wanted = *c.name;
      std::size_t number = 0;
      const auto [end, error] =
          std::from_chars(wanted.data(), wanted.data() + wanted.size(), number);
      if (error == std::errc{} && end == wanted.data() + wanted.size() && number >= 1) {
        c.index = number - 1;
        continue;
      }
      if (!header) {
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
    while (!sink.full() && read_record(in, delimiter, fields, line, first_line, file)) {
      ++rows;
      if (fields.size() == 1 && fields[0].empty()) {
        sink.skip("empty line");
        continue;
      }
      auto field = [&](int which) -> const std::string& {
        const Column& c = columns[static_cast<std::size_t>(which)];
        if (c.index >= fields.size()) {
          throw TraceError(file, first_line, *c.name,
                           "missing: the row has " + std::to_string(fields.size()) + " fields");
        }
        return fields[c.index];
      };
      auto number = [&](int which) {
        const std::string& text = field(which);
        double value = 0;
        const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
        if (error != std::errc{} || end != text.data() + text.size() || !std::isfinite(value)) {
          throw TraceError(file, first_line, *columns[static_cast<std::size_t>(which)].name,
                           "\"" + text + "\" is not a number");
        }
        return value;
      };
      const double raw_t = number(kTime);
      if (!start) start = raw_t;
      const double t = (raw_t - *start) * unit;
      if (taken > 0 && t < last_t) {
        throw TraceError(file, first_line, *columns[kTime].name,
                         "goes backwards (the log must be in time order)");
      }
      if (t < 0) {
        throw TraceError(file, first_line, *columns[kTime].name,
                         "before the start (" + std::to_string(*start) + ")");
      }
      if (t > kMaxRecordTime) {
        throw TraceError(file, first_line, *columns[kTime].name,
                         "more than 10^12 s after the first row (the trace format's limit)");
      }
      last_t = t;
      ++taken;
      const double bytes = number(kSize);
      if (bytes < 0 || bytes != std::floor(bytes) || bytes > kMaxImportSize) {
        throw TraceError(file, first_line, *columns[kSize].name,
                         "\"" + field(kSize) + "\" is not a size in bytes");
      }
      if (bytes == 0) {
        sink.skip("size 0");
        continue;
      }
      Request r;
      r.t = t;
      r.object = field(kKey);
      if (r.object.empty()) throw TraceError(file, first_line, *columns[kKey].name, "empty");
      r.size = static_cast<std::uint64_t>(bytes);
      if (columns[kPriority].name) {
        const std::string& text = field(kPriority);
        const auto [end, error] =
            std::from_chars(text.data(), text.data() + text.size(), r.priority);
        if (error != std::errc{} || end != text.data() + text.size()) {
          throw TraceError(file, first_line, *columns[kPriority].name,
                           "\"" + text + "\" is not an integer");
        }
      }
      if (columns[kEnd].name && !field(kEnd).empty()) {
        r.end = (number(kEnd) - *start) * unit;
        if (*r.end < t) {
          throw TraceError(file, first_line, *columns[kEnd].name, "before the request's time");
        }
        if (*r.end > kMaxRecordTime) {
          throw TraceError(file, first_line, *columns[kEnd].name,
                           "more than 10^12 s after the first row (the trace format's limit)");
        }
      }
      if (columns[kOwner].name) r.owner = field(kOwner);
      if (columns[kOrigin].name) r.origin = field(kOrigin);
      // Names go into JSON text: they must be UTF-8.
      for (const int which : {kKey, kOwner, kOrigin}) {
        const Column& c = columns[static_cast<std::size_t>(which)];
        if (c.name && !valid_utf8(field(which))) {
          throw TraceError(file, first_line, *c.name, "not valid UTF-8");
        }
      }
      if (columns[kPriorityBy].name) r.priority_value = field(kPriorityBy);
      r.demand = "r" + std::to_string(rows);
      sink.request(r);
    }
  }
  sink.count("rows", rows);
  if (sink.full()) sink.count("read_up_to_the_limit");

  ojson used = options.as_json();
  used["no-header"] = !header;
  used["delimiter"] = std::string(1, delimiter);
  used["time-unit"] = time_unit;
  used["start"] = start.value_or(0);
  sink.finish(name, std::move(used), out);
}

}  // namespace dfl::format::import_detail
