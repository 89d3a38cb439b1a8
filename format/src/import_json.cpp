#include "import_json.h"

#include <optional>

#include "demandflight/format/trace.h"

namespace dfl::format::import_detail {
namespace {

// An input iterator over a stream that counts the newlines it has passed.
class CountingIterator {
 public:
  using iterator_category = std::input_iterator_tag;
  using value_type = char;
  using difference_type = std::ptrdiff_t;
  using pointer = const char*;
  using reference = char;

  CountingIterator() = default;
  CountingIterator(std::istream& in, std::size_t* lines) : it_(in), lines_(lines) {}
  char operator*() const { return *it_; }
  CountingIterator& operator++() {
    if (*it_ == '\n') ++*lines_;
    ++it_;
    return *this;
  }
  bool operator==(const CountingIterator& o) const { return it_ == o.it_; }
  bool operator!=(const CountingIterator& o) const { return it_ != o.it_; }

 private:
  std::istreambuf_iterator<char> it_;
  std::size_t* lines_ = nullptr;
};

// nlohmann's text without its "[json.exception.KIND.N] " tag and its "parse
// error at line L, column C: " (the line is ours, counted above).
std::string plain_message(const std::exception& e) {
  std::string message = e.what();
  if (message.rfind("[json.exception.", 0) == 0) {
    if (const std::size_t tag = message.find("] "); tag != std::string::npos) {
      message = message.substr(tag + 2);
    }
  }
  if (message.rfind("parse error", 0) == 0) {
    if (const std::size_t colon = message.find(": "); colon != std::string::npos) {
      message = message.substr(colon + 2);
    }
  }
  return message;
}

class Handler : public nlohmann::json_sax<json> {
 public:
  Handler(const std::string& file, const std::vector<std::vector<std::string>>& targets,
          const std::function<void(std::size_t, json&&, std::size_t)>& each,
          const std::size_t* newlines)
      : file_(file), targets_(targets), each_(each), newlines_(newlines) {}

  bool null() override { return value(json(nullptr)); }
  bool boolean(bool v) override { return value(json(v)); }
  bool number_integer(number_integer_t v) override { return value(json(v)); }
  bool number_unsigned(number_unsigned_t v) override { return value(json(v)); }
  bool number_float(number_float_t v, const string_t&) override { return value(json(v)); }
  bool string(string_t& v) override { return value(json(std::move(v))); }
  bool binary(binary_t&) override { return value(json(nullptr)); }

  bool start_object(std::size_t) override {
    if (begin_element()) {
      building_.push_back(place(json::object()));
      return true;
    }
    if (!building_.empty()) {
      building_.push_back(place(json::object()));
      return true;
    }
    frames_.push_back(Frame{false, {}, std::nullopt});
    return true;
  }
  bool key(string_t& k) override {
    if (!building_.empty()) {
      key_ = k;
    } else {
      frames_.back().key = k;
    }
    return true;
  }
  bool end_object() override { return end_container(); }

  bool start_array(std::size_t) override {
    if (begin_element() || !building_.empty()) {
      building_.push_back(place(json::array()));
      return true;
    }
    frames_.push_back(Frame{true, {}, target_here()});
    return true;
  }
  bool end_array() override { return end_container(); }

  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) override {
    throw TraceError(file_, *newlines_ + 1, "-", "not valid JSON: " + plain_message(e));
  }

 private:
  struct Frame {
    bool array;
    std::string key;                    // An object's current key.
    std::optional<std::size_t> target;  // An array that is one of the targets.
  };

  // Whether a value starting now is an element of a target array (and starts one).
  bool begin_element() {
    if (!building_.empty() || frames_.empty() || !frames_.back().target) return false;
    element_line_ = *newlines_ + 1;
    target_ = *frames_.back().target;
    root_ = json();
    return true;
  }

  std::optional<std::size_t> target_here() const {
    std::vector<std::string> path;
    for (const Frame& f : frames_) {
      if (f.array) return std::nullopt;  // Targets sit under objects only.
      path.push_back(f.key);
    }
    for (std::size_t i = 0; i < targets_.size(); ++i) {
      if (targets_[i] == path) return i;
    }
    return std::nullopt;
  }

  // Puts a new value in the element being built; returns where it is.
  json* place(json v) {
    if (building_.empty()) {
      root_ = std::move(v);
      return &root_;
    }
    json& parent = *building_.back();
    if (parent.is_array()) {
      parent.push_back(std::move(v));
      return &parent.back();
    }
    json& slot = parent[key_];
    slot = std::move(v);
    return &slot;
  }

  bool value(json v) {
    if (begin_element()) {
      each_(target_, std::move(v), element_line_);
      return true;
    }
    if (!building_.empty()) place(std::move(v));
    return true;
  }

  bool end_container() {
    if (!building_.empty()) {
      building_.pop_back();
      if (building_.empty()) each_(target_, std::move(root_), element_line_);
      return true;
    }
    frames_.pop_back();
    return true;
  }

  const std::string& file_;
  const std::vector<std::vector<std::string>>& targets_;
  const std::function<void(std::size_t, json&&, std::size_t)>& each_;
  const std::size_t* newlines_;
  std::vector<Frame> frames_;
  std::vector<json*> building_;
  json root_;
  std::string key_;
  std::size_t target_ = 0, element_line_ = 0;
};

}  // namespace

void stream_json_arrays(std::istream& in, const std::string& file,
                        const std::vector<std::vector<std::string>>& targets,
                        const std::function<void(std::size_t, json&&, std::size_t)>& each) {
  std::size_t newlines = 0;
  Handler handler(file, targets, each, &newlines);
  try {
    json::sax_parse(CountingIterator(in, &newlines), CountingIterator(), &handler);
  } catch (const nlohmann::json::exception& e) {
    // A number out of a double's range, and the like.
    throw TraceError(file, newlines + 1, "-", "not valid JSON: " + plain_message(e));
  }
}

std::string element_path(const std::string& array_path, std::size_t index,
                         const std::string& field) {
  std::string out = array_path + "[" + std::to_string(index) + "]";
  if (!field.empty()) out += "." + field;
  return out;
}

}  // namespace dfl::format::import_detail
