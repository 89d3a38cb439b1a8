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

// What reading the entries needs besides each entry.
struct HarReader {
  const std::string& size_from;  // "content" or "body".
  const BrowserOptions& browser;
  const std::string& by_field;   // --priority-by's field, if any.
  Sink& sink;
  Names urls, owners, fields;
  std::vector<Entry> entries;
};

// A refusal of the entry's `field`, naming the file, the line and the entry.
struct EntryError {
  const std::string& file;
  std::size_t line;
  std::uint64_t index;
  [[noreturn]] void operator()(const std::string& field, const std::string& message) const {
    throw TraceError(file, line, element_path("log.entries", index, field), message);
  }
};

const json& member_object(const json& parent, const char* key, const std::string& path,
                          const EntryError& fail) {
  if (!parent.contains(key) || !parent[key].is_object()) fail(path, "missing, or not an object");
  return parent[key];
}

// startedDateTime, in microseconds since the epoch.
std::int64_t started_us(const json& e, const EntryError& fail) {
  if (!e.contains("startedDateTime") || !e["startedDateTime"].is_string()) {
    fail("startedDateTime", "missing, or not a string");
  }
  const std::string started = e["startedDateTime"].get<std::string>();
  absl::Time when;
  std::string why;
  if (!absl::ParseTime(absl::RFC3339_full, started, &when, &why)) {
    fail("startedDateTime", "\"" + started + "\" is not an ISO 8601 date and time (" + why + ")");
  }
  const std::int64_t us = absl::ToUnixMicros(when);
  // Years 0 to 4000 or so: what a capture can hold, and no overflow below.
  if (us < -62'000'000'000'000'000 || us > 64'000'000'000'000'000) {
    fail("startedDateTime", "\"" + started + "\" is out of range");
  }
  return us;
}

// HTTP/2 push (WebPageTest's and Chrome's `_was_pushed`): a real transfer,
// whatever the cache says.
bool was_pushed(const json& e) {
  if (!e.contains("_was_pushed")) return false;
  const json& v = e["_was_pushed"];
  return (v.is_number() && v.get<double>() != 0) || (v.is_string() && v != "0" && v != "") ||
         v == true;
}

