// The client's recording (ClientOptions::record, client.h): the callers'
// demand stream written as a trace (docs/trace-format.md). Every call is
// made under the client's lock, in the order the core saw the calls, with
// the time the core was given; a thread of the recording writes the lines.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "demandflight/backend/client.h"

namespace dfl::backend {

class Recording {
 public:
  // Creates the first file and writes its header; throws std::runtime_error
  // naming the path and the system's reason.
  // `measure` gives the figures a new part's header holds (called under the
  // client's lock, at each new part).
  Recording(RecordOptions options, const SchedulerConfig& scheduler, const ThrottleConfig& throttle,
            std::string_view orphan_policy, std::function<MeasuredPlatform()> measure);
  ~Recording();  // Writes what is left and closes the file.
  Recording(const Recording&) = delete;
  Recording& operator=(const Recording&) = delete;

  void subscribe(double t, DemandHandle demand, const ArtifactRef& artifact,
                 const DemandOptions& options);
  void cancel(double t, DemandHandle demand);
  void set_priority(double t, DemandHandle demand, Priority priority);
  void end_owner(double t, OwnerId owner, std::optional<OwnerGeneration> generation);
  void throttle(double t, const ThrottleConfig& config);

  RecordStatus status() const;
  // Writes what is left, closes the file, writes `measured` (when given) into
  // each part's header, and returns the final figures.
  RecordStatus close(const MeasuredPlatform* measured);
  // Every header line is this long (one page; padded with spaces).
  static constexpr std::size_t kHeaderBytes = 4096;

 private:
  // The lines of one call, added to the buffer together (one part holds them).
  void append(std::string lines);
  // `lines` as they go to the file at part_bytes_, with fillers (client_record.cpp).
  std::string paged(std::string_view lines) const;
  // Whether lines of this many bytes go to a new part.
  bool starts_part(std::size_t bytes) const;
  std::string header(std::uint32_t part, const MeasuredPlatform* measured) const;
  std::string origin_name(OriginId origin) const;
  std::string resource_name(const std::string& resource) const;
  void writer_loop();
  bool write_all(int fd, std::string_view data, const std::filesystem::path& path);

  const RecordOptions options_;
  const std::function<MeasuredPlatform()> measure_;
  const std::string scheduler_json_;  // The header's "scheduler" object.
  const std::string recording_json_;  // The header's "x-recording", without "part".

  // The caller's side, under the client's lock (and mutex_ for the buffer).
  struct Declared {
    std::uint64_t id = 0;
    std::uint32_t part = 0;  // The part that last declared it.
  };
  std::unordered_map<std::string, Declared> artifacts_;  // By the artifact line's fields.
  std::uint64_t next_artifact_ = 0;
  std::uint32_t part_ = 0;           // The part the next lines go to.
  std::uint64_t part_bytes_ = 0;     // Bytes given to that part so far.

  mutable std::mutex mutex_;
  std::condition_variable wake_writer_, space_;
  std::string pending_;                // Lines not yet taken by the writer.
  std::vector<std::size_t> breaks_;    // Offsets in pending_ where a new part begins.
  bool stop_ = false;
  RecordStatus status_;

  // The writer's side.
  int fd_ = -1;
  std::uint32_t file_part_ = 0;
  std::thread writer_;
};

}  // namespace dfl::backend
