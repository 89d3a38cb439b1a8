#include "progress.h"

#include <unistd.h>

#include <cstdio>

namespace dfl::cli {

ProgressLine::ProgressLine(std::string prefix, const std::string& flag, bool quiet)
    : prefix_(std::move(prefix)) {
  const bool tty = ::isatty(STDERR_FILENO) != 0;
  if (flag == "on") {
    mode_ = tty ? Mode::in_place : Mode::lines;
  } else if (flag == "auto" && tty && !quiet) {
    mode_ = Mode::in_place;
    delayed_ = true;
  }
}

ProgressLine::~ProgressLine() { done(); }

void ProgressLine::update(const std::string& text) {
  if (mode_ == Mode::off) return;
  const Clock::time_point now = Clock::now();
  if (delayed_ && now - start_ < kQuietFor) return;
  const auto every = mode_ == Mode::in_place ? Clock::duration(kRefresh) : Clock::duration(kLineEvery);
  if (last_ != Clock::time_point{} && now - last_ < every) return;
  last_ = now;
  const double elapsed = std::chrono::duration<double>(now - start_).count();
  if (mode_ == Mode::in_place) {
    // Carriage return, the line, and clear to its end (a shorter line
    // leaves nothing of the last).
    std::fprintf(stderr, "\r%s: %s, %.0f s\033[K", prefix_.c_str(), text.c_str(), elapsed);
    shown_ = true;
  } else {
    std::fprintf(stderr, "%s: %s, %.0f s\n", prefix_.c_str(), text.c_str(), elapsed);
  }
  std::fflush(stderr);
}

void ProgressLine::done() {
  if (!shown_) return;
  std::fprintf(stderr, "\r\033[K");
  std::fflush(stderr);
  shown_ = false;
}

std::string with_commas(unsigned long long n) {
  const std::string digits = std::to_string(n);
  std::string out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

}  // namespace dfl::cli
