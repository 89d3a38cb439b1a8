// The trace reader refuses every class of bad input the format lists, with
// `FILE:LINE: field: message`, exit code 2, and nothing run.
#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>

#include "cli_runner.h"
#include "demandflight/format/trace.h"

namespace dfl::testing {
namespace {

using format::TraceError;

const std::string kGood =
    header() + artifact("rock", 1000) +
    R"({"op": "subscribe", "t": 0.5, "demand": "d1", "owner": "o", "artifact": "rock", "priority": 1})"
    "\n";

struct BadInput {
  const char* name;
  std::string trace;
  std::size_t line;
  const char* field;
  const char* message_part;
};

std::vector<BadInput> bad_inputs() {
  const std::string h = header();
  const std::string a = artifact("rock", 1000);
  const std::string sub =
      R"({"op": "subscribe", "t": 1.0, "demand": "d1", "owner": "o", "artifact": "rock", "priority": 1})"
      "\n";
  return {
      {"UnknownOp",
       h + a +
           R"({"op": "subscribed", "t": 0})"
           "\n",
       3, "op", "unknown op"},
      {"MissingField",
       h + a +
           R"({"op": "subscribe", "t": 0, "demand": "d1", "artifact": "rock", "priority": 1})"
           "\n",
       3, "owner", "missing field"},
      {"TimeGoingBackwards",
       h + a + sub +
           R"({"op": "cancel", "t": 0.5, "demand": "d1"})"
           "\n",
       4, "t", "goes backwards"},
      {"DemandIdReused", h + a + sub + sub, 4, "demand", "already used"},
      {"UnknownArtifact",
       h + R"({"op": "subscribe", "t": 0, "demand": "d1", "owner": "o", "artifact": "rock", "priority": 1})"
           "\n",
       2, "artifact", "unknown artifact"},
      {"UnknownDemand",
       h + a +
           R"({"op": "cancel", "t": 0, "demand": "nobody"})"
           "\n",
       3, "demand", "unknown demand"},
      {"NegativeSize",
       h + R"({"op": "artifact", "id": "x", "resource": "x", "revision": "r", "target": "t", "generation": 0, "size": -5, "origin": "cdn"})"
           "\n",
       2, "size", "must not be negative"},
      {"ArtifactDeclaredTwice", h + a + a, 3, "id", "declared twice"},
      {"NotJson", h + "{\"op\": \"cancel\", \n", 2, "-", "not valid JSON"},
      {"WrongType",
       h + a +
           R"({"op": "subscribe", "t": "soon", "demand": "d1", "owner": "o", "artifact": "rock", "priority": 1})"
           "\n",
       3, "t", "must be a number"},
      {"UnknownHeaderField",
       R"({"format": "demandflight-trace", "version": 1, "platfrom": {}})"
       "\n",
       1, "platfrom", "unknown field"},
      {"UnknownNestedField",
       R"({"format": "demandflight-trace", "version": 1, "scheduler": {"max_transfer": 2}})"
       "\n",
       1, "scheduler.max_transfer", "unknown field"},
      {"CancelOfAnUnknownDemand",
       h + a +
           R"({"op": "cancel", "t": 0, "demand": "d1"})"
           "\n",
       3, "demand", "unknown demand"},
      {"NotATrace",
       R"({"hello": 1})"
       "\n",
       1, "format", "missing field"},
      {"WrongVersion",
       R"({"format": "demandflight-trace", "version": 2})"
       "\n",
       1, "version", "unsupported version"},
      {"UndeclaredOrigin",
       h + R"({"op": "artifact", "id": "x", "resource": "x", "revision": "r", "target": "t", "generation": 0, "size": 5, "origin": "mirror"})"
           "\n",
       2, "origin", "not declared"},
      {"UnknownFaultKind",
       h + a +
           R"({"op": "fault", "t": 0, "kind": "meteor"})"
           "\n",
       3, "kind", "unknown fault kind"},
      {"FractionOutOfRange",
       h + a +
           R"({"op": "fault", "t": 0, "kind": "transfer_error", "artifact": "rock", "after_fraction": 1.5})"
           "\n",
       3, "after_fraction", "at most"},
      {"EmptyTrace", "", 1, "format", "empty trace"},
      // Found by trace_fuzz: a number too large for a double is bad JSON, not a crash.
      {"NumberOverflow", h + "{\"op\": \"cancel\", \"t\": 3e500000}\n", 2, "-", "not valid JSON"},
      // Records are read from SAX events into a flat object (not a JSON tree):
      // what is not a flat object of scalars is still refused, in the same words.
      {"RecordNotAnObject", h + "[1, {\"op\": \"cancel\"}]\n", 2, "-", "must be a JSON object"},
      {"NestedValueWhereAStringBelongs",
       h + a + sub +
           R"({"op": "cancel", "t": 1, "demand": {"id": "d1"}})"
           "\n",
       4, "demand", "must be a string"},
      {"NestedUnknownField",
       h + a + sub +
           R"({"op": "cancel", "t": 1, "demand": "d1", "notes": {"a": [1]}})"
           "\n",
       4, "notes", "unknown field"},
      {"IntegerFieldGivenAFloat",
       h + a +
           R"({"op": "subscribe", "t": 1, "demand": "d1", "owner": "o", "artifact": "rock", "priority": 1.0})"
           "\n",
       3, "priority", "must be an integer"},
      {"OfTwoUnknownFieldsTheFirstInSortedOrderIsNamed",
       h + a + sub +
           R"({"op": "cancel", "t": 1, "demand": "d1", "zeta": 1, "beta": 2})"
           "\n",
       4, "beta", "unknown field"},
      // Found by trace_fuzz: an empty key is still named.
      {"EmptyFieldName",
       h + R"({"op": "artifact", "id": "x", "resource": "x", "revision": "r", "target": "t", "generation": 0, "size": 5, "origin": "cdn", "": 1})"
           "\n",
       2, "\"\"", "unknown field"},
      {"OriginAndOrigins",
       h + R"({"op": "artifact", "id": "x", "resource": "x", "revision": "r", "target": "t", "generation": 0, "size": 5, "origin": "cdn", "origins": ["cdn", "eu"]})"
           "\n",
       2, "origins", "not both"},
      {"OriginsNotAList",
       h + R"({"op": "artifact", "id": "x", "resource": "x", "revision": "r", "target": "t", "generation": 0, "size": 5, "origins": "cdn"})"
           "\n",
       2, "origins", "list of origin names"},
      {"OriginsEmpty",
       h + R"({"op": "artifact", "id": "x", "resource": "x", "revision": "r", "target": "t", "generation": 0, "size": 5, "origins": []})"
           "\n",
       2, "origins", "non-empty list"},
      {"OriginsNotStrings",
       h + R"({"op": "artifact", "id": "x", "resource": "x", "revision": "r", "target": "t", "generation": 0, "size": 5, "origins": ["cdn", 7]})"
           "\n",
       2, "origins", "list of origin names"},
      {"OriginsRepeated",
       h + R"({"op": "artifact", "id": "x", "resource": "x", "revision": "r", "target": "t", "generation": 0, "size": 5, "origins": ["cdn", "cdn"]})"
           "\n",
       2, "origins", "named twice"},
      {"OriginsUndeclared",
       h + R"({"op": "artifact", "id": "x", "resource": "x", "revision": "r", "target": "t", "generation": 0, "size": 5, "origins": ["cdn", "eu"]})"
           "\n",
       2, "origins", "not declared"},
      {"BreakerFailuresNegative",
       header(R"({"breaker": {"failures": -1}})") + a, 1, "scheduler.breaker.failures",
       "must not be negative"},
  };
}

class BadTrace : public ::testing::TestWithParam<BadInput> {};

TEST_P(BadTrace, IsRefusedWithFileLineAndField) {
  const BadInput& bad = GetParam();
  std::istringstream in(bad.trace);
  try {
    format::read_trace(in, "t.jsonl");
    FAIL() << "accepted";
  } catch (const TraceError& e) {
    EXPECT_EQ(e.line(), bad.line) << e.what();
    EXPECT_EQ(e.field(), bad.field) << e.what();
    EXPECT_NE(std::string(e.what()).find(bad.message_part), std::string::npos) << e.what();
    EXPECT_EQ(std::string(e.what()).rfind(
                  "t.jsonl:" + std::to_string(bad.line) + ": " + bad.field + ": ", 0),
              0u)
        << e.what();
  }
}

INSTANTIATE_TEST_SUITE_P(TraceReader, BadTrace, ::testing::ValuesIn(bad_inputs()),
                         [](const auto& param_info) { return std::string(param_info.param.name); });

TEST(TraceReader, UnknownRecordFieldsAreErrorsButExtensionsPass) {
  std::istringstream typo(kGood + R"({"op": "cancel", "t": 1, "demand": "d1", "priorty": 2})"
                                  "\n");
  EXPECT_THROW(format::read_trace(typo, "t.jsonl"), TraceError);
  std::istringstream extension(kGood + R"({"op": "cancel", "t": 1, "demand": "d1", "x-note": 2})"
                                       "\n");
  EXPECT_NO_THROW(format::read_trace(extension, "t.jsonl"));
}

TEST(TraceReader, AKeyGivenTwiceKeepsItsLastValueAndNestedExtensionsPass) {
  // As json::parse reads a line: the last of duplicate keys wins.
  std::istringstream in(
      header() + artifact("rock", 1000) +
      R"({"op": "subscribe", "t": 0.5, "demand": "d1", "owner": "o", "artifact": "rock", )"
      R"("priority": 1, "priority": 3, "x-meta": {"a": [1, {"b": null}], "c": "d"}})"
      "\n");
  const format::Trace trace = format::read_trace(in, "t.jsonl");
  ASSERT_EQ(trace.records.size(), 1u);
  EXPECT_EQ(trace.records[0].priority, 3);
  EXPECT_EQ(trace.demand_ids, std::vector<std::string>{"d1"});
  // A nested value given first, then a string: the string counts ...
  std::istringstream nested_first(
      kGood + R"({"op": "cancel", "t": 1, "demand": {}, "demand": "d1"})"
              "\n");
  EXPECT_NO_THROW(format::read_trace(nested_first, "t.jsonl"));
  // ... and the other way round, the nested value: not a string.
  std::istringstream nested_last(
      kGood + R"({"op": "cancel", "t": 1, "demand": "d1", "demand": [1]})"
              "\n");
  try {
    format::read_trace(nested_last, "t.jsonl");
    FAIL() << "accepted";
  } catch (const TraceError& e) {
    EXPECT_EQ(e.field(), "demand") << e.what();
    EXPECT_NE(std::string(e.what()).find("must be a string"), std::string::npos) << e.what();
  }
}

TEST(TraceReader, ALineWithManyExtensionFieldsIsReadAndItsLastValueKept) {
  // Past a few dozen fields the flat object indexes them; still one value per key.
  std::string line = R"({"op": "cancel", "t": 1, "demand": "d1")";
  for (int i = 0; i < 500; ++i)
    line += ", \"x-" + std::to_string(i % 250) + "\": " + std::to_string(i);
  line += R"(, "demand": "d1", "typo": 1})";
  std::istringstream in(kGood + line + "\n");
  try {
    format::read_trace(in, "t.jsonl");
    FAIL() << "accepted";
  } catch (const TraceError& e) {
    EXPECT_EQ(e.field(), "typo") << e.what();  // Every x- passes; the one unknown is named.
  }
}

// Record lines are read by simdjson, and by nlohmann's parser where simdjson
// refuses one. Wherever simdjson accepts a line, both must read the same
// object; trace_fuzz checks the same on random bytes.
TEST(TraceReader, TheFastLineReaderReadsWhatNlohmannReads) {
  const std::vector<std::string> lines = {
      R"({"op": "subscribe", "t": 0.5, "demand": "d1", "owner": "o", "artifact": "rock", "priority": 1})",
      R"({"a": -0, "b": 0, "c": -0.0, "d": 1e-400, "e": 5e-324, "f": 1E+2, "g": 0.1})",
      R"({"a": 9223372036854775807, "b": 9223372036854775808, "c": 18446744073709551615})",
      R"({"a": -9223372036854775808, "b": -1, "c": 2.2250738585072011e-308, "d": 1.7976931348623157e308})",
      R"({"a": "\ud83d\ude00", "b": "\u00e9\n\t\"\\/", "c": "caf\u00e9", "d": "", "": 1})",
      R"({"a": 1, "a": "x", "b": [1, {"c": null}], "b": true, "d": {"e": [[]]}, "f": false})",
      "{\"a\": 1}\r",
      " \t{\"a\" :1 , \"b\":[ ] }  ",
      "[1, 2]",
      R"({"origins": ["a", "b\u00e9"], "x": [], "y": ["a", 1], "z": [["a"]], "w": ["a", {"b": "c"}]})",
      R"({"origins": [1], "origins": ["a"], "q": ["a"], "q": 2})",
      "\"just a string\"",
      "{\"a\": \"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\"}",
  };
  for (const std::string& line : lines) {
    EXPECT_EQ(format::detail::compare_line_readers(line), std::nullopt) << line;
  }
}

