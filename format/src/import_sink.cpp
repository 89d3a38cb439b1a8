#include "import_sink.h"

#include <algorithm>
#include <boost/math/distributions/normal.hpp>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <limits>
#include <stdexcept>

#include "demandflight/format/trace.h"

namespace dfl::format::import_detail {

std::optional<double> parse_double(std::string_view text) {
  double value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc{} || end != text.data() + text.size() || !std::isfinite(value)) {
    return std::nullopt;
  }
  return value;
}

namespace {

std::optional<std::int64_t> parse_int(std::string_view text) {
  std::int64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc{} || end != text.data() + text.size()) return std::nullopt;
  return value;
}

// Splits `a=1,b=2` into its items; std::invalid_argument naming `option` for an
// item without '='.
std::vector<std::pair<std::string, std::string>> items(const std::string& option,
                                                       const std::string& spec) {
  std::vector<std::pair<std::string, std::string>> out;
  std::size_t from = 0;
  while (from <= spec.size()) {
    const std::size_t comma = std::min(spec.find(',', from), spec.size());
    const std::string item = spec.substr(from, comma - from);
    const std::size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0) {
      throw std::invalid_argument("--" + option + ": \"" + item + "\" is not NAME=VALUE");
    }
    out.emplace_back(item.substr(0, eq), item.substr(eq + 1));
    from = comma + 1;
  }
  return out;
}

}  // namespace

// --- Options -----------------------------------------------------------------------

std::optional<std::string> OptionReader::text(const std::string& name) {
  read_[name] = true;
  auto it = options_.find(name);
  if (it == options_.end()) return std::nullopt;
  return it->second;
}

std::string OptionReader::text_or(const std::string& name, const std::string& fallback) {
  return text(name).value_or(fallback);
}

std::optional<double> OptionReader::number(const std::string& name) {
  const std::optional<std::string> t = text(name);
  if (!t) return std::nullopt;
  const std::optional<double> value = parse_double(*t);
  if (!value) throw std::invalid_argument("--" + name + ": \"" + *t + "\" is not a number");
  return value;
}

bool OptionReader::flag(const std::string& name) {
  const std::optional<std::string> t = text(name);
  if (!t || *t == "false") return false;
  if (*t == "true") return true;
  throw std::invalid_argument("--" + name + ": a flag is true or false, not \"" + *t + "\"");
}

void OptionReader::check_all_read(const std::string& format) const {
  for (const auto& [name, value] : options_) {
    if (!read_.count(name)) {
      throw std::invalid_argument("--" + name + ": not an option of import " + format);
    }
  }
}

ojson OptionReader::as_json() const {
  ojson out = ojson::object();
  for (const auto& [name, value] : options_)
    out[name] = value;
  return out;
}

Abandon parse_abandon(const std::string& spec) {
  Abandon a;
  std::map<std::string, double> values;
  bool has_p = false;
  for (const auto& [name, value] : items("abandon", spec)) {
    if (name == "dist") {
      a.dist = value;
      continue;
    }
    const std::optional<double> v = parse_double(value);
    if (!v || *v < 0) {
      throw std::invalid_argument("--abandon: " + name + "=" + value +
                                  " is not a number at least 0");
    }
    if (name == "p") {
      if (*v > 1) throw std::invalid_argument("--abandon: p=" + value + " is above 1");
      a.p = *v;
      has_p = true;
    } else {
      values[name] = *v;
    }
  }
  if (!has_p) throw std::invalid_argument("--abandon: p=PROBABILITY is required");
  auto take = [&](const char* name) {
    auto it = values.find(name);
    if (it == values.end()) {
      throw std::invalid_argument("--abandon: dist=" + a.dist + " needs " + name);
    }
    const double v = it->second;
    values.erase(it);
    return v;
  };
  a.params = ojson{{"p", a.p}, {"dist", a.dist}};
  if (a.dist == "exponential") {
    a.a = take("mean_s");
    a.params["mean_s"] = a.a;
  } else if (a.dist == "lognormal") {
    a.a = take("median_s");
    a.b = take("sigma");
    a.params["median_s"] = a.a;
    a.params["sigma"] = a.b;
  } else if (a.dist == "uniform") {
    a.a = take("min_s");
    a.b = take("max_s");
    if (a.b < a.a) throw std::invalid_argument("--abandon: max_s is below min_s");
    a.params["min_s"] = a.a;
    a.params["max_s"] = a.b;
  } else if (a.dist == "fixed") {
    a.a = take("after_s");
    a.params["after_s"] = a.a;
  } else {
    throw std::invalid_argument("--abandon: dist=" + a.dist +
                                " is not exponential, lognormal, uniform or fixed");
  }
  if (!values.empty()) {
    throw std::invalid_argument("--abandon: " + values.begin()->first + " is not a parameter of " +
                                a.dist);
  }
  return a;
}

