// Strict reader for the trace format (docs/trace-format.md, version 1).
//
// Every object is read through a FieldReader that remembers which fields were
// used, so an unknown field (a typo) is an error unless it starts with "x-".
#include "demandflight/format/trace.h"

#include <cerrno>
#include <cstring>
#include "stream_demand_ids.h"

#include <absl/container/flat_hash_set.h>
#include <simdjson.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <optional>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "demandflight/format/defaults.h"
#include "demandflight/format/trace_writer.h"

namespace dfl::format {
namespace {

// "a, b, c": a table's names for a message.
std::string names_text(const std::vector<std::string_view>& names) {
  std::string out;
  for (std::string_view name : names) {
    if (!out.empty()) out += ", ";
    out += name;
  }
  return out;
}


using json = nlohmann::json;

// One record line's object, flat: a record's fields are scalars, and a nested
// value (an extension's object or array) is only known to be there. Filled by
// FlatParser and reused from line to line, so a record costs no allocation
// once the buffers have grown (a JSON tree per line was most of the reading
// time). Reads like a json value where FieldReader uses one; a key given twice
// keeps its last value, as json::parse does.
class FlatObject {
 public:
  enum class Kind : std::uint8_t {
    null,
    boolean,
    integer,
    unsigned_integer,
    floating,
    string,
    string_list,  // An array of strings (an artifact's `origins`).
    nested
  };

  struct Value {
    Kind kind = Kind::null;
    bool boolean = false;
    std::int64_t integer = 0;
    std::uint64_t unsigned_integer = 0;
    double floating = 0;
    std::string string;
    std::vector<std::string> strings;  // string_list

    bool is_string() const { return kind == Kind::string; }
    bool is_string_list() const { return kind == Kind::string_list; }
    bool is_boolean() const { return kind == Kind::boolean; }
    bool is_number_unsigned() const { return kind == Kind::unsigned_integer; }
    bool is_number_integer() const { return kind == Kind::integer || is_number_unsigned(); }
    bool is_number() const { return is_number_integer() || kind == Kind::floating; }

    template <class T>
    T get() const {
      if constexpr (std::is_same_v<T, std::string>) {
        return string;
      } else if constexpr (std::is_same_v<T, bool>) {
        return boolean;
      } else {  // A number, converted as json::get converts it.
        switch (kind) {
          case Kind::integer:
            return static_cast<T>(integer);
          case Kind::unsigned_integer:
            return static_cast<T>(unsigned_integer);
          default:
            return static_cast<T>(floating);
        }
      }
    }
  };

  struct Field {
    std::string name;
    Value value;
  };

  void clear() {
    size_ = 0;
    if (!index_.empty()) index_.clear();
  }
  std::size_t size() const { return size_; }
  const Field* begin() const { return fields_.data(); }
  const Field* end() const { return fields_.data() + size_; }

  const Value* find(std::string_view name) const {
    for (const Field& field : *this)
      if (field.name == name) return &field.value;
    return nullptr;
  }

  // The value of `name`, reset: a new field, or the one given before. A
  // record has a handful of fields; a line with very many (extensions) gets
  // an index, so that reading it stays linear.
  Value& slot(std::string_view name) {
    if (size_ < kIndexFrom) {
      for (std::size_t i = 0; i < size_; ++i)
        if (fields_[i].name == name) return reset(fields_[i].value);
    } else {
      if (index_.empty()) {
        for (std::size_t i = 0; i < size_; ++i)
          index_.emplace(fields_[i].name, i);
      }
      if (auto it = index_.find(std::string(name)); it != index_.end())
        return reset(fields_[it->second].value);
      index_.emplace(name, size_);
    }
    if (size_ == fields_.size()) fields_.emplace_back();
    Field& field = fields_[size_++];
    field.name.assign(name);
    return reset(field.value);
  }

 private:
  static Value& reset(Value& value) {
    value.kind = Kind::null;
    return value;
  }

  static constexpr std::size_t kIndexFrom = 32;
  std::vector<Field> fields_;  // The first size_ are this line's.
  std::size_t size_ = 0;
  std::unordered_map<std::string, std::size_t> index_;  // Name -> field, from kIndexFrom fields.
};

// One line into a FlatObject. simdjson reads the line when it can (it is
// much faster than nlohmann's lexer); a line it refuses is read again
// from nlohmann's SAX events (see json::sax_parse), which either accept it
// (a byte order mark, an integer beyond 64 bits, which json::parse reads as a
// double, or nesting deeper than simdjson's limit) or say why not, in
// json::parse's words. Wherever simdjson accepts a line, nlohmann accepts it
// with the same values (trace_fuzz checks the two against each other).
class FlatParser {
 public:
  explicit FlatParser(FlatObject& object) : object_(object) {}

  // False on bad JSON (error() says why, in json::parse's words). `text` must
  // have simdjson::SIMDJSON_PADDING bytes of capacity beyond its size.
  bool parse(const std::string& text) {
    if (parse_fast(text)) return true;
    return parse_slow(text);
  }

