// CsvRowWriter (result.h): a streamed run's rows as CSV, plain or gzip.
#include <zlib.h>

#include <charconv>
#include <cmath>
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "demandflight/format/result.h"
#include "demandflight/format/result_rows.h"

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

  // The text a row is appended to (CsvRows), then end_row().
  std::string& text() { return text_; }
  void end_row() {
    text_.push_back('\n');
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
};

}  // namespace

struct CsvRowWriter::Impl {
  std::unique_ptr<CsvFile> demands, tasks;
  const Trace& trace;
  std::string policy;
  std::uint64_t next_task = 0;
  std::vector<OrphanDecisionFields> decisions;  // A task row's, reused.
};

CsvRowWriter::CsvRowWriter(const std::string& demands_path, const std::string& tasks_path,
                           const Trace& trace, std::string policy)
    : impl_(std::make_unique<Impl>(Impl{nullptr, nullptr, trace, std::move(policy), 0, {}})) {
  if (!demands_path.empty()) {
    impl_->demands = std::make_unique<CsvFile>(
        demands_path,
        CsvRows::kDemandColumns);
  }
  if (!tasks_path.empty()) {
    impl_->tasks = std::make_unique<CsvFile>(
        tasks_path,
        CsvRows::kTaskColumns);
  }
}

CsvRowWriter::~CsvRowWriter() = default;

void CsvRowWriter::demand(const DemandResult& d, std::string_view demand_id) {
  if (!impl_->demands) return;
  DemandRowFields row;
  row.demand = demand_id;
  row.owner = impl_->trace.owners[d.owner];
  row.artifact = impl_->trace.artifacts[d.artifact].id;
  row.priority = d.priority;
  row.t_subscribe = d.t_subscribe;
  if (d.ended) {
    row.t_end = d.t_end;
    row.latency_s = d.t_end - d.t_subscribe;
    row.outcome = to_string(d.outcome);
  }
  if (d.task != 0) row.task = d.task - 1;
  if (d.served_by != ServedBy::none) row.served_by = to_string(d.served_by);
  CsvRows::append(impl_->demands->text(), row);
  impl_->demands->end_row();
}

void CsvRowWriter::task(const TaskResult& t) {
  const std::uint64_t index = impl_->next_task++;
  if (!impl_->tasks) return;
  std::vector<OrphanDecisionFields>& decisions = impl_->decisions;
  decisions.clear();
  for (const OrphanDecisionResult& o : t.orphan_decisions)
    decisions.push_back(OrphanDecisionFields{o.t, o.decision, o.bytes_done});
  TaskRowFields row;
  row.task = index;
  row.artifact = impl_->trace.artifacts[t.artifact].id;
  row.t_start = t.t_start;
  row.t_first_start = t.t_first_start;
  row.t_received = t.t_received;
  row.t_end = t.t_end;
  row.outcome = to_string(t.outcome);
  row.attempts = t.attempts;
  row.bytes_transferred = t.bytes_transferred;
  row.installs = t.installs;
  row.priority_timeline = t.priority_timeline;
  row.orphan_decisions = decisions;
  CsvRows::append(impl_->tasks->text(), row);
  impl_->tasks->end_row();
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