PriorityMap parse_priority_map(const std::string& field, const std::string& spec) {
  PriorityMap m;
  m.field = field;
  for (const auto& [value, priority_text] : items("priority-map", spec)) {
    const std::optional<std::int64_t> priority = parse_int(priority_text);
    if (!priority) {
      throw std::invalid_argument("--priority-map: " + value + "=" + priority_text +
                                  ": the priority is not an integer");
    }
    if (value == "*") {
      m.otherwise = *priority;
    } else if (field == "size") {
      const std::optional<double> bytes = parse_double(value);
      if (!bytes || *bytes < 0 || *bytes > kMaxImportSize) {
        throw std::invalid_argument("--priority-map: \"" + value +
                                    "\" is not a size in bytes (--priority-by size)");
      }
      m.by_size.emplace_back(*bytes, *priority);
    } else {
      m.by_value.emplace_back(value, *priority);
    }
  }
  std::sort(m.by_size.begin(), m.by_size.end());
  return m;
}

Deadlines parse_deadlines(const std::string& spec) {
  Deadlines d;
  auto seconds = [](const std::string& text) {
    const std::optional<double> s = parse_double(text);
    if (!s || *s <= 0) {
      throw std::invalid_argument("--deadline: \"" + text +
                                  "\" is not a number of seconds above 0");
    }
    return *s;
  };
  if (spec.find('=') == std::string::npos) {
    d.all = seconds(spec);
    return d;
  }
  for (const auto& [priority_text, s] : items("deadline", spec)) {
    if (priority_text == "*") {
      d.all = seconds(s);
      continue;
    }
    const std::optional<std::int64_t> priority = parse_int(priority_text);
    if (!priority) {
      throw std::invalid_argument("--deadline: \"" + priority_text +
                                  "\" is not a priority (an integer, or *)");
    }
    d.by_priority[*priority] = seconds(s);
  }
  return d;
}

DemandModel read_demand_model(OptionReader& options) {
  DemandModel m;
  if (const auto gap = options.number("sessions")) {
    if (*gap <= 0) throw std::invalid_argument("--sessions: the idle gap must be above 0 s");
    m.session_gap_s = gap;
  }
  if (const auto spec = options.text("abandon")) m.abandon = parse_abandon(*spec);
  const auto by = options.text("priority-by");
  const auto map = options.text("priority-map");
  if (by.has_value() != map.has_value()) {
    throw std::invalid_argument(by ? "--priority-by needs --priority-map"
                                   : "--priority-map needs --priority-by");
  }
  if (by) m.priority_by = parse_priority_map(*by, *map);
  if (const auto spec = options.text("deadline")) m.deadlines = parse_deadlines(*spec);
  if (const auto seed = options.text("seed")) {
    const std::optional<std::int64_t> s = parse_int(*seed);
    if (!s || *s < 0) throw std::invalid_argument("--seed: \"" + *seed + "\" is not an integer");
    m.seed = static_cast<std::uint64_t>(*s);
  }
  if (const auto limit = options.text("limit")) {
    const std::optional<std::int64_t> n = parse_int(*limit);
    if (!n || *n < 1) {
      throw std::invalid_argument("--limit: \"" + *limit + "\" is not a number of requests (1 or more)");
    }
    m.limit = static_cast<std::uint64_t>(*n);
  }
  return m;
}

std::vector<ImportOption> shared_options() {
  return {
      {"sessions",
       "group each owner's requests into sessions split by idle gaps of more than this many "
       "seconds; a session is an owner (OWNER#N) that ends (end_owner) once idle that long",
       false, false, ""},
      {"abandon",
       "abandon a demand with probability p after a drawn patience time: "
       "p=P,dist=exponential,mean_s=M | dist=lognormal,median_s=M,sigma=S | "
       "dist=uniform,min_s=A,max_s=B | dist=fixed,after_s=T (a log's own abandon time wins)",
       false, false, ""},
      {"priority-by",
       "give priorities by this field's value (see --priority-map): a column (csv), type, mime, "
       "method or host (har, cdp), or size (every format)",
       false, false, ""},
      {"priority-map",
       "VALUE=PRIORITY,...,*=PRIORITY; for size, VALUEs are byte thresholds (the first at or "
       "above the size applies)",
       false, false, ""},
      {"deadline", "a deadline (timeout_s) for every demand: SECONDS, or PRIORITY=SECONDS,...,*=S",
       false, false, ""},
      {"name", "the trace's name", false, false, "imported"},
      {"seed", "the trace's seed, which also draws the demand model", false, false, "1"},
      {"limit", "import the first N requests only (in time order; the rest are counted)", false,
       false, ""},
  };
}

