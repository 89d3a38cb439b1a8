// CsvRowWriter (result.h): a streamed run's rows as CSV, plain or gzip.
#include <zlib.h>

#include <charconv>
#include <cmath>
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>

#include "demandflight/format/result.h"

namespace dfl::format {
namespace {

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// One output file: text is gathered and written in large pieces.
class CsvFile {
 public:
  CsvFile(const std::string& path, std::string_view header) : path_(path) {
    // NAME.gz.partial is a NAME.gz being written (sim --stream renames it at the end).
    std::string_view name = path;
    if (ends_with(name, ".partial")) name.remove_suffix(std::string_view(".partial").size());
    if (ends_with(name, ".gz")) {
      gz_ = ::gzopen(path.c_str(), "wb1");  // Fast: rows come by the million.
      if (gz_ == nullptr) throw std::runtime_error("cannot write " + path);
    } else {
      file_ = std::fopen(path.c_str(), "wb");
      if (file_ == nullptr) throw std::runtime_error("cannot write " + path);
    }
    text_.reserve(kFlushAt + 4096);
    text_.append(header);
    text_.push_back('\n');
  }
  CsvFile(const CsvFile&) = delete;
  CsvFile& operator=(const CsvFile&) = delete;
  ~CsvFile() {
    if (gz_ != nullptr) ::gzclose(gz_);
    if (file_ != nullptr) std::fclose(file_);
  }

  CsvFile& field(std::string_view value) {  // RFC 4180 quoting where needed.
    comma();
    if (value.find_first_of(",\"\r\n") == std::string_view::npos) {
      text_.append(value);
      return *this;
    }
    text_.push_back('"');
    for (char c : value) {
      if (c == '"') text_.push_back('"');
      text_.push_back(c);
    }
    text_.push_back('"');
    return *this;
  }
  CsvFile& number(double value) {
    comma();
    if (!std::isfinite(value)) return *this;
    char buffer[32];
    const auto [end, error] = std::to_chars(buffer, buffer + sizeof buffer, value);
    text_.append(buffer, end);
    return *this;
  }
  template <typename Int>
    requires std::is_integral_v<Int>
  CsvFile& number(Int value) {
    comma();
    char buffer[24];
    const auto [end, error] = std::to_chars(buffer, buffer + sizeof buffer, value);
    text_.append(buffer, end);
    return *this;
  }
  CsvFile& null() {
    comma();
    return *this;
  }
  void end_row() {
    text_.push_back('\n');
    first_ = true;
    if (text_.size() >= kFlushAt) flush();
  }
  void close() {
    flush();
    int failed = 0;
    if (gz_ != nullptr) failed = ::gzclose(gz_) != Z_OK;
    if (file_ != nullptr) failed = std::fclose(file_) != 0;
    gz_ = nullptr;
    file_ = nullptr;
    if (failed) throw std::runtime_error("writing " + path_ + " failed");
  }

 private:
  void comma() {
    if (!first_) text_.push_back(',');
    first_ = false;
  }
  void flush() {
    if (text_.empty()) return;
    bool ok = true;
    if (gz_ != nullptr) {
      ok = ::gzwrite(gz_, text_.data(), static_cast<unsigned>(text_.size())) ==
           static_cast<int>(text_.size());
    } else if (file_ != nullptr) {
      ok = std::fwrite(text_.data(), 1, text_.size(), file_) == text_.size();
    }
    if (!ok) throw std::runtime_error("writing " + path_ + " failed");
    text_.clear();
  }