  // The two readers, apart (for the fuzzer). parse_fast false: simdjson
  // refused the line; the object is then in no particular state.
  bool parse_fast(const std::string& text) {
    object_.clear();
    top_level_object_ = false;
    error_.clear();
    simdjson::dom::element root;
    // No copy: the caller's string has the padding.
    if (fast_.parse(text.data(), text.size(), /*realloc_if_needed=*/false).get(root)) return false;
    simdjson::dom::object object;
    if (root.get(object)) return true;  // A JSON value, but not an object.
    top_level_object_ = true;
    for (const simdjson::dom::key_value_pair field : object) {
      FlatObject::Value& v = object_.slot(field.key);
      const simdjson::dom::element value = field.value;
      switch (value.type()) {
        case simdjson::dom::element_type::STRING:
          v.kind = FlatObject::Kind::string;
          v.string.assign(value.get_string().value_unsafe());
          break;
        case simdjson::dom::element_type::INT64: {
          const std::int64_t x = value.get_int64().value_unsafe();
          // json::parse reports a non-negative integer as unsigned.
          if (x >= 0) {
            v.kind = FlatObject::Kind::unsigned_integer;
            v.unsigned_integer = static_cast<std::uint64_t>(x);
          } else {
            v.kind = FlatObject::Kind::integer;
            v.integer = x;
          }
          break;
        }
        case simdjson::dom::element_type::UINT64:
          v.kind = FlatObject::Kind::unsigned_integer;
          v.unsigned_integer = value.get_uint64().value_unsafe();
          break;
        case simdjson::dom::element_type::DOUBLE:
          v.kind = FlatObject::Kind::floating;
          v.floating = value.get_double().value_unsafe();
          break;
        case simdjson::dom::element_type::BOOL:
          v.kind = FlatObject::Kind::boolean;
          v.boolean = value.get_bool().value_unsafe();
          break;
        case simdjson::dom::element_type::NULL_VALUE:
          v.kind = FlatObject::Kind::null;
          break;
        case simdjson::dom::element_type::ARRAY: {
          v.kind = FlatObject::Kind::string_list;
          v.strings.clear();
          simdjson::dom::array items;
          if (value.get(items) != simdjson::SUCCESS) {
            v.kind = FlatObject::Kind::nested;
            break;
          }
          for (const simdjson::dom::element item : items) {
            std::string_view item_text;
            if (item.get(item_text) != simdjson::SUCCESS) {
              v.kind = FlatObject::Kind::nested;  // Not a list of strings.
              break;
            }
            v.strings.emplace_back(item_text);
          }
          break;
        }
        case simdjson::dom::element_type::OBJECT:
          v.kind = FlatObject::Kind::nested;
          break;
      }
    }
    return true;
  }

  bool parse_slow(const std::string& text) {
    object_.clear();
    depth_ = 0;
    current_ = nullptr;
    top_level_object_ = false;
    in_list_ = false;
    error_.clear();
    return json::sax_parse(text, this);
  }
  bool is_object() const { return top_level_object_; }
  const std::string& error() const { return error_; }

  bool null() { return scalar(FlatObject::Kind::null); }
  bool boolean(bool value) {
    if (FlatObject::Value* v = field(FlatObject::Kind::boolean)) v->boolean = value;
    return true;
  }
  bool number_integer(json::number_integer_t value) {
    if (FlatObject::Value* v = field(FlatObject::Kind::integer)) v->integer = value;
    return true;
  }
  bool number_unsigned(json::number_unsigned_t value) {
    if (FlatObject::Value* v = field(FlatObject::Kind::unsigned_integer))
      v->unsigned_integer = value;
    return true;
  }
  bool number_float(json::number_float_t value, const std::string&) {
    if (FlatObject::Value* v = field(FlatObject::Kind::floating)) v->floating = value;
    return true;
  }
  bool string(std::string& value) {
    if (in_list_ && depth_ == 2) {
      current_->strings.push_back(std::move(value));
      return true;
    }
    if (FlatObject::Value* v = field(FlatObject::Kind::string)) v->string.swap(value);
    return true;
  }
  bool binary(json::binary_t&) { return scalar(FlatObject::Kind::nested); }  // Not in JSON text.
  bool start_object(std::size_t) {
    if (depth_ == 0) top_level_object_ = true;
    return open();
  }
  bool key(std::string& name) {
    if (depth_ == 1 && top_level_object_) current_ = &object_.slot(name);
    return true;
  }
  bool end_object() { return close(); }
  bool start_array(std::size_t) {
    if (depth_ == 1 && top_level_object_) {
      // A field's array: a string_list while it holds strings only.
      ++depth_;
      current_->kind = FlatObject::Kind::string_list;
      current_->strings.clear();
      in_list_ = true;
      return true;
    }
    return open();
  }
  bool end_array() {
    if (depth_ == 2) in_list_ = false;
    return close();
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) {
    error_ = e.what();
    return false;
  }

 private:
  // The field a scalar at this depth fills, if any (a top-level scalar, or
  // one inside a nested value, fills none).
  FlatObject::Value* field(FlatObject::Kind kind) {
    if (in_list_ && depth_ == 2) current_->kind = FlatObject::Kind::nested;  // Not a string.
    if (depth_ != 1 || !top_level_object_) return nullptr;  // Not a field of the line's object.
    current_->kind = kind;
    return current_;
  }
  bool scalar(FlatObject::Kind kind) {
    field(kind);
    return true;
  }
  bool open() {
    if (depth_ == 1 && top_level_object_) current_->kind = FlatObject::Kind::nested;
    if (in_list_ && depth_ == 2) current_->kind = FlatObject::Kind::nested;  // Not a string.
    ++depth_;
    return true;
  }
  bool close() {
    --depth_;
    return true;
  }

