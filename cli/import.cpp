// demandflight import FORMAT FILE... [options] > trace.jsonl
//
// FORMAT is csv, oracle-general, har, cdp or access-log; each format's options, and the
// demand model's (--sessions, --abandon, --priority-by/--priority-map,
// --deadline), come from format/import.h, so that the command and Python
// offer the same ones. Writes the trace to stdout; its header's `x-import`
// says what was read, with which options, and what was made and skipped and
// why. Bad input: FILE:LINE: field: message (binary: FILE: record N: ...),
// exit 2, nothing written.
#include <cstdio>
#include <deque>
#include <iostream>
#include <string>
#include <tuple>
#include <vector>

#include "demandflight/format/import.h"
#include "subcommand.h"

namespace dfl::cli {
namespace {

class Import {
 public:
  explicit Import(CLI::App& app) {
    cmd_ = app.add_subcommand("import",
                              "turn a request log or a browser capture into a trace "
                              "(written to stdout)");
    // A format that is not one of the subcommands is named in the error
    // (run()), not met with CLI11's "A subcommand is required".
    cmd_->require_subcommand(0, 1);
    cmd_->allow_extras();
    for (const std::string& format : format::import_formats()) {
      Format& f = formats_.emplace_back();
      f.name = format;
      f.app = cmd_->add_subcommand(format, format::import_format_help(format));
      // An option the format does not have is an error naming it (the parent
      // lets a word through only to name an unknown format).
      f.app->allow_extras(false);
      // A file that cannot be read is the importer's error, with the system's
      // reason, and after the options were checked.
      f.app->add_option("FILE", f.inputs, "the input, in order (several files: one log split)")
          ->required();
      for (const format::ImportOption& o : format::import_options(format)) {
        std::string help = o.help;
        if (!o.default_value.empty()) help += " (default: " + o.default_value + ")";
        CLI::Option* option = nullptr;
        if (o.flag) {
          option = f.app->add_flag("--" + o.name)->description(help);
        } else {
          std::string& value = values_.emplace_back();
          option = f.app->add_option("--" + o.name, value, help);
          option->type_name(o.name == "abandon" || o.name == "priority-map" ? "SPEC" : "VALUE");
          if (o.required) option->required();
        }
        f.options.emplace_back(o.name, option, o.flag ? nullptr : &values_.back());
      }
    }
  }

  Subcommand subcommand() {
    return {cmd_, [this] { return run(); }};
  }

 private:
  struct Format {
    std::string name;
    CLI::App* app = nullptr;
    std::vector<std::string> inputs;
    std::vector<std::tuple<std::string, CLI::Option*, std::string*>> options;
  };

  int run() {
    for (Format& f : formats_) {
      if (!f.app->parsed()) continue;
      format::ImportOptions options;
      for (const auto& [name, option, value] : f.options) {
        if (option->count() == 0) continue;
        options[name] = value != nullptr ? *value : "true";
      }
      // The importer writes nothing before the whole input was read and found good.
      std::ios::sync_with_stdio(false);
      format::import_trace(f.name, f.inputs, options, std::cout);
      std::cout.flush();
      return std::cout ? 0 : 1;
    }
    std::string known;
    for (const Format& f : formats_)
      known += (known.empty() ? "" : ", ") + f.name;
    const std::vector<std::string> extras = cmd_->remaining();
    if (extras.empty()) {
      std::fprintf(stderr, "demandflight import: FORMAT is required: one of %s\n", known.c_str());
    } else {
      std::fprintf(stderr,
                   "demandflight import: unknown format '%s': expected one of %s (demandflight "
                   "import FORMAT --help for its options)\n",
                   extras.front().c_str(), known.c_str());
    }
    return 2;
  }

  CLI::App* cmd_ = nullptr;
  std::deque<Format> formats_;
  std::deque<std::string> values_;
};

}  // namespace

Subcommand add_import_command(CLI::App& app) {
  static Import command(app);
  return command.subcommand();
}

}  // namespace dfl::cli
