// A progress line on stderr for the long subcommands (sim, compare).
//
// --progress auto (the default): on a terminal, a line rewritten in place
// once the command has run for kQuietFor, and nothing when stderr is not a
// terminal (a log or a pipe gets no noise). on: from the start, in place on
// a terminal and otherwise a line every kLineEvery. off: nothing.
#pragma once

#include <chrono>
#include <string>

namespace dfl::cli {

class ProgressLine {
 public:
  // `flag`: auto | on | off (anything else: off). `quiet`: the command's
  // --quiet, which silences auto.
  ProgressLine(std::string prefix, const std::string& flag, bool quiet);
  ~ProgressLine();  // Clears an in-place line.
  ProgressLine(const ProgressLine&) = delete;
  ProgressLine& operator=(const ProgressLine&) = delete;

  bool active() const { return mode_ != Mode::off; }
  // What to show now; shown if it is time to (at most every kRefresh in
  // place). The elapsed wall time is appended.
  void update(const std::string& text);
  // Clears an in-place line (before the command prints its own output).
  void done();

  static constexpr std::chrono::milliseconds kQuietFor{2000};
  static constexpr std::chrono::milliseconds kRefresh{200};
  static constexpr std::chrono::milliseconds kLineEvery{10000};

 private:
  enum class Mode { off, in_place, lines };
  using Clock = std::chrono::steady_clock;
  std::string prefix_;
  Mode mode_ = Mode::off;
  bool delayed_ = false;  // auto: nothing before kQuietFor.
  Clock::time_point start_ = Clock::now();
  Clock::time_point last_{};
  bool shown_ = false;  // An in-place line is on the screen.
};

// 1234567 -> "1,234,567".
std::string with_commas(unsigned long long n);

}  // namespace dfl::cli
