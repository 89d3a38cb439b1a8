// Assertions for the engine. Programmer errors (time going backwards, a broken
// invariant) stop the process with a message that names the violation; they
// are never swallowed. These stay on in release builds: each costs a compare.
#pragma once

#include <cstdio>
#include <cstdlib>

namespace dfl::detail {
[[noreturn]] inline void assertion_failed(const char* what, const char* file, int line) {
  std::fprintf(stderr, "demandflight engine: %s (%s:%d)\n", what, file, line);
  std::abort();
}
}  // namespace dfl::detail

#define DFL_ASSERT(cond, what) \
  ((cond) ? void(0)            \
          : ::dfl::detail::assertion_failed("assertion failed: " what, __FILE__, __LINE__))

// Invariant checks: same behaviour, separate name so they read as such.
#define DFL_CHECK(cond, what) \
  ((cond) ? void(0)           \
          : ::dfl::detail::assertion_failed("invariant violated: " what, __FILE__, __LINE__))

#define DFL_UNREACHABLE() ::dfl::detail::assertion_failed("unreachable state", __FILE__, __LINE__)
