// Reads a two-caller trace with the installed format library alone.
#include <cstdio>
#include <sstream>

#include "../two_callers_trace.h"
#include "demandflight/format/trace.h"

int main() {
  std::istringstream text(kTwoCallersTrace);
  const dfl::format::Trace trace = dfl::format::read_trace(text, "two-callers");
  std::printf("format consumer: read %zu records of %zu artifact\n", trace.records.size(),
              trace.artifacts.size());
  return trace.records.size() == 2 && trace.artifacts.size() == 1 ? 0 : 1;
}