  FlatObject& object_;
  simdjson::dom::parser fast_;
  std::size_t depth_ = 0;
  FlatObject::Value* current_ = nullptr;
  bool top_level_object_ = false;
  bool in_list_ = false;  // Inside a field's array (depth 2).
  std::string error_;
};

// Field access, the same for a json object (header lines) and a FlatObject.
std::string_view string_of(const json& value) {
  return value.get_ref<const std::string&>();
}
std::string_view string_of(const FlatObject::Value& value) {
  return value.string;
}
const json* find_field(const json& object, std::string_view name) {
  auto it = object.find(name);
  return it == object.end() ? nullptr : &*it;
}
const FlatObject::Value* find_field(const FlatObject& object, std::string_view name) {
  return object.find(name);
}
template <class F>
void for_each_name(const json& object, F&& f) {
  for (const auto& [name, value] : object.items())
    f(name);
}
template <class F>
void for_each_name(const FlatObject& object, F&& f) {
  for (const FlatObject::Field& field : object)
    f(field.name);
}

template <class Object>
class FieldReader {
 public:
  using Value = std::remove_cvref_t<decltype(*find_field(std::declval<const Object&>(), ""))>;

  FieldReader(const Object& object, const std::string& file, std::size_t line, std::string prefix)
      : object_(object), file_(file), line_(line), prefix_(std::move(prefix)) {}

  [[noreturn]] void fail(std::string_view field, const std::string& message) const {
    throw TraceError(file_, line_, prefix_ + std::string(field), message);
  }

  bool has(const char* name) const { return find_field(object_, name) != nullptr; }

  // Names are string literals: only views of them are kept.
  const Value& raw(const char* name) {
    const std::string_view n(name);
    if (std::find(used_.begin(), used_.end(), n) == used_.end()) used_.push_back(n);
    const Value* value = find_field(object_, n);
    if (value == nullptr) fail(name, "missing field");
    return *value;
  }

  std::string string(const char* name) { return std::string(text(name)); }

  // A string field, read in place: valid while the object is.
  std::string_view text(const char* name) {
    const Value& v = raw(name);
    if (!v.is_string()) fail(name, "must be a string");
    return string_of(v);
  }

  std::int64_t integer(const char* name, std::int64_t lo, std::int64_t hi) {
    const Value& v = raw(name);
    if (!v.is_number_integer()) fail(name, "must be an integer");
    if (v.is_number_unsigned() &&
        v.template get<std::uint64_t>() > static_cast<std::uint64_t>(hi)) {
      fail(name, "must be at most " + std::to_string(hi));
    }
    const std::int64_t x = v.template get<std::int64_t>();
    if (x < lo)
      fail(name, lo == 0 ? "must not be negative" : "must be at least " + std::to_string(lo));
    if (x > hi) fail(name, "must be at most " + std::to_string(hi));
    return x;
  }

  double number(const char* name, double lo, double hi, bool lo_open = false) {
    const Value& v = raw(name);
    if (!v.is_number()) fail(name, "must be a number");
    const double x = v.template get<double>();
    if (!std::isfinite(x)) fail(name, "must be finite");
    if (x < lo || (lo_open && x == lo)) {
      fail(name, std::string(lo == 0 ? (lo_open ? "must be positive" : "must not be negative")
                                     : "must be at least " + std::to_string(lo)));
    }
    if (x > hi) fail(name, "must be at most " + std::to_string(hi));
    return x;
  }

  bool boolean(const char* name) {
    const Value& v = raw(name);
    if (!v.is_boolean()) fail(name, "must be true or false");
    return v.template get<bool>();
  }

  template <class F>
  auto optional(const char* name, F&& read, decltype(read()) fallback) {
    return has(name) ? read() : fallback;
  }

  // Every field must have been used, or be an "x-" extension. Of several
  // unknown fields the first in sorted order is named (as it always was).
  void finish() const {
    if (used_.size() == object_.size()) return;  // Each used name is a field.
    const std::string* unknown = nullptr;
    for_each_name(object_, [&](const std::string& name) {
      if (std::find(used_.begin(), used_.end(), name) != used_.end() || name.rfind("x-", 0) == 0)
        return;
      if (unknown == nullptr || name < *unknown) unknown = &name;
    });
    if (unknown == nullptr) return;
    // An empty key is named as it is written, so that the message names a field.
    fail(unknown->empty() ? "\"\"" : *unknown, "unknown field (extensions must start with \"x-\")");
  }

 private:
  const Object& object_;
  const std::string& file_;
  std::size_t line_;
  std::string prefix_;
  std::vector<std::string_view> used_;  // Fields read (found or not), a handful.
};

// Id -> dense index over ids the trace keeps anyway (its demand ids, owners,
// artifacts): the table holds only the indices, and hashes and compares
// through the trace's vector: no string is stored twice, and no node is
// allocated per id (a node-based map spends its lookups in cache misses).
template <class T>
class IdIndex {
 public:
  explicit IdIndex(const std::vector<T>& items) : table_(0, Hash{&items}, Eq{&items}) {}

  std::optional<std::uint32_t> find(std::string_view id) const {
    auto it = table_.find(id);
    if (it == table_.end()) return std::nullopt;
    return *it;
  }
  // Adds items[index], which the caller has just appended; false (and nothing
  // added) when an item with the same id is there already.
  bool insert(std::uint32_t index) { return table_.insert(index).second; }

 private:
  static std::string_view id_of(const std::string& item) { return item; }
  static std::string_view id_of(const Artifact& item) { return item.id; }

