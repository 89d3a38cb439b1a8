// Files for the backend's tests: deterministic content by name, and reading
// a file back whole.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

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

// An empty directory of its own for the running test, with www/ in it (what
// the loopback server serves): TMP/dfl-PREFIX-PID-TESTNAME.
inline std::filesystem::path fresh_test_dir(const std::string& prefix) {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  const std::filesystem::path dir = std::filesystem::temp_directory_path() /
                                    ("dfl-" + prefix + "-" + std::to_string(::getpid()) + "-" +
                                     info->name());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir / "www");
  return dir;
}

// The whole file (empty if it cannot be read).
inline std::string read_bytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

}  // namespace dfl::testing
