// cdp: a Chrome DevTools Protocol network event log. Three shapes are read:
// a JSON array of events `{"method": ..., "params": ...}` (what a DevTools
// protocol client records), ChromeDriver's performance log (an array of
// `{"message": "<JSON text of {\"message\": {method, params}}>", ...}`), and
// JSON Lines of either.
//
//   Network.requestWillBeSent      a subscribe at `timestamp` (initialPriority);
//                                  with `redirectResponse`: the request moved on
//                                  to a new URL (the demand is for the last one)
//   Network.resourceChangedPriority  a set_priority (newPriority)
//   Network.responseReceived       the MIME type, and Content-Length
//   Network.dataReceived           the body bytes that arrived (encodedDataLength)
//   Network.loadingFinished        the size: its encodedDataLength less the
//                                  response headers' (responseReceived's
//                                  response.encodedDataLength). Chrome writes
//                                  -1 for "unknown": the size is then the
//                                  response's Content-Length, else the bytes
//                                  its dataReceived events counted, else the
//                                  request is skipped ("size unknown"); the
//                                  header's x-import counts each case
//   Network.loadingFailed          with `canceled`: a cancel at its timestamp;
//                                  otherwise the request failed: skipped
//   Network.requestServedFromCache the browser's cache served it
//
// A request still open when its frame's next document commits (that
// document's response) is a cancel then: a navigation ends the old page's
// loads, and Chromium does not always send loadingFailed for them.
//
// Other events are counted and ignored. Owners are frames (frameId) or, with
// --owner-by loader, loaders (loaderId).
#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <stdexcept>
#include <unordered_map>

#include "demandflight/format/trace.h"
#include "import_json.h"
#include "import_sink.h"