// The response's size by --size-from (the other where the one is unknown),
// else its Content-Length header (an aborted entry's may still say); 0: not
// known.
std::uint64_t response_size(const json& response, const std::string& size_from,
                            const EntryError& fail) {
  auto size_of = [&](bool content) -> double {
    if (content) {
      const json* c = response.contains("content") ? &response["content"] : nullptr;
      if (c != nullptr && c->is_object() && c->contains("size") && (*c)["size"].is_number()) {
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
  std::uint64_t out = size > 0 ? static_cast<std::uint64_t>(std::llround(size)) : 0;
  if (out == 0 && response.contains("headers") && response["headers"].is_array()) {
    for (const json& h : response["headers"]) {
      if (!h.is_object() || !h.contains("name") || !h["name"].is_string() ||
          !h.contains("value") || !h["value"].is_string()) {
        continue;
      }
      if (const auto length =
              content_length(h["name"].get<std::string>(), h["value"].get<std::string>())) {
        out = *length;
      }
    }
  }
  return out;
}

// The value of --priority-by's field for an entry.
std::string field_value(const std::string& by_field, const json& e, const json& response,
                        const std::string& method, const std::string& url) {
  if (by_field == "type" && e.contains("_resourceType") && e["_resourceType"].is_string()) {
    return e["_resourceType"].get<std::string>();
  }
  if (by_field == "mime") return mime_of(response);
  if (by_field == "method") return method;
  if (by_field == "host") return url_host(url);
  return {};
}

// Why an entry is no demand, or nullptr when it is one.
const char* skipped_because(const HarReader& h, const std::string& url, const std::string& method,
                            const Entry& entry, const json& e, const json& response,
                            double status, std::string& reason) {
  if (url.rfind("http://", 0) != 0 && url.rfind("https://", 0) != 0) return "not an http(s) URL";
  if (!h.browser.is_download(method)) {
    reason = "method " + method;
    return reason.c_str();
  }
  if (entry.pushed && h.browser.pushed == "skip") return "pushed by the server";
  const bool from_cache = !entry.pushed && ((e.contains("_fromCache") && e["_fromCache"].is_string()) ||
                                            (response.contains("status") &&
                                             response["status"].is_number() && status == 304));
  if (from_cache && h.browser.cached == "skip") return "served from the browser's cache";
  if (!entry.failed && status >= 400) return "HTTP error status";
  return nullptr;
}

// One element of log.entries: an Entry, or a counted skip.
void read_entry(HarReader& h, const json& e, const EntryError& fail) {
  if (!e.is_object()) fail("", "an entry must be an object");
  const json& request = member_object(e, "request", "request", fail);
  const json& response = member_object(e, "response", "response", fail);
  if (!request.contains("url") || !request["url"].is_string()) {
    fail("request.url", "missing, or not a string");
  }
  std::string url = request["url"].get<std::string>();
  if (const std::size_t hash = url.find('#'); hash != std::string::npos) url.resize(hash);
  const std::string method = request.contains("method") && request["method"].is_string()
                                 ? request["method"].get<std::string>()
                                 : std::string("GET");
  Entry entry;
  entry.start_us = started_us(e, fail);
  bool time_known = false;
  if (e.contains("time")) {
    if (!e["time"].is_number()) fail("time", "not a number of milliseconds");
    // -1: not known (recorders write it for requests the capture cut short).
    time_known = e["time"].get<double>() >= 0;
    entry.time_ms = std::max(0.0, e["time"].get<double>());
  }
  entry.number = fail.index + 1;
  entry.line = fail.line;
  const double status = response.contains("status") && response["status"].is_number()
                            ? response["status"].get<double>()
                            : 0;
  // Chrome writes response._error, Playwright response._failureText.
  auto said = [](const json& o, const char* key) {
    return o.contains(key) && o[key].is_string() && !o[key].get<std::string>().empty();
  };
  const bool error = said(response, "_error") || said(response, "_failureText") || said(e, "_error");
  // No response, no error and no time: still running when the capture
  // ended. A demand that was never withdrawn.
  entry.unfinished = status <= 0 && !error && !time_known;
  entry.failed = !entry.unfinished && (status <= 0 || error);
  entry.pushed = was_pushed(e);
  std::string reason;
  if (const char* why = skipped_because(h, url, method, entry, e, response, status, reason)) {
    h.sink.skip_request(why, entry.failed, 0);  // A skipped entry that failed had a cancel.
    return;
  }
  entry.size = response_size(response, h.size_from, fail);
  if (e.contains("_priority") && e["_priority"].is_string()) {
    const auto p = chrome_priority(e["_priority"].get<std::string>());
    if (!p) {
      fail("_priority", "\"" + e["_priority"].get<std::string>() +
                            "\" is not VeryLow, Low, Medium, High or VeryHigh");
    }
    entry.priority = *p;
  }
  entry.url = h.urls.id(url);
  entry.owner = h.owners.id(e.contains("pageref") && e["pageref"].is_string()
                                ? e["pageref"].get<std::string>()
                                : std::string("no-page"));
  entry.field = h.fields.id(field_value(h.by_field, e, response, method, url));
  h.entries.push_back(entry);
}

// The entries as requests, in time order; returns the first one's start
// (INT64_MAX when there is none).
std::int64_t write_requests(HarReader& h) {
  // A failed entry with no size of its own takes its URL's from an entry that arrived.
  std::unordered_map<std::uint32_t, std::uint64_t> known_size;
  for (const Entry& e : h.entries) {
    if (!e.failed && !e.unfinished && e.size > 0) known_size.try_emplace(e.url, e.size);
  }
  std::int64_t start_us = std::numeric_limits<std::int64_t>::max();
  for (const Entry& e : h.entries)
    start_us = std::min(start_us, e.start_us);
  std::stable_sort(h.entries.begin(), h.entries.end(),
                   [](const Entry& a, const Entry& b) { return a.start_us < b.start_us; });
  Request r;
  for (const Entry& e : h.entries) {
    std::uint64_t size = e.size;
    if (e.failed || e.unfinished) {
      if (auto it = known_size.find(e.url); it != known_size.end()) size = it->second;
    }
    if (size == 0) {
      h.sink.skip_request(e.failed       ? "failed before its size was known"
                          : e.unfinished ? "unfinished when the capture ended, size unknown"
                                         : "no size",
                          e.failed, 0);
      continue;
    }
    const std::string& url = h.urls[e.url];
    r.t = static_cast<double>(e.start_us - start_us) * 1e-6;
    r.demand = "e" + std::to_string(e.number);
    r.object = url;
    r.origin = url_origin(url);
    r.size = size;
    r.priority = e.priority;
    r.owner = h.owners[e.owner];
    r.end = e.failed ? std::optional<double>(r.t + e.time_ms * 1e-3) : std::nullopt;
    r.priority_value = h.fields[e.field];
    h.sink.request(r);
  }
  return start_us;
}

std::uint64_t count_entries(const std::vector<Entry>& entries, bool Entry::*flag) {
  return static_cast<std::uint64_t>(
      std::count_if(entries.begin(), entries.end(), [flag](const Entry& e) { return e.*flag; }));
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
  HarReader h{size_from, browser, by_field, sink, {}, {}, {}, {}};
  std::uint64_t read = 0, pages = 0;
  for (const std::string& file : inputs) {
    std::ifstream in(file, std::ios::binary);
    if (!in) throw TraceError::unreadable(file);
    std::uint64_t index = 0;
    bool saw_log = false;
    stream_json_arrays(in, file, {{"log", "entries"}, {"log", "pages"}},
                       [&](std::size_t target, json&& e, std::size_t line) {
                         saw_log = true;
                         if (target == 1) {
                           ++pages;
                           return;
                         }
                         ++read;
                         read_entry(h, e, EntryError{file, line, index++});
                       });
    if (!saw_log) {
      throw TraceError(file, 1, "log.entries",
                       "missing or empty: not a HAR capture of any request");
    }
  }
  const std::int64_t start_us = write_requests(h);
  sink.count("entries", read);
  sink.count("pages", pages);
  sink.count("unfinished_entries", count_entries(h.entries, &Entry::unfinished));
  sink.count("pushed", count_entries(h.entries, &Entry::pushed));
  sink.count("failed_entries", count_entries(h.entries, &Entry::failed));
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
