// Child processes and scratch space for the subcommands that run one
// simulation per process (SimGrid allows one engine per process): compare
// and train.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <filesystem>
#include <functional>
#include <string>

namespace dfl::cli {

// The CPUs online, at least 1.
int default_jobs();

// Runs `count` jobs, at most `jobs` at a time. start(i) starts job i and
// returns its process id; finished(i, code) is called as each ends (code: the
// exit status, or 1 when it was killed by a signal).
void run_processes(std::size_t count, int jobs, const std::function<pid_t(std::size_t)>& start,
                   const std::function<void(std::size_t, int)>& finished);

// A fresh directory under $TMPDIR (or /tmp), removed with everything in it
// when this goes out of scope.
class TempDir {
 public:
  explicit TempDir(const std::string& prefix);
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

}  // namespace dfl::cli
