// The client's recording (ClientOptions::record, client.h): the callers'
// demand stream written as a trace (docs/trace-format.md). Every call is
// made under the client's lock, in the order the core saw the calls, with
// the time the core was given; a thread of the recording writes the lines.
#pragma once

#include <array>
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
#include "demandflight/format/trace_writer.h"

namespace dfl::backend {

// Times in a recording: seconds on the client's clock, to the microsecond.
double record_time(double t);
// A demand's id in a recording: d<slot>g<generation>.
std::string record_demand_id(DemandHandle demand);

// The recording sees the callers' subscribes (and, with outcomes, every
// demand's and task's end) as the client's observer, the other calls from
// the client directly.
class Recording final : public ClientObserver {
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

  // ClientObserver: a subscribe is written as the core makes the demand;
  // the rest feeds the outcome rows (client_record_rows.cpp).
  void on_subscribe(double t, DemandHandle demand, const ArtifactRef& artifact,
                    const DemandOptions& options, std::optional<TaskId> task) override;
  void on_command(double t, const Command& command) override;
  void on_delivered(double t, DemandHandle demand, const DemandResult& result) override;

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
  // Returns the artifact's id in the recording.
  std::string subscribe(double t, DemandHandle demand, const ArtifactRef& artifact,
                        const DemandOptions& options);
  // The lines of one call, added to the buffer together (one part holds them).
  void append(std::string lines);
  // A row for the outcome file `side` (kDemandRows, kTaskRows).
  void append_row(std::size_t side, std::string row);
  // What each kind of command adds to the rows (on_command).
  void task_created(double t, const TaskCreated& created);
  void task_priority_changed(double t, const TaskPriorityChanged& changed);
  void orphan_decided(double t, const OrphanDecided& decided);
  void transfer_started(double t, const StartTransfer& start);
  void finalize_started(double t, const StartFinalize& finalize);
  void delivered(double t, const Deliver& deliver);
  void task_ended(double t, const TaskEnded& ended);
  void open_rows();  // Creates the outcome files with their header lines.
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
  const format::TraceHeader::Scheduler scheduler_;  // The header's "scheduler".
  const std::string recording_json_;  // The header's "x-recording", without "part".
  format::TraceWriter lines_;          // Each call's lines, then taken (append()).

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

  // The outcome rows (RecordOptions::outcomes): the live demands and tasks,
  // under the client's lock; a row is written as each ends.
  struct DemandRow {
    std::string owner, artifact;
    Priority priority = 0;
    double t_subscribe = 0;
    std::uint64_t task = 0;
    const char* served_by = "";
    std::string reason;
  };
  struct TaskRow {
    std::string artifact;
    double t_start = 0;
    std::optional<double> t_first_start, t_received;
    // The effective priority's changes and the orphan policy's answers, as
    // the simulator's result rows have them (format/recorder.h).
    std::vector<std::pair<double, std::optional<Priority>>> timeline;
    std::optional<Priority> effective;
    std::vector<std::pair<double, OrphanDecided>> decisions;
  };
  std::unordered_map<std::uint64_t, DemandRow> live_demands_;
  std::unordered_map<std::uint64_t, TaskRow> live_tasks_;
  std::uint64_t last_subscribe_ = 0;  // The demand of the subscribe being handled.
  struct Side {
    std::filesystem::path path;
    int fd = -1;
    std::string pending;  // Under mutex_.
  };
  static constexpr std::size_t kDemandRows = 0, kTaskRows = 1;
  std::array<Side, 2> sides_;
  std::size_t pending_rows_ = 0;  // Bytes in the sides' pending, under mutex_.

  // The writer's side.
  int fd_ = -1;
  std::uint32_t file_part_ = 0;
  std::thread writer_;
};

// Two observers as one: the caller's and the recording's (either may be null).
class TeeObserver final : public ClientObserver {
 public:
  ClientObserver* first = nullptr;
  ClientObserver* second = nullptr;

  void on_subscribe(double t, DemandHandle demand, const ArtifactRef& artifact,
                    const DemandOptions& options, std::optional<TaskId> task) override {
    if (first) first->on_subscribe(t, demand, artifact, options, task);
    if (second) second->on_subscribe(t, demand, artifact, options, task);
  }
  void on_set_priority(double t, DemandHandle demand, Priority priority) override {
    if (first) first->on_set_priority(t, demand, priority);
    if (second) second->on_set_priority(t, demand, priority);
  }
  void on_command(double t, const Command& command) override {
    if (first) first->on_command(t, command);
    if (second) second->on_command(t, command);
  }
  void on_transfer_ended(double t, TaskId task, TransferId transfer, std::uint64_t bytes,
                         bool aborted) override {
    if (first) first->on_transfer_ended(t, task, transfer, bytes, aborted);
    if (second) second->on_transfer_ended(t, task, transfer, bytes, aborted);
  }
  void on_settled(double t) override {
    if (first) first->on_settled(t);
    if (second) second->on_settled(t);
  }
  void on_attempt_failed(double t, TaskId task, const ArtifactKey& key,
                         const std::string& reason) override {
    if (first) first->on_attempt_failed(t, task, key, reason);
    if (second) second->on_attempt_failed(t, task, key, reason);
  }
  void on_delivered(double t, DemandHandle demand, const DemandResult& result) override {
    if (first) first->on_delivered(t, demand, result);
    if (second) second->on_delivered(t, demand, result);
  }
  void on_finalize_ended(double t, TaskId task, FinalizeStatus status,
                         std::uint64_t bytes) override {
    if (first) first->on_finalize_ended(t, task, status, bytes);
    if (second) second->on_finalize_ended(t, task, status, bytes);
  }
};

}  // namespace dfl::backend
