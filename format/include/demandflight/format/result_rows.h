// The result rows as CSV text (docs/trace-format.md, *Result rows: CSV*):
// the one writer of a row's fields, which a streamed run's files
// (CsvRowWriter, result.h) and the client recording's outcome rows
// (backend, RecordOptions::outcomes) both write with. The columns are the
// result JSON's, in its order; text is quoted as RFC 4180 asks; an absent
// value is an empty field (a null); numbers are the shortest text that reads
// back as the same double; a task's priority_timeline and orphan_decisions
// are JSON text in one field each.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "demandflight/engine/ids.h"
#include "demandflight/engine/orphan_policy.h"

namespace dfl::format {

struct DemandRowFields {
  std::string_view demand;
  std::string_view owner;
  std::string_view artifact;
  Priority priority = 0;
  double t_subscribe = 0;
  std::optional<double> t_end;
  std::optional<double> latency_s;
  std::optional<std::string_view> outcome;
  std::optional<std::uint64_t> task;
  std::optional<std::string_view> served_by;
};

struct OrphanDecisionFields {
  double t = 0;
  OrphanDecision decision = OrphanDecision::abort;
  std::uint64_t bytes_done = 0;
};

struct TaskRowFields {
  std::uint64_t task = 0;
  std::string_view artifact;
  double t_start = 0;
  std::optional<double> t_first_start;
  std::optional<double> t_received;
  double t_end = 0;
  std::string_view outcome;
  std::uint64_t attempts = 0;
  std::uint64_t bytes_transferred = 0;
  std::uint64_t installs = 0;
  std::span<const std::pair<double, std::optional<Priority>>> priority_timeline;
  std::span<const OrphanDecisionFields> orphan_decisions;
};

struct CsvRows {
  // The header lines' columns (without a newline).
  static constexpr std::string_view kDemandColumns =
      "demand,owner,artifact,priority,t_subscribe,t_end,latency_s,outcome,task,served_by";
  static constexpr std::string_view kTaskColumns =
      "task,artifact,t_start,t_first_start,t_received,t_end,outcome,attempts,bytes_transferred,"
      "installs,priority_timeline,orphan_decisions";
  // A row's fields after `out`'s end, without the newline (a writer may add
  // columns of its own first).
  static void append(std::string& out, const DemandRowFields& row);
  static void append(std::string& out, const TaskRowFields& row);
  // One field: text quoted where RFC 4180 asks; a number (nothing if not finite).
  static void append_text(std::string& out, std::string_view value);
  static void append_number(std::string& out, double value);
};

}  // namespace dfl::format
