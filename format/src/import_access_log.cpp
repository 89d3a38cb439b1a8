// access-log: the access logs web servers write, nginx's and Apache's. A
// line per response, in the format the server was told (--format): the
// Common and Combined Log Formats by name, or the server's own format
// string, nginx's `log_format` ($remote_addr, $time_local, "$request" ...)
// or Apache's `LogFormat` (%h, %t, "%r", %>s, %b ...).
//
// Each GET answered 200 or 206 is a demand for the artifact its host and URI
// name, by the owner --owner names (the client's address by default). When
// the demand began: nginx writes a line when the response has ended, so its
// time is the end and the start is the end minus $request_time; Apache's %t
// is when the request came, and the end is that plus %D or %T (--time-is
// says which; without a duration, start and end are the line's time). A
// client that closed the request early is a cancel at its end: nginx's 499
// (--abandon-status), and a 200 that sent fewer bytes than its URI's largest
// 200 (the artifact is immutable, so it was cut short). An artifact's size
// is its largest 200; an URI only ever answered 206 takes its largest
// response, and counts so. 304 (the client's cache had it), redirects,
// errors and other methods are skipped, each counted by why.
//
// Lines come in the order responses ended, not the order requests began, so
// the requests are kept (a compact record each, its strings interned) and
// sorted by start; a .gz log is read as it is (zlib).
#include <absl/strings/ascii.h>
#include <absl/strings/str_split.h>
#include <absl/time/time.h>
#include <zlib.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <memory>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "demandflight/format/trace.h"
#include "import_sink.h"

