// A subcommand registered on the `demandflight` app by its own file: what to
// run when it was chosen, returning the process exit code (0 success; 1
// something failed; 2 bad input).
#pragma once

#include <CLI/CLI.hpp>

#include <functional>

#include "demandflight/sim/simulator.h"

namespace dfl::cli {

struct Subcommand {
  CLI::App* app = nullptr;
  std::function<int()> run;
};

// cli/compare.cpp
Subcommand add_compare_command(CLI::App& app);
// cli/train.cpp
Subcommand add_train_command(CLI::App& app);
// cli/import.cpp
Subcommand add_import_command(CLI::App& app);
// cli/describe.cpp
Subcommand add_describe_command(CLI::App& app);
// cli/report.cpp
Subcommand add_report_command(CLI::App& app);
// cli/fidelity.cpp
Subcommand add_fidelity_command(CLI::App& app);

// The simulator, from its module (cli/sim_module.cpp), loaded on first
// use; load_simulator() loads it now. Both throw std::runtime_error naming
// the module's file when it cannot be loaded.
void load_simulator();
format::Result simulate(const format::Trace& trace, const sim::SimOptions& options);
format::Result simulate_streamed(format::TraceStream& stream, const sim::SimOptions& options,
                                 format::RowSink& rows);

}  // namespace dfl::cli
