// A randomized test's seed: DFL_SEED if set, else a fresh one, printed as
// "WHAT: DFL_SEED=N" so that a failure can be replayed with that value.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>

namespace dfl::testing {

inline std::uint64_t random_test_seed(const char* what) {
  std::uint64_t seed = std::random_device{}();
  if (const char* env = std::getenv("DFL_SEED")) seed = std::strtoull(env, nullptr, 10);
  std::printf("%s: DFL_SEED=%llu\n", what, static_cast<unsigned long long>(seed));
  return seed;
}

}  // namespace dfl::testing
