// `demandflight describe`: the summary, the --json file, and a bad trace
// refused as validate refuses it (FILE:LINE: field: message, exit 2).
#include <gtest/gtest.h>

#include <string>

#include "cli_runner.h"

namespace dfl::testing {
namespace {

// Two keys over the runner's platform (client 10 MB/s + 10 ms, cdn 40 MB/s +
// 40 ms): a lone 1 MB transfer takes 1e6 / 1e7 + 0.05 = 0.15 s.
std::string two_keys() {
  return header() + artifact("a", 1'000'000) + artifact("b", 2'000'000) +
         R"({"op": "subscribe", "t": 0, "demand": "d1", "owner": "o", "artifact": "a", "priority": 1})"
         "\n"
         R"({"op": "subscribe", "t": 0.1, "demand": "d2", "owner": "o", "artifact": "a", "priority": 2})"
         "\n"
         R"({"op": "subscribe", "t": 0.2, "demand": "d3", "owner": "o", "artifact": "b", "priority": 1})"
         "\n"
         R"({"op": "cancel", "t": 0.3, "demand": "d3"})"
         "\n";
}

TEST(DescribeCli, WritesTheJsonAndASummary) {
  const CliRun run =
      run_cli(two_keys(), {"describe", "TRACE", "--json", "DIR/d.json", "--top", "1"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const nlohmann::json j = nlohmann::json::parse(read_file(run.dir + "/d.json"));
  EXPECT_EQ(j["format"], "demandflight-describe");
  EXPECT_EQ(j["trace"], "test");
  EXPECT_EQ(j["counts"]["requests"], 3);
  EXPECT_EQ(j["counts"]["keys"], 2);
  EXPECT_EQ(j["counts"]["requested_bytes"], 4'000'000);
  EXPECT_EQ(j["counts"]["unique_bytes"], 3'000'000);
  EXPECT_EQ(j["counts"]["cancels"], 1);
  ASSERT_EQ(j["popularity"]["top"].size(), 1u);  // --top 1
  EXPECT_EQ(j["popularity"]["top"][0]["requests"], 2);
  // d2 at 0.1 is inside d1's window [0, 0.15): one request merged, 1 MB saved.
  EXPECT_EQ(j["single_flight"]["overlapping_requests"], 1);
  EXPECT_EQ(j["single_flight"]["saved_bytes"], 1'000'000);
  // d3 (2 MB: [0.2, 0.45)) cancelled at 0.3: in flight; b never comes back.
  EXPECT_EQ(j["orphans"]["cancelled_in_flight"], 1);
  EXPECT_EQ(j["orphans"]["came_back"], 0);
  EXPECT_EQ(j["reuse"]["time_s"]["count"], 1);
  EXPECT_NE(run.out.find("single-flight opportunity"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("a@r1/pc#0"), std::string::npos) << run.out;

  // The same trace gives the same bytes.
  const CliRun again =
      run_cli(two_keys(), {"describe", "TRACE", "--json", "DIR/d.json", "--top", "1"});
  EXPECT_EQ(read_file(again.dir + "/d.json"), read_file(run.dir + "/d.json"));
}

TEST(DescribeCli, ABadTraceIsRefusedWithItsLineAndExitCode2) {
  const std::string bad =
      header() + artifact("a", 1000) +
      R"({"op": "subscribe", "t": 0, "demand": "d1", "owner": "o", "artifact": "zz", "priority": 1})"
      "\n";
  const CliRun run = run_cli(bad, {"describe", "TRACE", "--json", "DIR/d.json"});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_NE(run.err.find("trace.jsonl:3: artifact:"), std::string::npos) << run.err;
  EXPECT_TRUE(run.out.empty()) << run.out;
  // validate says the same.
  const CliRun validate = run_cli(bad, {"validate", "TRACE"});
  EXPECT_EQ(validate.exit_code, 2);
  EXPECT_EQ(validate.err.substr(validate.err.find("trace.jsonl")),
            run.err.substr(run.err.find("trace.jsonl")));
}

}  // namespace
}  // namespace dfl::testing
