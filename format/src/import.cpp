// `demandflight import FORMAT`: the formats by name (format/import.h).
#include "demandflight/format/import.h"

#include <stdexcept>

#include "demandflight/format/trace.h"
#include "import_sink.h"

namespace dfl::format {
namespace {

struct Format {
  const char* name;
  const char* help;
  std::vector<ImportOption> (*options)();
  void (*run)(const std::vector<std::string>&, import_detail::OptionReader&, std::ostream&);
};

const std::vector<Format>& formats() {
  static const std::vector<Format> all = {
      {"csv", "a CSV request log: a row per request (time, object, size), in time order",
       &import_detail::csv_options, &import_detail::import_csv},
      {"oracle-general",
       "libCacheSim's oracleGeneral binary trace (24 bytes a request; .zst read as it is)",
       &import_detail::oracle_general_options, &import_detail::import_oracle_general},
      {"har", "a HAR 1.2 browser capture: a demand per entry, owners by page",
       &import_detail::har_options, &import_detail::import_har},
      {"cdp",
       "a Chrome DevTools Protocol network event log (a JSON array, a performance log, or "
       "JSON Lines)",
       &import_detail::cdp_options, &import_detail::import_cdp},
      {"access-log",
       "a web server's access log (nginx or Apache): Combined or Common Log Format, or the "
       "server's own format string; a .gz log as it is",
       &import_detail::access_log_options, &import_detail::import_access_log},
  };
  return all;
}

const Format& find(const std::string& name) {
  for (const Format& f : formats()) {
    if (name == f.name) return f;
  }
  std::string known;
  for (const Format& f : formats())
    known += (known.empty() ? "" : ", ") + std::string(f.name);
  throw std::invalid_argument("import: \"" + name + "\" is not a format (" + known + ")");
}

}  // namespace

std::vector<std::string> import_formats() {
  std::vector<std::string> out;
  for (const Format& f : formats())
    out.emplace_back(f.name);
  return out;
}

std::string import_format_help(const std::string& format) {
  return find(format).help;
}

std::vector<ImportOption> import_options(const std::string& format) {
  std::vector<ImportOption> out = find(format).options();
  for (ImportOption& o : import_detail::shared_options())
    out.push_back(std::move(o));
  return out;
}

void import_trace(const std::string& format, const std::vector<std::string>& inputs,
                  const ImportOptions& options, std::ostream& out) {
  const Format& f = find(format);
  import_detail::OptionReader reader(options);
  try {
    f.run(inputs, reader, out);
  } catch (const TraceError& e) {
    // Refused at its start: say what the file looks like, if another format.
    if (e.line() <= 2) {
      const std::string hint = import_detail::looks_like(import_detail::first_bytes(e.file()), format);
      if (!hint.empty()) throw e.with_note(hint);
    }
    throw;
  }
}

}  // namespace dfl::format