namespace dfl::format::import_detail {
namespace {

// The fields a format may name, as nginx names them (Apache's directives
// are mapped to these).
enum class Field : std::uint8_t {
  other,  // Any other variable: matched, not used (unless --owner names it).
  remote_addr,
  remote_user,
  time_local,    // 06/Dec/2026:02:11:55 +0000
  time_bracketed,  // Apache's %t: [06/Dec/2026:02:11:55 +0000]
  time_iso8601,  // 2026-12-06T02:11:55+00:00
  msec,          // 1796523115.123 (seconds since the epoch)
  request,       // GET /a/b?c HTTP/1.1
  request_method,
  request_uri,   // Path and query.
  status,
  body_bytes_sent,
  bytes_sent,       // With the headers: used only without body_bytes_sent.
  request_time,     // Seconds (nginx $request_time, Apache %T).
  request_time_us,  // Microseconds (Apache %D).
  host,
  request_completion,  // nginx: "OK" when the response was sent whole, else empty.
};

struct Token {
  bool is_field = false;
  std::string text;  // A literal's text, or the field's name as written.
  Field field = Field::other;
  std::string name;  // The field's canonical name (nginx's), for --owner.
};

Field field_named(const std::string& name) {
  static const std::unordered_map<std::string, Field> known = {
      {"remote_addr", Field::remote_addr},
      {"remote_user", Field::remote_user},
      {"time_local", Field::time_local},
      {"time_iso8601", Field::time_iso8601},
      {"msec", Field::msec},
      {"request", Field::request},
      {"request_method", Field::request_method},
      {"request_uri", Field::request_uri},
      {"status", Field::status},
      {"body_bytes_sent", Field::body_bytes_sent},
      {"bytes_sent", Field::bytes_sent},
      {"request_time", Field::request_time},
      {"host", Field::host},
      {"http_host", Field::host},
      {"server_name", Field::host},
      {"request_completion", Field::request_completion},
  };
  auto it = known.find(name);
  return it == known.end() ? Field::other : it->second;
}

// The named formats: the Common and Combined Log Formats (nginx's `combined`
// is Apache's; nginx writes 0 where Apache's %b writes "-").
const char* named_format(const std::string& name) {
  if (name == "common") return "$remote_addr - $remote_user [$time_local] \"$request\" $status $body_bytes_sent";
  if (name == "combined") {
    return "$remote_addr - $remote_user [$time_local] \"$request\" $status $body_bytes_sent "
           "\"$http_referer\" \"$http_user_agent\"";
  }
  return nullptr;
}

void add_literal(std::vector<Token>& tokens, std::string_view text) {
  if (text.empty()) return;
  if (!tokens.empty() && !tokens.back().is_field) {
    tokens.back().text += text;
  } else {
    tokens.push_back(Token{false, std::string(text), Field::other, {}});
  }
}

void add_field(std::vector<Token>& tokens, std::string written, std::string name, Field field,
               const std::string& spec) {
  if (!tokens.empty() && tokens.back().is_field) {
    throw std::invalid_argument("--format: " + tokens.back().text + " and " + written +
                                " have nothing between them, so a line cannot be split (\"" +
                                spec + "\")");
  }
  tokens.push_back(Token{true, std::move(written), field, std::move(name)});
}

// nginx's log_format: $name or ${name}; everything else is literal.
std::vector<Token> compile_nginx(const std::string& spec) {
  std::vector<Token> tokens;
  std::size_t i = 0;
  while (i < spec.size()) {
    const std::size_t dollar = spec.find('$', i);
    add_literal(tokens, std::string_view(spec).substr(i, dollar - i));  // npos: the rest.
    if (dollar == std::string::npos) break;
    std::size_t from = dollar + 1, to = from;
    const bool braced = from < spec.size() && spec[from] == '{';
    if (braced) ++from, to = from;
    while (to < spec.size() && (std::isalnum(static_cast<unsigned char>(spec[to])) || spec[to] == '_'))
      ++to;
    if (to == from || (braced && (to >= spec.size() || spec[to] != '}'))) {
      throw std::invalid_argument("--format: a '$' at character " + std::to_string(dollar + 1) +
                                  " is not followed by a variable name (\"" + spec + "\")");
    }
    const std::string name = spec.substr(from, to - from);
    i = braced ? to + 1 : to;
    add_field(tokens, "$" + name, name, field_named(name), spec);
  }
  return tokens;
}

// Apache's LogFormat: %X, %>X, %<X, %{name}X, %% (modifiers like %400,501{...}
// are not supported: said so).
std::vector<Token> compile_apache(const std::string& spec) {
  std::vector<Token> tokens;
  std::size_t i = 0;
  while (i < spec.size()) {
    const std::size_t percent = spec.find('%', i);
    add_literal(tokens, std::string_view(spec).substr(i, percent - i));  // npos: the rest.
    if (percent == std::string::npos) break;
    std::size_t at = percent + 1;
    if (at < spec.size() && spec[at] == '%') {
      add_literal(tokens, "%");
      i = at + 1;
      continue;
    }
    while (at < spec.size() && (spec[at] == '>' || spec[at] == '<')) ++at;
    std::string argument;
    if (at < spec.size() && spec[at] == '{') {
      const std::size_t close = spec.find('}', at);
      if (close == std::string::npos) {
        throw std::invalid_argument("--format: a '%{' at character " + std::to_string(percent + 1) +
                                    " is not closed (\"" + spec + "\")");
      }
      argument = spec.substr(at + 1, close - at - 1);
      at = close + 1;
    }
    if (at >= spec.size() || !std::isalpha(static_cast<unsigned char>(spec[at]))) {
      throw std::invalid_argument("--format: the directive at character " +
                                  std::to_string(percent + 1) + " is not %X, %>X or %{NAME}X (\"" +
                                  spec + "\")");
    }
    const char directive = spec[at];
    const std::string written = spec.substr(percent, at + 1 - percent);
    i = at + 1;
    Field field = Field::other;
    std::string name;
    switch (directive) {
      case 'h': case 'a': field = Field::remote_addr; name = "remote_addr"; break;
      case 'u': field = Field::remote_user; name = "remote_user"; break;
      case 't':
        if (!argument.empty()) {
          throw std::invalid_argument("--format: " + written +
                                      ": a time in its own format is not supported (use %t)");
        }
        field = Field::time_bracketed; name = "time_local"; break;
      case 'r': field = Field::request; name = "request"; break;
      case 'm': field = Field::request_method; name = "request_method"; break;
      case 'U': name = "uri"; break;
      case 's': field = Field::status; name = "status"; break;
      case 'b': case 'B': field = Field::body_bytes_sent; name = "body_bytes_sent"; break;
      case 'O': field = Field::bytes_sent; name = "bytes_sent"; break;
      case 'T': field = Field::request_time; name = "request_time"; break;
      case 'D': field = Field::request_time_us; name = "request_time_us"; break;
      case 'v': case 'V': field = Field::host; name = "host"; break;
      case 'i': {
        // A request header, named as nginx does: %{User-Agent}i is http_user_agent.
        name = "http_" + absl::AsciiStrToLower(argument);
        std::replace(name.begin(), name.end(), '-', '_');
        if (name == "http_host") field = Field::host;
        break;
      }
      default: name = written; break;
    }
    add_field(tokens, written, name, field, spec);
  }
  return tokens;
}

// One line split by the format: each field's text, or why it does not match.
bool split_line(const std::vector<Token>& tokens, std::string_view line,
                std::vector<std::string_view>& values, std::string& why) {
  values.assign(tokens.size(), {});
  std::size_t at = 0;
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    const Token& t = tokens[i];
    if (!t.is_field) {
      if (line.substr(at, t.text.size()) != t.text) {
        why = "expected \"" + t.text + "\" at column " + std::to_string(at + 1);
        return false;
      }
      at += t.text.size();
      continue;
    }
    if (i + 1 == tokens.size()) {
      values[i] = line.substr(at);
      at = line.size();
      continue;
    }
    // Up to the next literal; inside quotes a backslash escapes what follows
    // (Apache writes \" in a quoted field; nginx writes \x22).
    const std::string& next = tokens[i + 1].text;
    const bool quoted = i > 0 && !tokens[i - 1].text.empty() && tokens[i - 1].text.back() == '"';
    std::size_t end = at;
    for (;;) {
      if (end >= line.size()) {
        why = t.text + ": no \"" + next + "\" after it (column " + std::to_string(at + 1) + ")";
        return false;
      }
      if (quoted && line[end] == '\\') {
        end += 2;
        continue;
      }
      if (line.compare(end, next.size(), next) == 0) break;
      ++end;
    }
    values[i] = line.substr(at, end - at);
    at = end;
  }
  if (at != line.size()) {
    why = "more text after the format's end (column " + std::to_string(at + 1) + ")";
    return false;
  }
  return true;
}

// Seconds since the epoch, or nullopt.
std::optional<double> parse_time(Field field, std::string_view text) {
  if (field == Field::msec) return parse_double(text);
  if (field == Field::time_bracketed) {
    if (text.size() < 2 || text.front() != '[' || text.back() != ']') return std::nullopt;
    text = text.substr(1, text.size() - 2);
    field = Field::time_local;
  }
  absl::Time t;
  std::string error;
  const char* format = field == Field::time_local ? "%d/%b/%Y:%H:%M:%S %z" : "%Y-%m-%d%ET%H:%M:%S%Ez";
  if (!absl::ParseTime(format, std::string(text), &t, &error)) return std::nullopt;
  return absl::ToDoubleSeconds(t - absl::UnixEpoch());
}


struct Entry {
  double start = 0, end = 0;  // Seconds since the epoch.
  std::uint64_t bytes = 0;
  std::uint64_t number = 0;  // Its line, for a stable order.
  std::uint32_t object = 0, owner = 0, origin = 0, field = 0;
  std::uint16_t status = 0;
  bool abandoned = false;  // An --abandon-status.
  bool incomplete = false;  // $request_completion is not "OK".
};

// Lines of a plain or gzip-compressed file.
class LineReader {
 public:
  explicit LineReader(const std::string& file) : file_(file), gz_(::gzopen(file.c_str(), "rb")) {
    if (gz_ == nullptr) throw TraceError::unreadable(file, "cannot open the file");
    ::gzbuffer(gz_, 1 << 17);
  }
  ~LineReader() {
    if (gz_ != nullptr) ::gzclose(gz_);
  }
  LineReader(const LineReader&) = delete;
  LineReader& operator=(const LineReader&) = delete;
  bool next(std::string& line) {
    line.clear();
    char buffer[8192];
    for (;;) {
      if (::gzgets(gz_, buffer, sizeof buffer) == nullptr) {
        int code = 0;
        const char* message = ::gzerror(gz_, &code);
        if (code != Z_OK && code != Z_STREAM_END) {
          throw TraceError(file_, number_ + 1, "-",
                           std::string("cannot be read: ") +
                               (code == Z_ERRNO ? std::strerror(errno) : message));
        }
        if (line.empty()) return false;
        break;
      }
      line += buffer;
      if (!line.empty() && line.back() == '\n') break;
    }
    ++number_;
    if (!line.empty() && line.back() == '\n') line.pop_back();
    if (!line.empty() && line.back() == '\r') line.pop_back();
    return true;
  }
  std::size_t number() const { return number_; }

