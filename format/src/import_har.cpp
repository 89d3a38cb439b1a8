// har: HAR 1.2, what browsers export from their network panel. Each entry of
// `log.entries` is a request: a demand at `startedDateTime`, for the artifact
// its URL names, by the owner its `pageref` names. The entry's size is its
// response's `content.size` (or `bodySize`, by --size-from); for an aborted
// entry, that of its URL's entry that arrived, or its Content-Length header. Chrome's extension
// fields are read where present: `_priority` (VeryLow .. VeryHigh: 0 .. 4),
// `_resourceType`, `_fromCache`, `response._error`, and Playwright's
// `response._failureText`. An entry that failed or was aborted (status 0 or
// -1, or an error) is a cancel at its end (start + `time`).
#include <absl/time/time.h>

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

struct Entry {
  std::int64_t start_us = 0;  // Since the epoch.
  double time_ms = 0;
  std::uint64_t size = 0;    // 0: not known.
  std::uint64_t number = 0;  // Its place in the file, from 1.
  std::size_t line = 0;
  std::int64_t priority = 2;
  std::uint32_t url = 0, owner = 0, field = 0;
  bool failed = false;
  bool unfinished = false;
  bool pushed = false;
};

std::string mime_of(const json& response) {
  const json* content = response.contains("content") ? &response["content"] : nullptr;
  if (content == nullptr || !content->contains("mimeType") || !(*content)["mimeType"].is_string()) {
    return {};
  }
  std::string m = (*content)["mimeType"].get<std::string>();
  return m.substr(0, m.find(';'));
}

}  // namespace

std::vector<ImportOption> har_options() {
  std::vector<ImportOption> out = {
      {"size-from",
       "the artifact's size: content (the response's content.size, decoded) or body (bodySize, "
       "the bytes on the wire); the other when the one is unknown",
       false, false, "content"},
  };
  for (ImportOption& o : browser_options("entries"))
    out.push_back(std::move(o));
  return out;
}

