// Checks on reasons and lines that have numbers in them, without <regex>
// (GCC 12 warns inside <regex> under the sanitizers' -O1, and CI builds with
// warnings as errors).
#pragma once

#include <cstdlib>
#include <initializer_list>
#include <optional>
#include <string>

namespace dfl::testing {

// Whether `text` holds every piece, each after the one before.
inline bool says_in_order(const std::string& text, std::initializer_list<std::string> pieces) {
  std::size_t at = 0;
  for (const std::string& piece : pieces) {
    at = text.find(piece, at);
    if (at == std::string::npos) return false;
    at += piece.size();
  }
  return true;
}

// The number right after the first `before` in `text` ("... at 30.031 s").
inline std::optional<double> number_after(const std::string& text, const std::string& before) {
  const std::size_t at = text.find(before);
  if (at == std::string::npos) return std::nullopt;
  const char* start = text.c_str() + at + before.size();
  char* end = nullptr;
  const double value = std::strtod(start, &end);
  if (end == start) return std::nullopt;
  return value;
}

}  // namespace dfl::testing
