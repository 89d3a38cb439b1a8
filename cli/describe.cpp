// demandflight describe TRACE [--json FILE] [--top N]
//
// What a trace asks for, without simulating it (format/describe.h): counts,
// popularity and a Zipf fit, reuse, sizes, the single-flight and orphan
// opportunities, priorities. Prints a summary; --json writes every figure.
// Bad trace: FILE:LINE: field: message, exit 2 (as validate).
#include <fstream>
#include <iostream>
#include <string>

#include "demandflight/format/describe.h"
#include "demandflight/format/trace.h"
#include "subcommand.h"

namespace dfl::cli {
namespace {

class Describe {
 public:
  explicit Describe(CLI::App& app) {
    cmd_ = app.add_subcommand("describe",
                              "what a trace asks for: popularity, reuse, sizes, single-flight "
                              "and orphan opportunities, priorities (no simulation)");
    cmd_->add_option("TRACE", trace_path_, "trace file (.jsonl)")->required();
    cmd_->add_option("--json", json_path_, "write every figure as JSON here");
    cmd_->add_option("--top", top_, "the most requested keys to list (0: all)")
        ->check(CLI::NonNegativeNumber)
        ->capture_default_str();
  }

  Subcommand subcommand() {
    return {cmd_, [this] { return run(); }};
  }

 private:
  int run() {
    const format::Trace trace = format::read_trace(trace_path_);  // TraceError: exit 2.
    const format::Description description = format::describe(trace);
    if (!json_path_.empty()) {
      std::ofstream out(json_path_);
      if (out) format::write_description_json(description, out, top_);
      out.close();
      if (!out) {
        std::cerr << "demandflight describe: cannot write " << json_path_ << '\n';
        return 1;
      }
    }
    format::print_description(description, std::cout, top_);
    std::cout.flush();
    return std::cout ? 0 : 1;
  }

  CLI::App* cmd_ = nullptr;
  std::string trace_path_;
  std::string json_path_;
  std::size_t top_ = 10;
};

}  // namespace

Subcommand add_describe_command(CLI::App& app) {
  static Describe command(app);
  return command.subcommand();
}

}  // namespace dfl::cli
