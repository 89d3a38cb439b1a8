// A subcommand registered on the `demandflight` app by its own file: what to
// run when it was chosen, returning the process exit code (0 success; 1
// something failed; 2 bad input).
#pragma once

#include <CLI/CLI.hpp>

#include <functional>

namespace dfl::cli {

struct Subcommand {
  CLI::App* app = nullptr;
  std::function<int()> run;
};

// sim/cli/compare.cpp
Subcommand add_compare_command(CLI::App& app);
// sim/cli/train.cpp
Subcommand add_train_command(CLI::App& app);

}  // namespace dfl::cli
