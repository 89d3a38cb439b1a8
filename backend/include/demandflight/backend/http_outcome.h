// HttpOutcome: what a finished HTTP transfer means for the scheduler.
//
// libcurl reports success for any complete HTTP exchange, a 404 or a 503
// included, and for a 200 that ignored our Range header (the whole body
// instead of the rest). This file judges the exchange itself: the status
// code, Content-Range against what was asked, the size against what is
// expected, and Retry-After. Pure functions: the libcurl runtime feeds them
// what it saw; the tests feed them every case.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "demandflight/engine/outcome.h"

namespace dfl::backend {

// `Content-Range: bytes FIRST-LAST/TOTAL` (TOTAL may be `*`), or the
// unsatisfied form `bytes */TOTAL`.
struct ContentRange {
  std::optional<std::uint64_t> first, last;  // Both absent for `*/TOTAL`.
  std::optional<std::uint64_t> total;        // Absent for `/*`.
};
std::optional<ContentRange> parse_content_range(std::string_view value);

// `Retry-After` as delta-seconds (HTTP dates are not supported: nullopt).
std::optional<double> parse_retry_after(std::string_view value);

// What the runtime asked for and what came back before the body.
struct HttpExchange {
  std::uint64_t resume_offset_bytes = 0;             // The Range start asked for (0: no Range).
  std::optional<std::uint64_t> expected_size_bytes;  // Of the whole artifact, when known.
  long http_status = 0;                              // 0 when no response arrived.
  std::optional<std::string> content_range;          // The header, when present.
  std::optional<std::string> retry_after;
};

// How the body must be treated, decided from the headers before it streams.
enum class BodyPlan : std::uint8_t {
  append,   // 206 for exactly the bytes asked: append after the staged ones.
  restart,  // 200 with the whole body: drop what is staged, start at 0.
  reject,   // An error status or an inconsistent answer: keep nothing.
};

struct HeaderVerdict {
  BodyPlan plan = BodyPlan::reject;
  // For reject: how the transfer ends, and why.
  TransferStatus status = TransferStatus::retryable_error;
  std::string reason;
  std::optional<double> retry_after_s;
};

// Judges the status line and headers. Retryable: 408, 429, 5xx, a Range
// answer that does not match what was asked; permanent: other 4xx and
// 3xx that libcurl did not follow, a size that contradicts the expected one.
HeaderVerdict judge_headers(const HttpExchange& exchange);

// Judges a transport-level failure (curl's result code and text) as
// retryable or permanent: connection, DNS, timeout, partial body and TLS
// handshake errors are retryable; a certificate that fails verification,
// an unsupported protocol or a malformed URL are permanent.
TransferStatus judge_transport_error(int curl_code);

// A transport failure in words, without the URL (the caller adds it): from
// libcurl's code, the detail it wrote to CURLOPT_ERRORBUFFER (may be empty)
// and the system's errno (CURLINFO_OS_ERRNO, 0 when none), e.g.
// "connection reset by peer", "connection refused", "response header too
// large", "connection closed by the server"; libcurl's own detail where
// nothing plainer is known.
std::string describe_transport_error(int curl_code, std::string_view detail, long os_errno);

}  // namespace dfl::backend
