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

// The options of an access-log import, each checked as it is read.
struct LogOptions {
  std::string spec;  // The format string (a named format's text).
  bool apache = false;
  std::vector<Token> tokens;
  std::string time_is;
  std::optional<std::string> owner_option;
  std::set<int> abandon_status;
  std::vector<std::string> methods;
  bool strip_query = false;
  std::string bad_lines;
  std::string default_origin;
  std::string name;
  DemandModel model;
};

// --abandon-status: the statuses that mean the client closed the request.
std::set<int> read_abandon_status(OptionReader& options) {
  std::set<int> abandon_status;
  const std::vector<std::string> statuses =
      absl::StrSplit(options.text_or("abandon-status", "499"), ',');
  for (const std::string& item : statuses) {
    const std::optional<double> code = parse_double(item);
    if (!code || *code < 100 || *code > 999 || *code != std::floor(*code)) {
      throw std::invalid_argument("--abandon-status: \"" + item + "\" is not an HTTP status");
    }
    abandon_status.insert(static_cast<int>(*code));
  }
  return abandon_status;
}

// The import's options, read in order (the format compiled into tokens).
LogOptions read_log_options(OptionReader& options) {
  LogOptions o;
  const std::string format_option = options.text_or("format", "combined");
  const char* named = named_format(format_option);
  o.spec = named != nullptr ? named : format_option;
  o.apache = named == nullptr && o.spec.find('%') != std::string::npos &&
             o.spec.find('$') == std::string::npos;
  if (named == nullptr && o.spec.find('%') == std::string::npos &&
      o.spec.find('$') == std::string::npos) {
    throw std::invalid_argument("--format: \"" + o.spec +
                                "\" is not combined, common, an nginx log_format ($name ...) or "
                                "an Apache LogFormat (%h ...)");
  }
  o.tokens = o.apache ? compile_apache(o.spec) : compile_nginx(o.spec);
  o.time_is = options.text_or("time-is", o.apache ? "start" : "end");
  if (o.time_is != "start" && o.time_is != "end") {
    throw std::invalid_argument("--time-is: \"" + o.time_is + "\" is not start or end");
  }
  o.owner_option = options.text("owner-by");
  o.abandon_status = read_abandon_status(options);
  std::vector<std::string> methods = absl::StrSplit(options.text_or("methods", "GET"), ',');
  o.methods = std::move(methods);
  o.strip_query = options.flag("strip-query");
  o.bad_lines = options.text_or("bad-lines", "error");
  if (o.bad_lines != "error" && o.bad_lines != "skip") {
    throw std::invalid_argument("--bad-lines: \"" + o.bad_lines + "\" is not error or skip");
  }
  o.default_origin = options.text_or("origin", "origin");
  o.name = options.text_or("name", "imported");
  o.model = read_demand_model(options);
  return o;
}

// Where each field the import reads is in a line: its token's index.
struct Layout {
  std::optional<std::size_t> time_at;
  Field time_field = Field::other;
  std::optional<std::size_t> request_at, method_at, status_at, host_at, duration_at,
      duration_us_at, completion_at, bytes_at, uri_or_name, priority_at;
  std::string owner_field;  // As --owner-by names it, or its default.
  std::vector<std::size_t> owner_at;
};

// The first field of the format that is `f`.
std::optional<std::size_t> find_field(const std::vector<Token>& tokens, Field f) {
  for (std::size_t i = 0; i < tokens.size(); ++i)
    if (tokens[i].is_field && tokens[i].field == f) return i;
  return std::nullopt;
}

// The first field of the format whose (canonical) name is `wanted`.
std::optional<std::size_t> find_named(const std::vector<Token>& tokens, const std::string& wanted) {
  for (std::size_t i = 0; i < tokens.size(); ++i)
    if (tokens[i].is_field && tokens[i].name == wanted) return i;
  return std::nullopt;
}