 private:
  std::string file_;
  gzFile gz_;
  std::size_t number_ = 0;
};

}  // namespace

std::vector<ImportOption> access_log_options() {
  return {
      {"format",
       "combined, common, or the server's own format string: nginx's log_format ($remote_addr "
       "[$time_local] \"$request\" $status $body_bytes_sent $request_time ...) or Apache's "
       "LogFormat (%h %t \"%r\" %>s %b %D ...)",
       false, false, "combined"},
      {"time-is",
       "what a line's time is: end (nginx writes a line when the response ended) or start "
       "(Apache's %t); the default is end, start for an Apache format",
       false, false, ""},
      {"owner-by",
       "the fields that name a demand's owner, joined by +: addr (remote_addr), agent "
       "(http_user_agent), addr+agent, any field of the format; or none: one owner (default: "
       "addr if the format has it)",
       false, false, ""},
      {"abandon-status",
       "statuses that mean the client closed the request: a demand cancelled at its end",
       false, false, "499"},
      {"methods", "the methods that are downloads", false, false, "GET"},
      {"strip-query", "the artifact is the path without its query (?...)", false, true, ""},
      {"bad-lines",
       "a line that does not match the format: error (stop there) or skip (count it in x-import)",
       false, false, "error"},
      {"origin", "the origin when the format has no host", false, false, "origin"},
  };
}