  struct Hash {
    using is_transparent = void;
    const std::vector<T>* items;
    std::size_t operator()(std::string_view id) const { return std::hash<std::string_view>{}(id); }
    std::size_t operator()(std::uint32_t index) const { return (*this)(id_of((*items)[index])); }
  };
  struct Eq {
    using is_transparent = void;
    const std::vector<T>* items;
    std::string_view id(std::string_view id) const { return id; }
    std::string_view id(std::uint32_t index) const { return id_of((*items)[index]); }
    template <class A, class B>
    bool operator()(const A& a, const B& b) const {
      return id(a) == id(b);
    }
  };
  absl::flat_hash_set<std::uint32_t, Hash, Eq> table_;
};

constexpr std::int64_t kMaxInt = std::numeric_limits<std::int64_t>::max();
constexpr double kMaxTime = kMaxRecordTime;

class Reader {
 public:
  explicit Reader(std::string file, bool manifest = false) : manifest_(manifest) {
    trace_.file = std::move(file);
  }
  // A streamed trace (TraceStream): records are handed out one by one, and
  // demand ids go to `ids` instead of Trace::demand_ids.
  Reader(std::string file, detail::StreamDemandIds& ids) : stream_ids_(&ids) {
    trace_.file = std::move(file);
  }
  // The id indices point into trace_: a copy would share them.
  Reader(const Reader&) = delete;
  Reader& operator=(const Reader&) = delete;

  Trace read(std::istream& in) {
    while (read_line(in)) {
    }
    if (manifest_) {
      if (trace_.artifacts.empty()) throw TraceError(trace_.file, line_, "op", "no artifact lines");
      return std::move(trace_);
    }
    if (!header_seen_) throw TraceError(trace_.file, 1, "format", "empty trace: no header line");
    return std::move(trace_);
  }

  // Streamed: the next timed record, or false at the end of the input. The
  // first call reads the header (and fails if there is none).
  bool next(std::istream& in, Record& out) {
    streamed_ = &out;
    have_streamed_ = false;
    while (!have_streamed_ && read_line(in)) {
    }
    if (!header_seen_) throw TraceError(trace_.file, 1, "format", "empty trace: no header line");
    return have_streamed_;
  }
  // Streamed: from now on an origin no header or artifact line has named
  // cannot be added (the platform is built).
  void seal_origins() { origins_sealed_ = true; }
  const Trace& trace() const { return trace_; }
  std::uint64_t records() const { return records_; }

 private:
  // Reads and handles one line; false at the end of the input.
  bool read_line(std::istream& in) {
    for (;;) {
      if (!std::getline(in, text_)) return false;
      ++line_;
      text_.reserve(text_.size() + simdjson::SIMDJSON_PADDING);              // For FlatParser.
      if (text_.find_first_not_of(" \t\r") != std::string::npos) break;  // Not blank.
    }
    // Errors: parse_error, and out_of_range for a number no double holds
    // (found by trace_fuzz), in json::parse's words.
    if (!parser_.parse(text_))
      throw TraceError(trace_.file, line_, "-", "not valid JSON: " + parser_.error());
    if (!parser_.is_object()) throw TraceError(trace_.file, line_, "-", "must be a JSON object");
    if (!header_seen_ && !(manifest_ && flat_.find("format") == nullptr)) {
      header(json::parse(text_), line_);  // Once, with its nested objects.
      header_seen_ = true;
    } else {
      record(flat_, line_);
    }
    return true;
  }

