// ArtifactKey: the immutable identity of one downloadable result.
//
// Two calls may share one physical transfer, verification and install if and
// only if their keys are equal. Equality and hash cover all four fields: the
// same resource name at another revision, runtime target or resolution
// generation is different content and therefore a different task (design.md §2,
// defect 3).
#pragma once

#include <cstdint>
#include <functional>
#include <string>

namespace dfl {

struct ArtifactKey {
  std::string resource;         // Logical name, e.g. "textures/rock.ktx2".
  std::string revision;         // Content revision of the resource.
  std::string target;           // Runtime target (platform, format, quality tier).
  std::int64_t generation = 0;  // Resolution generation (manifest epoch).

  friend bool operator==(const ArtifactKey&, const ArtifactKey&) = default;
};

// Renders a key as "resource@revision/target#generation" for logs and errors.
std::string to_string(const ArtifactKey& key);

struct ArtifactKeyHash {
  std::size_t operator()(const ArtifactKey& key) const noexcept;
};

}  // namespace dfl

template <>
struct std::hash<dfl::ArtifactKey> : dfl::ArtifactKeyHash {};