void import_access_log(const std::vector<std::string>& inputs, OptionReader& options,
                       std::ostream& out) {
  const std::string format_option = options.text_or("format", "combined");
  const char* named = named_format(format_option);
  const std::string spec = named != nullptr ? named : format_option;
  const bool apache = named == nullptr && spec.find('%') != std::string::npos &&
                      spec.find('$') == std::string::npos;
  if (named == nullptr && spec.find('%') == std::string::npos && spec.find('$') == std::string::npos) {
    throw std::invalid_argument("--format: \"" + spec +
                                "\" is not combined, common, an nginx log_format ($name ...) or "
                                "an Apache LogFormat (%h ...)");
  }
  const std::vector<Token> tokens = apache ? compile_apache(spec) : compile_nginx(spec);
  const std::string time_is = options.text_or("time-is", apache ? "start" : "end");
  if (time_is != "start" && time_is != "end") {
    throw std::invalid_argument("--time-is: \"" + time_is + "\" is not start or end");
  }
  const std::optional<std::string> owner_option = options.text("owner-by");
  std::set<int> abandon_status;
  const std::vector<std::string> statuses = absl::StrSplit(options.text_or("abandon-status", "499"), ',');
  for (const std::string& item : statuses) {
    const std::optional<double> code = parse_double(item);
    if (!code || *code < 100 || *code > 999 || *code != std::floor(*code)) {
      throw std::invalid_argument("--abandon-status: \"" + item + "\" is not an HTTP status");
    }
    abandon_status.insert(static_cast<int>(*code));
  }
  std::vector<std::string> methods = absl::StrSplit(options.text_or("methods", "GET"), ',');
  const bool strip_query = options.flag("strip-query");
  const std::string bad_lines = options.text_or("bad-lines", "error");
  if (bad_lines != "error" && bad_lines != "skip") {
    throw std::invalid_argument("--bad-lines: \"" + bad_lines + "\" is not error or skip");
  }
  const std::string default_origin = options.text_or("origin", "origin");
  const std::string name = options.text_or("name", "imported");
  const DemandModel model = read_demand_model(options);
  options.check_all_read("access-log");
  if (inputs.empty()) throw std::invalid_argument("no input file");

  // Where each field is.
  auto find = [&](Field f) -> std::optional<std::size_t> {
    for (std::size_t i = 0; i < tokens.size(); ++i)
      if (tokens[i].is_field && tokens[i].field == f) return i;
    return std::nullopt;
  };
  auto find_name = [&](const std::string& wanted) -> std::optional<std::size_t> {
    for (std::size_t i = 0; i < tokens.size(); ++i)
      if (tokens[i].is_field && tokens[i].name == wanted) return i;
    return std::nullopt;
  };
  std::optional<std::size_t> time_at;
  Field time_field = Field::other;
  for (Field f : {Field::msec, Field::time_iso8601, Field::time_local, Field::time_bracketed}) {
    if (auto at = find(f)) {
      time_at = at;
      time_field = f;
      break;
    }
  }
  const std::optional<std::size_t> request_at = find(Field::request),
                                    method_at = find(Field::request_method),
                                    uri_at = find(Field::request_uri), status_at = find(Field::status),
                                    host_at = find(Field::host),
                                    duration_at = find(Field::request_time),
                                    duration_us_at = find(Field::request_time_us),
                                    completion_at = find(Field::request_completion);
  std::optional<std::size_t> bytes_at = find(Field::body_bytes_sent);
  if (!bytes_at) bytes_at = find(Field::bytes_sent);
  std::optional<std::size_t> uri_or_name = uri_at ? uri_at : find_name("uri");
  std::string missing;
  if (!time_at) missing = "a time ($time_local, $time_iso8601, $msec or %t)";
  else if (!status_at) missing = "the status ($status or %>s)";
  else if (!bytes_at) missing = "the bytes sent ($body_bytes_sent, $bytes_sent, %b or %B)";
  else if (!request_at && !uri_or_name) missing = "the request ($request or %r) or its URI ($request_uri or %U)";
  if (!missing.empty()) {
    throw std::invalid_argument("--format: has no field for " + missing + " (\"" + spec + "\")");
  }
  // The client's address by default, when the format has it.
  const std::string owner_field =
      owner_option ? *owner_option : (find_name("remote_addr") ? "addr" : "none");
  std::vector<std::size_t> owner_at;
  if (owner_field != "none") {
    const std::vector<std::string> parts = absl::StrSplit(owner_field, '+');
    for (std::string part : parts) {
      if (part == "addr") part = "remote_addr";
      if (part == "agent") part = "http_user_agent";
      const std::optional<std::size_t> at = find_name(part);
      if (!at) {
        std::string known;
        for (const Token& t : tokens)
          if (t.is_field) known += (known.empty() ? "" : ", ") + t.name;
        throw std::invalid_argument("--owner-by: the format has no field \"" + part +
                                    "\" (it has: " + known + "; or none)");
      }
      owner_at.push_back(*at);
    }
  }
  std::optional<std::size_t> priority_at;
  if (model.priority_by && model.priority_by->field != "size") {
    priority_at = find_name(model.priority_by->field);
    if (!priority_at) {
      throw std::invalid_argument("--priority-by: the format has no field \"" +
                                  model.priority_by->field + "\" (or size)");
    }
  }

  Sink sink("access-log", inputs, model);
  Names names;
  std::vector<Entry> entries;
  std::unordered_map<std::uint32_t, std::uint64_t> full_size, partial_size;  // By object.
  std::uint64_t lines = 0, number = 0;
  std::vector<std::string_view> values;
  std::string line, why;
  for (const std::string& file : inputs) {
    LineReader reader(file);
    while (reader.next(line)) {
      ++lines;
      ++number;
      const std::size_t at_line = reader.number();
      if (line.empty()) {
        sink.skip("empty line");
        continue;
      }
      if (!split_line(tokens, line, values, why)) {
        if (bad_lines == "skip") {
          sink.skip("does not match the format");
          continue;
        }
        throw TraceError(file, at_line, "-",
                         "does not match the format: " + why +
                             " (--format says how the server wrote its lines; --bad-lines skip "
                             "counts such lines)");
      }
      auto field_error = [&](std::size_t at, const std::string& what) {
        return TraceError(file, at_line, tokens[at].text,
                          "\"" + std::string(values[at]) + "\" " + what);
      };
      // The method and the URI: from $request ("GET /a HTTP/1.1"), or fields of their own.
      std::string_view method, uri;
      if (method_at) method = values[*method_at];
      if (uri_or_name) uri = values[*uri_or_name];
      if (request_at) {
        const std::string_view request = values[*request_at];
        const std::size_t space = request.find(' ');
        const std::size_t second = space == std::string_view::npos ? space : request.find(' ', space + 1);
        if (space == std::string_view::npos || second == std::string_view::npos || space == 0) {
          sink.skip("request not METHOD URI PROTOCOL");
          continue;
        }
        if (!method_at) method = request.substr(0, space);
        if (!uri_or_name) uri = request.substr(space + 1, second - space - 1);
      }
      if (std::find(methods.begin(), methods.end(), method) == methods.end()) {
        sink.skip("method not --methods");
        continue;
      }
      const std::optional<double> status_number = parse_double(values[*status_at]);
      if (!status_number || *status_number < 100 || *status_number > 999) {
        throw field_error(*status_at, "is not an HTTP status");
      }
      const int status = static_cast<int>(*status_number);
      const bool abandoned = abandon_status.count(status) != 0;
      if (!abandoned && status != 200 && status != 206) {
        if (status == 304) {
          sink.skip("status 304 (the client's cache had it)");
        } else {
          sink.skip("status " + std::to_string(status));
        }
        continue;
      }
      const std::string_view bytes_text = values[*bytes_at];
      std::uint64_t bytes = 0;
      if (bytes_text != "-") {  // Apache's %b for none.
        const std::optional<double> b = parse_double(bytes_text);
        if (!b || *b < 0 || *b != std::floor(*b) || *b > kMaxImportSize) {
          throw field_error(*bytes_at, "is not a size in bytes");
        }
        bytes = static_cast<std::uint64_t>(*b);
      }
      const std::optional<double> t = parse_time(time_field, values[*time_at]);
      if (!t || *t < 0 || *t > 1e11) {  // From 1970 to about the year 5000.
        throw field_error(*time_at, time_field == Field::msec
                                        ? "is not seconds since the epoch"
                                        : "is not a time (06/Dec/2026:02:11:55 +0000)");
      }
      double duration = 0;
      if (duration_at || duration_us_at) {
        const std::size_t at = duration_at ? *duration_at : *duration_us_at;
        const std::optional<double> d = parse_double(values[at]);
        if (!d || *d < 0 || *d > (duration_at ? 1e9 : 1e15)) throw field_error(at, "is not a duration");
        duration = duration_at ? *d : *d / 1e6;
      }
      if (strip_query) uri = uri.substr(0, uri.find('?'));
      const std::string_view host = host_at && values[*host_at] != "-" ? values[*host_at] : "";
      const std::string object = std::string(host) + std::string(uri);
      std::string owner = owner_at.empty() ? "log" : "";
      for (std::size_t at : owner_at)
        owner += (owner.empty() ? "" : " ") + std::string(values[at]);
      for (const std::string_view text : {std::string_view(object), std::string_view(owner)}) {
        if (!valid_utf8(text)) throw TraceError(file, at_line, "-", "not valid UTF-8");
      }
      Entry e;
      e.start = time_is == "end" ? *t - duration : *t;
      e.end = time_is == "end" ? *t : *t + duration;
      e.bytes = bytes;
      e.number = number;
      e.object = names.id(object);
      e.owner = names.id(owner);
      e.origin = names.id(host.empty() ? std::string_view(default_origin) : host);
      e.field = priority_at ? names.id(values[*priority_at]) : 0;
      e.status = static_cast<std::uint16_t>(status);
      e.abandoned = abandoned;
      e.incomplete = completion_at && values[*completion_at] != "OK";
      if (status == 200) {
        std::uint64_t& size = full_size[e.object];
        size = std::max(size, bytes);
      } else {
        std::uint64_t& size = partial_size[e.object];
        size = std::max(size, bytes);
      }
      entries.push_back(e);
    }
  }
  std::stable_sort(entries.begin(), entries.end(),
                   [](const Entry& a, const Entry& b) { return a.start < b.start; });
  const double start = entries.empty() ? 0.0 : entries.front().start;
  std::uint64_t cut_short = 0, from_206 = 0;
  std::set<std::uint32_t> sized_by_206;
  for (const Entry& e : entries) {
    std::uint64_t size = 0;
    if (auto it = full_size.find(e.object); it != full_size.end() && it->second > 0) {
      size = it->second;
    } else {
      size = partial_size[e.object];
      if (size > 0 && sized_by_206.insert(e.object).second) ++from_206;
    }
    if (size == 0) {
      sink.skip("size unknown (no byte sent for its URI)");
      continue;
    }
    Request r;
    r.t = e.start - start;
    r.demand = "l" + std::to_string(e.number);
    r.object = names[e.object];
    r.origin = names[e.origin];
    r.owner = names[e.owner];
    r.size = size;
    if (priority_at) r.priority_value = names[e.field];
    if (e.abandoned) {
      r.end = e.end - start;
    } else if (e.status == 200 && (e.bytes < size || e.incomplete)) {
      r.end = e.end - start;  // Cut short: the client closed it mid-body.
      ++cut_short;
    }
    sink.request(r);
  }
  sink.count("lines", lines);
  sink.count("abandoned_by_status", static_cast<std::uint64_t>(std::count_if(
                                         entries.begin(), entries.end(),
                                         [](const Entry& e) { return e.abandoned; })));
  sink.count("cut_short", cut_short);
  sink.count("sized_by_206_only", from_206);

  ojson used = options.as_json();
  used["format"] = spec;
  used["time-is"] = time_is;
  used["owner-by"] = owner_field;
  used["start"] = start;
  sink.finish(name, std::move(used), out);
}

}  // namespace dfl::format::import_detail
