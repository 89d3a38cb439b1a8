#include "demandflight/format/trace_writer.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <utility>

namespace dfl::format {
namespace {

constexpr std::array<std::string_view, 6> kOpNames = {"subscribe", "cancel", "set_priority",
                                                      "end_owner", "fault",  "throttle"};
constexpr std::array<std::string_view, 3> kFaultNames = {"transfer_error", "corrupt",
                                                         "origin_down"};
constexpr std::size_t kBlock = 1 << 16;

void append_integer(std::string& out, std::int64_t value) {
  char text[24];
  out.append(text, std::to_chars(text, text + sizeof text, value).ptr);
}

void append_unsigned(std::string& out, std::uint64_t value) {
  char text[24];
  out.append(text, std::to_chars(text, text + sizeof text, value).ptr);
}

// The length of the UTF-8 sequence at the start of `s` (whose first byte is
// past ASCII), or 0 if it is not one (overlong forms and surrogates included).
std::size_t utf8_length(std::string_view s) {
  const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(s[i]); };
  const unsigned char c = byte(0);
  std::size_t n = 0;
  unsigned char lo = 0x80, hi = 0xbf;  // The second byte's range.
  if (c >= 0xc2 && c <= 0xdf) {
    n = 2;
  } else if (c >= 0xe0 && c <= 0xef) {
    n = 3;
    if (c == 0xe0) lo = 0xa0;
    if (c == 0xed) hi = 0x9f;
  } else if (c >= 0xf0 && c <= 0xf4) {
    n = 4;
    if (c == 0xf0) lo = 0x90;
    if (c == 0xf4) hi = 0x8f;
  } else {
    return 0;
  }
  if (s.size() < n || byte(1) < lo || byte(1) > hi) return 0;
  for (std::size_t i = 2; i < n; ++i)
    if (byte(i) < 0x80 || byte(i) > 0xbf) return 0;
  return n;
}

void key(std::string& out, std::string_view name) {
  out += ", \"";
  out += name;
  out += "\": ";
}

void string_field(std::string& out, std::string_view name, std::string_view value) {
  key(out, name);
  TraceWriter::append_string(out, value);
}

void number_field(std::string& out, std::string_view name, double value) {
  key(out, name);
  TraceWriter::append_number(out, value, name);
}

void integer_field(std::string& out, std::string_view name, std::int64_t value) {
  key(out, name);
  append_integer(out, value);
}

void unsigned_field(std::string& out, std::string_view name, std::uint64_t value) {
  key(out, name);
  append_unsigned(out, value);
}

template <class T, class Write>
void optional_field(std::string& out, std::string_view name, const std::optional<T>& value,
                    Write write) {
  if (value) write(out, name, *value);
}

// `{"op": "NAME", "t": T`: a timed line up to its own fields.
void open_line(std::string& out, Op op, double t) {
  out += "{\"op\": \"";
  out += to_string(op);
  out += "\", \"t\": ";
  TraceWriter::append_number(out, t, "t");
}

void close_line(std::string& out) { out += "}\n"; }

// An object's members as `, "name": value` (the first without its comma) in
// braces, or nothing when `write_members` writes none.
template <class Members>
void section(std::string& out, std::string_view name, Members write_members) {
  std::string inner;
  write_members(inner);
  if (inner.empty()) return;
  key(out, name);
  out += '{';
  out.append(inner, 2);  // Without the first member's ", ".
  out += '}';
}

void caps_members(std::string& out, const ThrottleCaps& c) {
  optional_field(out, "background_at_or_below", c.background_at_or_below, integer_field);
  optional_field(out, "background_Bps", c.background_Bps, number_field);
  optional_field(out, "overall_Bps", c.overall_Bps, number_field);
}

// JSON text again in the writer's style.
void append_json(std::string& out, const nlohmann::ordered_json& v, std::string_view field) {
  switch (v.type()) {
    case nlohmann::ordered_json::value_t::object: {
      out += '{';
      bool first = true;
      for (const auto& [name, member] : v.items()) {
        if (!first) out += ", ";
        first = false;
        TraceWriter::append_string(out, name);
        out += ": ";
        append_json(out, member, name);
      }
      out += '}';
      return;
    }
    case nlohmann::ordered_json::value_t::array: {
      out += '[';
      for (std::size_t i = 0; i < v.size(); ++i) {
        if (i > 0) out += ", ";
        append_json(out, v[i], field);
      }
      out += ']';
      return;
    }
    case nlohmann::ordered_json::value_t::string:
      TraceWriter::append_string(out, v.get_ref<const std::string&>());
      return;
    case nlohmann::ordered_json::value_t::boolean:
      out += v.get<bool>() ? "true" : "false";
      return;
    case nlohmann::ordered_json::value_t::number_integer:
      append_integer(out, v.get<std::int64_t>());
      return;
    case nlohmann::ordered_json::value_t::number_unsigned:
      append_unsigned(out, v.get<std::uint64_t>());
      return;
    case nlohmann::ordered_json::value_t::number_float:
      TraceWriter::append_number(out, v.get<double>(), field);
      return;
    default:
      out += "null";
      return;
  }
}

}  // namespace

