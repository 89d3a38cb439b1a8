#include "demandflight/engine/artifact_key.h"

#include <string_view>

#include "demandflight/engine/installed_index.h"

namespace dfl {
namespace {

// Boost-style mixing: cheap, and good enough for keys made of strings.
std::size_t mix(std::size_t seed, std::size_t value) {
  return seed ^ (value + 0x9E3779B97F4A7C15ull + (seed << 6) + (seed >> 2));
}

}  // namespace

std::string to_string(const ArtifactKey& key) {
  return key.resource + "@" + key.revision + "/" + key.target + "#" +
         std::to_string(key.generation);
}

std::size_t ArtifactKeyHash::operator()(const ArtifactKey& key) const noexcept {
  const std::hash<std::string_view> hash_text;
  std::size_t h = hash_text(key.resource);
  h = mix(h, hash_text(key.revision));
  h = mix(h, hash_text(key.target));
  h = mix(h, std::hash<std::int64_t>{}(key.generation));
  return h;
}

std::size_t KeyIdentity::Hash::operator()(const ArtifactKey& key) const noexcept {
  if (resource_only) return std::hash<std::string_view>{}(key.resource);
  return ArtifactKeyHash{}(key);
}

bool KeyIdentity::Equal::operator()(const ArtifactKey& a, const ArtifactKey& b) const noexcept {
  if (resource_only) return a.resource == b.resource;
  return a == b;
}

}  // namespace dfl
