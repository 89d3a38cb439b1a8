// The cache directory: what is visible, when, and under which name.
#include "demandflight/backend/cache_dir.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

namespace dfl::backend {
namespace {

namespace fs = std::filesystem;

fs::path scratch(const char* name) {
  const fs::path dir =
      fs::temp_directory_path() / ("dfl-cache-" + std::to_string(::getpid()) + "-" + name);
  fs::remove_all(dir);
  return dir;
}

ArtifactKey key(const std::string& resource, const std::string& revision = "r1") {
  return ArtifactKey{resource, revision, "pc", 0};
}

std::string read(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

CacheDir::Staging begin(CacheDir& cache, const ArtifactKey& k) {
  auto begun = cache.begin(k);
  EXPECT_TRUE(std::holds_alternative<CacheDir::Staging>(begun));
  return std::move(std::get<CacheDir::Staging>(begun));
}

TEST(Sha256, MatchesTheStandardTestVectors) {
  EXPECT_EQ(Sha256::hex_of(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(Sha256::hex_of("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  Sha256 streamed;
  streamed.update("a", 1);
  streamed.update("bc", 2);
  EXPECT_EQ(Sha256::hex(streamed.finish()), Sha256::hex_of("abc"));
}

TEST(CacheDir, AnObjectBecomesVisibleOnlyAtCommit) {
  const fs::path root = scratch("visible");
  CacheDir cache(root);
  const ArtifactKey rock = key("props/rock.ktx2");
  const std::string body(3 * CacheDir::kBufferBytes + 123, 'x');
  CacheDir::Staging staging = begin(cache, rock);
  ASSERT_FALSE(staging.write(body.data(), body.size()));
  EXPECT_FALSE(cache.installed_size(rock));
  EXPECT_FALSE(fs::exists(cache.object_path(rock))) << "nothing visible before commit";
  EXPECT_TRUE(fs::exists(staging.path()));
  const fs::path staged = staging.path();
  ASSERT_FALSE(cache.commit(std::move(staging), body.size(), Sha256::hex_of(body)));
  EXPECT_EQ(cache.installed_size(rock), body.size());
  EXPECT_EQ(read(cache.object_path(rock)), body);
  EXPECT_FALSE(fs::exists(staged)) << "the staging file was renamed, not copied";
}

TEST(CacheDir, ACommitReplacesAnInstalledObjectAtomically) {
  const fs::path root = scratch("replace");
  CacheDir cache(root);
  const ArtifactKey rock = key("props/rock.ktx2");
  for (const std::string body : {"first body", "second, longer body"}) {
    CacheDir::Staging staging = begin(cache, rock);
    ASSERT_FALSE(staging.write(body.data(), body.size()));
    ASSERT_FALSE(cache.commit(std::move(staging), body.size(), Sha256::hex_of(body)));
    EXPECT_EQ(read(cache.object_path(rock)), body);
    EXPECT_EQ(cache.installed_size(rock), body.size());
  }
  EXPECT_EQ(cache.installed_count(), 1u);
  EXPECT_EQ(cache.installed_bytes(), std::string("second, longer body").size());
  EXPECT_TRUE(fs::is_empty(root / "staging"));
}

TEST(CacheDir, AWrongDigestOrSizeIsNeverInstalled) {
  const fs::path root = scratch("corrupt");
  CacheDir cache(root);
  const ArtifactKey rock = key("props/rock.ktx2");
  CacheDir::Staging staging = begin(cache, rock);
  ASSERT_FALSE(staging.write("wrong bytes", 11));
  const fs::path staged = staging.path();
  auto error = cache.commit(std::move(staging), 11, Sha256::hex_of("right bytes"));
  ASSERT_TRUE(error);
  EXPECT_NE(error->message.find("sha256 mismatch"), std::string::npos) << error->message;
  EXPECT_FALSE(cache.installed_size(rock));
  EXPECT_FALSE(fs::exists(cache.object_path(rock)));
  EXPECT_FALSE(fs::exists(staged)) << "the corrupt bytes are deleted";

  CacheDir::Staging short_body = begin(cache, rock);
  ASSERT_FALSE(short_body.write("abc", 3));
  error = cache.commit(std::move(short_body), 4, std::nullopt);
  ASSERT_TRUE(error);
  EXPECT_NE(error->message.find("size mismatch"), std::string::npos) << error->message;
  EXPECT_FALSE(fs::exists(cache.object_path(rock)));
}

TEST(CacheDir, AnAbandonedStagingFileIsRemoved) {
  const fs::path root = scratch("abandoned");
  CacheDir cache(root);
  fs::path staged;
  {
    CacheDir::Staging staging = begin(cache, key("a"));
    ASSERT_FALSE(staging.write("abc", 3));
    staged = staging.path();
  }
  EXPECT_FALSE(fs::exists(staged));
}

TEST(CacheDir, NamesDeriveFromTheWholeKeySoNoResourceNameEscapesTheRoot) {
  const fs::path root = scratch("names");
  CacheDir cache(root);
  const ArtifactKey hostile = key("../../../../etc/passwd");
  const fs::path path = cache.object_path(hostile);
  EXPECT_EQ(path.parent_path(), root / "objects");
  EXPECT_EQ(path.filename().string().size(), 64u);
  EXPECT_NE(CacheDir::object_name(key("a", "r1")), CacheDir::object_name(key("a", "r2")));
  EXPECT_NE(CacheDir::object_name(ArtifactKey{"ab", "c", "t", 0}),
            CacheDir::object_name(ArtifactKey{"a", "bc", "t", 0}))
      << "length-prefixed fields cannot run into each other";
  EXPECT_NE(CacheDir::object_name(ArtifactKey{"a", "r", "t", 0}),
            CacheDir::object_name(ArtifactKey{"a", "r", "t", 1}));
}

TEST(CacheDir, ReopeningRebuildsTheIndexAndRemovesStagingLeftovers) {
  const fs::path root = scratch("reopen");
  {
    CacheDir cache(root);
    CacheDir::Staging staging = begin(cache, key("kept"));
    ASSERT_FALSE(staging.write("12345", 5));
    ASSERT_FALSE(cache.commit(std::move(staging), 5, std::nullopt));
  }
  std::ofstream(root / "staging" / "leftover.part") << "half an artifact";
  CacheDir reopened(root);
  EXPECT_EQ(reopened.installed_size(key("kept")), 5u);
  EXPECT_EQ(reopened.installed_count(), 1u);
  EXPECT_EQ(reopened.installed_bytes(), 5u);
  EXPECT_EQ(reopened.staging_leftovers_removed(), 1u);
  EXPECT_TRUE(fs::is_empty(root / "staging"));
  EXPECT_TRUE(reopened.remove(key("kept")));
  EXPECT_FALSE(fs::exists(reopened.object_path(key("kept"))));
  EXPECT_FALSE(reopened.remove(key("kept")));
}

}  // namespace
}  // namespace dfl::backend
