// libFuzzer target: the trace reader on any bytes. It must give a clean error
// (TraceError naming the file, a line and a field) or a valid trace, never a
// crash, a hang, a leak or another exception (ASan/UBSan and libFuzzer's
// timeout and leak checks do the rest). And each line simdjson accepts must
// read the same through nlohmann's parser (the reader's two line readers).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>

#include "demandflight/format/trace.h"

namespace {

[[noreturn]] void fail(const char* what) {
  std::fprintf(stderr, "trace_fuzz: %s\n", what);
  std::abort();
}

// What every trace the reader accepts must satisfy.
void check(const dfl::format::Trace& t) {
  double last = 0;
  for (const dfl::format::Record& r : t.records) {
    if (!(r.t >= last)) fail("records out of time order");
    last = r.t;
    switch (r.op) {
      case dfl::format::Op::subscribe:
        if (r.artifact >= t.artifacts.size() || r.owner >= t.owners.size() ||
            r.demand >= t.demand_ids.size()) {
          fail("a subscribe names something out of range");
        }
        break;
      case dfl::format::Op::cancel:
      case dfl::format::Op::set_priority:
        if (r.demand >= t.demand_ids.size()) fail("a demand out of range");
        break;
      case dfl::format::Op::end_owner:
        if (r.owner >= t.owners.size()) fail("an owner out of range");
        break;
      case dfl::format::Op::fault:
        if (r.fault >= t.faults.size()) fail("a fault out of range");
        break;
    }
  }
  for (const dfl::format::Artifact& a : t.artifacts) {
    if (a.origin >= t.platform.origins.size()) fail("an artifact's origin out of range");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (auto difference = dfl::format::detail::compare_line_readers(line)) {
      std::fprintf(stderr, "trace_fuzz: the line readers differ: %s\n", difference->c_str());
      std::abort();
    }
  }
  std::istringstream in(text);
  try {
    check(dfl::format::read_trace(in, "fuzz.jsonl"));
  } catch (const dfl::format::TraceError& e) {
    if (e.file() != "fuzz.jsonl" || e.line() == 0 || e.field().empty()) {
      fail("a TraceError without file, line or field");
    }
    if (std::string(e.what()).rfind("fuzz.jsonl:", 0) != 0) fail("a message not FILE:LINE: ...");
  }
  return 0;  // Any other exception escapes and libFuzzer reports it.
}