namespace dfl::format::import_detail {
namespace {

struct Req {
  double t = 0;
  std::uint64_t order = 0;  // Its first event's place in the log.
  std::size_t line = 0;
  std::string url, method, owner, type, mime, frame, loader;
  std::optional<double> response_t;  // When its response (headers) came.
  std::int64_t priority = 2;
  std::vector<std::pair<double, std::int64_t>> changes;
  std::uint64_t size = 0;            // loadingFinished's encodedDataLength.
  std::uint64_t header_bytes = 0;    // The response's, before its body.
  std::uint64_t content_length = 0;  // From the response's headers.
  std::uint64_t data_received = 0;   // dataReceived's encodedDataLength, summed.
  bool size_unknown = false;         // loadingFinished said -1.
  std::optional<double> cancel_t;
  std::string failure;  // loadingFailed without `canceled`.
  bool finished = false, cached = false;
  bool pushed = false;  // The server pushed it (response.timing.pushStart).
};

// A refusal naming the file, the line and the event's `field`.
struct EventError {
  const std::string& file;
  std::size_t line;
  std::string where;  // "event N"
  [[noreturn]] void operator()(const std::string& field, const std::string& message) const {
    throw TraceError(file, line, field.empty() ? where : where + "." + field, message);
  }
  std::string text(const json& o, const char* key, const std::string& path) const {
    if (!o.contains(key) || !o[key].is_string()) (*this)(path, "missing, or not a string");
    return o[key].get<std::string>();
  }
  double number(const json& o, const char* key, const std::string& path) const {
    if (!o.contains(key) || !o[key].is_number()) (*this)(path, "missing, or not a number");
    const double v = o[key].get<double>();
    if (!std::isfinite(v) || v < 0 || v > kMaxImportSize) {
      (*this)(path, "not a number from 0 to 2^53");
    }
    return v;
  }
  std::int64_t priority(const json& o, const char* key, const std::string& path) const {
    const std::string level = text(o, key, path);
    const auto value = chrome_priority(level);
    if (!value) (*this)(path, "\"" + level + "\" is not VeryLow, Low, Medium, High or VeryHigh");
    return *value;
  }
};

// The event in an element: itself, or (ChromeDriver's performance log) the
// JSON text in its "message".
json unwrap(json&& element, const EventError& fail) {
  if (!element.is_object()) fail("", "an event must be an object");
  if (!element.contains("message") || !element["message"].is_string()) return std::move(element);
  const std::string text = element["message"].get<std::string>();
  json event = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (event.is_discarded()) fail("message", "not valid JSON text");
  if (event.contains("message") && event["message"].is_object()) {
    json inner = std::move(event["message"]);
    return inner;
  }
  return event;
}

// What responseReceived says of a request.
void response_received(Req& r, const json& p) {
  if (p.contains("type") && p["type"].is_string()) r.type = p["type"].get<std::string>();
  if (p.contains("timestamp") && p["timestamp"].is_number()) {
    r.response_t = p["timestamp"].get<double>();
  }
  if (!p.contains("response") || !p["response"].is_object()) return;
  const json& response = p["response"];
  if (response.contains("mimeType") && response["mimeType"].is_string()) {
    r.mime = response["mimeType"].get<std::string>();
    r.mime = r.mime.substr(0, r.mime.find(';'));
  }
  if (response.contains("encodedDataLength") && response["encodedDataLength"].is_number() &&
      response["encodedDataLength"].get<double>() > 0 &&
      response["encodedDataLength"].get<double>() <= kMaxImportSize) {
    r.header_bytes = static_cast<std::uint64_t>(response["encodedDataLength"].get<double>());
  }
  if (response.contains("fromDiskCache") && response["fromDiskCache"] == true) r.cached = true;
  // HTTP/2 push: Chrome serves the page's request from the pushed stream
  // (and may call it served from cache); the transfer was real.
  if (response.contains("timing") && response["timing"].is_object() &&
      response["timing"].contains("pushStart") && response["timing"]["pushStart"].is_number() &&
      response["timing"]["pushStart"].get<double>() > 0) {
    r.pushed = true;
  }
  if (response.contains("headers") && response["headers"].is_object()) {
    for (const auto& [header, value] : response["headers"].items()) {
      if (!value.is_string()) continue;
      if (const auto length = content_length(header, value.get<std::string>())) {
        r.content_length = *length;
      }
    }
  }
}

// A frame's navigation to a new document ends its old document's loads when
// the new one commits (its response): `r`, still open then, was cancelled
// (Chromium does not always report them as loadingFailed).
void navigated_from(Req& r, const Req& next) {
  if (next.type != "Document" || r.frame.empty() || next.frame != r.frame ||
      next.loader == r.loader || next.t <= r.t) {
    return;
  }
  const double at = std::max(next.response_t.value_or(next.t), r.t);
  if (!r.cancel_t || at < *r.cancel_t) r.cancel_t = at;
}

// Reads the event logs into requests (done), then hands them to the sink.
class CdpReader {
 public:
  CdpReader(const std::string& owner_by, const BrowserOptions& browser, const std::string& by_field,
            Sink& sink)
      : owner_by_(owner_by), browser_(browser), by_field_(by_field), sink_(sink) {}

  // One file: request ids are unique within one browser session, one file's.
  void read_file(const std::string& file) {
    std::ifstream in(file, std::ios::binary);
    if (!in) throw TraceError::unreadable(file);
    live_.clear();
    const std::size_t file_begin = done_.size();
    std::uint64_t index = 0;
    auto on_event = [&](json&& element, std::size_t line) {
      const EventError fail{file, line, "event " + std::to_string(index)};
      handle_event(unwrap(std::move(element), fail), fail);
      ++index;
    };
    // An array (of events or of performance log entries), or JSON Lines.
    char first = 0;
    while (in.get(first) && std::isspace(static_cast<unsigned char>(first))) {
    }
    if (!in) throw TraceError(file, 1, "-", "is empty");
    in.unget();
    if (first == '[') {
      stream_json_arrays(in, file, {{}}, [&](std::size_t, json&& e, std::size_t line) {
        on_event(std::move(e), line);
      });
    } else {
      std::string text;
      for (std::size_t line = 1; std::getline(in, text); ++line) {
        if (text.find_first_not_of(" \t\r") == std::string::npos) continue;
        json e = json::parse(text, nullptr, /*allow_exceptions=*/false);
        if (e.is_discarded()) {
          throw TraceError(file, line, "-", "not valid JSON (one event a line, or one array)");
        }
        on_event(std::move(e), line);
      }
    }
    // Requests still in flight when the capture ended.
    for (auto& [id, r] : live_) {
      for (std::size_t i = file_begin; i < done_.size(); ++i)
        navigated_from(r, done_[i]);
      for (const auto& [other_id, other] : live_)
        navigated_from(r, other);
      if (r.cancel_t) ++navigated_away_;
      done_.push_back(std::move(r));
    }
  }

