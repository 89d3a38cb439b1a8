// The demand ids of a streamed trace (stream_demand_ids.h).
#include <charconv>
#include <stdexcept>

#include "stream_demand_ids.h"

namespace dfl::format::detail {
namespace {
// Ids numbered from the first number seen to this many more (a 256 MB bitmap
// at most) are bits; others strings.
constexpr std::uint64_t kMaxNumbered = std::uint64_t{1} << 31;

std::size_t digits_from(std::string_view id) {
  std::size_t i = id.size();
  while (i > 0 && id[i - 1] >= '0' && id[i - 1] <= '9') --i;
  return i;
}
}  // namespace

std::optional<std::uint64_t> SeenIds::number(std::string_view id) const {
  if (!has_prefix_) return std::nullopt;
  if (id.size() <= prefix_.size() || id.substr(0, prefix_.size()) != prefix_) return std::nullopt;
  const std::string_view digits = id.substr(prefix_.size());
  if (digits.size() > 10 || (digits.size() > 1 && digits[0] == '0')) return std::nullopt;
  std::uint64_t n = 0;
  const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), n);
  if (error != std::errc{} || end != digits.data() + digits.size() || n < base_ ||
      n - base_ >= kMaxNumbered) {
    return std::nullopt;
  }
  return n - base_;  // The bit's index.
}

bool SeenIds::contains(std::string_view id) const {
  if (auto n = number(id)) return *n / 64 < bits_.size() && (bits_[*n / 64] >> (*n % 64) & 1) != 0;
  return others_.contains(std::string(id));
}

void SeenIds::insert(std::string_view id) {
  if (!has_prefix_) {
    const std::size_t split = digits_from(id);
    const std::string_view digits = id.substr(split);
    std::uint64_t first = 0;
    const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), first);
    if (!digits.empty() && error == std::errc{} && end == digits.data() + digits.size()) {
      // The first id with a number sets the prefix and where the bitmap starts.
      prefix_ = std::string(id.substr(0, split));
      base_ = first;
      has_prefix_ = true;
    }
  }
  if (auto n = number(id)) {
    const std::size_t word = *n / 64;
    if (word >= bits_.size())
      bits_.resize(std::min(std::max(word + 1, bits_.size() * 2), kMaxNumbered / 64), 0);
    bits_[word] |= std::uint64_t{1} << (*n % 64);
    return;
  }
  others_.emplace(id);
}

std::optional<std::uint32_t> StreamDemandIds::add(std::string_view id) {
  if (seen_.contains(id)) return std::nullopt;
  if (count() >= kEnded) throw std::length_error("more than 2^32 - 1 demands");
  seen_.insert(id);
  const auto index = static_cast<std::uint32_t>(count());
  ids_.emplace_back(id);
  live_.emplace(ids_.back(), index);
  return index;
}

std::optional<std::uint32_t> StreamDemandIds::find(std::string_view id) const {
  if (auto it = live_.find(id); it != live_.end()) return it->second;
  if (seen_.contains(id)) return kEnded;
  return std::nullopt;
}

void StreamDemandIds::ended(std::uint32_t demand) {
  if (demand < base_ || demand - base_ >= ids_.size()) return;
  auto it = live_.find(ids_[demand - base_]);
  if (it != live_.end() && it->second == demand) live_.erase(it);
}

void StreamDemandIds::written(std::uint32_t demand) {
  while (base_ <= demand && !ids_.empty()) {
    ended(static_cast<std::uint32_t>(base_));  // A row written unended (a stopped run).
    ids_.pop_front();
    ++base_;
  }
}

}  // namespace dfl::format::detail
