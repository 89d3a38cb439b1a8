// sim --stream (simulator.h, simulate_streamed): a run that reads its trace as
// it goes and writes each row as it ends writes the in-memory run's result
// byte for byte, on every scenario kind, model and a spread of policies; its
// CSV rows are the JSON's rows; a bad line stops it with nothing written; what
// needs the whole trace is refused.
#include <gtest/gtest.h>
#include <zlib.h>

#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "cli_runner.h"
#include "demandflight/format/generator.h"
#include "random_test_seed.h"

namespace dfl::testing {
namespace {

std::string generated(const char* kind, std::uint64_t seed, std::uint64_t demands) {
  std::ostringstream out;
  format::GenOptions options;
  options.seed = seed;
  options.demands = demands;
  format::generate(kind, options, out);
  return out.str();
}

CliRun sim(const std::string& trace, std::vector<std::string> extra) {
  std::vector<std::string> args = {"sim", "TRACE", "--out", "OUT", "--quiet"};
  args.insert(args.end(), extra.begin(), extra.end());
  return run_cli(trace, args);
}

TEST(SimStream, WritesTheInMemoryResultByteForByte) {
  const std::uint64_t seed = random_test_seed("SimStream.WritesTheInMemoryResultByteForByte");
  struct Case {
    const char* kind;
    const char* model;
    const char* policy;
  };
  const std::vector<Case> cases = {
      {"open_world_streaming", "demand", "always-abort"},
      {"open_world_streaming", "demand", "keep-partial"},
      {"open_world_streaming", "independent", "always-complete"},
      {"session_churn", "demand", "expected-value"},
      {"session_churn", "callbacks", "always-abort"},
      {"cache_pressure", "demand", "keep-partial"},
      {"flaky_network", "demand", "always-complete"},
      {"flaky_network", "independent", "keep-partial"},
  };
  for (const Case& c : cases) {
    const std::string trace = generated(c.kind, seed % 100000 + 1, 3000);
    const std::vector<std::string> args = {"--model", c.model, "--policy", c.policy};
    std::vector<std::string> streamed_args = args;
    streamed_args.push_back("--stream");
    const CliRun whole = sim(trace, args);
    const CliRun streamed = sim(trace, streamed_args);
    ASSERT_EQ(whole.exit_code, 0) << whole.err;
    ASSERT_EQ(streamed.exit_code, 0) << streamed.err;
    ASSERT_FALSE(whole.result_text.empty());
    EXPECT_TRUE(whole.result_text == streamed.result_text)
        << c.kind << " " << c.model << " " << c.policy << ", seed " << seed;
    EXPECT_GT(whole.result["summary"]["outcomes"]["succeeded"].get<int>(), 0);
  }
  // The bundled scenarios (faults, origins down, cancels of ended demands).
  for (const char* name : {"three_callers", "flaky_network", "session_churn"}) {
    const std::string trace = read_file(std::string(DFL_SCENARIOS) + "/" + name + ".jsonl");
    const CliRun whole = sim(trace, {});
    const CliRun streamed = sim(trace, {"--stream"});
    ASSERT_EQ(streamed.exit_code, 0) << streamed.err;
    EXPECT_TRUE(whole.result_text == streamed.result_text) << name;
  }
}

// Cancels and priority changes of demands that have ended are ignored and
// counted alike, though a streamed run no longer knows those demands' handles.
TEST(SimStream, RecordsOfEndedDemandsAreIgnoredAndCountedAlike) {
  const std::string trace = header() + artifact("a", 1'000'000) + artifact("b", 1'000'000) +
                            R"({"op":"subscribe","t":0,"demand":"d1","owner":"o","artifact":"a","priority":1})"
                            "\n"
                            R"({"op":"subscribe","t":0,"demand":"d2","owner":"o","artifact":"b","priority":1})"
                            "\n"
                            R"({"op":"cancel","t":0.05,"demand":"d2"})"
                            "\n"
                            R"({"op":"cancel","t":5,"demand":"d1"})"
                            "\n"
                            R"({"op":"set_priority","t":5,"demand":"d1","priority":3})"
                            "\n"
                            R"({"op":"set_priority","t":6,"demand":"d2","priority":3})"
                            "\n";
  const CliRun whole = simulate(trace);
  const CliRun streamed = simulate(trace, {"--stream"});
  ASSERT_EQ(streamed.exit_code, 0) << streamed.err;
  EXPECT_EQ(streamed.result["summary"]["ignored_cancels"], 1);
  EXPECT_EQ(streamed.result["summary"]["ignored_set_priorities"], 2);
  EXPECT_EQ(whole.result_text, streamed.result_text);
}

std::string gunzip(const std::string& path) {
  gzFile f = ::gzopen(path.c_str(), "rb");
  if (f == nullptr) return {};
  std::string out;
  char buffer[1 << 16];
  int n = 0;
  while ((n = ::gzread(f, buffer, sizeof buffer)) > 0)
    out.append(buffer, static_cast<std::size_t>(n));
  ::gzclose(f);
  return out;
}

std::vector<std::vector<std::string>> csv_rows(const std::string& text) {
  // The generated ids need no quoting; the task lists are quoted JSON.
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> row;
  std::string field;
  bool quoted = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quoted) {
      if (c == '"' && i + 1 < text.size() && text[i + 1] == '"') {
        field += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        field += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      row.push_back(field);
      field.clear();
    } else if (c == '\n') {
      row.push_back(field);
      field.clear();
      rows.push_back(row);
      row.clear();
    } else {
      field += c;
    }
  }
  return rows;
}

std::string text_of(const nlohmann::json& value) {
  if (value.is_null()) return "";
  if (value.is_string()) return value.get<std::string>();
  return value.dump();
}

// The CSV rows are the JSON rows: every field, compared by value (the CSV
// writes the shortest text that reads back to the same double).
TEST(SimStream, CsvRowsAreTheResultRows) {
  const std::string trace = generated("session_churn", 7, 2000);
  for (const bool stream : {true, false}) {
    std::vector<std::string> args = {"--demands-csv", "DIR/demands.csv.gz", "--tasks-csv",
                                     "DIR/tasks.csv", "--policy", "keep-partial"};
    if (stream) args.push_back("--stream");
    const CliRun run = sim(trace, args);
    ASSERT_EQ(run.exit_code, 0) << run.err;
    const auto demands = csv_rows(gunzip(run.dir + "/demands.csv.gz"));
    const auto tasks = csv_rows(read_file(run.dir + "/tasks.csv"));
    const nlohmann::json& want_demands = run.result["demands"];
    const nlohmann::json& want_tasks = run.result["tasks"];
    ASSERT_EQ(demands.size(), want_demands.size() + 1) << "stream " << stream;
    ASSERT_EQ(tasks.size(), want_tasks.size() + 1) << "stream " << stream;
    const std::vector<std::string>& names = demands[0];
    for (std::size_t i = 0; i < want_demands.size(); ++i) {
      ASSERT_EQ(demands[i + 1].size(), names.size());
      for (std::size_t f = 0; f < names.size(); ++f) {
        const nlohmann::json& want = want_demands[i][names[f]];
        if (want.is_number()) {
          EXPECT_EQ(std::stod(demands[i + 1][f]), want.get<double>()) << names[f] << " row " << i;
        } else {
          EXPECT_EQ(demands[i + 1][f], text_of(want)) << names[f] << " row " << i;
        }
      }
    }
    const std::vector<std::string>& task_names = tasks[0];
    EXPECT_EQ(task_names[0], "task");
    std::size_t with_decisions = 0;
    for (std::size_t i = 0; i < want_tasks.size(); ++i) {
      EXPECT_EQ(tasks[i + 1][0], std::to_string(i));
      for (std::size_t f = 1; f < task_names.size(); ++f) {
        nlohmann::json want = want_tasks[i][task_names[f]];
        const std::string& got = tasks[i + 1][f];
        if (task_names[f] == "orphan_decisions") {
          for (auto& d : want)
            d.erase("policy");  // The file's policy is the run's.
          with_decisions += !want.empty();
        }
        if (want.is_array()) {
          EXPECT_EQ(nlohmann::json::parse(got), want) << task_names[f] << " row " << i;
        } else if (want.is_number()) {
          EXPECT_EQ(std::stod(got), want.get<double>()) << task_names[f] << " row " << i;
        } else {
          EXPECT_EQ(got, text_of(want)) << task_names[f] << " row " << i;
        }
      }
    }
    EXPECT_GT(with_decisions, 0u);  // The lists were exercised.
  }
}

TEST(SimStream, ABadLineStopsTheRunAndLeavesNothing) {
  std::string trace = generated("session_churn", 3, 500);
  // A line far into the trace goes back in time.
  const std::size_t at = trace.find('\n', trace.size() * 3 / 4) + 1;
  const std::size_t line = static_cast<std::size_t>(std::count(trace.begin(), trace.begin() + static_cast<std::ptrdiff_t>(at), '\n')) + 1;
  trace.insert(at, R"({"op":"end_owner","t":0,"owner":"late"})" "\n");
  const CliRun run = sim(trace, {"--stream", "--demands-csv", "DIR/d.csv"});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_NE(run.err.find("trace.jsonl:" + std::to_string(line) + ": t: goes backwards"),
            std::string::npos)
      << run.err;
  // Only the error: the simulation stopped cleanly, nothing of SimGrid's on stderr.
  EXPECT_EQ(std::count(run.err.begin(), run.err.end(), '\n'), 1) << run.err;
  for (const char* file : {"/result.json", "/result.json.partial", "/d.csv", "/d.csv.partial"})
    EXPECT_FALSE(std::filesystem::exists(run.dir + file)) << file;
}

// A device, not a file: written as the run goes, never replaced by a renamed
// NAME.partial. A write that fails (a full disk: /dev/full) stops the run at
// once with the reason, in both modes.
TEST(SimStream, WritesToDevicesInPlaceAndStopsWhenAWriteFails) {
  if (!std::filesystem::exists("/dev/full")) GTEST_SKIP() << "no /dev/full here";
  const std::string trace = generated("session_churn", 3, 300);
  for (const bool stream : {true, false}) {
    std::vector<std::string> args = {"sim", "TRACE", "--quiet", "--out", "/dev/full"};
    if (stream) args.push_back("--stream");
    const CliRun run = run_cli(trace, args);
    EXPECT_EQ(run.exit_code, 1) << "stream " << stream;
    EXPECT_NE(run.err.find("writing the result failed: No space left on device"),
              std::string::npos)
        << run.err;
  }
  EXPECT_TRUE(std::filesystem::is_character_file("/dev/full"));
  EXPECT_FALSE(std::filesystem::exists("/dev/full.partial"));
  const CliRun ok = run_cli(trace, {"sim", "TRACE", "--quiet", "--stream", "--out", "/dev/null"});
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_TRUE(std::filesystem::is_character_file("/dev/null"));
}

TEST(SimStream, RefusesWhatNeedsTheWholeTrace) {
  const std::string trace = generated("session_churn", 3, 100);
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{{"--policy", "oracle"},
                                             {"--policy", "lookahead"},
                                             {"--timeline", "DIR/t.json"},
                                             {"--decisions", "DIR/d.jsonl"},
                                             {"--resample", "owners"}}) {
    std::vector<std::string> all = args;
    all.push_back("--stream");
    const CliRun run = sim(trace, all);
    EXPECT_EQ(run.exit_code, 2) << args[0];
    EXPECT_NE(run.err.find("needs the whole trace"), std::string::npos) << run.err;
    EXPECT_TRUE(run.result_text.empty());
  }
}

}  // namespace
}  // namespace dfl::testing