  // The requests, in time order, to the sink; returns the first one's time.
  double write_requests();
  void count() const;

 private:
  void handle_event(json event, const EventError& fail) {
    if (!event.is_object() || !event.contains("method") || !event["method"].is_string()) {
      fail("method", "missing, or not a string");
    }
    ++events_;
    const std::string method = event["method"].get<std::string>();
    if (method.rfind("Network.", 0) != 0) {
      ++ignored_;
      return;
    }
    if (!event.contains("params") || !event["params"].is_object()) {
      fail("params", "missing, or not an object");
    }
    const json& p = event["params"];
    const std::string id = fail.text(p, "requestId", "params.requestId");
    if (method == "Network.requestWillBeSent") return request_sent(id, p, fail);
    auto it = live_.find(id);
    if (it == live_.end()) {
      ++unknown_request_;  // Its request was sent before the capture began.
      return;
    }
    Req& r = it->second;
    if (method == "Network.resourceChangedPriority") {
      const double t = std::max(fail.number(p, "timestamp", "params.timestamp"), r.t);
      const std::int64_t to = fail.priority(p, "newPriority", "params.newPriority");
      if (!r.changes.empty() && t < r.changes.back().first) {
        fail("params.timestamp", "before this request's previous priority change");
      }
      r.changes.emplace_back(t, to);
    } else if (method == "Network.responseReceived") {
      response_received(r, p);
    } else if (method == "Network.requestServedFromCache") {
      r.cached = true;
    } else if (method == "Network.dataReceived") {
      if (p.contains("encodedDataLength") && p["encodedDataLength"].is_number()) {
        const double v = p["encodedDataLength"].get<double>();
        if (v > 0 && v <= kMaxImportSize) r.data_received += static_cast<std::uint64_t>(v);
      }
    } else if (method == "Network.loadingFinished" || method == "Network.loadingFailed") {
      ended(method == "Network.loadingFinished", r, p, fail);
      live_.erase(it);
    } else {
      ++ignored_;
    }
  }

  void request_sent(const std::string& id, const json& p, const EventError& fail) {
    if (!p.contains("request") || !p["request"].is_object()) {
      fail("params.request", "missing, or not an object");
    }
    const json& request = p["request"];
    const double t = fail.number(p, "timestamp", "params.timestamp");
    auto [it, fresh] = live_.try_emplace(id);
    Req& r = it->second;
    if (!fresh) {
      if (!p.contains("redirectResponse")) {
        fail("params.requestId", "\"" + id + "\" was sent twice without a redirect");
      }
      sink_.skip("redirect hop");
      r = Req{};  // The demand is for the URL it was sent on to.
    }
    r.t = t;
    r.order = order_++;
    r.line = fail.line;
    r.url = fail.text(request, "url", "params.request.url");
    if (const std::size_t hash = r.url.find('#'); hash != std::string::npos) r.url.resize(hash);
    r.method = request.contains("method") && request["method"].is_string()
                   ? request["method"].get<std::string>()
                   : std::string("GET");
    if (request.contains("initialPriority")) {
      r.priority = fail.priority(request, "initialPriority", "params.request.initialPriority");
    }
    const char* owner_key = owner_by_ == "frame" ? "frameId" : "loaderId";
    r.owner = p.contains(owner_key) && p[owner_key].is_string() ? p[owner_key].get<std::string>()
                                                                : std::string("no-") + owner_by_;
    if (p.contains("type") && p["type"].is_string()) r.type = p["type"].get<std::string>();
    if (p.contains("frameId") && p["frameId"].is_string()) r.frame = p["frameId"].get<std::string>();
    if (p.contains("loaderId") && p["loaderId"].is_string()) {
      r.loader = p["loaderId"].get<std::string>();
    }
  }