 public:
 private:
  void header(const json& object, std::size_t line) {
    FieldReader<json> f(object, trace_.file, line, "");
    if (!f.has("format")) f.fail("format", "missing field: is this a demandflight trace?");
    if (f.string("format") != "demandflight-trace")
      f.fail("format", "must be \"demandflight-trace\"");
    if (f.integer("version", 0, kMaxInt) != 1)
      f.fail("version", "unsupported version (this reader knows 1)");
    trace_.name = f.optional(
        "name", [&] { return f.string("name"); }, std::string("unnamed"));
    trace_.seed = static_cast<std::uint64_t>(f.optional(
        "seed", [&] { return f.integer("seed", 0, kMaxInt); }, defaults::seed));

    Platform& p = trace_.platform;
    p.client_bandwidth_Bps = defaults::client_bandwidth_Bps;
    p.client_latency_s = defaults::client_latency_s;
    p.disk_write_Bps = defaults::disk_write_Bps;
    p.hash_Bps = defaults::hash_Bps;
    if (f.has("platform")) {
      const json& platform = f.raw("platform");
      if (!platform.is_object()) f.fail("platform", "must be an object");
      FieldReader<json> pf(platform, trace_.file, line, "platform.");
      auto bandwidth = [&](FieldReader<json>& r, const char* n, double d) {
        return r.optional(
            n, [&] { return r.number(n, 0, 1e15, true); }, d);
      };
      auto latency = [&](FieldReader<json>& r, const char* n, double d) {
        return r.optional(
            n, [&] { return r.number(n, 0, 1e3); }, d);
      };
      p.client_bandwidth_Bps = bandwidth(pf, "client_bandwidth_Bps", p.client_bandwidth_Bps);
      p.client_latency_s = latency(pf, "client_latency_s", p.client_latency_s);
      p.disk_write_Bps = bandwidth(pf, "disk_write_Bps", p.disk_write_Bps);
      p.hash_Bps = bandwidth(pf, "hash_Bps", p.hash_Bps);
      if (pf.has("network_model")) {
        const std::string model = pf.string("network_model");
        const std::optional<NetworkModel> parsed = parse_network_model(model);
        if (!parsed) pf.fail("network_model", "must be one of " + network_model_names_text());
        p.network_model = *parsed;
      }
      if (pf.has("server_congestion_control")) {
        const std::optional<ServerCongestionControl> cc =
            parse_server_congestion_control(pf.string("server_congestion_control"));
        if (!cc) pf.fail("server_congestion_control", "must be \"cubic\" or \"bbr\"");
        p.server_congestion_control = *cc;
      }
      if (pf.has("origins")) {
        const json& origins = pf.raw("origins");
        if (!origins.is_object()) pf.fail("origins", "must be an object of origin name to link");
        origins_declared_ = true;
        for (const auto& [name, spec] : origins.items()) {
          if (!spec.is_object()) pf.fail("origins." + name, "must be an object");
          FieldReader<json> of(spec, trace_.file, line, "platform.origins." + name + ".");
          OriginSpec origin{name, bandwidth(of, "bandwidth_Bps", defaults::origin_bandwidth_Bps),
                            latency(of, "latency_s", defaults::origin_latency_s)};
          of.finish();
          add_origin(std::move(origin));
        }
      }
      pf.finish();
    }

    SchedulerSpec& s = trace_.scheduler;
    s = SchedulerSpec{defaults::max_transfers,      defaults::max_per_origin, defaults::cache_bytes,
                      defaults::retry_max_attempts, defaults::retry_base_s,   defaults::retry_cap_s,
                      defaults::retry_jitter};
    if (f.has("scheduler")) {
      const json& scheduler = f.raw("scheduler");
      if (!scheduler.is_object()) f.fail("scheduler", "must be an object");
      FieldReader<json> sf(scheduler, trace_.file, line, "scheduler.");
      auto count = [&](FieldReader<json>& r, const char* n, std::uint32_t d, std::int64_t hi) {
        return static_cast<std::uint32_t>(r.optional(
            n, [&] { return r.integer(n, 1, hi); }, d));
      };
      s.max_transfers = count(sf, "max_transfers", s.max_transfers, defaults::max_transfers_limit);
      s.max_per_origin =
          count(sf, "max_per_origin", s.max_per_origin, defaults::max_transfers_limit);
      s.cache_bytes = static_cast<std::uint64_t>(sf.optional(
          "cache_bytes", [&] { return sf.integer("cache_bytes", 0, kMaxInt); },
          static_cast<std::int64_t>(s.cache_bytes)));
      if (sf.has("retry")) {
        const json& retry = sf.raw("retry");
        if (!retry.is_object()) sf.fail("retry", "must be an object");
        FieldReader<json> rf(retry, trace_.file, line, "scheduler.retry.");
        s.retry_max_attempts = count(rf, "max_attempts", s.retry_max_attempts, 1000);
        s.retry_base_s = rf.optional(
            "base_s", [&] { return rf.number("base_s", 0, 1e6); }, s.retry_base_s);
        s.retry_cap_s = rf.optional(
            "cap_s", [&] { return rf.number("cap_s", 0, 1e6); }, s.retry_cap_s);
        s.retry_jitter = rf.optional(
            "jitter", [&] { return rf.number("jitter", 0, 1); }, s.retry_jitter);
        rf.finish();
      }
      if (sf.has("throttle")) {
        const json& throttle = sf.raw("throttle");
        if (!throttle.is_object()) sf.fail("throttle", "must be an object");
        FieldReader<json> tf(throttle, trace_.file, line, "scheduler.throttle.");
        s.throttle = read_throttle(tf);
        tf.finish();
      }
      if (sf.has("breaker")) {
        const json& breaker = sf.raw("breaker");
        if (!breaker.is_object()) sf.fail("breaker", "must be an object");
        FieldReader<json> bf(breaker, trace_.file, line, "scheduler.breaker.");
        s.breaker_failures = static_cast<std::uint32_t>(bf.optional(
            "failures", [&] { return bf.integer("failures", 0, 1000); },
            std::int64_t{s.breaker_failures}));
        s.breaker_open_s = bf.optional(
            "open_s", [&] { return bf.number("open_s", 0, 1e6); }, s.breaker_open_s);
        bf.finish();
      }
      sf.finish();
    }
    f.finish();
  }

