// Deterministic artifact content for the crash-safety test: the helper that is
// killed and the test that checks what survived derive the same bytes from
// the same index, so every visible object can be checked byte for byte.
#pragma once

#include <cstdint>
#include <string>

#include "demandflight/engine/artifact_key.h"

namespace dfl::testing {

inline ArtifactKey crash_key(std::uint32_t i) {
  return ArtifactKey{"assets/crash/" + std::to_string(i) + ".bin", "r1", "pc", 0};
}

// Between 1 byte and about 3 MiB, so that installs span several buffer flushes.
inline std::uint64_t crash_size(std::uint32_t i) {
  return 1 + (i * 7919ull * 104729ull) % (3u << 20);
}

// Byte `offset` of artifact `i`: a cheap hash, different for every artifact.
inline char crash_byte(std::uint32_t i, std::uint64_t offset) {
  std::uint64_t x = (offset + 1) * 0x9E3779B97F4A7C15ull ^ (i + 1) * 0xC2B2AE3D27D4EB4Full;
  x ^= x >> 29;
  return static_cast<char>(x & 0xff);
}

inline std::string crash_content(std::uint32_t i) {
  std::string out(crash_size(i), '\0');
  for (std::uint64_t o = 0; o < out.size(); ++o)
    out[o] = crash_byte(i, o);
  return out;
}

}  // namespace dfl::testing