// --- The writer ------------------------------------------------------------------

Sink::Sink(std::string format, std::vector<std::string> inputs, DemandModel model)
    : format_(std::move(format)),
      inputs_(std::move(inputs)),
      model_(std::move(model)),
      rng_(model_.seed),
      body_(std::tmpfile(), &std::fclose),
      writer_([this](std::string_view lines) {
        if (std::fwrite(lines.data(), 1, lines.size(), body_.get()) != lines.size())
          throw std::runtime_error("import: writing the temporary file failed");
      }) {
  if (!body_) throw std::runtime_error("import: cannot create a temporary file");
}

Sink::~Sink() = default;

double Sink::draw() {
  // 53 random bits, shifted off 0: the same numbers on every platform.
  return (static_cast<double>(rng_() >> 11) + 0.5) * 0x1.0p-53;
}

double Sink::patience() {
  const Abandon& a = *model_.abandon;
  const double u = draw();
  if (a.dist == "exponential") return -a.a * std::log1p(-u);
  if (a.dist == "lognormal") {
    return a.a * std::exp(a.b * boost::math::quantile(boost::math::normal(), u));
  }
  if (a.dist == "uniform") return a.a + (a.b - a.a) * u;
  return a.a;  // fixed
}

void Sink::flush(double up_to) {
  while (!pending_.empty() && pending_.top().t <= up_to) {
    const Pending& p = pending_.top();
    switch (p.kind) {
      case Pending::cancel:
        writer_.write(CancelLine{p.t, p.who});
        break;
      case Pending::set_priority:
        writer_.write(SetPriorityLine{p.t, p.who, p.priority});
        break;
      case Pending::end_owner:
        writer_.write(EndOwnerLine{p.t, p.who, std::nullopt});
        break;
    }
    pending_.pop();
  }
}

void Sink::close_sessions(double before) {
  while (!closing_.empty() && closing_.top().first < before) {
    const auto [closes, base] = closing_.top();
    closing_.pop();
    auto it = sessions_.find(base);
    // Stale: the session went on after this entry was queued.
    if (it == sessions_.end() || it->second.last_t + *model_.session_gap_s != closes) continue;
    pending_.push(Pending{closes, seq_++, Pending::end_owner,
                          base + "#" + std::to_string(it->second.number), 0});
    ++owner_ends_;
    sessions_.erase(it);
  }
}

std::string Sink::owner_of(const std::string& base, double t) {
  if (!model_.session_gap_s) return base;
  auto [it, fresh] = sessions_.try_emplace(base);
  Session& s = it->second;
  if (fresh) {
    s.number = ++session_numbers_[base];  // Numbered per owner over the whole log.
    ++sessions_made_;
  }
  s.last_t = t;
  closing_.emplace(t + *model_.session_gap_s, base);
  return base + "#" + std::to_string(s.number);
}

std::int64_t Sink::mapped_priority(const Request& r) {
  if (!model_.priority_by) return r.priority;
  const PriorityMap& m = *model_.priority_by;
  if (m.field == "size") {
    for (const auto& [threshold, priority] : m.by_size) {
      if (static_cast<double>(r.size) <= threshold) return priority;
    }
  } else {
    for (const auto& [value, priority] : m.by_value) {
      if (value == r.priority_value) return priority;
    }
  }
  if (m.otherwise) return *m.otherwise;
  ++unmapped_;
  return r.priority;
}

namespace {
const std::string kDefaultOrigin = "origin";
}  // namespace