TEST(TraceReader, LinesTheFastReaderRefusesAreStillReadAsJsonParseReadsThem) {
  // A byte order mark, and integers beyond 64 bits (a double to json::parse):
  // simdjson refuses these lines, nlohmann's parser reads them.
  std::istringstream in(
      header() + artifact("rock", 1000) + "\xef\xbb\xbf" +
      R"({"op": "subscribe", "t": 0.5, "demand": "d1", "owner": "o", "artifact": "rock", "priority": 1, "x-big": 18446744073709551616})"
      "\n" +
      R"({"op": "cancel", "t": 1e0, "demand": "d1", "x-low": -9223372036854775809})"
      "\n");
  const format::Trace trace = format::read_trace(in, "t.jsonl");
  ASSERT_EQ(trace.records.size(), 2u);
  EXPECT_EQ(trace.records[0].priority, 1);
  EXPECT_EQ(trace.records[1].op, format::Op::cancel);
  // Bad JSON is reported in json::parse's words, from either reader.
  std::istringstream bad(kGood + R"({"op": "cancel", "t": 01, "demand": "d1"})"
                                 "\n");
  try {
    format::read_trace(bad, "t.jsonl");
    FAIL() << "accepted";
  } catch (const TraceError& e) {
    EXPECT_EQ(e.line(), 4u);
    EXPECT_NE(std::string(e.what()).find("not valid JSON: [json.exception.parse_error.101]"),
              std::string::npos)
        << e.what();
  }
}