// --- Names -------------------------------------------------------------------------

std::string_view to_string(Op op) { return kOpNames.at(static_cast<std::size_t>(op)); }

std::optional<Op> parse_op(std::string_view name) {
  for (std::size_t i = 0; i < kOpNames.size(); ++i)
    if (kOpNames[i] == name) return static_cast<Op>(i);
  return std::nullopt;
}

std::string_view to_string(FaultKind kind) {
  return kFaultNames.at(static_cast<std::size_t>(kind));
}

std::optional<FaultKind> parse_fault_kind(std::string_view name) {
  for (std::size_t i = 0; i < kFaultNames.size(); ++i)
    if (kFaultNames[i] == name) return static_cast<FaultKind>(i);
  return std::nullopt;
}

const std::vector<std::string_view>& record_kind_names() {
  static const std::vector<std::string_view> names = [] {
    std::vector<std::string_view> all{"artifact"};
    all.insert(all.end(), kOpNames.begin(), kOpNames.end());
    return all;
  }();
  return names;
}

const std::vector<std::string_view>& fault_kind_names() {
  static const std::vector<std::string_view> names(kFaultNames.begin(), kFaultNames.end());
  return names;
}

// --- Values ------------------------------------------------------------------------

void TraceWriter::append_string(std::string& out, std::string_view value) {
  out += '"';
  std::size_t i = 0;
  while (i < value.size()) {
    // A run of bytes that go as they are, appended at once.
    std::size_t end = i;
    while (end < value.size()) {
      const auto c = static_cast<unsigned char>(value[end]);
      if (c < 0x20 || c == '"' || c == '\\' || c >= 0x80) break;
      ++end;
    }
    out.append(value, i, end - i);
    i = end;
    if (i == value.size()) break;
    const auto c = static_cast<unsigned char>(value[i]);
    if (c >= 0x80) {
      const std::size_t n = utf8_length(value.substr(i));
      if (n == 0) {
        out += "\xef\xbf\xbd";  // U+FFFD for a byte that is not UTF-8.
        ++i;
      } else {
        out.append(value, i, n);
        i += n;
      }
    } else if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
      ++i;
    } else {
      static constexpr char kHex[] = "0123456789abcdef";
      out += "\\u00";
      out += kHex[c >> 4];
      out += kHex[c & 15];
      ++i;
    }
  }
  out += '"';
}

void TraceWriter::append_number(std::string& out, double value, std::string_view field) {
  if (!std::isfinite(value))
    throw std::invalid_argument(std::string(field) + ": not a finite number");
  // An integral value as an integer (2^53 and beyond it in its shortest form).
  if (value == std::trunc(value) && std::fabs(value) < 0x1p53) {
    append_integer(out, static_cast<std::int64_t>(value));
    return;
  }
  char text[32];
  out.append(text, std::to_chars(text, text + sizeof text, value).ptr);
}

