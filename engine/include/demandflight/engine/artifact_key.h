// ArtifactKey: the immutable identity of one downloadable result.
//
// Two calls may share one physical transfer, verification and install if and
// only if their keys are equal. Equality and hash cover all four fields: the
// same resource name at another revision, runtime target or resolution
// generation is different content and therefore a different task (docs/design.md §2,
// defect 3).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>

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

// KeyRef: a shared, immutable ArtifactKey. The engine keeps one per task and
// hands it on in its commands, its installed index and its evictions, so a
// key's strings are copied at most once per task rather than once per use.
// A caller that subscribes to one key many times (a manifest, a trace) can
// make the KeyRef once and pass it: the task then shares the caller's key,
// and comparing the two is a pointer comparison.
//
// A KeyRef is never null once made from a key. It compares by value: two
// KeyRefs to equal keys are equal, whoever made them.
class KeyRef {
 public:
  KeyRef() = default;  // Empty: only to be assigned to.
  explicit KeyRef(ArtifactKey key) : key_(std::make_shared<const ArtifactKey>(std::move(key))) {}
  explicit KeyRef(std::shared_ptr<const ArtifactKey> key) : key_(std::move(key)) {}
  const ArtifactKey& operator*() const noexcept { return *key_; }
  const ArtifactKey* operator->() const noexcept { return key_.get(); }
  const ArtifactKey* get() const noexcept { return key_.get(); }
  operator const ArtifactKey&() const noexcept { return *key_; }  // NOLINT: a key, read-only.
  explicit operator bool() const noexcept { return key_ != nullptr; }

  friend bool operator==(const KeyRef& a, const KeyRef& b) noexcept {
    return a.key_ == b.key_ || (a.key_ && b.key_ && *a.key_ == *b.key_);
  }
  friend bool operator==(const KeyRef& a, const ArtifactKey& b) noexcept {
    return a.key_ && (a.key_.get() == &b || *a.key_ == b);
  }

 private:
  std::shared_ptr<const ArtifactKey> key_;
};

inline std::string to_string(const KeyRef& key) {
  return to_string(*key);
}

}  // namespace dfl

template <>
struct std::hash<dfl::ArtifactKey> : dfl::ArtifactKeyHash {};