  void record(const FlatObject& object, std::size_t line) {
    FieldReader<FlatObject> f(object, trace_.file, line, "");
    const std::string_view op = f.text("op");
    if (op == "artifact") {
      artifact(f);
      f.finish();
      return;
    }
    const std::optional<Op> kind = parse_op(op);
    if (!kind) {
      f.fail("op", "unknown op \"" + std::string(op) + "\" (expected " +
                       names_text(record_kind_names()) + ")");
    }
    if (stream_ids_ == nullptr && trace_.records.size() >= defaults::max_records)
      f.fail("-", "too many records");
    Record r;
    r.op = *kind;
    r.line = static_cast<std::uint32_t>(line);
    r.t = f.number("t", 0, kMaxTime);
    if (r.t < last_t_) {
      f.fail("t",
             "goes backwards (" + std::to_string(r.t) + " after " + std::to_string(last_t_) + ")");
    }
    last_t_ = r.t;
    if (r.op == Op::subscribe) {
      if (stream_ids_ != nullptr) {
        const std::string_view id = f.text("demand");
        const auto index = stream_ids_->add(id);
        if (!index) f.fail("demand", "demand id \"" + std::string(id) + "\" is already used");
        r.demand = *index;
      } else {
        r.demand = static_cast<std::uint32_t>(trace_.demand_ids.size());
        trace_.demand_ids.emplace_back(f.text("demand"));
        if (!demands_.insert(r.demand)) {
          std::string demand = std::move(trace_.demand_ids.back());
          trace_.demand_ids.pop_back();
          f.fail("demand", "demand id \"" + demand + "\" is already used");
        }
      }
      r.owner = owner(f.text("owner"));
      r.artifact = artifact_ref(f, "artifact");
      r.priority = static_cast<Priority>(f.integer("priority", std::numeric_limits<Priority>::min(),
                                                   std::numeric_limits<Priority>::max()));
      r.owner_generation = f.optional(
          "owner_generation", [&] { return f.integer("owner_generation", 0, kMaxInt); },
          defaults::owner_generation);
      if (f.has("timeout_s")) r.timeout_s = f.number("timeout_s", 0, kMaxTime);
    } else if (r.op == Op::cancel) {
      r.demand = demand_ref(f);
    } else if (r.op == Op::set_priority) {
      r.demand = demand_ref(f);
      r.priority = static_cast<Priority>(f.integer("priority", std::numeric_limits<Priority>::min(),
                                                   std::numeric_limits<Priority>::max()));
    } else if (r.op == Op::end_owner) {
      r.owner = owner(f.text("owner"));
      if (f.has("owner_generation")) {
        r.has_generation = true;
        r.owner_generation = f.integer("owner_generation", 0, kMaxInt);
      }
    } else if (r.op == Op::fault) {
      r.fault = static_cast<std::uint32_t>(trace_.faults.size());
      FaultSpec& spec = trace_.faults.emplace_back();
      const std::string_view fault = f.text("kind");
      const std::optional<FaultKind> fault_kind = parse_fault_kind(fault);
      if (!fault_kind) {
        f.fail("kind", "unknown fault kind \"" + std::string(fault) + "\" (expected " +
                           names_text(fault_kind_names()) + ")");
      }
      spec.kind = *fault_kind;
      if (spec.kind == FaultKind::transfer_error) {
        r.artifact = artifact_ref(f, "artifact");
        spec.count = static_cast<std::uint32_t>(f.optional(
            "count", [&] { return f.integer("count", 1, 1'000'000); },
            static_cast<std::int64_t>(defaults::fault_count)));
        spec.after_fraction = f.optional(
            "after_fraction", [&] { return f.number("after_fraction", 0, 1); },
            defaults::fault_after_fraction);
        spec.retryable = f.optional(
            "retryable", [&] { return f.boolean("retryable"); }, defaults::fault_retryable);
      } else if (spec.kind == FaultKind::corrupt) {
        r.artifact = artifact_ref(f, "artifact");
        spec.count = static_cast<std::uint32_t>(f.optional(
            "count", [&] { return f.integer("count", 1, 1'000'000); },
            static_cast<std::int64_t>(defaults::fault_count)));
      } else {
        const std::string origin = f.string("origin");
        auto it = origin_index_.find(origin);
        if (it == origin_index_.end()) f.fail("origin", "unknown origin \"" + origin + "\"");
        spec.origin = it->second;
        spec.duration_s = f.number("duration_s", 0, kMaxTime, /*lo_open=*/true);
      }
    } else if (r.op == Op::throttle) {
      r.fault = static_cast<std::uint32_t>(trace_.throttles.size());
      trace_.throttles.push_back(read_throttle(f));
    }
    f.finish();
    ++records_;
    if (streamed_ != nullptr) {
      *streamed_ = r;
      have_streamed_ = true;
    } else {
      trace_.records.push_back(r);
    }
  }

  void artifact(FieldReader<FlatObject>& f) {
    Artifact a;
    a.id = f.string("id");
    if (artifacts_.find(a.id)) f.fail("id", "artifact id \"" + a.id + "\" is declared twice");
    a.key.resource = f.string("resource");
    a.key.revision = f.string("revision");
    a.key.target = f.string("target");
    a.key.generation = f.integer("generation", std::numeric_limits<std::int64_t>::min(), kMaxInt);
    a.size_bytes = static_cast<std::uint64_t>(
        f.integer("size", 0, static_cast<std::int64_t>(defaults::max_artifact_size_bytes)));
    // `origin`, or `origins`: the first is preferred, the others are mirrors.
    if (f.has("origins")) {
      if (f.has("origin")) f.fail("origins", "give origin or origins, not both");
      const FlatObject::Value& list = f.raw("origins");
      if (!list.is_string_list() || list.strings.empty())
        f.fail("origins", "must be a non-empty list of origin names");
      if (list.strings.size() > defaults::max_origins_per_artifact) {
        f.fail("origins",
               "at most " + std::to_string(defaults::max_origins_per_artifact) + " origins");
      }
      for (std::size_t i = 0; i < list.strings.size(); ++i) {
        const std::uint32_t o = origin_of(f, "origins", list.strings[i]);
        for (std::size_t j = 0; j < i; ++j) {
          if (list.strings[j] == list.strings[i])
            f.fail("origins", "origin \"" + list.strings[i] + "\" is named twice");
        }
        if (i == 0) {
          a.origin = o;
        } else {
          a.mirrors.push_back(o);
        }
      }
    } else {
      a.origin = origin_of(f, "origin", f.string("origin"));
    }
    if (f.has("sha256")) {
      std::string digest = f.string("sha256");
      if (digest.size() != 64 ||
          digest.find_first_not_of("0123456789abcdefABCDEF") != std::string::npos) {
        f.fail("sha256", "must be 64 hexadecimal digits");
      }
      a.sha256 = std::move(digest);
    }
    trace_.artifacts.push_back(std::move(a));
    artifacts_.insert(static_cast<std::uint32_t>(trace_.artifacts.size() - 1));
  }

