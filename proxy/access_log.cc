// SPDX-License-Identifier: MIT
#include "proxy/access_log.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <climits>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <thread>
#include <utility>

#include "base/check.h"
#include "base/log.h"

namespace bulkhead::proxy {

namespace {

// The pipe between the loop and the writer thread: asked for this size (F_SETPIPE_SZ; the
// default 64 KiB when refused, e.g. over /proc/sys/fs/pipe-max-size for an unprivileged user).
constexpr int kPipeBytes = 1024 * 1024;
// The writer's reads from the pipe, and its writes to a stderr shared with bulkheadd's own lines:
// at most PIPE_BUF and cut after a newline, so that a line is not interleaved with another
// writer's when stderr is a pipe.
constexpr size_t kWriterChunk = size_t{64} * 1024;
constexpr size_t kAtomicWrite = PIPE_BUF;

void AppendNumber(std::string* out, uint64_t value) {
  char text[24];
  const int n = std::snprintf(text, sizeof text, "%" PRIu64, value);
  out->append(text, static_cast<size_t>(n));
}

// `us` as milliseconds with three decimals ("3.400").
void AppendMs(std::string* out, uint64_t us) {
  char text[32];
  const int n = std::snprintf(text, sizeof text, "%" PRIu64 ".%03" PRIu64, us / 1000, us % 1000);
  out->append(text, static_cast<size_t>(n));
}

Result<int> OpenDestination(const std::string& destination) {
  if (destination == "stderr") {
    const int fd = ::fcntl(STDERR_FILENO, F_DUPFD_CLOEXEC, 3);
    if (fd < 0) return Status::FromErrno("dup stderr");
    return fd;
  }
  const int fd = ::open(destination.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0640);
  if (fd < 0) return Status::FromErrno(destination);
  return fd;
}

}  // namespace

void AppendRequestFields(std::string* out, std::string_view client, std::string_view request_id,
                         std::string_view method, std::string_view target) {
  out->append(" client=");
  AppendLogfmtValue(out, client);
  out->append(" id=");
  AppendLogfmtValue(out, request_id);
  if (method.empty()) return;
  out->append(" method=");
  AppendLogfmtValue(out, method);
  out->append(" target=");
  AppendLogfmtValue(out, target);
}

void FormatAccessLine(const AccessRecord& record, std::string* out) {
  tm utc{};
  gmtime_r(&record.time.tv_sec, &utc);
  char stamp[40];
  const size_t n = std::strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%S", &utc);
  std::snprintf(stamp + n, sizeof stamp - n, ".%03ldZ", record.time.tv_nsec / 1000000);
  out->append(stamp);
  out->append(" cell=");
  AppendLogfmtValue(out, record.cell);
  out->append(record.request_fields);
  out->append(" outcome=");
  AppendLogfmtValue(out, record.outcome);
  out->append(" reason=");
  AppendLogfmtValue(out, record.reason);
  if (record.http_status != 0) {
    out->append(" status=");
    AppendNumber(out, static_cast<uint64_t>(record.http_status));
  }
  out->append(" wait_ms=");
  AppendMs(out, record.queue_wait_us);
  out->append(" worker_ms=");
  AppendMs(out, record.worker_us);
  out->append(" bytes_in=");
  AppendNumber(out, record.bytes_in);
  out->append(" bytes_out=");
  AppendNumber(out, record.bytes_out);
  out->append(" worker_pid=");
  AppendNumber(out, static_cast<uint64_t>(record.worker_pid > 0 ? record.worker_pid : 0));
  if (record.limit != 0) {
    out->append(" limit=");
    AppendNumber(out, record.limit);
  }
  out->push_back('\n');
}

// The writer thread: copies the pipe to the destination with blocking writes, until the pipe's
// write end closes. Reopen hands it a new destination descriptor under mutex_.
class AccessLog::Writer {
 public:
  Writer(int pipe_read, int destination, bool shared_stderr)
      : pipe_read_(pipe_read), destination_(destination), shared_stderr_(shared_stderr) {
    thread_ = std::thread([this] { Run(); });
  }
  ~Writer() {
    if (thread_.joinable()) thread_.join();
    ::close(pipe_read_);
    ::close(destination_);
  }
  Writer(const Writer&) = delete;
  Writer& operator=(const Writer&) = delete;

  // REQUIRES: the pipe's write end is closed (the thread then ends once it wrote everything).
  void Join() {
    if (thread_.joinable()) thread_.join();
  }

  void Replace(int destination) {
    const std::lock_guard<std::mutex> lock(mutex_);
    ::close(std::exchange(destination_, destination));
  }

 private:
  void Run() {
    std::string pending;
    char chunk[4096];
    for (;;) {
      const ssize_t n = ::read(pipe_read_, chunk, sizeof chunk);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;  // EOF: the loop closed the pipe
      pending.append(chunk, static_cast<size_t>(n));
      // Whole lines only, so that a line shared with stderr is written in one piece.
      const size_t last_newline = pending.rfind('\n');
      if (last_newline == std::string::npos && pending.size() < kWriterChunk) continue;
      const size_t whole = last_newline == std::string::npos ? pending.size() : last_newline + 1;
      WriteAll(std::string_view(pending).substr(0, whole));
      pending.erase(0, whole);
    }
    WriteAll(pending);
  }

