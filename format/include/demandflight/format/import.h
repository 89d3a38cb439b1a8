// Importers: request logs users already have, as traces (`demandflight import`).
//
// Each importer streams: rows are read one at a time and records written as
// they come (cancels of later times wait in a queue of the demands still
// open), into a temporary file; the header, which carries an `x-import`
// object with every choice made and the counts of what was skipped and why,
// is written once the input is read, then the records after it. On bad input
// nothing is written: a TraceError names the file, the line and the field.
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

namespace dfl::format {

// csv: one request per row. Columns are named by the header row, or by their
// 1-based number (with header = false, numbers only).
struct CsvImport {
  std::string time;                     // Required: the request's time.
  std::string key;                      // Required: the object's id.
  std::string size;                     // Required: its size in bytes.
  std::optional<std::string> priority;  // An integer; default 1.
  std::optional<std::string> owner;     // Default: one owner, "log".
  std::optional<std::string> origin;    // Default: "origin".
  std::optional<std::string> end;       // When the request was abandoned: a cancel then.
  bool header = true;
  char delimiter = ',';
  // Seconds per unit of the time columns: 1 (s), 1e-3 (ms), 1e-6 (us), 1e-9 (ns).
  std::string time_unit = "s";
  // Subtracted from every time (in the file's unit); default: the first row's.
  std::optional<double> start;
  std::string name = "imported";
  std::uint64_t seed = 1;
};

// Reads `inputs` in order (one log split in files) and writes the trace.
// Throws TraceError for bad input, std::invalid_argument for bad options.
void import_csv(const std::vector<std::string>& inputs, const CsvImport& options,
                std::ostream& out);

}  // namespace dfl::format