void Sink::request(const Request& r) {
  if (r.t < last_t_) throw std::logic_error("import: requests out of time order");
  // A backstop for the formats that do not bound their times where they read
  // them (the CSV importer names the row and column).
  const bool too_late =
      r.t > kMaxRecordTime || (r.end && *r.end > kMaxRecordTime) ||
      std::any_of(r.priority_changes.begin(), r.priority_changes.end(),
                  [](const auto& change) { return change.first > kMaxRecordTime; });
  if (too_late) {
    throw TraceError(inputs_.empty() ? std::string("-") : inputs_.front(), 0, "t",
                     "request " + r.demand +
                         ": a time more than 10^12 s after the log's first (the trace format's "
                         "limit)");
  }
  if (full()) {
    skip_request("beyond --limit", r.end.has_value(), r.priority_changes.size());
    return;
  }
  last_t_ = r.t;
  if (model_.session_gap_s) close_sessions(r.t);
  flush(r.t);

  // An object whose size changed is a new revision of it.
  auto [it, fresh] = artifacts_.try_emplace(r.object, Known{r.object, r.size, 1});
  if (!fresh && it->second.size != r.size) {
    ++size_changes_;
    it->second.size = r.size;
    ++it->second.revision;
    it->second.id = r.object + "@" + std::to_string(it->second.revision);
    fresh = true;
  }
  if (fresh) {
    ++revisions_;
    const std::string& origin = r.origin.empty() ? kDefaultOrigin : r.origin;
    if (std::find(origins_.begin(), origins_.end(), origin) == origins_.end())
      origins_.push_back(origin);  // A handful: a scan is enough.
    std::string revision = "r";
    revision += std::to_string(it->second.revision);
    ArtifactLine a;
    a.id = it->second.id;
    a.resource = r.object;
    a.revision = revision;
    a.target = "import";
    a.size = r.size;
    const std::string_view origin_name = origin;
    a.origins = std::span<const std::string_view>(&origin_name, 1);
    writer_.artifact(a);
  }

  const std::string owner = owner_of(r.owner.empty() ? std::string("log") : r.owner, r.t);
  const std::int64_t priority = mapped_priority(r);
  SubscribeLine subscribe{r.t, r.demand, owner, it->second.id, priority, std::nullopt,
                          std::nullopt};
  if (model_.deadlines) {
    const Deadlines& d = *model_.deadlines;
    auto by = d.by_priority.find(priority);
    subscribe.timeout_s = by != d.by_priority.end() ? std::optional<double>(by->second) : d.all;
    if (subscribe.timeout_s) ++deadlines_;
  }
  writer_.write(subscribe);
  ++demands_;
  ++by_priority_[priority];

  // Drawn for every demand, so that one demand's draws do not depend on
  // whether the log gave another an abandon time.
  std::optional<double> end = r.end;
  if (model_.abandon) {
    const bool abandons = draw() < model_.abandon->p;
    const double after = patience();
    if (!end && abandons) {
      end = r.t + after;
      ++abandons_;
    }
  }
  // The demand's priority changes up to its end (a change after it would do
  // nothing: the demand has ended).
  double changed_at = r.t;
  for (const auto& [t, p] : r.priority_changes) {
    if (t < changed_at) throw std::logic_error("import: priority changes out of order");
    changed_at = t;
    if (end && t > *end) {
      ++changes_after_end_;
      continue;
    }
    pending_.push(Pending{t, seq_++, Pending::set_priority, r.demand, p});
    ++set_priorities_;
  }
  if (end) {
    pending_.push(Pending{*end, seq_++, Pending::cancel, r.demand, 0});
    ++cancels_;
  }
}

