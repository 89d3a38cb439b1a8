// format::TraceWriter: the one writer of the trace format. Every record kind
// written here gives tests/format/data/every_record_kind.jsonl byte for byte,
// and so does Python's TraceBuilder (tests/python/test_api.py), which builds
// through it; what it writes reads back as written.
#include "demandflight/format/trace_writer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "demandflight/format/trace.h"
#include "random_test_seed.h"

namespace dfl::format {
namespace {

namespace testing = ::dfl::testing;

std::string file_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The records of every_record_kind.jsonl (test_api.py writes the same
// through TraceBuilder).
std::string every_record_kind() {
  TraceWriter w;
  TraceHeader h;
  h.name = "every kind";
  h.seed = 7;
  h.platform.client_bandwidth_Bps = 12.5e6;
  h.platform.client_latency_s = 0.01;
  h.platform.origins = std::vector<HeaderOrigin>{{"cdn", 5e7, 0.03}, {"mirror", 2e7, std::nullopt}};
  h.platform.disk_write_Bps = 4e8;
  h.platform.hash_Bps = 8e8;
  h.platform.network_model = "cm02";
  h.platform.server_congestion_control = "bbr";
  h.scheduler.max_transfers = 2;
  h.scheduler.max_per_origin = 2;
  h.scheduler.cache_bytes = 1'000'000'000;
  h.scheduler.retry = TraceHeader::Retry{3, 0.5, 8.0, 0.2};
  h.scheduler.breaker = TraceHeader::Breaker{5, 30.0};
  h.scheduler.throttle = ThrottleCaps{0, 1e6, std::nullopt};
  w.header(h);

  const std::vector<std::string_view> one{"cdn"}, both{"mirror", "cdn"};
  ArtifactLine rock;
  rock.id = "rock";
  rock.resource = "props/rock \"large\".mesh";
  rock.revision = "r3";
  rock.target = "pc";
  rock.size = 25'000'000;
  rock.origins = one;
  w.artifact(rock);
  ArtifactLine grass = rock;
  grass.id = "grass";
  grass.resource = "props/grass\u00e9.mesh";
  grass.generation = 2;
  grass.size = 1000;
  grass.origins = both;
  grass.sha256 = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";
  w.artifact(grass);

  w.write(SubscribeLine{0, "d1", "camera", "rock", 3, std::nullopt, std::nullopt});
  w.write(SubscribeLine{0.25, "d2", "session", "grass", 1, 4, 2.5});
  w.write(SetPriorityLine{0.5, "d1", -1});
  w.write(ThrottleLine{0.75, ThrottleCaps{1, 2.5e5, 1e7}});
  w.write(FaultLine{1, FaultKind::transfer_error, "rock", "", 2, 0.5, false, std::nullopt});
  w.write(FaultLine{1, FaultKind::corrupt, "grass", "", 1, std::nullopt, std::nullopt,
                    std::nullopt});
  w.write(FaultLine{1.5, FaultKind::origin_down, "", "mirror", std::nullopt, std::nullopt,
                    std::nullopt, 4.0});
  w.write(CancelLine{2, "d1"});
  w.write(EndOwnerLine{3.125, "session", 4});
  w.write(EndOwnerLine{4, "camera", std::nullopt});
  return w.take();
}

TEST(TraceWriter, WritesEveryRecordKindAsTheFormatSpellsIt) {
  const std::string expected = file_text(DFL_TEST_DATA "/every_record_kind.jsonl");
  ASSERT_FALSE(expected.empty());
  EXPECT_EQ(every_record_kind(), expected);
}

TEST(TraceWriter, WhatItWritesReadsBackAsWritten) {
  std::istringstream in(every_record_kind());
  const Trace t = read_trace(in, "every_record_kind");
  EXPECT_EQ(t.name, "every kind");
  EXPECT_EQ(t.seed, 7u);
  EXPECT_EQ(t.platform.network_model, NetworkModel::cm02);
  EXPECT_EQ(t.platform.server_congestion_control, ServerCongestionControl::bbr);
  EXPECT_DOUBLE_EQ(t.platform.client_latency_s, 0.01);
  ASSERT_EQ(t.platform.origins.size(), 2u);
  EXPECT_EQ(t.platform.origins[1].name, "mirror");
  EXPECT_EQ(t.scheduler.retry_max_attempts, 3u);
  EXPECT_EQ(t.scheduler.breaker_failures, 5u);
  ASSERT_TRUE(t.scheduler.throttle.background_at_or_below.has_value());
  EXPECT_EQ(*t.scheduler.throttle.background_at_or_below, 0);
  ASSERT_EQ(t.artifacts.size(), 2u);
  EXPECT_EQ(t.artifacts[0].key.resource, "props/rock \"large\".mesh");
  EXPECT_EQ(t.artifacts[1].key.resource, "props/grass\u00e9.mesh");
  EXPECT_EQ(t.artifacts[1].key.generation, 2);
  EXPECT_EQ(t.artifacts[1].mirrors.size(), 1u);
  EXPECT_TRUE(t.artifacts[1].sha256.has_value());
  ASSERT_EQ(t.records.size(), 10u);
  EXPECT_EQ(t.records[1].owner_generation, 4);
  EXPECT_DOUBLE_EQ(t.records[1].timeout_s, 2.5);
  EXPECT_EQ(t.records[2].priority, -1);
  EXPECT_EQ(t.faults.size(), 3u);
  EXPECT_FALSE(t.faults[0].retryable);
  EXPECT_DOUBLE_EQ(t.faults[2].duration_s, 4.0);
  EXPECT_TRUE(t.records[8].has_generation);
  EXPECT_FALSE(t.records[9].has_generation);
}

TEST(TraceWriter, NumbersReadBackAsTheSameDoubles) {
  const std::uint64_t seed = testing::random_test_seed("NumbersReadBackAsTheSameDoubles");
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> exponent(-9, 12);
  for (int i = 0; i < 20'000; ++i) {
    const double v = std::pow(10.0, exponent(rng)) * (rng() % 2 ? 1 : 1.0 / 3);
    std::string text;
    TraceWriter::append_number(text, v, "t");
    EXPECT_EQ(std::strtod(text.c_str(), nullptr), v) << text << " (seed " << seed << ")";
    // JSON numbers: no "inf", no leading '+', no trailing '.'.
    EXPECT_EQ(text.find_first_not_of("0123456789.e+-"), std::string::npos) << text;
  }
  std::string integral;
  TraceWriter::append_number(integral, 400'000'000.0, "disk_write_Bps");
  EXPECT_EQ(integral, "400000000");  // Not 4e+08: a reader of integers takes it.
}

TEST(TraceWriter, RefusesANumberThatIsNotFiniteNamingItsField) {
  TraceWriter w;
  try {
    w.write(CancelLine{std::nan(""), "d1"});
    FAIL() << "a NaN time was written";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "t: not a finite number");
  }
  SubscribeLine s{1, "d", "o", "a", 1, std::nullopt, HUGE_VAL};
  EXPECT_THROW(w.write(s), std::invalid_argument);
}

TEST(TraceWriter, EscapesStringsAndReplacesBytesThatAreNotUtf8) {
  std::string out;
  TraceWriter::append_string(out, std::string("a\"b\\c\n\x01 \xc3\xa9 \xff\xc3", 13));
  EXPECT_EQ(out, "\"a\\\"b\\\\c\\u000a\\u0001 \xc3\xa9 \xef\xbf\xbd\xef\xbf\xbd\"");
  out.clear();
  TraceWriter::append_string(out, "\xed\xa0\x80");  // A surrogate: not UTF-8.
  EXPECT_EQ(out, "\"\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\"");
}

TEST(TraceWriter, HeldRecordsComeInTimeOrderAndTiesInTheOrderHeld) {
  TraceWriter w;
  w.write(CancelLine{1, "a"});
  w.hold(CancelLine{5, "held-first"});
  w.hold(CancelLine{4, "earlier"});
  w.hold(CancelLine{5, "held-second"});
  w.write(CancelLine{4.5, "b"});
  w.write(CancelLine{6, "c"});
  const std::string text = w.take();
  std::vector<std::string> order;
  for (const char* name : {"\"a\"", "\"earlier\"", "\"b\"", "\"held-first\"", "\"held-second\"",
                           "\"c\""}) {
    order.push_back(name);
  }
  std::size_t at = 0;
  for (const std::string& name : order) {
    const std::size_t found = text.find(name, at);
    ASSERT_NE(found, std::string::npos) << name << " out of order in\n" << text;
    at = found;
  }
  EXPECT_THROW(w.hold(CancelLine{2, "past"}), std::logic_error);
  w.hold(CancelLine{7, "at the end"});
  w.finish();
  EXPECT_NE(w.text().find("at the end"), std::string::npos);
}

TEST(TraceWriter, RewritesExtensionsInItsStyleAndRefusesTextThatIsNotJson) {
  TraceWriter w;
  TraceHeader h;
  h.extensions.emplace_back("x-import", R"({"format":"csv","n":[1,2.5,true,null]})");
  w.header(h);
  EXPECT_EQ(w.text(),
            "{\"format\": \"demandflight-trace\", \"version\": 1, \"name\": \"trace\", \"seed\": 0, "
            "\"x-import\": {\"format\": \"csv\", \"n\": [1, 2.5, true, null]}}\n");
  h.extensions = {{"x-bad", "{not json"}};
  EXPECT_THROW(w.header(h), std::invalid_argument);
}

TEST(TraceWriter, AStreamGetsTheLinesInBlocksAndAllAtFinish) {
  std::ostringstream out;
  TraceWriter w(out);
  for (int i = 0; i < 5000; ++i)
    w.write(CancelLine{static_cast<double>(i), "d"});
  EXPECT_GT(out.str().size(), 0u);  // Blocks of about 64 KiB went out already.
  w.finish();
  TraceWriter whole;
  for (int i = 0; i < 5000; ++i)
    whole.write(CancelLine{static_cast<double>(i), "d"});
  EXPECT_EQ(out.str(), whole.text());
}

}  // namespace
}  // namespace dfl::format