TEST(TraceReader, AnArtifactsOriginsAreItsFirstChoiceThenItsMirrors) {
  std::istringstream in(
      // Origins not declared in the header: each is added where first named.
      R"({"format": "demandflight-trace", "version": 1, "scheduler": {"breaker": {"failures": 5, "open_s": 12.5}}})"
      "\n"
      R"({"op": "artifact", "id": "x", "resource": "x", "revision": "r", "target": "t", "generation": 0, "size": 5, "origins": ["eu", "cdn", "us"]})"
      "\n"
      R"({"op": "artifact", "id": "y", "resource": "y", "revision": "r", "target": "t", "generation": 0, "size": 5, "origin": "us"})"
      "\n");
  const format::Trace trace = format::read_trace(in, "t.jsonl");
  const auto& origins = trace.platform.origins;
  auto name = [&](std::uint32_t o) { return origins.at(o).name; };
  ASSERT_EQ(trace.artifacts.size(), 2u);
  EXPECT_EQ(name(trace.artifacts[0].origin), "eu");
  ASSERT_EQ(trace.artifacts[0].mirrors.size(), 2u);
  EXPECT_EQ(name(trace.artifacts[0].mirrors[0]), "cdn");
  EXPECT_EQ(name(trace.artifacts[0].mirrors[1]), "us");
  EXPECT_EQ(name(trace.artifacts[1].origin), "us");
  EXPECT_TRUE(trace.artifacts[1].mirrors.empty());
  EXPECT_EQ(trace.scheduler.breaker_failures, 5u);
  EXPECT_EQ(trace.scheduler.breaker_open_s, 12.5);
}

