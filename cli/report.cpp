// demandflight report INPUT... -o report.html [--title T]
//
// One self-contained HTML page of figures from result JSON files and
// compare's CSV tables. The figures are drawn by the Python package's
// demandflight._report (matplotlib), which this command runs with the
// interpreter the build was configured with: from the build tree
// (build/X/python) or from inside the installed package (demandflight/_bin).
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

#include "subcommand.h"

#ifndef DFL_PYTHON_EXECUTABLE
#define DFL_PYTHON_EXECUTABLE "/usr/bin/python3"
#endif

namespace dfl::cli {
namespace {

namespace fs = std::filesystem;

class Report {
 public:
  explicit Report(CLI::App& app) {
    cmd_ = app.add_subcommand("report",
                              "draw one self-contained HTML page of figures from result JSON "
                              "files (sim --out) and compare's --csv and --runs-csv tables");
    cmd_->add_option("INPUT", inputs_, "result JSON, compare --csv or --runs-csv files")
        ->required()
        ->check(CLI::ExistingFile);
    cmd_->add_option("-o,--out", out_, "the HTML page to write")->required();
    cmd_->add_option("--title", title_, "the page's title")->capture_default_str();
  }

  Subcommand subcommand() {
    return {cmd_, [this] { return run(); }};
  }

 private:
  // Where the package `demandflight` is, with its _report.py: next to this
  // program's build tree, or around it when it runs from the package.
  static std::vector<fs::path> candidates() {
    std::vector<fs::path> out;
    if (const char* env = std::getenv("DEMANDFLIGHT_PYTHONPATH")) out.emplace_back(env);
    std::error_code ec;
    const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
    if (!ec) {
      const fs::path dir = exe.parent_path();
      out.push_back(dir.parent_path() / "python");  // build/X/cli -> build/X/python
      out.push_back(dir.parent_path().parent_path());  // .../demandflight/_bin -> ...
    }
    return out;
  }

  int run() {
    const std::vector<fs::path> places = candidates();
    fs::path package;
    for (const fs::path& p : places) {
      std::error_code ec;
      if (fs::exists(p / "demandflight" / "_report.py", ec)) {
        package = p;
        break;
      }
    }
    if (package.empty()) {
      std::string looked;
      for (const fs::path& p : places)
        looked += (looked.empty() ? "" : ", ") + (p / "demandflight").string();
      std::fprintf(stderr,
                   "demandflight report: the Python package demandflight is not where this "
                   "command looks (%s): build it (DFL_PYTHON=ON) or set "
                   "DEMANDFLIGHT_PYTHONPATH to the directory that holds it\n",
                   looked.c_str());
      return 1;
    }
    const char* python_env = std::getenv("DEMANDFLIGHT_PYTHON");
    const std::string python = python_env != nullptr ? python_env : DFL_PYTHON_EXECUTABLE;
    std::string path = package.string();
    if (const char* old = std::getenv("PYTHONPATH"); old != nullptr && *old != '\0') {
      path += ":" + std::string(old);
    }
    ::setenv("PYTHONPATH", path.c_str(), 1);
    std::vector<std::string> args = {
        python, "-c",
        "import sys; from demandflight._report import main; sys.exit(main(sys.argv[1:]))",
        "--out", out_, "--title", title_};
    args.insert(args.end(), inputs_.begin(), inputs_.end());
    std::vector<char*> argv;
    for (std::string& a : args)
      argv.push_back(a.data());
    argv.push_back(nullptr);
    std::fflush(nullptr);
    ::execv(python.c_str(), argv.data());
    std::perror(("demandflight report: cannot run " + python).c_str());
    return 1;
  }

  CLI::App* cmd_ = nullptr;
  std::vector<std::string> inputs_;
  std::string out_;
  std::string title_ = "demandflight report";
};

}  // namespace

Subcommand add_report_command(CLI::App& app) {
  static Report command(app);
  return command.subcommand();
}

}  // namespace dfl::cli