  // The caps of a scheduler.throttle object or a throttle record: each field
  // optional (absent: no such cap).
  template <class Object>
  static ThrottleConfig read_throttle(FieldReader<Object>& f) {
    ThrottleConfig c;
    if (f.has("background_at_or_below")) {
      c.background_at_or_below = static_cast<Priority>(
          f.integer("background_at_or_below", std::numeric_limits<Priority>::min(),
                    std::numeric_limits<Priority>::max()));
    }
    if (f.has("background_Bps")) c.background_Bps = f.number("background_Bps", 0, 1e15);
    if (f.has("overall_Bps")) c.overall_Bps = f.number("overall_Bps", 0, 1e15);
    if (c.background_Bps > 0 && !c.background_at_or_below)
      f.fail("background_Bps", "needs background_at_or_below (the level it caps)");
    return c;
  }

  // The index of the origin an artifact line names in `field`; a new one is
  // added unless the header declared its origins.
  std::uint32_t origin_of(FieldReader<FlatObject>& f, const char* field,
                          const std::string& origin) {
    auto it = origin_index_.find(origin);
    if (it != origin_index_.end()) return it->second;
    if (origins_declared_)
      f.fail(field, "origin \"" + origin + "\" is not declared in platform.origins");
    if (origins_sealed_) {
      f.fail(field, "origin \"" + origin +
                        "\" is first named after the first timed record: a streamed run "
                        "builds its platform before that record; declare it in "
                        "platform.origins or name it on an earlier artifact line");
    }
    if (trace_.platform.origins.size() >= defaults::max_origins) f.fail(field, "too many origins");
    return add_origin(
        OriginSpec{origin, defaults::origin_bandwidth_Bps, defaults::origin_latency_s});
  }

  std::uint32_t add_origin(OriginSpec origin) {
    const auto index = static_cast<std::uint32_t>(trace_.platform.origins.size());
    origin_index_.emplace(origin.name, index);
    trace_.platform.origins.push_back(std::move(origin));
    return index;
  }

  std::uint32_t artifact_ref(FieldReader<FlatObject>& f, const char* field) {
    const std::string_view id = f.text(field);
    const auto index = artifacts_.find(id);
    if (!index) {
      f.fail(field, "unknown artifact \"" + std::string(id) +
                        "\" (declare it with an artifact line first)");
    }
    return *index;
  }

  std::uint32_t demand_ref(FieldReader<FlatObject>& f) {
    const std::string_view id = f.text("demand");
    const auto index = stream_ids_ != nullptr ? stream_ids_->find(id) : demands_.find(id);
    if (!index) f.fail("demand", "unknown demand \"" + std::string(id) + "\"");
    return *index;
  }

  std::uint32_t owner(std::string_view name) {
    if (auto index = owners_.find(name)) return *index;
    const auto index = static_cast<std::uint32_t>(trace_.owners.size());
    trace_.owners.emplace_back(name);
    owners_.insert(index);
    return index;
  }

  Trace trace_;
  bool manifest_ = false;
  std::string text_;
  std::size_t line_ = 0;
  bool header_seen_ = false;
  FlatObject flat_;
  FlatParser parser_{flat_};
  std::uint64_t records_ = 0;
  // Streamed (TraceStream).
  detail::StreamDemandIds* stream_ids_ = nullptr;
  Record* streamed_ = nullptr;
  bool have_streamed_ = false;
  bool origins_sealed_ = false;
  bool origins_declared_ = false;
  double last_t_ = 0;
  std::unordered_map<std::string, std::uint32_t> origin_index_;  // A handful.
  IdIndex<Artifact> artifacts_{trace_.artifacts};
  IdIndex<std::string> demands_{trace_.demand_ids};
  IdIndex<std::string> owners_{trace_.owners};
};

}  // namespace

namespace {
constexpr std::array kNetworkModels{NetworkModel::tcp, NetworkModel::calibrated,
                                    NetworkModel::cm02, NetworkModel::lv08, NetworkModel::ns3};
}  // namespace

namespace {
std::string lowercase(std::string_view name) {
  std::string lower;
  for (const char c : name) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return lower;
}
}  // namespace

std::optional<ServerCongestionControl> parse_server_congestion_control(std::string_view name) {
  const std::string lower = lowercase(name);
  if (lower == "cubic") return ServerCongestionControl::cubic;
  if (lower == "bbr") return ServerCongestionControl::bbr;
  return std::nullopt;
}

std::string_view to_string(NetworkModel model) {
  switch (model) {
    case NetworkModel::calibrated:
      return "calibrated";
    case NetworkModel::cm02:
      return "cm02";
    case NetworkModel::lv08:
      return "lv08";
    case NetworkModel::tcp:
      return "tcp";
    case NetworkModel::ns3:
      return "ns3";
  }
  return "unknown";
}

std::optional<NetworkModel> parse_network_model(std::string_view name) {
  std::string lower = lowercase(name);
  std::erase(lower, '-');
  if (lower == "default") return NetworkModel::tcp;
  for (const NetworkModel model : kNetworkModels) {
    if (lower == to_string(model)) return model;
  }
  return std::nullopt;
}

const std::vector<std::string>& network_model_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out{"default"};  // The tcp model.
    for (const NetworkModel model : kNetworkModels) out.emplace_back(to_string(model));
    return out;
  }();
  return names;
}

std::string network_model_names_text() {
  std::string text;
  for (const std::string& name : network_model_names()) {
    if (!text.empty()) text += ", ";
    text += name;
  }
  return text;
}

TraceError::TraceError(std::string file, std::size_t line, std::string field,
                       const std::string& message)
    : std::runtime_error(line == 0 && field == "-"
                             ? file + ": " + message  // The whole file, no line or field.
                             : file + ":" + std::to_string(line) + ": " + field + ": " + message),
      file_(std::move(file)),
      line_(line),
      field_(std::move(field)) {}