TEST(TraceReader, DefaultsApplyWhereTheHeaderIsSilent) {
  std::istringstream in(
      R"({"format": "demandflight-trace", "version": 1})"
      "\n" +
      std::string(
          R"({"op": "artifact", "id": "x", "resource": "x", "revision": "r", "target": "t", "generation": 0, "size": 5, "origin": "anywhere"})") +
      "\n");
  const format::Trace trace = format::read_trace(in, "t.jsonl");
  EXPECT_EQ(trace.scheduler.max_transfers, 4u);
  EXPECT_EQ(trace.scheduler.retry_max_attempts, 4u);
  ASSERT_EQ(trace.platform.origins.size(), 1u);
  EXPECT_EQ(trace.platform.origins[0].bandwidth_Bps, 50e6);
  EXPECT_EQ(trace.platform.client_bandwidth_Bps, 12.5e6);
}

TEST(TraceReader, TheCliExitsTwoAndRunsNothingOnBadInput) {
  const std::string trace =
      header() + artifact("rock", 1000) +
      R"({"op": "subscribe", "t": 0, "demand": "d1", "owner": "o", "artifact": "rock", "priority": 1})"
      "\n" +
      R"({"op": "subscribe", "t": 0, "demand": "d1", "owner": "o", "artifact": "rock", "priority": 1})"
      "\n";
  const CliRun sim = run_cli(trace, {"sim", "TRACE", "--out", "OUT"});
  EXPECT_EQ(sim.exit_code, 2);
  EXPECT_NE(sim.err.find("trace.jsonl:4: demand: "), std::string::npos) << sim.err;
  EXPECT_FALSE(std::filesystem::exists(sim.dir + "/result.json")) << "nothing runs on bad input";
  const CliRun validate = run_cli(trace, {"validate", "TRACE"});
  EXPECT_EQ(validate.exit_code, 2);
  EXPECT_NE(validate.err.find(":4: demand: demand id \"d1\" is already used"), std::string::npos)
      << validate.err;
  const CliRun good = run_cli(kGood, {"validate", "TRACE"});
  EXPECT_EQ(good.exit_code, 0) << good.err;
  EXPECT_NE(good.out.find("ok"), std::string::npos);
}

TEST(TraceReader, TheCliRefusesAnUnknownPolicyWithExitTwo) {
  const CliRun run = run_cli(kGood, {"sim", "TRACE", "--policy", "sometimes"});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_NE(run.err.find("unknown policy \"sometimes\""), std::string::npos) << run.err;
}

}  // namespace
}  // namespace dfl::testing