// --- Lines -------------------------------------------------------------------------

TraceWriter::TraceWriter() = default;

TraceWriter::TraceWriter(Output output) : output_(std::move(output)) {
  buffer_.reserve(kBlock + 4096);
}

TraceWriter::TraceWriter(std::ostream& out) : stream_(&out) { buffer_.reserve(kBlock + 4096); }

void TraceWriter::header(const TraceHeader& h) {
  std::string& s = buffer_;
  s += "{\"format\": \"demandflight-trace\", \"version\": 1";
  string_field(s, "name", h.name);
  unsigned_field(s, "seed", h.seed);
  section(s, "platform", [&](std::string& p) {
    const TraceHeader::Platform& m = h.platform;
    optional_field(p, "client_bandwidth_Bps", m.client_bandwidth_Bps, number_field);
    optional_field(p, "client_latency_s", m.client_latency_s, number_field);
    if (m.origins) {
      key(p, "origins");
      p += '{';
      for (std::size_t i = 0; i < m.origins->size(); ++i) {
        const HeaderOrigin& o = (*m.origins)[i];
        if (i > 0) p += ", ";
        append_string(p, o.name);
        p += ": {";
        std::string link;
        optional_field(link, "bandwidth_Bps", o.bandwidth_Bps, number_field);
        optional_field(link, "latency_s", o.latency_s, number_field);
        if (!link.empty()) p.append(link, 2);
        p += '}';
      }
      p += '}';
    }
    optional_field(p, "disk_write_Bps", m.disk_write_Bps, number_field);
    optional_field(p, "hash_Bps", m.hash_Bps, number_field);
    optional_field(p, "network_model", m.network_model, string_field);
    optional_field(p, "server_congestion_control", m.server_congestion_control, string_field);
  });
  section(s, "scheduler", [&](std::string& p) {
    const TraceHeader::Scheduler& m = h.scheduler;
    optional_field(p, "max_transfers", m.max_transfers, unsigned_field);
    optional_field(p, "max_per_origin", m.max_per_origin, unsigned_field);
    optional_field(p, "cache_bytes", m.cache_bytes, unsigned_field);
    // Present even when empty: `"retry": {}` says the defaults on purpose.
    auto always = [&](std::string_view name, auto members) {
      std::string inner;
      members(inner);
      key(p, name);
      p += '{';
      if (!inner.empty()) p.append(inner, 2);
      p += '}';
    };
    if (m.retry) {
      always("retry", [&](std::string& r) {
        optional_field(r, "max_attempts", m.retry->max_attempts, unsigned_field);
        optional_field(r, "base_s", m.retry->base_s, number_field);
        optional_field(r, "cap_s", m.retry->cap_s, number_field);
        optional_field(r, "jitter", m.retry->jitter, number_field);
      });
    }
    if (m.breaker) {
      always("breaker", [&](std::string& b) {
        optional_field(b, "failures", m.breaker->failures, unsigned_field);
        optional_field(b, "open_s", m.breaker->open_s, number_field);
      });
    }
    if (m.throttle) always("throttle", [&](std::string& c) { caps_members(c, *m.throttle); });
  });
  for (const auto& [name, text] : h.extensions) {
    const auto value = nlohmann::ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (value.is_discarded()) throw std::invalid_argument(name + ": not JSON text");
    key(s, name);
    append_json(s, value, name);
  }
  close_line(s);
  maybe_output();
}

void TraceWriter::artifact(const ArtifactLine& a) {
  std::string& s = buffer_;
  s += "{\"op\": \"artifact\"";
  string_field(s, "id", a.id);
  string_field(s, "resource", a.resource);
  string_field(s, "revision", a.revision);
  string_field(s, "target", a.target);
  integer_field(s, "generation", a.generation);
  unsigned_field(s, "size", a.size);
  if (a.origins.size() == 1) {
    string_field(s, "origin", a.origins[0]);
  } else if (!a.origins.empty()) {
    key(s, "origins");
    s += '[';
    for (std::size_t i = 0; i < a.origins.size(); ++i) {
      if (i > 0) s += ", ";
      append_string(s, a.origins[i]);
    }
    s += ']';
  }
  optional_field(s, "sha256", a.sha256, string_field);
  close_line(s);
  maybe_output();
}