// The fields --owner-by names, joined by + (none: no field).
std::vector<std::size_t> owner_fields(const std::vector<Token>& tokens,
                                      const std::string& owner_field) {
  std::vector<std::size_t> owner_at;
  if (owner_field != "none") {
    const std::vector<std::string> parts = absl::StrSplit(owner_field, '+');
    for (std::string part : parts) {
      if (part == "addr") part = "remote_addr";
      if (part == "agent") part = "http_user_agent";
      const std::optional<std::size_t> at = find_named(tokens, part);
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
  return owner_at;
}

// Where each field is; std::invalid_argument when the format lacks one the import needs.
Layout locate_fields(const LogOptions& o) {
  const std::vector<Token>& tokens = o.tokens;
  Layout l;
  for (Field f : {Field::msec, Field::time_iso8601, Field::time_local, Field::time_bracketed}) {
    if (auto at = find_field(tokens, f)) {
      l.time_at = at;
      l.time_field = f;
      break;
    }
  }
  l.request_at = find_field(tokens, Field::request);
  l.method_at = find_field(tokens, Field::request_method);
  const std::optional<std::size_t> uri_at = find_field(tokens, Field::request_uri);
  l.status_at = find_field(tokens, Field::status);
  l.host_at = find_field(tokens, Field::host);
  l.duration_at = find_field(tokens, Field::request_time);
  l.duration_us_at = find_field(tokens, Field::request_time_us);
  l.completion_at = find_field(tokens, Field::request_completion);
  l.bytes_at = find_field(tokens, Field::body_bytes_sent);
  if (!l.bytes_at) l.bytes_at = find_field(tokens, Field::bytes_sent);
  l.uri_or_name = uri_at ? uri_at : find_named(tokens, "uri");
  std::string missing;
  if (!l.time_at) missing = "a time ($time_local, $time_iso8601, $msec or %t)";
  else if (!l.status_at) missing = "the status ($status or %>s)";
  else if (!l.bytes_at) missing = "the bytes sent ($body_bytes_sent, $bytes_sent, %b or %B)";
  else if (!l.request_at && !l.uri_or_name)
    missing = "the request ($request or %r) or its URI ($request_uri or %U)";
  if (!missing.empty()) {
    throw std::invalid_argument("--format: has no field for " + missing + " (\"" + o.spec + "\")");
  }
  // The client's address by default, when the format has it.
  l.owner_field =
      o.owner_option ? *o.owner_option : (find_named(tokens, "remote_addr") ? "addr" : "none");
  l.owner_at = owner_fields(tokens, l.owner_field);
  if (o.model.priority_by && o.model.priority_by->field != "size") {
    l.priority_at = find_named(tokens, o.model.priority_by->field);
    if (!l.priority_at) {
      throw std::invalid_argument("--priority-by: the format has no field \"" +
                                  o.model.priority_by->field + "\" (or size)");
    }
  }
  return l;
}

// Reads the logs' lines into entries (each URI's largest sizes noted), then
// hands them to the sink in order of start.
class AccessLogReader {
 public:
  AccessLogReader(const LogOptions& options, const Layout& layout, Sink& sink)
      : o_(options), layout_(layout), sink_(sink) {}

  // One file's lines: each an entry, or a counted skip.
  void read_file(const std::string& file) {
    LineReader reader(file);
    file_ = &file;
    while (reader.next(line_)) {
      ++lines_;
      ++number_;
      at_line_ = reader.number();
      if (line_.empty()) {
        sink_.skip("empty line");
        continue;
      }
      if (!split_line(o_.tokens, line_, values_, why_)) {
        if (o_.bad_lines == "skip") {
          sink_.skip("does not match the format");
          continue;
        }
        throw TraceError(file, at_line_, "-",
                         "does not match the format: " + why_ +
                             " (--format says how the server wrote its lines; --bad-lines skip "
                             "counts such lines)");
      }
      read_entry();
    }
  }

  // The entries' demands, in order of start, to the sink; returns the first start.
  double write_requests();
  // The import's own counts, for x-import.
  void count();

 private:
  // The refusal of a field's text, in the line being read.
  TraceError field_error(std::size_t at, const std::string& what) const {
    return TraceError(*file_, at_line_, o_.tokens[at].text,
                      "\"" + std::string(values_[at]) + "\" " + what);
  }

  // A line the format split: an entry, or a counted skip.
  void read_entry() {
    std::string_view method, uri;
    if (!method_and_uri(method, uri)) return;
    if (std::find(o_.methods.begin(), o_.methods.end(), method) == o_.methods.end()) {
      sink_.skip("method not --methods");
      return;
    }
    const int status = read_status();
    const bool abandoned = o_.abandon_status.count(status) != 0;
    if (!abandoned && status != 200 && status != 206) {
      if (status == 304) {
        sink_.skip("status 304 (the client's cache had it)");
      } else {
        sink_.skip("status " + std::to_string(status));
      }
      return;
    }
    const std::uint64_t bytes = read_bytes();
    const double t = read_time();
    const double duration = read_duration();
    if (o_.strip_query) uri = uri.substr(0, uri.find('?'));
    add_entry(uri, status, abandoned, bytes, t, duration);
  }

  // The method and the URI: from $request ("GET /a HTTP/1.1"), or fields of
  // their own; false (a counted skip) when $request is not METHOD URI PROTOCOL.
  bool method_and_uri(std::string_view& method, std::string_view& uri) {
    if (layout_.method_at) method = values_[*layout_.method_at];
    if (layout_.uri_or_name) uri = values_[*layout_.uri_or_name];
    if (layout_.request_at) {
      const std::string_view request = values_[*layout_.request_at];
      const std::size_t space = request.find(' ');
      const std::size_t second =
          space == std::string_view::npos ? space : request.find(' ', space + 1);
      if (space == std::string_view::npos || second == std::string_view::npos || space == 0) {
        sink_.skip("request not METHOD URI PROTOCOL");
        return false;
      }
      if (!layout_.method_at) method = request.substr(0, space);
      if (!layout_.uri_or_name) uri = request.substr(space + 1, second - space - 1);
    }
    return true;
  }

  // The response's status, from 100 to 999.
  int read_status() const {
    const std::optional<double> status_number = parse_double(values_[*layout_.status_at]);
    if (!status_number || *status_number < 100 || *status_number > 999) {
      throw field_error(*layout_.status_at, "is not an HTTP status");
    }
    return static_cast<int>(*status_number);
  }

  // The bytes the response sent.
  std::uint64_t read_bytes() const {
    const std::string_view bytes_text = values_[*layout_.bytes_at];
    std::uint64_t bytes = 0;
    if (bytes_text != "-") {  // Apache's %b for none.
      const std::optional<double> b = parse_double(bytes_text);
      if (!b || *b < 0 || *b != std::floor(*b) || *b > kMaxImportSize) {
        throw field_error(*layout_.bytes_at, "is not a size in bytes");
      }
      bytes = static_cast<std::uint64_t>(*b);
    }
    return bytes;
  }

  // The line's time, in seconds since the epoch.
  double read_time() const {
    const std::optional<double> t = parse_time(layout_.time_field, values_[*layout_.time_at]);
    if (!t || *t < 0 || *t > 1e11) {  // From 1970 to about the year 5000.
      throw field_error(*layout_.time_at, layout_.time_field == Field::msec
                                              ? "is not seconds since the epoch"
                                              : "is not a time (06/Dec/2026:02:11:55 +0000)");
    }
    return *t;
  }

  // How long the response took, in seconds (0 when the format does not say).
  double read_duration() const {
    double duration = 0;
    if (layout_.duration_at || layout_.duration_us_at) {
      const std::size_t at = layout_.duration_at ? *layout_.duration_at : *layout_.duration_us_at;
      const std::optional<double> d = parse_double(values_[at]);
      if (!d || *d < 0 || *d > (layout_.duration_at ? 1e9 : 1e15)) {
        throw field_error(at, "is not a duration");
      }
      duration = layout_.duration_at ? *d : *d / 1e6;
    }
    return duration;
  }

  // The line's entry (its names interned), its bytes noted as its URI's size.
  void add_entry(std::string_view uri, int status, bool abandoned, std::uint64_t bytes, double t,
                 double duration) {
    const std::string_view host =
        layout_.host_at && values_[*layout_.host_at] != "-" ? values_[*layout_.host_at] : "";
    const std::string object = std::string(host) + std::string(uri);
    std::string owner = layout_.owner_at.empty() ? "log" : "";
    for (std::size_t at : layout_.owner_at)
      owner += (owner.empty() ? "" : " ") + std::string(values_[at]);
    for (const std::string_view text : {std::string_view(object), std::string_view(owner)}) {
      if (!valid_utf8(text)) throw TraceError(*file_, at_line_, "-", "not valid UTF-8");
    }
    Entry e;
    e.start = o_.time_is == "end" ? t - duration : t;
    e.end = o_.time_is == "end" ? t : t + duration;
    e.bytes = bytes;
    e.number = number_;
    e.object = names_.id(object);
    e.owner = names_.id(owner);
    e.origin = names_.id(host.empty() ? std::string_view(o_.default_origin) : host);
    e.field = layout_.priority_at ? names_.id(values_[*layout_.priority_at]) : 0;
    e.status = static_cast<std::uint16_t>(status);
    e.abandoned = abandoned;
    e.incomplete = layout_.completion_at && values_[*layout_.completion_at] != "OK";
    if (status == 200) {
      std::uint64_t& size = full_size_[e.object];
      size = std::max(size, bytes);
    } else {
      std::uint64_t& size = partial_size_[e.object];
      size = std::max(size, bytes);
    }
    entries_.push_back(e);
  }

  // An entry's artifact's size: its URI's largest 200, else its largest
  // response (counted once per URI sized so); 0 when unknown.
  std::uint64_t size_of(const Entry& e) {
    std::uint64_t size = 0;
    if (auto it = full_size_.find(e.object); it != full_size_.end() && it->second > 0) {
      size = it->second;
    } else {
      size = partial_size_[e.object];
      if (size > 0 && sized_by_206_.insert(e.object).second) ++from_206_;
    }
    return size;
  }

  // The demand an entry makes, its times from `start`: a cancel at its end
  // when abandoned or cut short.
  Request request_of(const Entry& e, std::uint64_t size, double start) {
    Request r;
    r.t = e.start - start;
    r.demand = "l" + std::to_string(e.number);
    r.object = names_[e.object];
    r.origin = names_[e.origin];
    r.owner = names_[e.owner];
    r.size = size;
    if (layout_.priority_at) r.priority_value = names_[e.field];
    if (e.abandoned) {
      r.end = e.end - start;
    } else if (e.status == 200 && (e.bytes < size || e.incomplete)) {
      r.end = e.end - start;  // Cut short: the client closed it mid-body.
      ++cut_short_;
    }
    return r;
  }

  const LogOptions& o_;
  const Layout& layout_;
  Sink& sink_;
  Names names_;
  std::vector<Entry> entries_;
  std::unordered_map<std::uint32_t, std::uint64_t> full_size_, partial_size_;  // By object.
  std::set<std::uint32_t> sized_by_206_;
  std::uint64_t lines_ = 0, number_ = 0, cut_short_ = 0, from_206_ = 0;
  // The line being read: its file, its number there, its text split.
  const std::string* file_ = nullptr;
  std::size_t at_line_ = 0;
  std::vector<std::string_view> values_;
  std::string line_, why_;
};

double AccessLogReader::write_requests() {
  std::stable_sort(entries_.begin(), entries_.end(),
                   [](const Entry& a, const Entry& b) { return a.start < b.start; });
  const double start = entries_.empty() ? 0.0 : entries_.front().start;
  for (const Entry& e : entries_) {
    const std::uint64_t size = size_of(e);
    if (size == 0) {
      sink_.skip("size unknown (no byte sent for its URI)");
      continue;
    }
    sink_.request(request_of(e, size, start));
  }
  return start;
}

void AccessLogReader::count() {
  sink_.count("lines", lines_);
  sink_.count("abandoned_by_status", static_cast<std::uint64_t>(std::count_if(
                                          entries_.begin(), entries_.end(),
                                          [](const Entry& e) { return e.abandoned; })));
  sink_.count("cut_short", cut_short_);
  sink_.count("sized_by_206_only", from_206_);
}

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
  const LogOptions o = read_log_options(options);
  options.check_all_read("access-log");
  if (inputs.empty()) throw std::invalid_argument("no input file");
  // Where each field is.
  const Layout layout = locate_fields(o);

  Sink sink("access-log", inputs, o.model);
  AccessLogReader reader(o, layout, sink);
  for (const std::string& file : inputs)
    reader.read_file(file);
  const double start = reader.write_requests();
  reader.count();

  ojson used = options.as_json();
  used["format"] = o.spec;
  used["time-is"] = o.time_is;
  used["owner-by"] = layout.owner_field;
  used["start"] = start;
  sink.finish(o.name, std::move(used), out);
}

}  // namespace dfl::format::import_detail
