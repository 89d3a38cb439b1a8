// Deterministic artifact content for the crash-safety test: the helper that is
// killed and the test that checks what survived derive the same bytes from
// the same index, so every visible object can be checked byte for byte.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
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

// The bytes of artifact `i` from `offset` on, `size` of them, into `out`: a
// cheap hash of each 8-byte word's index, different for every artifact (a
// word at a time, because sanitizer builds make per-byte work slow).
inline void crash_bytes(std::uint32_t i, std::uint64_t offset, char* out, std::size_t size) {
  for (std::size_t k = 0; k < size;) {
    const std::uint64_t at = offset + k;
    std::uint64_t x = (at / 8 + 1) * 0x9E3779B97F4A7C15ull ^ (i + 1) * 0xC2B2AE3D27D4EB4Full;
    x ^= x >> 29;
    x *= 0xBF58476D1CE4E5B9ull;
    x ^= x >> 32;
    if constexpr (std::endian::native == std::endian::little) {
      if (at % 8 == 0 && size - k >= 8) {  // A whole word: one store.
        std::memcpy(out + k, &x, 8);
        k += 8;
        continue;
      }
    }
    for (std::uint64_t b = at % 8; b < 8 && k < size; ++b, ++k)
      out[k] = static_cast<char>(x >> (8 * b));
  }
}

inline std::string crash_content(std::uint32_t i) {
  std::string out(crash_size(i), '\0');
  crash_bytes(i, 0, out.data(), out.size());
  return out;
}

}  // namespace dfl::testing
