// TraceStream (trace.h): a trace read record by record, as `sim --stream`
// reads it. It hands out what read_trace() reads, field by field; it knows
// the demand ids it must (live ones by index, ended ones as ended, unknown
// ones as errors) while it forgets the strings of demands written; and a
// problem stops it at its line.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "demandflight/format/generator.h"
#include "demandflight/format/trace.h"
#include "random_test_seed.h"

namespace dfl::format {
namespace {

class TraceStreamTest : public ::testing::Test {
 protected:
  std::string write(const std::string& text) {
    path_ = (std::filesystem::temp_directory_path() /
             ("dfl_trace_stream_" + std::to_string(::getpid()) + "_" +
              ::testing::UnitTest::GetInstance()->current_test_info()->name() + ".jsonl"))
                .string();
    std::ofstream(path_) << text;
    return path_;
  }
  void TearDown() override {
    if (!path_.empty()) std::remove(path_.c_str());
  }
  std::string path_;
};

constexpr const char* kHeader =
    R"({"format":"demandflight-trace","version":1,"name":"t"})"
    "\n";

std::string artifact(const std::string& id, const std::string& origin = "cdn") {
  return R"({"op":"artifact","id":")" + id + R"(","resource":")" + id +
         R"(","revision":"r1","target":"x","generation":0,"size":1000,"origin":")" + origin +
         "\"}\n";
}

TEST_F(TraceStreamTest, HandsOutWhatReadTraceReadsFieldByField) {
  const std::uint64_t seed =
      dfl::testing::random_test_seed("TraceStreamTest.HandsOutWhatReadTraceReadsFieldByField");
  for (const char* kind : {"open_world_streaming", "session_churn", "flaky_network"}) {
    std::ostringstream text;
    GenOptions options;
    options.seed = seed % 1000 + 1;
    options.demands = 3000;
    generate(kind, options, text);
    const std::string path = write(text.str());
    const Trace whole = read_trace(path);
    TraceStream stream(path);
    const Trace& streamed = stream.trace();
    EXPECT_EQ(streamed.name, whole.name);
    EXPECT_EQ(streamed.platform.origins.size(), whole.platform.origins.size());
    Record r;
    std::size_t i = 0;
    std::vector<bool> ended(whole.demand_ids.size(), false);
    while (stream.next(r)) {
      ASSERT_LT(i, whole.records.size()) << kind;
      const Record& w = whole.records[i];
      EXPECT_EQ(r.t, w.t);
      EXPECT_EQ(r.op, w.op);
      EXPECT_EQ(r.line, w.line);
      EXPECT_EQ(r.owner, w.owner);
      EXPECT_EQ(r.priority, w.priority);
      EXPECT_EQ(r.timeout_s, w.timeout_s);
      if (r.op == Op::subscribe || r.op == Op::fault) {
        EXPECT_EQ(streamed.artifacts.at(r.artifact).id, whole.artifacts.at(w.artifact).id);
      }
      if (r.op == Op::subscribe) {
        EXPECT_EQ(r.demand, w.demand);
        EXPECT_EQ(stream.demand_id(r.demand), whole.demand_ids[w.demand]);
      }
      if (r.op == Op::cancel || r.op == Op::set_priority) {
        EXPECT_EQ(r.demand, ended[w.demand] ? TraceStream::kEndedDemand : w.demand) << kind;
        // End every other demand named by a cancel: its later records say so.
        if (!ended[w.demand] && w.demand % 2 == 0) {
          stream.demand_ended(w.demand);
          ended[w.demand] = true;
        }
      }
      ++i;
    }
    EXPECT_EQ(i, whole.records.size()) << kind;
    EXPECT_EQ(stream.records_read(), whole.records.size());
    EXPECT_EQ(stream.demands_read(), whole.demand_ids.size());
  }
}

TEST_F(TraceStreamTest, ForgetsWrittenIdsButNotThatTheyWereUsed) {
  std::string text = kHeader + artifact("a");
  for (int i = 0; i < 100; ++i)
    text += R"({"op":"subscribe","t":1,"demand":"d)" + std::to_string(i) +
            R"(","owner":"o","artifact":"a","priority":0})" + "\n";
  text += R"({"op":"cancel","t":2,"demand":"d5"})" "\n";
  text += R"({"op":"cancel","t":2,"demand":"d70"})" "\n";
  text += R"({"op":"subscribe","t":3,"demand":"d5","owner":"o","artifact":"a","priority":0})"
          "\n";
  TraceStream stream(write(text));
  Record r;
  for (std::uint32_t i = 0; i < 100; ++i) {
    ASSERT_TRUE(stream.next(r));
    ASSERT_EQ(r.demand, i);
  }
  EXPECT_EQ(stream.demand_ids_kept(), 100u);
  for (std::uint32_t i = 0; i < 60; ++i) {
    stream.demand_ended(i);
    stream.demand_written(i);
  }
  EXPECT_EQ(stream.demand_ids_kept(), 40u);
  EXPECT_EQ(stream.demand_id(60), "d60");
  ASSERT_TRUE(stream.next(r));
  EXPECT_EQ(r.demand, TraceStream::kEndedDemand);  // d5: written, ended.
  ASSERT_TRUE(stream.next(r));
  EXPECT_EQ(r.demand, 70u);  // Live.
  try {
    stream.next(r);
    FAIL() << "a reused id was accepted";
  } catch (const TraceError& e) {
    EXPECT_EQ(e.line(), 105u);
    EXPECT_EQ(e.field(), "demand");
    EXPECT_NE(std::string(e.what()).find("\"d5\" is already used"), std::string::npos);
  }
}