  static constexpr std::size_t kFlushAt = 1 << 20;
  std::string path_;
  gzFile gz_ = nullptr;
  std::FILE* file_ = nullptr;
  std::string text_;
  bool first_ = true;
};

}  // namespace

struct CsvRowWriter::Impl {
  std::unique_ptr<CsvFile> demands, tasks;
  const Trace& trace;
  std::string policy;
  std::uint64_t next_task = 0;
  std::string scratch;
};

CsvRowWriter::CsvRowWriter(const std::string& demands_path, const std::string& tasks_path,
                           const Trace& trace, std::string policy)
    : impl_(std::make_unique<Impl>(Impl{nullptr, nullptr, trace, std::move(policy), 0, {}})) {
  if (!demands_path.empty()) {
    impl_->demands = std::make_unique<CsvFile>(
        demands_path,
        "demand,owner,artifact,priority,t_subscribe,t_end,latency_s,outcome,task,served_by");
  }
  if (!tasks_path.empty()) {
    impl_->tasks = std::make_unique<CsvFile>(
        tasks_path,
        "task,artifact,t_start,t_first_start,t_received,t_end,outcome,attempts,bytes_transferred,"
        "installs,"
        "priority_timeline,orphan_decisions");
  }
}

CsvRowWriter::~CsvRowWriter() = default;

void CsvRowWriter::demand(const DemandResult& d, std::string_view demand_id) {
  if (!impl_->demands) return;
  CsvFile& f = *impl_->demands;
  f.field(demand_id).field(impl_->trace.owners[d.owner]).field(impl_->trace.artifacts[d.artifact].id);
  f.number(d.priority).number(d.t_subscribe);
  if (d.ended) {
    f.number(d.t_end).number(d.t_end - d.t_subscribe).field(to_string(d.outcome));
  } else {
    f.null().null().null();
  }
  if (d.task != 0) {
    f.number(d.task - 1);
  } else {
    f.null();
  }
  if (d.served_by != ServedBy::none) {
    f.field(to_string(d.served_by));
  } else {
    f.null();
  }
  f.end_row();
}

void CsvRowWriter::task(const TaskResult& t) {
  const std::uint64_t index = impl_->next_task++;
  if (!impl_->tasks) return;
  CsvFile& f = *impl_->tasks;
  f.number(index).field(impl_->trace.artifacts[t.artifact].id).number(t.t_start);
  for (const std::optional<double>& at : {t.t_first_start, t.t_received}) {
    if (at) {
      f.number(*at);
    } else {
      f.null();
    }
  }
  f.number(t.t_end).field(to_string(t.outcome)).number(t.attempts).number(t.bytes_transferred);
  f.number(t.installs);
  // The lists as JSON text, as in the result JSON.
  std::string& s = impl_->scratch;
  auto append = [&s](double v) {
    char buffer[32];
    const auto [end, error] = std::to_chars(buffer, buffer + sizeof buffer, v);
    s.append(buffer, end);
  };
  s = "[";
  for (const auto& [at, priority] : t.priority_timeline) {
    if (s.size() > 1) s += ',';
    s += '[';
    append(at);
    s += ',';
    s += priority ? std::to_string(*priority) : "null";
    s += ']';
  }
  s += ']';
  f.field(s);
  s = "[";
  for (const OrphanDecisionResult& o : t.orphan_decisions) {
    if (s.size() > 1) s += ',';
    s += "{\"t\":";
    append(o.t);
    s += ",\"decision\":\"";
    s += to_string(o.decision);
    s += "\",\"bytes_done\":" + std::to_string(o.bytes_done) + '}';
  }
  s += ']';
  f.field(s);
  f.end_row();
}

void CsvRowWriter::finish() {
  if (impl_->demands) impl_->demands->close();
  if (impl_->tasks) impl_->tasks->close();
}

void write_rows_csv(const Result& result, const Trace& trace, const std::string& demands_path,
                    const std::string& tasks_path) {
  if (demands_path.empty() && tasks_path.empty()) return;
  CsvRowWriter csv(demands_path, tasks_path, trace, result.policy);
  for (const DemandResult& d : result.demands)
    csv.demand(d, trace.demand_ids[d.demand]);
  for (const TaskResult& t : result.tasks)
    csv.task(t);
  csv.finish();
}

}  // namespace dfl::format
