// Files for the backend's tests: deterministic content by name, and reading
// a file back whole.
#pragma once

#include <cstddef>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>

namespace dfl::testing {

// `size` bytes that differ for every name.
inline std::string content_of(const std::string& name, std::size_t size) {
  std::string out(size, '\0');
  const std::size_t seed = std::hash<std::string>{}(name);
  for (std::size_t i = 0; i < size; ++i)
    out[i] = static_cast<char>((i * 131 + seed) % 253);
  return out;
}

// The whole file (empty if it cannot be read).
inline std::string read_bytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

}  // namespace dfl::testing
