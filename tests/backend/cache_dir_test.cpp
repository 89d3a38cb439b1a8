// The cache directory: what is visible, when, and under which name.
#include "demandflight/backend/cache_dir.h"

#include <fcntl.h>
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

bool unnamed_files_work_in(const fs::path& dir) {
  fs::create_directories(dir);
  const int fd = ::open(dir.c_str(), O_TMPFILE | O_WRONLY, 0644);
  if (fd < 0) return false;
  ::close(fd);
  return true;
}

// Staging files unnamed until commit (the default, where the file system has
// O_TMPFILE) or named in staging/.
class CacheDirStaging : public ::testing::TestWithParam<bool> {
 protected:
  bool unnamed() const { return GetParam(); }
  fs::path root(const char* name) const {
    return scratch((std::string(name) + (unnamed() ? "-unnamed" : "-named")).c_str());
  }
  // The staging file's name exists exactly while a named file is staged.
  void expect_staged(const CacheDir::Staging& staging, const fs::path& root) const {
    if (unnamed() && unnamed_files_work_in(root / "staging")) {
      EXPECT_FALSE(staging.named());
      EXPECT_TRUE(fs::is_empty(root / "staging")) << "an unnamed file shows nowhere";
    } else {
      EXPECT_TRUE(staging.named());
      EXPECT_TRUE(fs::exists(staging.path()));
    }
  }
};

INSTANTIATE_TEST_SUITE_P(Unnamed, CacheDirStaging, ::testing::Values(true));
INSTANTIATE_TEST_SUITE_P(Named, CacheDirStaging, ::testing::Values(false));

TEST_P(CacheDirStaging, AnObjectBecomesVisibleOnlyAtCommit) {
  const fs::path dir = root("visible");
  CacheDir cache(dir, false, unnamed());
  const ArtifactKey rock = key("props/rock.ktx2");
  const std::string body(3 * CacheDir::kBufferBytes + 123, 'x');
  CacheDir::Staging staging = begin(cache, rock);
  ASSERT_FALSE(staging.write(body.data(), body.size()));
  EXPECT_FALSE(cache.installed_size(rock));
  EXPECT_FALSE(fs::exists(cache.object_path(rock))) << "nothing visible before commit";
  expect_staged(staging, dir);
  const fs::path staged = staging.path();
  ASSERT_FALSE(cache.commit(std::move(staging), body.size(), Sha256::hex_of(body)));
  EXPECT_EQ(cache.installed_size(rock), body.size());
  EXPECT_EQ(read(cache.object_path(rock)), body);
  EXPECT_FALSE(fs::exists(staged)) << "the staging file was renamed, not copied";
  EXPECT_TRUE(fs::is_empty(dir / "staging"));
}

TEST_P(CacheDirStaging, ACommitReplacesAnInstalledObjectAtomically) {
  const fs::path dir = root("replace");
  CacheDir cache(dir, false, unnamed());
  const ArtifactKey rock = key("props/rock.ktx2");
  for (const std::string body : {"first body", "second, longer body"}) {
    CacheDir::Staging staging = begin(cache, rock);
    ASSERT_FALSE(staging.write(body.data(), body.size()));
    ASSERT_FALSE(cache.commit(std::move(staging), body.size(), Sha256::hex_of(body)));
    EXPECT_EQ(read(cache.object_path(rock)), body);
    EXPECT_EQ(cache.installed_size(rock), body.size());
  }
  EXPECT_EQ(cache.installed_count(), 1u);
  EXPECT_TRUE(fs::is_empty(dir / "staging"));
}

TEST_P(CacheDirStaging, AWrongDigestOrSizeIsNeverInstalled) {
  const fs::path dir = root("corrupt");
  CacheDir cache(dir, false, unnamed());
  const ArtifactKey rock = key("props/rock.ktx2");
  CacheDir::Staging staging = begin(cache, rock);
  ASSERT_FALSE(staging.write("wrong bytes", 11));
  expect_staged(staging, dir);
  const fs::path staged = staging.path();
  auto error = cache.commit(std::move(staging), 11, Sha256::hex_of("right bytes"));
  ASSERT_TRUE(error);
  EXPECT_NE(error->message.find("sha256 mismatch"), std::string::npos) << error->message;
  EXPECT_FALSE(cache.installed_size(rock));
  EXPECT_FALSE(fs::exists(cache.object_path(rock)));
  EXPECT_FALSE(fs::exists(staged)) << "the corrupt bytes are deleted";
  EXPECT_TRUE(fs::is_empty(dir / "staging"));

  CacheDir::Staging short_body = begin(cache, rock);
  ASSERT_FALSE(short_body.write("abc", 3));
  error = cache.commit(std::move(short_body), 4, std::nullopt);
  ASSERT_TRUE(error);
  EXPECT_NE(error->message.find("size mismatch"), std::string::npos) << error->message;
  EXPECT_FALSE(fs::exists(cache.object_path(rock)));
}

TEST_P(CacheDirStaging, AnAbandonedStagingFileIsRemoved) {
  const fs::path dir = root("abandoned");
  CacheDir cache(dir, false, unnamed());
  {
    CacheDir::Staging staging = begin(cache, key("a"));
    ASSERT_FALSE(staging.write("abc", 3));
    expect_staged(staging, dir);
  }
  EXPECT_TRUE(fs::is_empty(dir / "staging"));
  EXPECT_TRUE(fs::is_empty(dir / "objects"));
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