  void WriteAll(std::string_view bytes) {
    const std::lock_guard<std::mutex> lock(mutex_);
    while (!bytes.empty()) {
      size_t size = bytes.size();
      if (shared_stderr_ && size > kAtomicWrite) {
        // Cut after the last newline within PIPE_BUF, when there is one.
        const size_t cut = bytes.substr(0, kAtomicWrite).rfind('\n');
        size = cut == std::string_view::npos ? kAtomicWrite : cut + 1;
      }
      const ssize_t n = ::write(destination_, bytes.data(), size);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return;  // a broken destination loses these lines; the next may pass
      bytes.remove_prefix(static_cast<size_t>(n));
    }
  }

  int pipe_read_;
  std::mutex mutex_;  // guards destination_
  int destination_;
  bool shared_stderr_;
  std::thread thread_;
};

Result<std::unique_ptr<AccessLog>> AccessLog::Open(uv_loop_t* loop, const std::string& destination,
                                                   size_t buffer_bytes) {
  Result<int> out = OpenDestination(destination);
  if (!out.ok()) return out.status();
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    ::close(*out);
    return Status::FromErrno("pipe");
  }
  ::fcntl(fds[1], F_SETPIPE_SZ, kPipeBytes);  // a smaller pipe serves too
  auto log = std::make_unique<AccessLog>(loop, fds[1], buffer_bytes);
  log->destination_ = destination;
  log->writer_ = std::make_unique<Writer>(fds[0], *out, destination == "stderr");
  return log;
}

AccessLog::AccessLog(uv_loop_t* loop, int out_fd, size_t buffer_bytes)
    : loop_(loop), out_fd_(out_fd) {
  const int flags = ::fcntl(out_fd_, F_GETFL);
  ::fcntl(out_fd_, F_SETFL, flags | O_NONBLOCK);
  buffer_.resize(buffer_bytes);
  line_.reserve(1024);
  prepare_ = handles_.Open(uv_prepare_init, loop_);
  prepare_->data = this;
  Result<uv_poll_t*> poll = handles_.TryOpen(uv_poll_init, loop_, out_fd_);
  BH_CHECK(poll.ok());  // a pipe or a socket: libuv polls it
  poll_ = *poll;
  poll_->data = this;
}

AccessLog::~AccessLog() {
  BH_CHECK(closed_);
  writer_.reset();
}

void AccessLog::Append(const AccessRecord& record) {
  if (closed_) {
    // A cell shutting down after the log closed.
    ++dropped_;
    return;
  }
  line_.clear();
  FormatAccessLine(record, &line_);
  if (buffer_.size() - end_ < line_.size() && head_ > 0) {
    // Room at the front: what waits moves there.
    std::memmove(buffer_.data(), buffer_.data() + head_, end_ - head_);
    end_ -= head_;
    head_ = 0;
  }
  if (buffer_.size() - end_ < line_.size()) {
    ++dropped_;
    return;
  }
  std::memcpy(buffer_.data() + end_, line_.data(), line_.size());
  end_ += line_.size();
  ++lines_;
  if (!flush_armed_ && !polling_) {
    flush_armed_ = true;
    uv_prepare_start(prepare_, &AccessLog::OnPrepare);
  }
}

void AccessLog::OnPrepare(uv_prepare_t* prepare) {
  auto* self = static_cast<AccessLog*>(prepare->data);
  uv_prepare_stop(prepare);
  self->flush_armed_ = false;
  self->Flush();
}

void AccessLog::OnWritable(uv_poll_t* poll, int status, int) {
  auto* self = static_cast<AccessLog*>(poll->data);
  if (status < 0) {
    // The pipe broke (the writer is gone): nothing more can be written; what waits is dropped.
    uv_poll_stop(poll);
    self->polling_ = false;
    self->head_ = self->end_ = 0;
    return;
  }
  self->Flush();
}

void AccessLog::Flush() {
  while (head_ < end_) {
    const ssize_t n = ::write(out_fd_, buffer_.data() + head_, end_ - head_);
    if (n > 0) {
      head_ += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (!polling_) {
        polling_ = true;
        uv_poll_start(poll_, UV_WRITABLE, &AccessLog::OnWritable);
      }
      return;
    }
    // Any other error (EPIPE): the bytes cannot go anywhere; counted lost as dropped would not be
    // exact (lines are cut), so they are discarded and the next lines try again.
    break;
  }
  head_ = end_ = 0;
  if (polling_) {
    polling_ = false;
    uv_poll_stop(poll_);
  }
}

Status AccessLog::Reopen() {
  if (writer_ == nullptr || destination_ == "stderr") return Status::Ok();
  Result<int> out = OpenDestination(destination_);
  if (!out.ok()) return out.status();
  writer_->Replace(*out);
  return Status::Ok();
}

void AccessLog::Close(std::function<void()> on_closed) {
  if (closed_) return;
  closed_ = true;
  Flush();
  handles_.Close([this, on_closed = std::move(on_closed)] {
    // The poll handle is closed: the pipe may close now; the writer writes what it holds and ends.
    ::close(out_fd_);
    out_fd_ = -1;
    if (writer_ != nullptr) writer_->Join();
    if (on_closed) on_closed();
  });
}

}  // namespace bulkhead::proxy
