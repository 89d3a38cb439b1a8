// libFuzzer target: the importers (demandflight import) on any bytes. The
// first byte picks the format and whether the demand model runs; the rest is
// the input file. An import must either refuse the input cleanly (TraceError
// naming the file and a line or record) or write a trace that the strict
// trace reader accepts; never crash, hang, leak or throw anything else.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <stdexcept>
#include <string>

#include "demandflight/format/import.h"
#include "demandflight/format/trace.h"

namespace {

[[noreturn]] void fail(const char* what, const std::string& detail) {
  std::fprintf(stderr, "import_fuzz: %s: %s\n", what, detail.c_str());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  static const char* const kFormats[] = {"csv", "oracle-general", "har", "cdp", "access-log"};
  const std::string format = kFormats[(data[0] & 7) % 5];
  const bool model = (data[0] & 8) != 0;
  static const std::string path = "/dev/shm/import_fuzz_" + std::to_string(::getpid());
  if (std::FILE* f = std::fopen(path.c_str(), "wb")) {
    std::fwrite(data + 1, 1, size - 1, f);
    std::fclose(f);
  } else {
    return 0;
  }
  dfl::format::ImportOptions options;
  if (format == "csv") {
    options = {{"time", "1"},  {"key", "2"}, {"size", "3"},
               {"owner", "4"}, {"end", "5"}, {"no-header", "true"}};
  }
  if (model) {
    options["abandon"] = "p=0.5,dist=lognormal,median_s=1,sigma=1";
    options["sessions"] = "2";
    options["priority-by"] = "size";
    options["priority-map"] = "1000=3,*=0";
    options["deadline"] = "3=1,*=10";
  }
  std::ostringstream out;
  try {
    dfl::format::import_trace(format, {path}, options, out);
  } catch (const dfl::format::TraceError& e) {
    if (e.file() != path) fail("an error that names another file", e.what());
    return 0;
  } catch (const std::exception& e) {
    fail("not a TraceError", e.what());
  }
  std::istringstream trace(out.str());
  try {
    dfl::format::read_trace(trace, "imported");
  } catch (const dfl::format::TraceError& e) {
    fail("the import is not a valid trace", e.what());
  }
  return 0;
}
