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

#include "demandflight/format/import.h"
#include "demandflight/format/trace.h"

namespace dfl::format {
namespace {

using ojson = nlohmann::ordered_json;

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

double seconds_per_unit(const std::string& unit) {
  if (unit == "s") return 1;
  if (unit == "ms") return 1e-3;
  if (unit == "us") return 1e-6;
  if (unit == "ns") return 1e-9;
  throw std::invalid_argument("--time-unit: \"" + unit + "\" is not s, ms, us or ns");
}

struct Pending {
  double t;
  std::uint64_t seq;
  std::string demand;
  bool operator>(const Pending& o) const { return t != o.t ? t > o.t : seq > o.seq; }
};

class Writer {
 public:
  Writer() : body_(std::tmpfile(), &std::fclose) {
    if (!body_) throw std::runtime_error("import: cannot create a temporary file");
  }
  void line(const ojson& record) {
    const std::string text = record.dump();
    if (std::fwrite(text.data(), 1, text.size(), body_.get()) != text.size() ||
        std::fputc('\n', body_.get()) == EOF) {
      throw std::runtime_error("import: writing the temporary file failed");
    }
  }
  void finish(const ojson& header, std::ostream& out) {
    out << header.dump() << '\n';
    std::rewind(body_.get());
    char buffer[1 << 16];
    for (;;) {
      const std::size_t n = std::fread(buffer, 1, sizeof buffer, body_.get());
      if (n == 0) break;
      out.write(buffer, static_cast<std::streamsize>(n));
    }
    if (std::ferror(body_.get())) throw std::runtime_error("import: reading the temporary file failed");
    if (!out) throw std::runtime_error("import: writing the trace failed");
  }