  // loadingFinished (its size) or loadingFailed (a cancel, or a failure).
  void ended(bool finished, Req& r, const json& p, const EventError& fail) {
    if (finished) {
      r.finished = true;
      // -1 (or any negative) is Chrome's "unknown".
      if (p.contains("encodedDataLength") && p["encodedDataLength"].is_number() &&
          p["encodedDataLength"].get<double>() < 0) {
        r.size_unknown = true;
      } else {
        r.size = static_cast<std::uint64_t>(
            std::llround(fail.number(p, "encodedDataLength", "params.encodedDataLength")));
      }
    } else {
      const double t = std::max(fail.number(p, "timestamp", "params.timestamp"), r.t);
      if (p.contains("canceled") && p["canceled"] == true) {
        r.cancel_t = t;
      } else {
        r.failure = p.contains("errorText") && p["errorText"].is_string()
                        ? p["errorText"].get<std::string>()
                        : std::string("unknown error");
      }
    }
    done_.push_back(std::move(r));
  }

  // Why the request is no demand, or nullptr.
  const char* skipped_because(const Req& r, std::string& reason) const {
    if (r.url.rfind("http://", 0) != 0 && r.url.rfind("https://", 0) != 0) {
      return "not an http(s) URL";
    }
    if (!browser_.is_download(r.method)) {
      reason = "method " + r.method;
      return reason.c_str();
    }
    if (r.pushed && browser_.pushed == "skip") return "pushed by the server";
    if (r.cached && !r.pushed && browser_.cached == "skip") return "served from the browser's cache";
    if (!r.failure.empty()) {
      reason = "failed: " + r.failure;
      return reason.c_str();
    }
    return nullptr;
  }

  // The body's bytes on the wire (0: not known; `why` says why).
  std::uint64_t body_size(const Req& r, const std::unordered_map<std::string, std::uint64_t>& known,
                          const char*& why) {
    // All that was received less the headers.
    std::uint64_t size = r.finished && r.size > r.header_bytes ? r.size - r.header_bytes : 0;
    if (r.size_unknown) {
      // Chrome did not know: the headers' length, else what arrived.
      size = r.content_length != 0 ? r.content_length : r.data_received;
      if (size == 0) {
        why = "size unknown (loadingFinished's encodedDataLength -1, no Content-Length, "
              "no dataReceived bytes)";
        return 0;
      }
      ++(r.content_length != 0 ? unknown_from_length_ : unknown_from_data_);
    }
    if (size == 0) {
      const auto it = known.find(r.url);
      size = it != known.end() ? it->second : r.content_length;
    }
    if (size == 0) {
      why = r.cancel_t   ? "cancelled before its size was known"
            : r.finished ? "size 0"
                         : "unfinished when the capture ended, size unknown";
    }
    return size;
  }

  std::string field_value(const Req& r) const {
    return by_field_ == "type"     ? r.type
           : by_field_ == "mime"   ? r.mime
           : by_field_ == "method" ? r.method
           : by_field_ == "host"   ? url_host(r.url)
                                   : std::string();
  }

