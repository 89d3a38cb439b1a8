// demandflight import csv FILE... --time COL --key COL --size COL [--priority COL]
//                     [--owner COL] [--origin COL] [--end COL] [--no-header]
//                     [--delimiter C] [--time-unit s|ms|us|ns] [--start T] [--name N]
//
// Writes a trace (docs/trace-format.md) of a request log to stdout; its
// header's `x-import` says what was read, with which options, and what was
// skipped and why (format/import.h). Bad input: FILE:LINE: field: message,
// exit 2, nothing written.
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "demandflight/format/import.h"
#include "subcommand.h"

namespace dfl::cli {
namespace {

class Import {
 public:
  explicit Import(CLI::App& app) {
    cmd_ = app.add_subcommand("import", "turn a request log into a trace (written to stdout)");
    cmd_->require_subcommand(1);
    csv_ = cmd_->add_subcommand(
        "csv", "a CSV request log: a row per request (time, object, size), in time order");
    csv_->add_option("FILE", inputs_, "the log, in order (several files: one log split)")
        ->required()
        ->check(CLI::ExistingFile);
    csv_->add_option("--time", options_.time, "the time column (a name, or a number from 1)")
        ->required();
    csv_->add_option("--key", options_.key, "the object id column")->required();
    csv_->add_option("--size", options_.size, "the size column (bytes)")->required();
    csv_->add_option("--priority", priority_, "an integer priority column (default: 1)");
    csv_->add_option("--owner", owner_, "the owner column (default: one owner, \"log\")");
    csv_->add_option("--origin", origin_, "the origin column (default: one, \"origin\")");
    csv_->add_option("--end", end_,
                     "a column with the time the request was abandoned: a cancel then "
                     "(empty: never)");
    csv_->add_flag("--no-header", no_header_, "the first row is data: columns are numbers");
    csv_->add_option("--delimiter", delimiter_, "the field separator")->capture_default_str();
    csv_->add_option("--time-unit", options_.time_unit, "s, ms, us or ns")
        ->check(CLI::IsMember({"s", "ms", "us", "ns"}))
        ->capture_default_str();
    csv_->add_option("--start", start_,
                     "subtracted from every time, in the log's unit (default: the first "
                     "row's time)");
    csv_->add_option("--name", options_.name, "the trace's name")->capture_default_str();
    csv_->add_option("--seed", options_.seed, "the trace's seed")->capture_default_str();
  }

  Subcommand subcommand() {
    return {cmd_, [this] { return run(); }};
  }

 private:
  int run() {
    if (delimiter_.size() != 1) {
      throw std::invalid_argument("import csv: --delimiter must be one character");
    }
    options_.delimiter = delimiter_[0];
    options_.header = !no_header_;
    options_.priority = priority_;
    options_.owner = owner_;
    options_.origin = origin_;
    options_.end = end_;
    options_.start = start_;
    std::ios::sync_with_stdio(false);
    format::import_csv(inputs_, options_, std::cout);
    std::cout.flush();
    return std::cout ? 0 : 1;
  }

  CLI::App* cmd_ = nullptr;
  CLI::App* csv_ = nullptr;
  std::vector<std::string> inputs_;
  format::CsvImport options_;
  std::optional<std::string> priority_, owner_, origin_, end_;
  std::optional<double> start_;
  bool no_header_ = false;
  std::string delimiter_ = ",";
};

}  // namespace

Subcommand add_import_command(CLI::App& app) {
  static Import command(app);
  return command.subcommand();
}

}  // namespace dfl::cli