 private:
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> body_;
};

}  // namespace

void import_csv(const std::vector<std::string>& inputs, const CsvImport& o, std::ostream& out) {
  if (inputs.empty()) throw std::invalid_argument("import csv: no input file");
  const double unit = seconds_per_unit(o.time_unit);
  struct Column {
    const char* flag;
    const std::optional<std::string>* name;
    std::size_t index = 0;
  };
  const std::optional<std::string> time(o.time), key(o.key), size(o.size);
  std::vector<Column> columns = {{"--time", &time},         {"--key", &key},
                                 {"--size", &size},         {"--priority", &o.priority},
                                 {"--owner", &o.owner},     {"--origin", &o.origin},
                                 {"--end", &o.end}};
  for (std::size_t i = 0; i < 3; ++i) {
    if (!columns[i].name->has_value() || (*columns[i].name)->empty()) {
      throw std::invalid_argument(std::string("import csv: ") + columns[i].flag +
                                  " COLUMN is required");
    }
  }
  enum { kTime, kKey, kSize, kPriority, kOwner, kOrigin, kEnd };

  Writer writer;
  std::map<std::string, std::uint64_t> skipped;
  std::uint64_t rows = 0, demands = 0, cancels = 0, size_changes = 0, skipped_rows = 0;
  struct Known {
    std::string id;
    std::uint64_t size;
    std::uint32_t revision;
  };
  std::unordered_map<std::string, Known> artifacts;
  std::priority_queue<Pending, std::vector<Pending>, std::greater<>> pending;
  std::uint64_t seq = 0;
  std::optional<double> start = o.start;
  double last_t = 0;
  auto flush_cancels = [&](double up_to) {
    while (!pending.empty() && pending.top().t <= up_to) {
      writer.line(ojson{{"op", "cancel"}, {"t", pending.top().t}, {"demand", pending.top().demand}});
      ++cancels;
      pending.pop();
    }
  };

  std::vector<std::string> fields;
  for (const std::string& file : inputs) {
    std::ifstream in(file);
    if (!in) throw TraceError(file, 0, "-", "cannot be read");
    std::size_t line = 0, first_line = 0;
    // Where each column is, from the header row or the numbers given.
    std::vector<std::string> names;
    if (o.header && !read_record(in, o.delimiter, names, line, first_line, file)) {
      throw TraceError(file, 1, "-", "is empty: no header row");
    }
    for (Column& c : columns) {
      if (!c.name->has_value()) continue;
      const std::string& wanted = **c.name;
      std::size_t number = 0;
      const auto [end, error] = std::from_chars(wanted.data(), wanted.data() + wanted.size(), number);
      if (error == std::errc{} && end == wanted.data() + wanted.size() && number >= 1) {
        c.index = number - 1;
        continue;
      }
      if (!o.header) {
        throw std::invalid_argument(std::string("import csv: ") + c.flag + " " + wanted +
                                    ": without a header row, columns are numbers from 1");
      }
      auto it = std::find(names.begin(), names.end(), wanted);
      if (it == names.end()) {
        std::string known;
        for (const std::string& n : names)
          known += (known.empty() ? "" : ", ") + n;
        throw TraceError(file, 1, c.flag + 2, "no column \"" + wanted + "\" (the header has: " +
                                                  known + ")");
      }
      c.index = static_cast<std::size_t>(it - names.begin());
    }
    while (read_record(in, o.delimiter, fields, line, first_line, file)) {
      ++rows;
      if (fields.size() == 1 && fields[0].empty()) {
        ++skipped["empty line"];
        continue;
      }
      auto field = [&](int which) -> const std::string& {
        const Column& c = columns[static_cast<std::size_t>(which)];
        if (c.index >= fields.size()) {
          throw TraceError(file, first_line, **c.name,
                           "missing: the row has " + std::to_string(fields.size()) + " fields");
        }
        return fields[c.index];
      };
      auto number = [&](int which) {
        const std::string& text = field(which);
        double value = 0;
        const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
        if (error != std::errc{} || end != text.data() + text.size() || !std::isfinite(value)) {
          throw TraceError(file, first_line, **columns[static_cast<std::size_t>(which)].name,
                           "\"" + text + "\" is not a number");
        }
        return value;
      };
      const double raw_t = number(kTime);
      if (!start) start = raw_t;
      const double t = (raw_t - *start) * unit;
      if (demands + skipped_rows > 0 && t < last_t) {
        throw TraceError(file, first_line, o.time,
                         "goes backwards (the log must be in time order)");
      }
      if (t < 0) {
        throw TraceError(file, first_line, o.time,
                         "before the start (" + std::to_string(*start) + ")");
      }
      last_t = t;
      const double bytes = number(kSize);
      if (bytes < 0 || bytes != std::floor(bytes)) {
        throw TraceError(file, first_line, o.size, "\"" + field(kSize) + "\" is not a size in bytes");
      }
      if (bytes == 0) {
        ++skipped["size 0"];
        ++skipped_rows;
        continue;
      }
      const std::string& object = field(kKey);
      if (object.empty()) throw TraceError(file, first_line, o.key, "empty");
      long long priority = 1;
      if (o.priority) {
        const std::string& text = field(kPriority);
        const auto [end, error] =
            std::from_chars(text.data(), text.data() + text.size(), priority);
        if (error != std::errc{} || end != text.data() + text.size()) {
          throw TraceError(file, first_line, *o.priority, "\"" + text + "\" is not an integer");
        }
      }
      std::optional<double> end_t;
      if (o.end && !field(kEnd).empty()) {
        end_t = (number(kEnd) - *start) * unit;
        if (*end_t < t) throw TraceError(file, first_line, *o.end, "before the request's time");
      }
      flush_cancels(t);
      // An object whose size changed is a new revision of it.
      const auto size_bytes = static_cast<std::uint64_t>(bytes);
      auto [it, fresh] = artifacts.try_emplace(object, Known{object, size_bytes, 1});
      if (!fresh && it->second.size != size_bytes) {
        ++size_changes;
        it->second.size = size_bytes;
        ++it->second.revision;
        it->second.id = object + "@" + std::to_string(it->second.revision);
        fresh = true;
      }
      if (fresh) {
        writer.line(ojson{{"op", "artifact"},
                          {"id", it->second.id},
                          {"resource", object},
                          {"revision", "r" + std::to_string(it->second.revision)},
                          {"target", "import"},
                          {"generation", 0},
                          {"size", size_bytes},
                          {"origin", o.origin ? field(kOrigin) : std::string("origin")}});
      }
      const std::string demand = "r" + std::to_string(rows);
      writer.line(ojson{{"op", "subscribe"},
                        {"t", t},
                        {"demand", demand},
                        {"owner", o.owner ? field(kOwner) : std::string("log")},
                        {"artifact", it->second.id},
                        {"priority", priority}});
      ++demands;
      if (end_t) pending.push(Pending{*end_t, seq++, demand});
    }
  }
  flush_cancels(std::numeric_limits<double>::infinity());

  ojson options{{"time", o.time}, {"key", o.key}, {"size", o.size}};
  for (const Column& c : columns) {
    if (c.name->has_value() && std::string_view(c.flag) != "--time" &&
        std::string_view(c.flag) != "--key" && std::string_view(c.flag) != "--size") {
      options[c.flag + 2] = **c.name;
    }
  }
  options["header"] = o.header;
  options["delimiter"] = std::string(1, o.delimiter);
  options["time_unit"] = o.time_unit;
  options["start"] = start.value_or(0);
  ojson skipped_json = ojson::object();
  for (const auto& [why, n] : skipped)
    skipped_json[why] = n;
  ojson header{{"format", "demandflight-trace"},
               {"version", 1},
               {"name", o.name},
               {"seed", o.seed},
               {"x-import",
                {{"format", "csv"},
                 {"inputs", inputs},
                 {"options", options},
                 {"rows", rows},
                 {"demands", demands},
                 {"artifacts", artifacts.size() + size_changes},
                 {"size_changes", size_changes},
                 {"cancels", cancels},
                 {"skipped", skipped_json}}}};
  writer.finish(header, out);
}

}  // namespace dfl::format
