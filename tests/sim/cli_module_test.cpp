// The CLI opens the simulator (and SimGrid with it) only for the subcommands
// that simulate (cli/sim_module.cpp): the others start without it.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

namespace dfl::testing {
namespace {

namespace fs = std::filesystem;

struct Outcome {
  int exit_code = -1;
  std::string output;  // stdout and stderr.
};

Outcome run(const std::string& command) {
  Outcome r;
  FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return r;
  char buffer[4096];
  while (std::fgets(buffer, sizeof buffer, pipe) != nullptr)
    r.output += buffer;
  const int status = ::pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

TEST(CliSimulatorModule, OnlyTheSubcommandsThatSimulateNeedIt) {
  const fs::path dir = fs::temp_directory_path() / ("dfl-module-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  fs::copy_file(DFL_CLI, dir / "demandflight");
  const std::string cli = (dir / "demandflight").string();
  const std::string trace = std::string(DFL_SCENARIOS) + "/three_callers.jsonl";

  // The executable does not name SimGrid (nor, through it, ns-3) among its libraries.
  const Outcome needed = run("readelf -d " + cli);
  ASSERT_EQ(needed.exit_code, 0) << needed.output;
  EXPECT_NE(needed.output.find("(NEEDED)"), std::string::npos) << needed.output;
  EXPECT_EQ(needed.output.find("libsimgrid"), std::string::npos) << needed.output;

  // Without the module next to it: everything but sim works.
  const Outcome validate = run(cli + " validate " + trace);
  EXPECT_EQ(validate.exit_code, 0) << validate.output;
  const Outcome gen =
      run(cli + " gen session_churn --seed 1 --demands 10 > " + (dir / "g.jsonl").string());
  EXPECT_EQ(gen.exit_code, 0) << gen.output;
  const Outcome missing = run(cli + " sim " + trace + " --quiet");
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.output.find("cannot load the simulator ("), std::string::npos)
      << missing.output;
  EXPECT_NE(missing.output.find("libdemandflight_simgrid.so"), std::string::npos) << missing.output;

  // A module of another build (its build id differs) is refused.
  std::string module;
  {
    std::ifstream in(DFL_SIM_MODULE, std::ios::binary);
    module.assign(std::istreambuf_iterator<char>(in), {});
  }
  const std::size_t at = module.find(DFL_BUILD_ID);
  ASSERT_NE(at, std::string::npos) << "the module carries its build id";
  std::string other = module;
  other[at] = other[at] == '0' ? '1' : '0';
  const fs::path module_path = dir / fs::path(DFL_SIM_MODULE).filename();
  std::ofstream(module_path, std::ios::binary) << other;
  const Outcome foreign = run(cli + " sim " + trace + " --quiet");
  EXPECT_EQ(foreign.exit_code, 1);
  EXPECT_NE(foreign.output.find("is from another build"), std::string::npos) << foreign.output;

  // Its own: sim runs.
  std::ofstream(module_path, std::ios::binary | std::ios::trunc) << module;
  const Outcome sim = run(cli + " sim " + trace + " --quiet --out " + (dir / "r.json").string());
  EXPECT_EQ(sim.exit_code, 0) << sim.output;
  EXPECT_TRUE(fs::exists(dir / "r.json"));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace dfl::testing
