#include "demandflight/backend/http_outcome.h"

#include <curl/curl.h>

#include <charconv>
#include <cmath>
#include <cstring>

namespace dfl::backend {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t'))
    s.remove_prefix(1);
  while (!s.empty() &&
         (s.back() == ' ' || s.back() == '\t' || s.back() == '\r' || s.back() == '\n')) {
    s.remove_suffix(1);
  }
  return s;
}

std::optional<std::uint64_t> parse_u64(std::string_view s) {
  std::uint64_t value = 0;
  if (s.empty()) return std::nullopt;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  if (ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return value;
}

HeaderVerdict reject(TransferStatus status, std::string reason,
                     std::optional<double> retry_after_s = std::nullopt) {
  return HeaderVerdict{BodyPlan::reject, status, std::move(reason), retry_after_s};
}

}  // namespace

std::optional<ContentRange> parse_content_range(std::string_view value) {
  value = trim(value);
  constexpr std::string_view kUnit = "bytes ";
  if (value.substr(0, kUnit.size()) != kUnit) return std::nullopt;
  value.remove_prefix(kUnit.size());
  const std::size_t slash = value.find('/');
  if (slash == std::string_view::npos) return std::nullopt;
  const std::string_view span = value.substr(0, slash);
  const std::string_view total = value.substr(slash + 1);
  ContentRange out;
  if (total != "*") {
    out.total = parse_u64(total);
    if (!out.total) return std::nullopt;
  }
  if (span == "*") {
    if (!out.total) return std::nullopt;  // "*/*" says nothing.
    return out;
  }
  const std::size_t dash = span.find('-');
  if (dash == std::string_view::npos) return std::nullopt;
  out.first = parse_u64(span.substr(0, dash));
  out.last = parse_u64(span.substr(dash + 1));
  if (!out.first || !out.last || *out.first > *out.last) return std::nullopt;
  if (out.total && *out.last >= *out.total) return std::nullopt;
  return out;
}

std::optional<double> parse_retry_after(std::string_view value) {
  const auto seconds = parse_u64(trim(value));
  if (!seconds) return std::nullopt;
  return static_cast<double>(*seconds);
}

HeaderVerdict judge_headers(const HttpExchange& e) {
  const long s = e.http_status;
  const std::optional<double> retry_after =
      e.retry_after ? parse_retry_after(*e.retry_after) : std::nullopt;
  if (s == 0) return reject(TransferStatus::retryable_error, "no HTTP response");
  if (s == 408 || s == 429 || (s >= 500 && s <= 599)) {
    return reject(TransferStatus::retryable_error, "HTTP " + std::to_string(s), retry_after);
  }
  if (s == 416 && e.resume_offset_bytes > 0) {
    // No bytes from the resume offset on: with `bytes */TOTAL`, the server
    // says how long the artifact is, which may contradict the size expected
    // (a body that came short of it, then resumed at its end).
    const std::string what = "HTTP 416 to a resume from byte " +
                             std::to_string(e.resume_offset_bytes);
    const auto range = e.content_range ? parse_content_range(*e.content_range) : std::nullopt;
    if (range && range->total && e.expected_size_bytes && *range->total != *e.expected_size_bytes) {
      return reject(TransferStatus::permanent_error,
                    "size " + std::to_string(*range->total) + ", expected " +
                        std::to_string(*e.expected_size_bytes) + " (" + what + ")");
    }
    return reject(TransferStatus::permanent_error, what);
  }
  if (s != 200 && s != 206) {
    return reject(TransferStatus::permanent_error, "HTTP " + std::to_string(s));
  }
  if (s == 200) {
    // The whole representation: right for a first request, and for a resumed
    // one whose Range the server ignored (or whose If-Range no longer matched).
    return HeaderVerdict{BodyPlan::restart, TransferStatus::ok,
                         e.resume_offset_bytes > 0 ? "server sent the whole body" : "",
                         std::nullopt};
  }
  // 206: it must be exactly the rest we asked for.
  if (e.resume_offset_bytes == 0) {
    return reject(TransferStatus::retryable_error, "HTTP 206 to a request without Range");
  }
  const auto range = e.content_range ? parse_content_range(*e.content_range) : std::nullopt;
  if (!range || !range->first) {
    return reject(TransferStatus::retryable_error, "HTTP 206 without a valid Content-Range");
  }
  if (*range->first != e.resume_offset_bytes) {
    return reject(TransferStatus::retryable_error,
                  "Content-Range starts at " + std::to_string(*range->first) + ", asked for " +
                      std::to_string(e.resume_offset_bytes));
  }
  if (e.expected_size_bytes && range->total && *range->total != *e.expected_size_bytes) {
    return reject(TransferStatus::permanent_error, "size " + std::to_string(*range->total) +
                                                       ", expected " +
                                                       std::to_string(*e.expected_size_bytes));
  }
  if (range->total && *range->last + 1 != *range->total) {
    return reject(TransferStatus::retryable_error, "HTTP 206 for less than the rest of the body");
  }
  return HeaderVerdict{BodyPlan::append, TransferStatus::ok, "", std::nullopt};
}

TransferStatus judge_transport_error(int curl_code) {
  switch (static_cast<CURLcode>(curl_code)) {
    case CURLE_OK:
      return TransferStatus::ok;
    case CURLE_UNSUPPORTED_PROTOCOL:
    case CURLE_URL_MALFORMAT:
    case CURLE_NOT_BUILT_IN:
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
    case CURLE_FILESIZE_EXCEEDED:
    case CURLE_TOO_MANY_REDIRECTS:
      return TransferStatus::permanent_error;
    default:
      // Connection refused or reset, DNS, timeouts, a partial body, TLS
      // handshakes, send/receive errors: the next attempt may well succeed.
      return TransferStatus::retryable_error;
  }
}

std::string describe_transport_error(int curl_code, std::string_view detail, long os_errno) {
  const auto code = static_cast<CURLcode>(curl_code);
  auto lowered = [](std::string text) {
    if (!text.empty() && text[0] >= 'A' && text[0] <= 'Z' &&
        !(text.size() > 1 && text[1] >= 'A' && text[1] <= 'Z')) {
      text[0] = static_cast<char>(text[0] - 'A' + 'a');
    }
    while (!text.empty() && (text.back() == '\n' || text.back() == ' ' || text.back() == '.'))
      text.pop_back();
    return text;
  };
  switch (code) {
    case CURLE_OUT_OF_MEMORY:
      // libcurl 7.x reports a header over its limit (CURL_MAX_HTTP_HEADER,
      // 100 KiB) as out of memory; a real shortage of memory is far rarer.
      return "response header too large (libcurl takes at most 100 KiB), or out of memory";
    case CURLE_PARTIAL_FILE:
      return "connection closed by the server before the end of the body";
    case CURLE_GOT_NOTHING:
      return "connection closed by the server without a response";
    case CURLE_COULDNT_RESOLVE_HOST:
      return "host not found" + (detail.empty() ? std::string() : " (" + std::string(detail) + ")");
    default:
      break;
  }
  const bool socket_error = code == CURLE_RECV_ERROR || code == CURLE_SEND_ERROR ||
                            code == CURLE_COULDNT_CONNECT;
  if (socket_error && os_errno != 0) return lowered(std::strerror(static_cast<int>(os_errno)));
  if (!detail.empty()) return lowered(std::string(detail));
  return lowered(curl_easy_strerror(code));
}

}  // namespace dfl::backend