TraceError::TraceError(std::string file, Record record, std::string field,
                       const std::string& message)
    : std::runtime_error(file + ": record " + std::to_string(record.number) + ": " + field + ": " +
                         message),
      file_(std::move(file)),
      line_(record.number),
      field_(std::move(field)) {}

TraceError::TraceError(Text, const std::string& what, std::string file, std::size_t line,
                       std::string field)
    : std::runtime_error(what), file_(std::move(file)), line_(line), field_(std::move(field)) {}

TraceError TraceError::with_note(const std::string& note) const {
  return TraceError(Text{}, std::string(what()) + " (" + note + ")", file_, line_, field_);
}

TraceError TraceError::unreadable(const std::string& file, const std::string& what) {
  const int error = errno;
  return TraceError(file, 0, "-", error != 0 ? what + ": " + std::strerror(error) : what);
}

namespace detail {

std::optional<std::string> compare_line_readers(const std::string& line) {
  std::string padded = line;
  padded.reserve(line.size() + simdjson::SIMDJSON_PADDING);
  FlatObject fast;
  FlatParser fast_parser(fast);
  if (!fast_parser.parse_fast(padded)) return std::nullopt;
  FlatObject slow;
  FlatParser slow_parser(slow);
  if (!slow_parser.parse_slow(padded)) return "nlohmann refuses it: " + slow_parser.error();
  if (fast_parser.is_object() != slow_parser.is_object()) return std::string("object or not");
  if (fast.size() != slow.size()) {
    return "fields: " + std::to_string(fast.size()) + " against " + std::to_string(slow.size());
  }
  for (std::size_t i = 0; i < fast.size(); ++i) {
    const FlatObject::Field& a = fast.begin()[i];
    const FlatObject::Field& b = slow.begin()[i];
    const std::string where = "field " + std::to_string(i) + " (" + b.name + "): ";
    if (a.name != b.name) return where + "name \"" + a.name + "\"";
    using Kind = FlatObject::Kind;
    auto zero = [](const FlatObject::Value& v) {
      return (v.kind == Kind::integer && v.integer == 0) ||
             (v.kind == Kind::unsigned_integer && v.unsigned_integer == 0);
    };
    if (zero(a.value) && zero(b.value))
      continue;  // "-0": integer 0 to nlohmann, either kind reads as 0.
    if (a.value.kind != b.value.kind) {
      return where + "kind " + std::to_string(static_cast<int>(a.value.kind)) + " against " +
             std::to_string(static_cast<int>(b.value.kind));
    }
    bool same = true;
    switch (a.value.kind) {
      case Kind::null:
      case Kind::nested:
        break;
      case Kind::boolean:
        same = a.value.boolean == b.value.boolean;
        break;
      case Kind::integer:
        same = a.value.integer == b.value.integer;
        break;
      case Kind::unsigned_integer:
        same = a.value.unsigned_integer == b.value.unsigned_integer;
        break;
      case Kind::floating:  // Bit for bit: both round correctly.
        same = std::memcmp(&a.value.floating, &b.value.floating, sizeof(double)) == 0;
        break;
      case Kind::string:
        same = a.value.string == b.value.string;
        break;
      case Kind::string_list:
        same = a.value.strings == b.value.strings;
        break;
    }
    if (!same) return where + "value";
  }
  return std::nullopt;
}

}  // namespace detail

Trace read_trace(std::istream& in, const std::string& name_for_errors) {
  return Reader(name_for_errors).read(in);
}

Trace read_manifest(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw TraceError::unreadable(path);
  return Reader(path, true).read(in);
}

struct TraceStream::Impl {
  explicit Impl(const std::string& name) : reader(name, ids) {}
  std::ifstream file;
  std::istream* in = nullptr;
  detail::StreamDemandIds ids;
  Reader reader;
  Record pending;
  bool has_pending = false;

  void start() {
    has_pending = reader.next(*in, pending);
    reader.seal_origins();
  }
};

TraceStream::TraceStream(const std::string& path) : impl_(std::make_unique<Impl>(path)) {
  impl_->file.open(path);
  if (!impl_->file) throw TraceError::unreadable(path);
  impl_->in = &impl_->file;
  impl_->start();
}

TraceStream::TraceStream(std::istream& in, const std::string& name_for_errors)
    : impl_(std::make_unique<Impl>(name_for_errors)) {
  impl_->in = &in;
  impl_->start();
}

TraceStream::~TraceStream() = default;

const Trace& TraceStream::trace() const { return impl_->reader.trace(); }

bool TraceStream::next(Record& record) {
  if (impl_->has_pending) {
    record = impl_->pending;
    impl_->has_pending = false;
    return true;
  }
  return impl_->reader.next(*impl_->in, record);
}

const std::string& TraceStream::demand_id(std::uint32_t demand) const {
  return impl_->ids.id(demand);
}
void TraceStream::demand_ended(std::uint32_t demand) { impl_->ids.ended(demand); }
void TraceStream::demand_written(std::uint32_t demand) { impl_->ids.written(demand); }
std::uint64_t TraceStream::demands_read() const { return impl_->ids.count(); }
std::uint64_t TraceStream::records_read() const { return impl_->reader.records(); }
std::size_t TraceStream::demand_ids_kept() const { return impl_->ids.kept(); }

Trace read_trace(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw TraceError::unreadable(path);
  return read_trace(in, path);
}

}  // namespace dfl::format
