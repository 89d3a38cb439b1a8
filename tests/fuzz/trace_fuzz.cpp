// libFuzzer target: the trace reader on any bytes. It must give a clean error
// (TraceError naming the file, a line and a field) or a valid trace, never a
// crash, a hang, a leak or another exception (ASan/UBSan and libFuzzer's
// timeout and leak checks do the rest). And each line simdjson accepts must
// read the same through nlohmann's parser (the reader's two line readers).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
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
      case dfl::format::Op::throttle:
        if (r.fault >= t.throttles.size()) fail("a throttle out of range");
        break;
    }
  }
  for (const dfl::format::Artifact& a : t.artifacts) {
    if (a.origin >= t.platform.origins.size()) fail("an artifact's origin out of range");
  }
}

void check_error(const dfl::format::TraceError& e) {
  if (e.file() != "fuzz.jsonl" || e.line() == 0 || e.field().empty()) {
    fail("a TraceError without file, line or field");
  }
  if (std::string(e.what()).rfind("fuzz.jsonl:", 0) != 0) fail("a message not FILE:LINE: ...");
}

// The same text streamed (TraceStream, sim --stream) gives the same records,
// or fails at the same line; or earlier, only for an origin first named after
// the first record (a streamed run's platform is built by then).
void check_stream(const std::string& text, const std::optional<dfl::format::Trace>& whole,
                  std::size_t error_line) {
  std::istringstream in(text);
  std::size_t i = 0;
  try {
    dfl::format::TraceStream stream(in, "fuzz.jsonl");
    dfl::format::Record r;
    while (stream.next(r)) {
      if (!whole) continue;  // It must fail later, as the whole read did.
      if (i >= whole->records.size()) fail("the stream has more records");
      const dfl::format::Record& w = whole->records[i++];
      if (r.t != w.t || r.op != w.op || r.line != w.line || r.demand != w.demand ||
          r.owner != w.owner || r.priority != w.priority || r.timeout_s != w.timeout_s ||
          r.owner_generation != w.owner_generation) {
        fail("a streamed record differs from the whole read's");
      }
      if ((r.op == dfl::format::Op::subscribe || r.op == dfl::format::Op::fault) &&
          stream.trace().artifacts.at(r.artifact).id != whole->artifacts.at(w.artifact).id) {
        fail("a streamed record names another artifact");
      }
    }
    if (whole && i != whole->records.size()) fail("the stream has fewer records");
    if (!whole) fail("the stream accepted what the whole read refused");
  } catch (const dfl::format::TraceError& e) {
    check_error(e);
    const bool late_origin = e.field() == "origin" &&
                             std::string(e.what()).find("first named after") != std::string::npos;
    if (late_origin) {
      if (whole.has_value() || e.line() <= error_line) return;
      fail("a late origin reported after the whole read's error");
    }
    if (whole) fail("the stream refused what the whole read accepted");
    if (e.line() != error_line) fail("the stream failed at another line");
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
  std::optional<dfl::format::Trace> whole;
  std::size_t error_line = 0;
  try {
    whole = dfl::format::read_trace(in, "fuzz.jsonl");
    check(*whole);
  } catch (const dfl::format::TraceError& e) {
    check_error(e);
    error_line = e.line();
  }
  check_stream(text, whole, error_line);
  return 0;  // Any other exception escapes and libFuzzer reports it.
}