void TraceWriter::render(std::string& out, const SubscribeLine& line) {
  open_line(out, Op::subscribe, line.t);
  string_field(out, "demand", line.demand);
  string_field(out, "owner", line.owner);
  string_field(out, "artifact", line.artifact);
  integer_field(out, "priority", line.priority);
  optional_field(out, "owner_generation", line.owner_generation, integer_field);
  optional_field(out, "timeout_s", line.timeout_s, number_field);
  close_line(out);
}

void TraceWriter::render(std::string& out, const CancelLine& line) {
  open_line(out, Op::cancel, line.t);
  string_field(out, "demand", line.demand);
  close_line(out);
}

void TraceWriter::render(std::string& out, const SetPriorityLine& line) {
  open_line(out, Op::set_priority, line.t);
  string_field(out, "demand", line.demand);
  integer_field(out, "priority", line.priority);
  close_line(out);
}

void TraceWriter::render(std::string& out, const EndOwnerLine& line) {
  open_line(out, Op::end_owner, line.t);
  string_field(out, "owner", line.owner);
  optional_field(out, "owner_generation", line.owner_generation, integer_field);
  close_line(out);
}

void TraceWriter::render(std::string& out, const ThrottleLine& line) {
  open_line(out, Op::throttle, line.t);
  caps_members(out, line.caps);
  close_line(out);
}

void TraceWriter::render(std::string& out, const FaultLine& line) {
  open_line(out, Op::fault, line.t);
  string_field(out, "kind", to_string(line.kind));
  if (line.kind == FaultKind::origin_down) {
    string_field(out, "origin", line.origin);
  } else {
    string_field(out, "artifact", line.artifact);
  }
  optional_field(out, "count", line.count, unsigned_field);
  optional_field(out, "after_fraction", line.after_fraction, number_field);
  if (line.retryable) {
    key(out, "retryable");
    out += *line.retryable ? "true" : "false";
  }
  optional_field(out, "duration_s", line.duration_s, number_field);
  close_line(out);
}

// --- Order and output --------------------------------------------------------------

namespace {
struct Later {
  template <class Held>
  bool operator()(const Held& a, const Held& b) const {
    return a.t != b.t ? a.t > b.t : a.sequence > b.sequence;
  }
};
}  // namespace

void TraceWriter::hold_text(double t, std::string text) {
  if (t < last_t_) throw std::logic_error("trace writer: a record held for a time already past");
  held_.push_back(Held{t, next_sequence_++, std::move(text)});
  std::push_heap(held_.begin(), held_.end(), Later{});
}

void TraceWriter::before(double t) {
  while (!held_.empty() && held_.front().t <= t) {
    std::pop_heap(held_.begin(), held_.end(), Later{});
    Held h = std::move(held_.back());
    held_.pop_back();
    buffer_ += h.text;
    end_line(h.t);
  }
}

void TraceWriter::end_line(double t) {
  last_t_ = t;
  maybe_output();
}

void TraceWriter::maybe_output() {
  if (buffer_.size() < kBlock || (!output_ && stream_ == nullptr)) return;
  if (output_) output_(buffer_);
  if (stream_ != nullptr) stream_->write(buffer_.data(), static_cast<std::streamsize>(buffer_.size()));
  buffer_.clear();
}

void TraceWriter::finish() {
  before(std::numeric_limits<double>::infinity());
  if (output_) output_(buffer_);
  if (stream_ != nullptr) {
    stream_->write(buffer_.data(), static_cast<std::streamsize>(buffer_.size()));
    if (!*stream_) throw std::runtime_error("writing the trace failed");
  }
  if (output_ || stream_ != nullptr) buffer_.clear();
}

std::string TraceWriter::take() {
  std::string out = std::move(buffer_);
  buffer_.clear();
  return out;
}

}  // namespace dfl::format
