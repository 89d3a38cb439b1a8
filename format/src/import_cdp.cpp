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
  // Request ids are unique within one browser session: one file's.
  std::vector<Req> done;
  std::uint64_t events = 0, ignored = 0, unknown_request = 0, order = 0, navigated_away = 0;
  for (const std::string& file : inputs) {
    std::ifstream in(file, std::ios::binary);
    if (!in) throw TraceError::unreadable(file);
    std::unordered_map<std::string, Req> live;
    const std::size_t file_begin = done.size();
    std::uint64_t index = 0;

    auto on_event = [&](json&& element, std::size_t line) {
      const std::uint64_t i = index++;
      const std::string where = "event " + std::to_string(i);
      auto fail = [&](const std::string& field, const std::string& message) {
        throw TraceError(file, line, field.empty() ? where : where + "." + field, message);
      };
      if (!element.is_object()) fail("", "an event must be an object");
      json event;
      // ChromeDriver's performance log: the event is JSON text in "message".
      if (element.contains("message") && element["message"].is_string()) {
        const std::string text = element["message"].get<std::string>();
        event = json::parse(text, nullptr, /*allow_exceptions=*/false);
        if (event.is_discarded()) fail("message", "not valid JSON text");
        if (event.contains("message") && event["message"].is_object()) {
          event = std::move(event["message"]);
        }
      } else {
        event = std::move(element);
      }
      if (!event.is_object() || !event.contains("method") || !event["method"].is_string()) {
        fail("method", "missing, or not a string");
      }
      ++events;
      const std::string method = event["method"].get<std::string>();
      if (method.rfind("Network.", 0) != 0) {
        ++ignored;
        return;
      }
      if (!event.contains("params") || !event["params"].is_object()) {
        fail("params", "missing, or not an object");
      }
      const json& p = event["params"];
      auto text = [&](const json& o, const char* key, const std::string& path) -> std::string {
        if (!o.contains(key) || !o[key].is_string()) fail(path, "missing, or not a string");
        return o[key].get<std::string>();
      };
      auto number = [&](const json& o, const char* key, const std::string& path) -> double {
        if (!o.contains(key) || !o[key].is_number()) fail(path, "missing, or not a number");
        const double v = o[key].get<double>();
        if (!std::isfinite(v) || v < 0 || v > kMaxImportSize) {
          fail(path, "not a number from 0 to 2^53");
        }
        return v;
      };
      auto priority = [&](const json& o, const char* key, const std::string& path) {
        const std::string level = text(o, key, path);
        const auto value = chrome_priority(level);
        if (!value) {
          fail(path, "\"" + level + "\" is not VeryLow, Low, Medium, High or VeryHigh");
        }
        return *value;
      };
      const std::string id = text(p, "requestId", "params.requestId");

      if (method == "Network.requestWillBeSent") {
        if (!p.contains("request") || !p["request"].is_object()) {
          fail("params.request", "missing, or not an object");
        }
        const json& request = p["request"];
        const double t = number(p, "timestamp", "params.timestamp");
        auto [it, fresh] = live.try_emplace(id);
        Req& r = it->second;
        if (!fresh) {
          if (!p.contains("redirectResponse")) {
            fail("params.requestId", "\"" + id + "\" was sent twice without a redirect");
          }
          sink.skip("redirect hop");
          r = Req{};  // The demand is for the URL it was sent on to.
        }
        r.t = t;
        r.order = order++;
        r.line = line;
        r.url = text(request, "url", "params.request.url");
        if (const std::size_t hash = r.url.find('#'); hash != std::string::npos) r.url.resize(hash);
        r.method = request.contains("method") && request["method"].is_string()
                       ? request["method"].get<std::string>()
                       : std::string("GET");
        if (request.contains("initialPriority")) {
          r.priority = priority(request, "initialPriority", "params.request.initialPriority");
        }
        const char* owner_key = owner_by == "frame" ? "frameId" : "loaderId";
        r.owner = p.contains(owner_key) && p[owner_key].is_string()
                      ? p[owner_key].get<std::string>()
                      : std::string("no-") + owner_by;
        if (p.contains("type") && p["type"].is_string()) r.type = p["type"].get<std::string>();
        if (p.contains("frameId") && p["frameId"].is_string())
          r.frame = p["frameId"].get<std::string>();
        if (p.contains("loaderId") && p["loaderId"].is_string()) {
          r.loader = p["loaderId"].get<std::string>();
        }
        return;
      }
      auto it = live.find(id);
      if (it == live.end()) {
        // Its request was sent before the capture began.
        ++unknown_request;
        return;
      }
      Req& r = it->second;
      if (method == "Network.resourceChangedPriority") {
        const double t = std::max(number(p, "timestamp", "params.timestamp"), r.t);
        const std::int64_t to = priority(p, "newPriority", "params.newPriority");
        if (!r.changes.empty() && t < r.changes.back().first) {
          fail("params.timestamp", "before this request's previous priority change");
        }
        r.changes.emplace_back(t, to);
      } else if (method == "Network.responseReceived") {
        if (p.contains("type") && p["type"].is_string()) r.type = p["type"].get<std::string>();
        if (p.contains("timestamp") && p["timestamp"].is_number()) {
          r.response_t = p["timestamp"].get<double>();
        }
        if (p.contains("response") && p["response"].is_object()) {
          const json& response = p["response"];
          if (response.contains("mimeType") && response["mimeType"].is_string()) {
            r.mime = response["mimeType"].get<std::string>();
            r.mime = r.mime.substr(0, r.mime.find(';'));
          }
          if (response.contains("encodedDataLength") && response["encodedDataLength"].is_number() &&
              response["encodedDataLength"].get<double>() > 0 &&
              response["encodedDataLength"].get<double>() <= kMaxImportSize) {
            r.header_bytes =
                static_cast<std::uint64_t>(response["encodedDataLength"].get<double>());
          }
          if (response.contains("fromDiskCache") && response["fromDiskCache"] == true) {
            r.cached = true;
          }
          // HTTP/2 push: Chrome serves the page's request from the pushed
          // stream (and may call it served from cache); the transfer was real.
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
      } else if (method == "Network.requestServedFromCache") {
        r.cached = true;
      } else if (method == "Network.dataReceived") {
        if (p.contains("encodedDataLength") && p["encodedDataLength"].is_number()) {
          const double v = p["encodedDataLength"].get<double>();
          if (v > 0 && v <= kMaxImportSize) r.data_received += static_cast<std::uint64_t>(v);
        }
      } else if (method == "Network.loadingFinished") {
        r.finished = true;
        // -1 (or any negative) is Chrome's "unknown".
        if (p.contains("encodedDataLength") && p["encodedDataLength"].is_number() &&
            p["encodedDataLength"].get<double>() < 0) {
          r.size_unknown = true;
        } else {
          r.size = static_cast<std::uint64_t>(
              std::llround(number(p, "encodedDataLength", "params.encodedDataLength")));
        }
        done.push_back(std::move(r));
        live.erase(it);
      } else if (method == "Network.loadingFailed") {
        const double t = std::max(number(p, "timestamp", "params.timestamp"), r.t);
        if (p.contains("canceled") && p["canceled"] == true) {
          r.cancel_t = t;
        } else {
          r.failure = p.contains("errorText") && p["errorText"].is_string()
                          ? p["errorText"].get<std::string>()
                          : std::string("unknown error");
        }
        done.push_back(std::move(r));
        live.erase(it);
      } else {
        ++ignored;
      }
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
    // Requests still in flight when the capture ended. A frame's navigation
    // to a new document ends its old document's loads when the new one
    // commits (its response): those still open then were cancelled (Chromium
    // does not always report them as loadingFailed).
    auto navigated_from = [](Req& r, const Req& next) {
      if (next.type != "Document" || r.frame.empty() || next.frame != r.frame ||
          next.loader == r.loader || next.t <= r.t) {
        return;
      }
      const double at = std::max(next.response_t.value_or(next.t), r.t);
      if (!r.cancel_t || at < *r.cancel_t) r.cancel_t = at;
    };
    for (auto& [id, r] : live) {
      for (std::size_t i = file_begin; i < done.size(); ++i)
        navigated_from(r, done[i]);
      for (const auto& [other_id, other] : live)
        navigated_from(r, other);
      if (r.cancel_t) ++navigated_away;
      done.push_back(std::move(r));
    }
  }

  // The sizes that arrived, by URL, for requests cut short.
  std::unordered_map<std::string, std::uint64_t> known_size;
  for (const Req& r : done) {
    if (r.finished && r.size > r.header_bytes)
      known_size.try_emplace(r.url, r.size - r.header_bytes);
  }
  double start = std::numeric_limits<double>::infinity();
  for (const Req& r : done)
    start = std::min(start, r.t);
  std::sort(done.begin(), done.end(),
            [](const Req& a, const Req& b) { return a.t != b.t ? a.t < b.t : a.order < b.order; });
  Request out_request;
  std::uint64_t number = 0;
  std::uint64_t unknown_from_length = 0, unknown_from_data = 0, pushed = 0, cancels_read = 0,
                changes_read = 0;
  for (Req& r : done) {
    ++number;
    cancels_read += r.cancel_t.has_value();
    changes_read += r.changes.size();
    auto skip = [&](const std::string& why) {
      sink.skip_request(why, r.cancel_t.has_value(), r.changes.size());
    };
    if (r.url.rfind("http://", 0) != 0 && r.url.rfind("https://", 0) != 0) {
      skip("not an http(s) URL");
      continue;
    }
    if (!browser.is_download(r.method)) {
      skip("method " + r.method);
      continue;
    }
    if (r.pushed && browser.pushed == "skip") {
      skip("pushed by the server");
      continue;
    }
    if (r.cached && !r.pushed && browser.cached == "skip") {
      skip("served from the browser's cache");
      continue;
    }
    if (!r.failure.empty()) {
      skip("failed: " + r.failure);
      continue;
    }
    // The body's bytes on the wire: all that was received less the headers.
    std::uint64_t size = r.finished && r.size > r.header_bytes ? r.size - r.header_bytes : 0;
    if (r.size_unknown) {
      // Chrome did not know: the headers' length, else what arrived.
      size = r.content_length != 0 ? r.content_length : r.data_received;
      if (size == 0) {
        skip("size unknown (loadingFinished's encodedDataLength -1, no Content-Length, "
             "no dataReceived bytes)");
        continue;
      }
      ++(r.content_length != 0 ? unknown_from_length : unknown_from_data);
    }
    if (size == 0) {
      if (auto it = known_size.find(r.url); it != known_size.end()) {
        size = it->second;
      } else {
        size = r.content_length;
      }
    }
    if (size == 0) {
      skip(r.cancel_t   ? "cancelled before its size was known"
           : r.finished ? "size 0"
                        : "unfinished when the capture ended, size unknown");
      continue;
    }
    out_request.t = r.t - start;
    out_request.demand = "q" + std::to_string(number);
    out_request.object = r.url;
    out_request.origin = url_origin(r.url);
    out_request.size = size;
    out_request.priority = r.priority;
    out_request.owner = r.owner;
    out_request.priority_changes.clear();
    for (const auto& [t, p] : r.changes)
      out_request.priority_changes.emplace_back(t - start, p);
    out_request.end = r.cancel_t ? std::optional<double>(*r.cancel_t - start) : std::nullopt;
    out_request.priority_value = by_field == "type"     ? r.type
                                 : by_field == "mime"   ? r.mime
                                 : by_field == "method" ? r.method
                                 : by_field == "host"   ? url_host(r.url)
                                                        : std::string();
    pushed += r.pushed;
    sink.request(out_request);
  }
  sink.count("events", events);
  sink.count("events_ignored", ignored);
  sink.count("events_of_requests_sent_before_the_capture", unknown_request);
  sink.count("requests", done.size());
  sink.count("cancelled_by_navigation", navigated_away);
  sink.count("cancels_read", cancels_read);
  sink.count("priority_changes_read", changes_read);
  sink.count("pushed", pushed);
  sink.count("sizes_unknown_taken_from_content_length", unknown_from_length);
  sink.count("sizes_unknown_taken_from_data_received", unknown_from_data);
  ojson used = options.as_json();
  used["owner-by"] = owner_by;
  used["cached"] = browser.cached;
  used["pushed"] = browser.pushed;
  used["methods"] = browser.methods;
  used["start_timestamp"] = std::isfinite(start) ? start : 0.0;
  sink.finish(name, std::move(used), out);
}

}  // namespace dfl::format::import_detail
