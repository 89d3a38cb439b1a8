// Importers: workloads users already have, as traces (`demandflight import`).
//
// Five formats: `csv` (request logs), `oracle-general` (libCacheSim's binary
// request traces), `har` (HAR 1.2 browser captures), `cdp` (Chrome DevTools
// Protocol network event logs) and `access-log` (nginx's and Apache's). Each reads its input, turns it into
// requests, and hands them to one writer shared by all formats, which applies
// the demand model (sessions, abandonment, priorities by a field, deadlines)
// and writes the trace.
//
// Records go to a temporary file as they come; the header, which carries an
// `x-import` object with the format, every option and the counts of what was
// read, made and skipped (and why), is written once the input is read, then
// the records after it. On bad input nothing is written: a TraceError names the
// file, the line (the record number for binary input) and the field.
//
// Memory: csv and oracle-general stream (one row at a time; a table of the
// distinct objects, and queues of the cancels and sessions still open). A
// browser capture's requests come out of order and are matched by id across
// events, so har and cdp keep a compact record per request (tens of bytes plus
// its URL) and sort them: browser captures have thousands of requests. An
// access log's lines come in the order responses ended, so access-log keeps
// a record per line (about 50 bytes, its strings kept once) and sorts them
// by start.
#pragma once

#include <map>
#include <ostream>
#include <string>
#include <vector>

namespace dfl::format {

// The options of an import, by name without dashes ("time-unit"); Python's
// underscores are turned into dashes before. A flag's value is "true".
using ImportOptions = std::map<std::string, std::string>;

struct ImportOption {
  std::string name;
  std::string help;
  bool required = false;
  bool flag = false;               // Takes no value on the command line.
  std::string default_value = {};  // Shown in help; empty: none.
};

// "csv", "oracle-general", "har", "cdp", "access-log".
std::vector<std::string> import_formats();
// One line saying what the format is.
std::string import_format_help(const std::string& format);
// Every option of the format, its own first, then the demand model's and the
// trace's (shared by every format). std::invalid_argument for an unknown format.
std::vector<ImportOption> import_options(const std::string& format);

// Reads `inputs` in order (one log split in files) and writes the trace.
// Throws TraceError for bad input, std::invalid_argument for a bad or unknown
// option (its message names the option as `--name`).
void import_trace(const std::string& format, const std::vector<std::string>& inputs,
                  const ImportOptions& options, std::ostream& out);

}  // namespace dfl::format
