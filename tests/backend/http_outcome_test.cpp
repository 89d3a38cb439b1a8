// Judging HTTP exchanges: libcurl calls all of these a success.
#include "demandflight/backend/http_outcome.h"

#include <curl/curl.h>
#include <gtest/gtest.h>

namespace dfl::backend {
namespace {

HttpExchange exchange(long status, std::uint64_t offset = 0,
                      std::optional<std::string> content_range = std::nullopt,
                      std::optional<std::uint64_t> expected = 1000) {
  HttpExchange e;
  e.http_status = status;
  e.resume_offset_bytes = offset;
  e.content_range = std::move(content_range);
  e.expected_size_bytes = expected;
  return e;
}

TEST(ContentRange, ParsesEveryFormTheRfcAllowsAndRefusesTheRest) {
  auto r = parse_content_range("bytes 100-999/1000");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->first, 100u);
  EXPECT_EQ(r->last, 999u);
  EXPECT_EQ(r->total, 1000u);
  r = parse_content_range("bytes 0-9/*");
  ASSERT_TRUE(r);
  EXPECT_FALSE(r->total);
  r = parse_content_range("bytes */1000");
  ASSERT_TRUE(r);
  EXPECT_FALSE(r->first);
  EXPECT_EQ(r->total, 1000u);
  for (const char* bad : {"", "bytes", "bytes 5-4/10", "bytes 0-10/10", "items 0-1/2",
                          "bytes -1-3/4", "bytes */*", "bytes 1-2", "bytes a-b/c"}) {
    EXPECT_FALSE(parse_content_range(bad)) << bad;
  }
}

// A resume past the server's end: the size it gives against the expected one.
TEST(JudgeHeaders, A416ToAResumeSaysWhereAndTheSizeTheServerGives) {
  HeaderVerdict v = judge_headers(exchange(416, 900, "bytes */900", 1000));
  EXPECT_EQ(v.plan, BodyPlan::reject);
  EXPECT_EQ(v.status, TransferStatus::permanent_error);
  EXPECT_EQ(v.reason, "size 900, expected 1000 (HTTP 416 to a resume from byte 900)");
  v = judge_headers(exchange(416, 900, std::nullopt, 1000));
  EXPECT_EQ(v.reason, "HTTP 416 to a resume from byte 900");
  v = judge_headers(exchange(416, 900, "bytes */1000", 1000));  // Agrees: says only where.
  EXPECT_EQ(v.reason, "HTTP 416 to a resume from byte 900");
  v = judge_headers(exchange(416));  // No Range asked: the status alone.
  EXPECT_EQ(v.reason, "HTTP 416");
  EXPECT_EQ(v.status, TransferStatus::permanent_error);
}

TEST(RetryAfter, TakesDeltaSecondsOnly) {
  EXPECT_EQ(parse_retry_after("2"), 2.0);
  EXPECT_EQ(parse_retry_after(" 120 "), 120.0);
  EXPECT_FALSE(parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT"));
  EXPECT_FALSE(parse_retry_after("-1"));
}

TEST(JudgeHeaders, SuccessStatusesLibcurlWouldAcceptAreJudgedByUs) {
  EXPECT_EQ(judge_headers(exchange(404)).status, TransferStatus::permanent_error);
  EXPECT_EQ(judge_headers(exchange(403)).status, TransferStatus::permanent_error);
  EXPECT_EQ(judge_headers(exchange(301)).status, TransferStatus::permanent_error);
  EXPECT_EQ(judge_headers(exchange(503)).status, TransferStatus::retryable_error);
  EXPECT_EQ(judge_headers(exchange(500)).status, TransferStatus::retryable_error);
  EXPECT_EQ(judge_headers(exchange(408)).status, TransferStatus::retryable_error);
  for (long s : {404L, 503L})
    EXPECT_EQ(judge_headers(exchange(s)).plan, BodyPlan::reject);
}

TEST(JudgeHeaders, A429CarriesItsRetryAfter) {
  HttpExchange e = exchange(429);
  e.retry_after = "7";
  const HeaderVerdict v = judge_headers(e);
  EXPECT_EQ(v.status, TransferStatus::retryable_error);
  EXPECT_EQ(v.retry_after_s, 7.0);
}

TEST(JudgeHeaders, A200ToAResumedRequestRestartsFromZero) {
  // The server ignored Range (or If-Range no longer matched): the whole body.
  const HeaderVerdict v = judge_headers(exchange(200, 400));
  EXPECT_EQ(v.plan, BodyPlan::restart);
  EXPECT_EQ(judge_headers(exchange(200, 0)).plan, BodyPlan::restart);
}

TEST(JudgeHeaders, A206MustBeExactlyTheRestAskedFor) {
  EXPECT_EQ(judge_headers(exchange(206, 400, "bytes 400-999/1000")).plan, BodyPlan::append);
  EXPECT_EQ(judge_headers(exchange(206, 400, "bytes 400-999/*")).plan, BodyPlan::append);
  const HeaderVerdict shifted = judge_headers(exchange(206, 400, "bytes 300-999/1000"));
  EXPECT_EQ(shifted.plan, BodyPlan::reject);
  EXPECT_EQ(shifted.status, TransferStatus::retryable_error);
  EXPECT_EQ(judge_headers(exchange(206, 400, "bytes 400-899/1000")).plan, BodyPlan::reject)
      << "less than the rest";
  EXPECT_EQ(judge_headers(exchange(206, 400, std::nullopt)).plan, BodyPlan::reject);
  EXPECT_EQ(judge_headers(exchange(206, 0, "bytes 0-999/1000")).plan, BodyPlan::reject)
      << "a 206 nobody asked for";
}

TEST(JudgeHeaders, ASizeThatContradictsTheManifestIsPermanent) {
  const HeaderVerdict v = judge_headers(exchange(206, 400, "bytes 400-1999/2000"));
  EXPECT_EQ(v.plan, BodyPlan::reject);
  EXPECT_EQ(v.status, TransferStatus::permanent_error);
  EXPECT_NE(v.reason.find("expected 1000"), std::string::npos) << v.reason;
}

TEST(JudgeTransport, NetworkTroubleIsRetryableMisconfigurationIsNot) {
  for (CURLcode c :
       {CURLE_COULDNT_CONNECT, CURLE_OPERATION_TIMEDOUT, CURLE_PARTIAL_FILE, CURLE_RECV_ERROR,
        CURLE_SEND_ERROR, CURLE_COULDNT_RESOLVE_HOST, CURLE_SSL_CONNECT_ERROR, CURLE_GOT_NOTHING}) {
    EXPECT_EQ(judge_transport_error(c), TransferStatus::retryable_error) << curl_easy_strerror(c);
  }
  for (CURLcode c :
       {CURLE_PEER_FAILED_VERIFICATION, CURLE_URL_MALFORMAT, CURLE_UNSUPPORTED_PROTOCOL}) {
    EXPECT_EQ(judge_transport_error(c), TransferStatus::permanent_error) << curl_easy_strerror(c);
  }
  EXPECT_EQ(judge_transport_error(CURLE_OK), TransferStatus::ok);
}

}  // namespace
}  // namespace dfl::backend
