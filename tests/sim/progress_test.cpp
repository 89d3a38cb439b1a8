// sim and compare --progress (cli/progress.h): a line rewritten in place on
// a terminal, lines when asked for off one, nothing unasked off one.
#include <fcntl.h>
#include <pty.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "cli_runner.h"

namespace dfl::testing {
namespace {

std::string churn_trace() {
  const CliRun gen = run_cli("", {"gen", "session_churn", "--demands", "300", "--seed", "3"});
  EXPECT_EQ(gen.exit_code, 0) << gen.err;
  return gen.out;
}

// Runs the CLI with stderr (and stdin) on a pseudo-terminal and stdout on
// /dev/null; returns what the terminal showed.
std::string on_a_terminal(const std::vector<std::string>& args, int& exit_code) {
  int master = -1;
  const pid_t pid = ::forkpty(&master, nullptr, nullptr, nullptr);
  if (pid < 0) {
    ADD_FAILURE() << "forkpty: " << std::strerror(errno);
    return {};
  }
  if (pid == 0) {
    const int null = ::open("/dev/null", O_WRONLY);
    ::dup2(null, STDOUT_FILENO);
    std::vector<char*> argv{const_cast<char*>(DFL_CLI)};
    for (const std::string& a : args)
      argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execv(DFL_CLI, argv.data());
    ::_exit(127);
  }
  std::string shown;
  char buffer[4096];
  for (;;) {
    const ssize_t n = ::read(master, buffer, sizeof buffer);
    if (n > 0) {
      shown.append(buffer, static_cast<std::size_t>(n));
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else {
      break;  // EIO: the child closed the terminal.
    }
  }
  ::close(master);
  int status = 0;
  ::waitpid(pid, &status, 0);
  exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return shown;
}

TEST(Progress, SimRewritesOneLineOnATerminalAndClearsIt) {
  const CliRun setup = run_cli(churn_trace(), {"validate", "TRACE"});
  ASSERT_EQ(setup.exit_code, 0) << setup.err;
  const std::string trace = setup.dir + "/trace.jsonl";
  int code = -1;
  const std::string shown =
      on_a_terminal({"sim", trace, "--progress", "on", "--out", setup.dir + "/r.json"}, code);
  ASSERT_EQ(code, 0) << shown;
  // "\r", what it has done of the whole, "\033[K" (clear to the end); at
  // the end the line is cleared.
  EXPECT_NE(shown.find("\rsim: "), std::string::npos) << shown;
  EXPECT_NE(shown.find(" records, simulated "), std::string::npos) << shown;
  EXPECT_NE(shown.find("\033[K"), std::string::npos) << shown;
  EXPECT_EQ(shown.rfind("\r\033[K"), shown.size() - 4) << "the line is cleared at the end";
  // Unasked on a short run (under 2 s): nothing.
  const std::string quiet_run = on_a_terminal({"sim", trace, "--out", setup.dir + "/q.json"}, code);
  ASSERT_EQ(code, 0) << quiet_run;
  EXPECT_EQ(quiet_run.find("sim: "), std::string::npos) << quiet_run;
  // The progress changes nothing in the result.
  EXPECT_EQ(read_file(setup.dir + "/r.json"), read_file(setup.dir + "/q.json"));
}

TEST(Progress, OffATerminalItSaysNothingUnlessAskedThenWritesLines) {
  const std::string trace = churn_trace();
  const CliRun plain = run_cli(trace, {"sim", "TRACE", "--quiet"});
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  EXPECT_EQ(plain.err, "");
  const CliRun asked = run_cli(trace, {"sim", "TRACE", "--quiet", "--progress", "on"});
  ASSERT_EQ(asked.exit_code, 0) << asked.err;
  EXPECT_EQ(asked.err.rfind("sim: ", 0), 0u) << asked.err;
  EXPECT_NE(asked.err.find(" records, simulated "), std::string::npos) << asked.err;
  EXPECT_EQ(asked.err.find('\r'), std::string::npos) << "no carriage return off a terminal";
  EXPECT_EQ(asked.err.back(), '\n');

  const CliRun compare = run_cli(trace, {"compare", "TRACE", "--policies", "keep-partial"});
  ASSERT_EQ(compare.exit_code, 0) << compare.err;
  EXPECT_EQ(compare.err.find("runs done"), std::string::npos) << compare.err;
  const CliRun compare_asked =
      run_cli(trace, {"compare", "TRACE", "--policies", "keep-partial", "--progress", "on"});
  ASSERT_EQ(compare_asked.exit_code, 0) << compare_asked.err;
  EXPECT_NE(compare_asked.err.find("compare: 0 of "), std::string::npos) << compare_asked.err;

  const CliRun bad = run_cli(trace, {"sim", "TRACE", "--progress", "sometimes"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("--progress"), std::string::npos) << bad.err;
}

}  // namespace
}  // namespace dfl::testing
