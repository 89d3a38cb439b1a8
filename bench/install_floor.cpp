// The cost of verified, durable installs alone, with no network: the floor
// under `demandflight fetch` on a set of files.
//
//   install_floor --cache DIR --files N --size BYTES [--threads T] [--mode M]
//
// T threads (fetch's finalize pool has 16) each take the next file index and
// install it. Modes:
//   cachedir  demandflight's own install path (CacheDir: staging file, SHA-256
//             checked, fdatasync, rename into objects/, group-committed fsync
//             of objects/): what `fetch` does per artifact once the bytes
//             have arrived;
//   durable   the same syscalls without hashing (create, write, fdatasync,
//             rename, fsync of the directory per file): the file system's
//             price of a durable atomic install;
//   batched   create, write, close; one committer thread takes every file
//             written so far, makes all of them durable with one syncfs,
//             renames them into objects/ and fsyncs objects/ once: the
//             cheapest durable atomic install Linux offers for many files;
//   plain     create, write, close: what curl does per file (no durability).
// The bytes come from memory (distinct per file). Prints one JSON line:
// {"mode":..., "files":..., "wall_s":..., "cpu_s":...}.
#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "demandflight/backend/cache_dir.h"
#include "demandflight/backend/sha256.h"

namespace {

namespace fs = std::filesystem;

double cpu_seconds() {
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  auto s = [](const timeval& tv) {
    return static_cast<double>(tv.tv_sec) + static_cast<double>(tv.tv_usec) / 1e6;
  };
  return s(usage.ru_utime) + s(usage.ru_stime);
}

[[noreturn]] void die(const std::string& message) {
  std::fprintf(stderr, "install_floor: %s\n", message.c_str());
  std::exit(1);
}

bool write_all(int fd, const char* data, std::size_t size) {
  while (size > 0) {
    const ssize_t n = ::write(fd, data, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    data += n;
    size -= static_cast<std::size_t>(n);
  }
  return true;
}

struct Args {
  fs::path cache;
  std::size_t files = 2000;
  std::size_t size = 64 << 10;
  unsigned threads = 16;
  std::string mode = "cachedir";
};

Args parse(int argc, char** argv) {
  Args args;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) die("missing value after " + flag);
    const std::string value = argv[++i];
    if (flag == "--cache") {
      args.cache = value;
    } else if (flag == "--files") {
      args.files = std::stoull(value);
    } else if (flag == "--size") {
      args.size = std::stoull(value);
    } else if (flag == "--threads") {
      args.threads = static_cast<unsigned>(std::stoul(value));
    } else if (flag == "--mode") {
      args.mode = value;
    } else {
      die("unknown flag " + flag);
    }
  }
  if (args.cache.empty()) die("--cache DIR is required");
  if (args.mode != "cachedir" && args.mode != "durable" && args.mode != "batched" &&
      args.mode != "batched-fdatasync" && args.mode != "plain")
    die("--mode is cachedir, durable, batched or plain");
  if (args.threads == 0) die("--threads must be at least 1");
  return args;
}

}  // namespace