  const std::string& owner_by_;
  const BrowserOptions& browser_;
  const std::string& by_field_;
  Sink& sink_;
  std::unordered_map<std::string, Req> live_;  // The file's requests not ended yet.
  std::vector<Req> done_;
  std::uint64_t events_ = 0, ignored_ = 0, unknown_request_ = 0, order_ = 0, navigated_away_ = 0;
  std::uint64_t unknown_from_length_ = 0, unknown_from_data_ = 0, pushed_ = 0, cancels_read_ = 0,
                changes_read_ = 0;
};

double CdpReader::write_requests() {
  // The sizes that arrived, by URL, for requests cut short.
  std::unordered_map<std::string, std::uint64_t> known_size;
  for (const Req& r : done_) {
    if (r.finished && r.size > r.header_bytes) known_size.try_emplace(r.url, r.size - r.header_bytes);
  }
  double start = std::numeric_limits<double>::infinity();
  for (const Req& r : done_)
    start = std::min(start, r.t);
  std::sort(done_.begin(), done_.end(),
            [](const Req& a, const Req& b) { return a.t != b.t ? a.t < b.t : a.order < b.order; });
  Request out;
  std::uint64_t number = 0;
  for (Req& r : done_) {
    ++number;
    cancels_read_ += r.cancel_t.has_value();
    changes_read_ += r.changes.size();
    std::string reason;
    const char* why = skipped_because(r, reason);
    const std::uint64_t size = why ? 0 : body_size(r, known_size, why);
    if (why) {
      sink_.skip_request(why, r.cancel_t.has_value(), r.changes.size());
      continue;
    }
    out.t = r.t - start;
    out.demand = "q" + std::to_string(number);
    out.object = r.url;
    out.origin = url_origin(r.url);
    out.size = size;
    out.priority = r.priority;
    out.owner = r.owner;
    out.priority_changes.clear();
    for (const auto& [t, p] : r.changes)
      out.priority_changes.emplace_back(t - start, p);
    out.end = r.cancel_t ? std::optional<double>(*r.cancel_t - start) : std::nullopt;
    out.priority_value = field_value(r);
    pushed_ += r.pushed;
    sink_.request(out);
  }
  return start;
}

void CdpReader::count() const {
  sink_.count("events", events_);
  sink_.count("events_ignored", ignored_);
  sink_.count("events_of_requests_sent_before_the_capture", unknown_request_);
  sink_.count("requests", done_.size());
  sink_.count("cancelled_by_navigation", navigated_away_);
  sink_.count("cancels_read", cancels_read_);
  sink_.count("priority_changes_read", changes_read_);
  sink_.count("pushed", pushed_);
  sink_.count("sizes_unknown_taken_from_content_length", unknown_from_length_);
  sink_.count("sizes_unknown_taken_from_data_received", unknown_from_data_);
}

}  // namespace

std::vector<ImportOption> cdp_options() {
  std::vector<ImportOption> out = {
      {"owner-by", "who owns a request: frame (frameId) or loader (loaderId)", false, false,
       "frame"},
  };
  for (ImportOption& o : browser_options("requests"))
    out.push_back(std::move(o));
  return out;
}

void import_cdp(const std::vector<std::string>& inputs, OptionReader& options, std::ostream& out) {
  const std::string owner_by = options.text_or("owner-by", "frame");
  if (owner_by != "frame" && owner_by != "loader") {
    throw std::invalid_argument("--owner-by: \"" + owner_by + "\" is not frame or loader");
  }
  const BrowserOptions browser = read_browser_options(options);
  const std::string name = options.text_or("name", "imported");
  const DemandModel model = read_demand_model(options);
  options.check_all_read("cdp");
  const std::string by_field = browser_priority_field(model, "cdp");
  if (inputs.empty()) throw std::invalid_argument("no input file");

  Sink sink("cdp", inputs, model);
  CdpReader reader(owner_by, browser, by_field, sink);
  for (const std::string& file : inputs)
    reader.read_file(file);
  const double start = reader.write_requests();
  reader.count();
  ojson used = options.as_json();
  used["owner-by"] = owner_by;
  used["cached"] = browser.cached;
  used["pushed"] = browser.pushed;
  used["methods"] = browser.methods;
  used["start_timestamp"] = std::isfinite(start) ? start : 0.0;
  sink.finish(name, std::move(used), out);
}

}  // namespace dfl::format::import_detail
