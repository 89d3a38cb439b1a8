// The CLI opens the simulator (and SimGrid with it) only for the subcommands
// that simulate (sim/cli/sim_module.h): the others start without it.
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

// sim, validate, compare and train start again once with glibc's malloc asking
// for transparent huge pages (sim/cli/main.cpp), unless told not to.
TEST(CliStartUp, TheSimulatingCommandsAskMallocForHugePages) {
  std::ifstream thp("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string modes;
  std::getline(thp, modes);
  if (modes.empty() || modes.find("[never]") != std::string::npos)
    GTEST_SKIP() << "no transparent huge pages here: nothing to ask for";
  const std::string trace = std::string(DFL_SCENARIOS) + "/three_callers.jsonl";
  const std::string clean = "env -u GLIBC_TUNABLES -u DFL_NO_HUGE_PAGES -u DFL_HUGE_PAGES_SET ";
  const std::string sim = std::string(DFL_CLI) + " sim " + trace + " --quiet --profile";

  const Outcome asked = run(clean + sim);
  EXPECT_EQ(asked.exit_code, 0) << asked.output;
  EXPECT_NE(asked.output.find("malloc huge pages on"), std::string::npos) << asked.output;

  const Outcome refused = run(clean + "DFL_NO_HUGE_PAGES=1 " + sim);
  EXPECT_EQ(refused.exit_code, 0) << refused.output;
  EXPECT_NE(refused.output.find("malloc huge pages off"), std::string::npos) << refused.output;

  // The user's own setting stands, and other tunables are kept.
  const Outcome chosen = run(clean + "GLIBC_TUNABLES=glibc.malloc.hugetlb=0 " + sim);
  EXPECT_NE(chosen.output.find("malloc huge pages off"), std::string::npos) << chosen.output;
  const Outcome other = run(clean + "GLIBC_TUNABLES=glibc.malloc.check=0 " + sim);
  EXPECT_NE(other.output.find("malloc huge pages on"), std::string::npos) << other.output;
}

}  // namespace
}  // namespace dfl::testing
