// What the C++ fragments of README.md and docs/ take as given, besides the
// function parameters extract_snippets.py gives them (a client, an artifact's
// key, size and digests, an ArtifactRef): the game's own functions.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include "demandflight/backend/client.h"

namespace doc {
inline void load(const std::filesystem::path&) {}
inline void open(const std::filesystem::path&) {}
inline void log(const std::string&) {}
}  // namespace doc
