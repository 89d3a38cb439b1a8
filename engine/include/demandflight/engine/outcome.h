// Terminal outcomes and the results runtimes report.
#pragma once

#include <cstdint>
#include <string_view>

namespace dfl {

// The one terminal a demand receives (docs/design.md §3, contract 4).
enum class DemandOutcome : std::uint8_t {
  succeeded,    // The artifact is installed and usable.
  failed,       // Permanent error, or retry attempts exhausted.
  cancelled,    // The caller withdrew this demand.
  timed_out,    // This demand's own deadline passed first.
  owner_ended,  // The owner went away (or the demand's owner generation was stale).
};

// How a physical task instance ended.
enum class TaskOutcome : std::uint8_t {
  installed,  // Verified and atomically installed.
  failed,     // Permanent error or attempts exhausted.
  dropped,    // Queued or in backoff when its last demand left; nothing was running.
  aborted,    // Transferring when its last demand left, and the orphan policy said abort.
};

// What a runtime reports when a transfer ends.
enum class TransferStatus : std::uint8_t {
  ok,               // All bytes arrived.
  retryable_error,  // Connect error, timeout, 5xx, 429, dropped connection.
  permanent_error,  // 404, other 4xx, size mismatch the server insists on.
};

// What a runtime reports when finalize (verify + atomic install) ends.
enum class FinalizeStatus : std::uint8_t {
  installed,      // Verified and installed.
  verify_failed,  // The digest did not match: retried from offset 0.
  error,          // Could not install (disk error): the task fails.
};

std::string_view to_string(DemandOutcome outcome);
std::string_view to_string(TaskOutcome outcome);
std::string_view to_string(TransferStatus status);
std::string_view to_string(FinalizeStatus status);

}  // namespace dfl