void Sink::finish(const std::string& name, ojson options, std::ostream& out) {
  if (model_.session_gap_s) close_sessions(std::numeric_limits<double>::infinity());
  flush(std::numeric_limits<double>::infinity());
  writer_.finish();

  ojson counts = ojson::object();
  for (const auto& [what, n] : counts_)
    counts[what] = n;
  ojson skipped = ojson::object();
  for (const auto& [why, n] : skipped_)
    skipped[why] = n;
  ojson priorities = ojson::object();
  for (const auto& [p, n] : by_priority_)
    priorities[std::to_string(p)] = n;
  ojson model = ojson::object();
  model["seed"] = model_.seed;
  if (model_.session_gap_s) model["sessions"] = {{"gap_s", *model_.session_gap_s}};
  if (model_.abandon) model["abandon"] = model_.abandon->params;
  if (model_.priority_by) {
    const PriorityMap& m = *model_.priority_by;
    ojson map = ojson::object();
    for (const auto& [v, p] : m.by_value)
      map[v] = p;
    for (const auto& [v, p] : m.by_size)
      map["<=" + std::to_string(static_cast<std::uint64_t>(v))] = p;
    if (m.otherwise) map["*"] = *m.otherwise;
    model["priority_by"] = {{"field", m.field}, {"map", map}};
  }
  if (model_.deadlines) {
    ojson d = ojson::object();
    for (const auto& [p, s] : model_.deadlines->by_priority)
      d[std::to_string(p)] = s;
    if (model_.deadlines->all) d["*"] = *model_.deadlines->all;
    model["deadline_s"] = d;
  }

  ojson x{{"format", format_}, {"inputs", inputs_}, {"options", std::move(options)}};
  for (auto& [what, n] : counts.items())
    x[what] = n;
  x["demands"] = demands_;
  x["artifacts"] = revisions_;
  x["size_changes"] = size_changes_;
  x["cancels"] = cancels_;
  x["abandoned_by_model"] = abandons_;
  x["set_priorities"] = set_priorities_;
  x["priority_changes_after_the_end"] = changes_after_end_;
  x["sessions"] = sessions_made_;
  x["owner_ends"] = owner_ends_;
  x["deadlines"] = deadlines_;
  x["priority_not_mapped"] = unmapped_;
  x["demands_by_priority"] = priorities;
  x["skipped"] = skipped;
  x["demand_model"] = model;

  TraceHeader header;
  header.name = name;
  header.seed = model_.seed;
  if (!origins_.empty()) {
    header.platform.origins.emplace();
    for (const std::string& origin : origins_)
      header.platform.origins->push_back(HeaderOrigin{origin, std::nullopt, std::nullopt});
  }
  header.extensions.emplace_back("x-import", x.dump());
  TraceWriter head(out);
  head.header(header);
  head.finish();
  std::rewind(body_.get());
  char buffer[1 << 16];
  for (;;) {
    const std::size_t n = std::fread(buffer, 1, sizeof buffer, body_.get());
    if (n == 0) break;
    out.write(buffer, static_cast<std::streamsize>(n));
  }
  if (std::ferror(body_.get()))
    throw std::runtime_error("import: reading the temporary file failed");
  if (!out) throw std::runtime_error("import: writing the trace failed");
}

// --- Helpers -------------------------------------------------------------------------

bool valid_utf8(std::string_view text) {
  std::size_t i = 0;
  while (i < text.size()) {
    const auto c = static_cast<unsigned char>(text[i]);
    std::size_t n = 0;
    std::uint32_t code = 0;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xE0) == 0xC0) {
      n = 1;
      code = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      n = 2;
      code = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      n = 3;
      code = c & 0x07;
    } else {
      return false;
    }
    for (std::size_t k = 1; k <= n; ++k) {
      if (i + k >= text.size()) return false;
      const auto d = static_cast<unsigned char>(text[i + k]);
      if ((d & 0xC0) != 0x80) return false;
      code = (code << 6) | (d & 0x3F);
    }
    // Overlong forms, surrogates and code points past U+10FFFF.
    static constexpr std::uint32_t kMin[] = {0, 0x80, 0x800, 0x10000};
    if (code < kMin[n] || (code >= 0xD800 && code <= 0xDFFF) || code > 0x10FFFF) return false;
    i += n + 1;
  }
  return true;
}

double seconds_per_unit(const std::string& unit) {
  if (unit == "s") return 1;
  if (unit == "ms") return 1e-3;
  if (unit == "us") return 1e-6;
  if (unit == "ns") return 1e-9;
  throw std::invalid_argument("--time-unit: \"" + unit + "\" is not s, ms, us or ns");
}

bool BrowserOptions::is_download(const std::string& method) const {
  return std::find(method_list.begin(), method_list.end(), method) != method_list.end();
}

std::vector<ImportOption> browser_options(const std::string& what) {
  return {
      {"cached",
       what + " the browser served from its cache: skip them, or keep them as demands (demand)",
       false, false, "skip"},
      {"pushed",
       what + " the server pushed (HTTP/2 push): demands of the page that used them (demand), "
       "or skip them",
       false, false, "demand"},
      {"methods", "the request methods that are downloads (others are skipped)", false, false,
       "GET"},
  };
}

BrowserOptions read_browser_options(OptionReader& options) {
  BrowserOptions b;
  b.cached = options.text_or("cached", "skip");
  if (b.cached != "skip" && b.cached != "demand") {
    throw std::invalid_argument("--cached: \"" + b.cached + "\" is not skip or demand");
  }
  b.pushed = options.text_or("pushed", "demand");
  if (b.pushed != "skip" && b.pushed != "demand") {
    throw std::invalid_argument("--pushed: \"" + b.pushed + "\" is not demand or skip");
  }
  b.methods = options.text_or("methods", "GET");
  for (std::size_t from = 0; from <= b.methods.size();) {
    const std::size_t comma = std::min(b.methods.find(',', from), b.methods.size());
    b.method_list.push_back(b.methods.substr(from, comma - from));
    from = comma + 1;
  }
  return b;
}