int main(int argc, char** argv) {
  const Args args = parse(argc, argv);

  // Distinct bytes per file: a window into one random block, shifted by the index.
  std::vector<char> block(args.size + 4096);
  std::mt19937_64 random(42);
  for (auto& c : block)
    c = static_cast<char>(random());
  auto bytes_of = [&](std::size_t i) { return block.data() + (i * 64) % 4096; };

  std::vector<dfl::ArtifactKey> keys(args.files);
  std::vector<std::string> digests(args.files);
  for (std::size_t i = 0; i < args.files; ++i) {
    keys[i].resource = "floor/" + std::to_string(i);
    keys[i].revision = "r1";
    keys[i].target = "any";
    dfl::backend::Sha256 hash;
    hash.update(bytes_of(i), args.size);
    digests[i] = dfl::backend::Sha256::hex(hash.finish());
  }

  fs::create_directories(args.cache / "objects");
  fs::create_directories(args.cache / "staging");
  std::unique_ptr<dfl::backend::CacheDir> cache;
  if (args.mode == "cachedir") cache = std::make_unique<dfl::backend::CacheDir>(args.cache);
  const fs::path objects = args.cache / "objects";
  const fs::path staging = args.cache / "staging";
  const int objects_fd = ::open(objects.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (objects_fd < 0) die("cannot open " + objects.string());

  std::atomic<std::size_t> next{0};
  std::mutex queue_mutex;
  std::condition_variable queue_cv;
  std::vector<std::size_t> queue;
  std::size_t committed = 0;
  std::size_t batches = 0;
  auto commit_batches = [&] {
    while (committed < args.files) {
      std::vector<std::size_t> batch;
      {
        std::unique_lock lock(queue_mutex);
        queue_cv.wait(lock, [&] { return !queue.empty(); });
        batch.swap(queue);
      }
      ++batches;
      if (args.mode == "batched") {
        if (::syncfs(objects_fd) != 0) die("syncfs");
      } else {
        for (std::size_t i : batch) {
          const fs::path part = staging / (std::to_string(i) + ".bin.part");
          const int fd = ::open(part.c_str(), O_WRONLY | O_CLOEXEC);
          if (fd < 0 || ::fdatasync(fd) != 0) die("fdatasync");
          ::close(fd);
        }
      }
      for (std::size_t i : batch) {
        const std::string name = std::to_string(i) + ".bin";
        if (::rename((staging / (name + ".part")).c_str(), (objects / name).c_str()) != 0)
          die("rename");
      }
      if (::fsync(objects_fd) != 0) die("fsync objects/");
      committed += batch.size();
    }
  };
  auto install = [&](std::size_t i) {
    const char* data = bytes_of(i);
    if (args.mode == "cachedir") {
      auto begun = cache->begin(keys[i]);
      if (auto* error = std::get_if<dfl::backend::IoError>(&begun)) die(error->message);
      auto& staged = std::get<dfl::backend::CacheDir::Staging>(begun);
      if (auto error = staged.write(data, args.size)) die(error->message);
      if (auto error = cache->commit(std::move(staged), args.size, digests[i])) die(error->message);
      return;
    }
    const std::string name = std::to_string(i) + ".bin";
    const fs::path part = (args.mode == "plain" ? objects : staging) / (name + ".part");
    const int fd = ::open(part.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0 || !write_all(fd, data, args.size)) die("cannot write " + part.string());
    if (args.mode == "plain" || args.mode == "batched" || args.mode == "batched-fdatasync") {
      ::close(fd);
      if (args.mode != "plain") {
        std::lock_guard lock(queue_mutex);
        queue.push_back(i);
        queue_cv.notify_one();
      }
      return;
    }
    if (::fdatasync(fd) != 0) die("fdatasync");
    ::close(fd);
    if (::rename(part.c_str(), (objects / name).c_str()) != 0) die("rename");
    if (::fsync(objects_fd) != 0) die("fsync objects/");
  };

  const double cpu0 = cpu_seconds();
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;
  if (args.mode.starts_with("batched")) threads.emplace_back(commit_batches);
  for (unsigned t = 0; t < args.threads; ++t) {
    threads.emplace_back([&] {
      for (std::size_t i; (i = next.fetch_add(1)) < args.files;)
        install(i);
    });
  }
  for (auto& t : threads)
    t.join();
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double cpu = cpu_seconds() - cpu0;
  ::close(objects_fd);
  std::printf(
      "{\"mode\": \"%s\", \"files\": %zu, \"size\": %zu, \"threads\": %u, "
      "\"wall_s\": %.4f, \"cpu_s\": %.4f, \"batches\": %zu}\n",
      args.mode.c_str(), args.files, args.size, args.threads, wall, cpu, batches);
  return 0;
}