void import_har(const std::vector<std::string>& inputs, OptionReader& options, std::ostream& out) {
  const std::string size_from = options.text_or("size-from", "content");
  if (size_from != "content" && size_from != "body") {
    throw std::invalid_argument("--size-from: \"" + size_from + "\" is not content or body");
  }
  const BrowserOptions browser = read_browser_options(options);
  const std::string name = options.text_or("name", "imported");
  const DemandModel model = read_demand_model(options);
  options.check_all_read("har");
  const std::string by_field = browser_priority_field(model, "har");
  if (inputs.empty()) throw std::invalid_argument("no input file");

  Sink sink("har", inputs, model);
  Names urls, owners, fields;
  std::vector<Entry> entries;
  std::uint64_t read = 0, pages = 0;
  for (const std::string& file : inputs) {
    std::ifstream in(file, std::ios::binary);
    if (!in) throw TraceError::unreadable(file);
    std::uint64_t index = 0;
    bool saw_log = false;
    stream_json_arrays(
        in, file, {{"log", "entries"}, {"log", "pages"}},
        [&](std::size_t target, json&& e, std::size_t line) {
          saw_log = true;
          if (target == 1) {
            ++pages;
            return;
          }
          const std::uint64_t i = index++;
          ++read;
          auto fail = [&](const std::string& field, const std::string& message) {
            throw TraceError(file, line, element_path("log.entries", i, field), message);
          };
          if (!e.is_object()) fail("", "an entry must be an object");
          auto object = [&](const json& parent, const char* key,
                            const std::string& path) -> const json& {
            if (!parent.contains(key) || !parent[key].is_object())
              fail(path, "missing, or not an object");
            return parent[key];
          };
          const json& request = object(e, "request", "request");
          const json& response = object(e, "response", "response");
          if (!request.contains("url") || !request["url"].is_string()) {
            fail("request.url", "missing, or not a string");
          }
          std::string url = request["url"].get<std::string>();
          if (const std::size_t hash = url.find('#'); hash != std::string::npos) url.resize(hash);
          const std::string method = request.contains("method") && request["method"].is_string()
                                         ? request["method"].get<std::string>()
                                         : std::string("GET");
          if (!e.contains("startedDateTime") || !e["startedDateTime"].is_string()) {
            fail("startedDateTime", "missing, or not a string");
          }
          const std::string started = e["startedDateTime"].get<std::string>();
          absl::Time when;
          std::string why;
          if (!absl::ParseTime(absl::RFC3339_full, started, &when, &why)) {
            fail("startedDateTime",
                 "\"" + started + "\" is not an ISO 8601 date and time (" + why + ")");
          }
          Entry entry;
          entry.start_us = absl::ToUnixMicros(when);
          // Years 0 to 4000 or so: what a capture can hold, and no overflow below.
          if (entry.start_us < -62'000'000'000'000'000 || entry.start_us > 64'000'000'000'000'000) {
            fail("startedDateTime", "\"" + started + "\" is out of range");
          }
          bool time_known = false;
          if (e.contains("time")) {
            if (!e["time"].is_number()) fail("time", "not a number of milliseconds");
            // -1: not known (recorders write it for requests the capture cut short).
            time_known = e["time"].get<double>() >= 0;
            entry.time_ms = std::max(0.0, e["time"].get<double>());
          }
          entry.number = i + 1;
          entry.line = line;
          const double status = response.contains("status") && response["status"].is_number()
                                    ? response["status"].get<double>()
                                    : 0;
          // Chrome writes response._error, Playwright response._failureText.
          auto said = [](const json& o, const char* key) {
            return o.contains(key) && o[key].is_string() && !o[key].get<std::string>().empty();
          };
          const bool error =
              said(response, "_error") || said(response, "_failureText") || said(e, "_error");
          // No response, no error and no time: still running when the capture
          // ended. A demand that was never withdrawn.
          entry.unfinished = status <= 0 && !error && !time_known;
          entry.failed = !entry.unfinished && (status <= 0 || error);
          // A skipped entry that failed had a cancel: it is counted too.
          auto skip = [&](const std::string& reason) { sink.skip_request(reason, entry.failed, 0); };
          if (url.rfind("http://", 0) != 0 && url.rfind("https://", 0) != 0) {
            skip("not an http(s) URL");
            return;
          }
          if (!browser.is_download(method)) {
            skip("method " + method);
            return;
          }
          // HTTP/2 push (WebPageTest's and Chrome's `_was_pushed`): a real
          // transfer, whatever the cache says.
          entry.pushed = e.contains("_was_pushed") &&
                         ((e["_was_pushed"].is_number() && e["_was_pushed"].get<double>() != 0) ||
                          (e["_was_pushed"].is_string() && e["_was_pushed"] != "0" &&
                           e["_was_pushed"] != "") ||
                          e["_was_pushed"] == true);
          if (entry.pushed && browser.pushed == "skip") {
            skip("pushed by the server");
            return;
          }
          const bool from_cache = !entry.pushed &&
                                  ((e.contains("_fromCache") && e["_fromCache"].is_string()) ||
                                   (response.contains("status") && response["status"].is_number() &&
                                    response["status"].get<double>() == 304));
          if (from_cache && browser.cached == "skip") {
            skip("served from the browser's cache");
            return;
          }
          if (!entry.failed && status >= 400) {
            skip("HTTP error status");
            return;
          }
          auto size_of = [&](bool content) -> double {
            if (content) {
              const json* c = response.contains("content") ? &response["content"] : nullptr;
              if (c != nullptr && c->is_object() && c->contains("size") &&
                  (*c)["size"].is_number()) {
                return (*c)["size"].get<double>();
              }
              return -1;
            }
            if (response.contains("bodySize") && response["bodySize"].is_number()) {
              return response["bodySize"].get<double>();
            }
            return -1;
          };
          double size = size_of(size_from == "content");
          if (size <= 0) size = size_of(size_from != "content");
          if (size > kMaxImportSize) fail("response", "a size above 2^53 bytes");
          if (size > 0) entry.size = static_cast<std::uint64_t>(std::llround(size));
          // An aborted entry's response headers may still say how large it was.
          if (entry.size == 0 && response.contains("headers") && response["headers"].is_array()) {
            for (const json& h : response["headers"]) {
              if (!h.is_object() || !h.contains("name") || !h["name"].is_string() ||
                  !h.contains("value") || !h["value"].is_string()) {
                continue;
              }
              if (const auto length =
                      content_length(h["name"].get<std::string>(), h["value"].get<std::string>())) {
                entry.size = *length;
              }
            }
          }
          if (e.contains("_priority") && e["_priority"].is_string()) {
            const auto p = chrome_priority(e["_priority"].get<std::string>());
            if (!p)
              fail("_priority", "\"" + e["_priority"].get<std::string>() +
                                    "\" is not VeryLow, Low, Medium, High or VeryHigh");
            entry.priority = *p;
          }
          entry.url = urls.id(url);
          entry.owner = owners.id(e.contains("pageref") && e["pageref"].is_string()
                                      ? e["pageref"].get<std::string>()
                                      : std::string("no-page"));
          std::string value;
          if (by_field == "type" && e.contains("_resourceType") && e["_resourceType"].is_string()) {
            value = e["_resourceType"].get<std::string>();
          } else if (by_field == "mime") {
            value = mime_of(response);
          } else if (by_field == "method") {
            value = method;
          } else if (by_field == "host") {
            value = url_host(url);
          }
          entry.field = fields.id(value);
          entries.push_back(entry);
        });
    if (!saw_log) {
      throw TraceError(file, 1, "log.entries",
                       "missing or empty: not a HAR capture of any request");
    }
  }

  // A failed entry with no size of its own takes its URL's from an entry that arrived.
  std::unordered_map<std::uint32_t, std::uint64_t> known_size;
  for (const Entry& e : entries) {
    if (!e.failed && !e.unfinished && e.size > 0) known_size.try_emplace(e.url, e.size);
  }
  std::int64_t start_us = std::numeric_limits<std::int64_t>::max();
  for (const Entry& e : entries)
    start_us = std::min(start_us, e.start_us);
  std::stable_sort(entries.begin(), entries.end(),
                   [](const Entry& a, const Entry& b) { return a.start_us < b.start_us; });
  Request r;
  for (const Entry& e : entries) {
    std::uint64_t size = e.size;
    if (e.failed || e.unfinished) {
      if (auto it = known_size.find(e.url); it != known_size.end()) size = it->second;
    }
    if (size == 0) {
      sink.skip_request(e.failed       ? "failed before its size was known"
                        : e.unfinished ? "unfinished when the capture ended, size unknown"
                                       : "no size",
                        e.failed, 0);
      continue;
    }
    const std::string& url = urls[e.url];
    r.t = static_cast<double>(e.start_us - start_us) * 1e-6;
    r.demand = "e" + std::to_string(e.number);
    r.object = url;
    r.origin = url_origin(url);
    r.size = size;
    r.priority = e.priority;
    r.owner = owners[e.owner];
    r.end = e.failed ? std::optional<double>(r.t + e.time_ms * 1e-3) : std::nullopt;
    r.priority_value = fields[e.field];
    sink.request(r);
  }
  sink.count("entries", read);
  sink.count("pages", pages);
  sink.count("unfinished_entries",
             static_cast<std::uint64_t>(std::count_if(
                 entries.begin(), entries.end(), [](const Entry& e) { return e.unfinished; })));
  sink.count("pushed", static_cast<std::uint64_t>(std::count_if(
                           entries.begin(), entries.end(), [](const Entry& e) { return e.pushed; })));
  sink.count("failed_entries",
             static_cast<std::uint64_t>(std::count_if(entries.begin(), entries.end(),
                                                      [](const Entry& e) { return e.failed; })));
  ojson used = options.as_json();
  used["size-from"] = size_from;
  used["cached"] = browser.cached;
  used["pushed"] = browser.pushed;
  used["methods"] = browser.methods;
  used["start"] = start_us == std::numeric_limits<std::int64_t>::max()
                      ? std::string()
                      : absl::FormatTime(absl::RFC3339_full, absl::FromUnixMicros(start_us),
                                         absl::UTCTimeZone());
  sink.finish(name, std::move(used), out);
}

}  // namespace dfl::format::import_detail