TEST_F(TraceStreamTest, IdsOfAnyFormAreKnownToo) {
  // Not PREFIX<number>: kept as strings, and still checked.
  std::string text = kHeader + artifact("a");
  for (const char* id : {"x", "007", "d01", "d1", "a,b", "d99999999999"})
    text += R"({"op":"subscribe","t":1,"demand":")" + std::string(id) +
            R"(","owner":"o","artifact":"a","priority":0})" + "\n";
  text += R"({"op":"cancel","t":2,"demand":"007"})" "\n";
  text += R"({"op":"cancel","t":2,"demand":"d99999999999"})" "\n";
  text += R"({"op":"cancel","t":2,"demand":"d7"})" "\n";
  TraceStream stream(write(text));
  Record r;
  for (std::uint32_t i = 0; i < 6; ++i) {
    ASSERT_TRUE(stream.next(r));
    stream.demand_ended(i);
    stream.demand_written(i);
  }
  ASSERT_TRUE(stream.next(r));
  EXPECT_EQ(r.demand, TraceStream::kEndedDemand);
  ASSERT_TRUE(stream.next(r));
  EXPECT_EQ(r.demand, TraceStream::kEndedDemand);
  try {
    stream.next(r);
    FAIL() << "an unknown demand was accepted";
  } catch (const TraceError& e) {
    EXPECT_EQ(e.line(), 11u);
    EXPECT_NE(std::string(e.what()).find("unknown demand \"d7\""), std::string::npos);
  }
}

TEST_F(TraceStreamTest, NumberedIdsAreBitsFromTheFirstNumberOn) {
  // Request logs number from wherever they start: the bitmap starts there too,
  // and a number below it is an id like any other.
  std::string text = kHeader + artifact("a");
  for (const char* id : {"req1500000000", "req1500000001", "req3", "req1500000002"})
    text += R"({"op":"subscribe","t":1,"demand":")" + std::string(id) +
            R"(","owner":"o","artifact":"a","priority":0})" + "\n";
  text += R"({"op":"cancel","t":2,"demand":"req3"})" "\n";
  text += R"({"op":"cancel","t":2,"demand":"req1500000001"})" "\n";
  text += R"({"op":"subscribe","t":3,"demand":"req1500000002","owner":"o","artifact":"a","priority":0})"
          "\n";
  TraceStream stream(write(text));
  Record r;
  for (std::uint32_t i = 0; i < 4; ++i) {
    ASSERT_TRUE(stream.next(r));
    stream.demand_ended(i);
    stream.demand_written(i);
  }
  EXPECT_EQ(stream.demand_ids_kept(), 0u);
  ASSERT_TRUE(stream.next(r));
  EXPECT_EQ(r.demand, TraceStream::kEndedDemand);
  ASSERT_TRUE(stream.next(r));
  EXPECT_EQ(r.demand, TraceStream::kEndedDemand);
  EXPECT_THROW(stream.next(r), TraceError);  // Reused.
}

TEST_F(TraceStreamTest, AnOriginNamedAfterTheFirstRecordIsAnErrorAtItsLine) {
  std::string text = kHeader + artifact("a") +
                     R"({"op":"subscribe","t":1,"demand":"d1","owner":"o","artifact":"a","priority":0})"
                     "\n" +
                     artifact("b") + artifact("c", "other");
  TraceStream stream(write(text));
  Record r;
  ASSERT_TRUE(stream.next(r));
  try {
    stream.next(r);
    FAIL() << "a late origin was accepted";
  } catch (const TraceError& e) {
    EXPECT_EQ(e.line(), 5u);
    EXPECT_EQ(e.field(), "origin");
    EXPECT_NE(std::string(e.what()).find("platform.origins"), std::string::npos);
  }
  // Read whole, the same trace is fine.
  EXPECT_EQ(read_trace(path_).platform.origins.size(), 2u);
}

TEST_F(TraceStreamTest, ABadLineStopsItThere) {
  std::string text = kHeader + artifact("a");
  text += R"({"op":"subscribe","t":1,"demand":"d1","owner":"o","artifact":"a","priority":0})" "\n";
  text += R"({"op":"subscribe","t":0.5,"demand":"d2","owner":"o","artifact":"a","priority":0})" "\n";
  TraceStream stream(write(text));
  Record r;
  ASSERT_TRUE(stream.next(r));
  try {
    stream.next(r);
    FAIL() << "time going backwards was accepted";
  } catch (const TraceError& e) {
    EXPECT_EQ(e.line(), 4u);
    EXPECT_EQ(e.field(), "t");
  }
  EXPECT_THROW(TraceStream(write("not json\n")), TraceError);
  EXPECT_THROW(TraceStream(write("")), TraceError);
  EXPECT_THROW(TraceStream("/nonexistent/trace.jsonl"), TraceError);
}

}  // namespace
}  // namespace dfl::format
