#include "cli_runner.h"

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace dfl::testing {

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

namespace {

std::string quote(const std::string& s) {
  std::string out = "'";
  for (char c : s)
    out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string scratch_dir() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string name = info ? std::string(info->test_suite_name()) + "." + info->name() : "run";
  for (char& c : name) {
    if (c == '/') c = '_';
  }
  static int counter = 0;
  const auto dir =
      std::filesystem::temp_directory_path() /
      ("dfl-sim-" + std::to_string(::getpid()) + "-" + name + "-" + std::to_string(++counter));
  std::filesystem::create_directories(dir);
  return dir.string();
}

}  // namespace

CliRun run_cli(const std::string& trace, const std::vector<std::string>& args) {
  CliRun run;
  run.dir = scratch_dir();
  const std::string trace_path = run.dir + "/trace.jsonl";
  const std::string out_path = run.dir + "/result.json";
  std::ofstream(trace_path) << trace;
  std::string command = quote(DFL_CLI);
  for (const std::string& arg : args) {
    std::string value = arg == "TRACE" ? trace_path : arg == "OUT" ? out_path : arg;
    if (value.rfind("DIR/", 0) == 0) value = run.dir + value.substr(3);
    command += " " + quote(value);
  }
  command += " >" + quote(run.dir + "/stdout") + " 2>" + quote(run.dir + "/stderr");
  const int status = std::system(command.c_str());
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  run.out = read_file(run.dir + "/stdout");
  run.err = read_file(run.dir + "/stderr");
  if (std::filesystem::exists(out_path)) {
    run.result_text = read_file(out_path);
    if (!run.result_text.empty()) run.result = nlohmann::json::parse(run.result_text);
  }
  return run;
}

CliRun simulate(const std::string& trace, const std::vector<std::string>& extra) {
  std::vector<std::string> args = {"sim",  "TRACE",  "--out", "OUT", "--network-model",
                                   "cm02", "--quiet"};
  args.insert(args.end(), extra.begin(), extra.end());
  CliRun run = run_cli(trace, args);
  EXPECT_EQ(run.exit_code, 0) << run.err;
  return run;
}

std::string header(const std::string& scheduler, const std::string& extra_platform) {
  return R"({"format": "demandflight-trace", "version": 1, "name": "test", "seed": 3, )"
         R"("platform": {"client_bandwidth_Bps": 10000000, "client_latency_s": 0.01, )"
         R"("origins": {"cdn": {"bandwidth_Bps": 40000000, "latency_s": 0.04}}, )"
         R"("disk_write_Bps": 1e15, "hash_Bps": 1e15)" +
         extra_platform + R"(}, "scheduler": )" + scheduler + "}\n";
}

std::string artifact(const std::string& id, std::uint64_t size, const std::string& resource,
                     const std::string& revision) {
  return R"({"op": "artifact", "id": ")" + id + R"(", "resource": ")" +
         (resource.empty() ? id : resource) + R"(", "revision": ")" + revision +
         R"(", "target": "pc", "generation": 0, "size": )" + std::to_string(size) +
         R"(, "origin": "cdn"})" + "\n";
}

const nlohmann::json& demand_record(const nlohmann::json& result, const std::string& demand) {
  for (const auto& d : result.at("demands")) {
    if (d.at("demand") == demand) return d;
  }
  ADD_FAILURE() << "no demand " << demand << " in the result";
  static const nlohmann::json none;
  return none;
}

std::vector<nlohmann::json> lines_of(const std::string& text) {
  std::vector<nlohmann::json> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    out.push_back(nlohmann::json::parse(line));
  return out;
}

}  // namespace dfl::testing