std::string browser_priority_field(const DemandModel& model, const std::string& format) {
  if (!model.priority_by) return {};
  const std::string& field = model.priority_by->field;
  if (field != "type" && field != "mime" && field != "method" && field != "host" &&
      field != "size") {
    throw std::invalid_argument("--priority-by: " + format +
                                " has the fields type, mime, method, host and size, not \"" +
                                field + "\"");
  }
  return field;
}

std::optional<std::uint64_t> content_length(std::string_view name, const std::string& value) {
  static constexpr std::string_view kName = "content-length";
  if (name.size() != kName.size()) return std::nullopt;
  for (std::size_t i = 0; i < name.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(name[i])) != kName[i]) return std::nullopt;
  }
  std::uint64_t length = 0;
  const auto [end, error] = std::from_chars(value.data(), value.data() + value.size(), length);
  if (error != std::errc{} || end == value.data() || static_cast<double>(length) > kMaxImportSize) {
    return std::nullopt;
  }
  return length;
}

std::optional<std::int64_t> chrome_priority(std::string_view name) {
  if (name == "VeryLow") return 0;
  if (name == "Low") return 1;
  if (name == "Medium") return 2;
  if (name == "High") return 3;
  if (name == "VeryHigh") return 4;
  return std::nullopt;
}

std::string url_origin(std::string_view url) {
  const std::size_t scheme = url.find("://");
  if (scheme == std::string_view::npos) return {};
  const std::size_t end = url.find_first_of("/?#", scheme + 3);
  return std::string(url.substr(0, end == std::string_view::npos ? url.size() : end));
}

std::string url_host(std::string_view url) {
  const std::string origin = url_origin(url);
  if (origin.empty()) return {};
  std::string host = origin.substr(origin.find("://") + 3);
  if (const std::size_t at = host.rfind('@'); at != std::string::npos) host = host.substr(at + 1);
  if (!host.empty() && host.front() == '[') return host.substr(0, host.find(']') + 1);
  return host.substr(0, host.find(':'));
}

std::string first_bytes(const std::string& file, std::size_t n) {
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(file.c_str(), "rb"), &std::fclose);
  if (!f) return {};
  std::string out(n, '\0');
  out.resize(std::fread(out.data(), 1, n, f.get()));
  return out;
}

std::string looks_like(std::string_view start, const std::string& format) {
  const std::size_t first = start.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos) return {};
  const std::string_view text = start.substr(first);
  auto guess = [&](const char* what, const char* other) -> std::string {
    if (format == other) return {};
    return std::string("it looks like ") + what + " (import " + other + ")";
  };
  if (text.size() >= 4 && static_cast<unsigned char>(text[0]) == 0x28 &&
      static_cast<unsigned char>(text[1]) == 0xb5 && static_cast<unsigned char>(text[2]) == 0x2f &&
      static_cast<unsigned char>(text[3]) == 0xfd) {
    return guess("zstd-compressed data, as libCacheSim's traces are", "oracle-general");
  }
  if (text.front() == '{') {
    if (text.find("\"log\"") != std::string_view::npos &&
        (text.find("\"entries\"") != std::string_view::npos ||
         text.find("\"creator\"") != std::string_view::npos ||
         text.find("\"version\"") != std::string_view::npos)) {
      return guess("a HAR capture", "har");
    }
    if (text.find("\"method\"") != std::string_view::npos &&
        text.find("\"Network.") != std::string_view::npos) {
      return guess("a DevTools protocol log", "cdp");
    }
    if (text.find("\"demandflight-trace\"") != std::string_view::npos) {
      return "it is a demandflight trace already: sim or describe it as it is";
    }
    return format == "har" || format == "cdp" ? std::string() : "it is JSON, not " + format;
  }
  if (text.front() == '[') {
    if (text.find("\"Network.") != std::string_view::npos) return guess("a DevTools protocol log", "cdp");
    if (format != "har" && format != "cdp") return "it is JSON, not " + format;
    return {};
  }
  const std::string_view line = text.substr(0, text.find('\n'));
  if (line.find(" [") != std::string_view::npos && line.find("] \"") != std::string_view::npos) {
    return guess("a web server's access log", "access-log");
  }
  if (std::count(line.begin(), line.end(), ',') >= 2) return guess("a CSV log", "csv");
  return {};
}

}  // namespace dfl::format::import_detail
