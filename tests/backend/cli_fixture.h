// The fixture of the `demandflight fetch` and `replay` tests: a scratch
// directory, the loopback server serving its www/, and manifest lines.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "demandflight/backend/cache_dir.h"
#include "demandflight/backend/sha256.h"
#include "loopback.h"
#include "test_files.h"

namespace dfl::testing {

namespace fs = std::filesystem;
using nlohmann::json;

inline std::string content(const std::string& name, std::size_t size) {
  return content_of(name, size);
}

class CliTest : public ::testing::Test {
 public:  // Helpers of the tests' own files use them too.
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ =
        fs::temp_directory_path() / ("dfl-cli-" + std::to_string(::getpid()) + "-" + info->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "www");
  }
  void TearDown() override {
    server_.reset();
    fs::remove_all(dir_);
  }

  // Serves a file of `size` bytes as /NAME and returns its manifest line.
  std::string serve(const std::string& name, std::size_t size, bool right_digest = true) {
    const std::string bytes = content(name, size);
    std::ofstream(dir_ / "www" / name, std::ios::binary) << bytes;
    const std::string digest = backend::Sha256::hex_of(right_digest ? bytes : bytes + "x");
    return artifact_line(name, name, size, digest);
  }
  // An artifact line of the manifest: `id` names the resource `resource`.
  static std::string artifact_line(const std::string& id, const std::string& resource,
                                   std::size_t size, const std::string& digest) {
    return json{{"op", "artifact"}, {"id", id},        {"resource", resource},
                {"revision", "r1"}, {"target", "pc"},  {"generation", 0},
                {"size", size},     {"origin", "cdn"}, {"sha256", digest}}
               .dump() +
           "\n";
  }
  LoopbackServer& server() {
    if (!server_) server_ = std::make_unique<LoopbackServer>(dir_ / "www");
    return *server_;
  }
  std::string cache() const { return (dir_ / "cache").string(); }
  fs::path object(const std::string& name) const {
    return dir_ / "cache" / "objects" /
           backend::CacheDir::object_name(ArtifactKey{name, "r1", "pc", 0});
  }
  static std::string read(const fs::path& path) { return read_bytes(path); }

  std::filesystem::path dir_;
  std::unique_ptr<LoopbackServer> server_;
};

}  // namespace dfl::testing
