// SPDX-License-Identifier: MIT
#include "proxy/access_log.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <climits>
#include <cstring>
#include <mutex>
#include <string_view>
#include <thread>
#include <utility>

#include "base/check.h"
#include "base/log.h"

namespace bulkhead::proxy {

namespace {

// The pipe between the loop and the writer thread: asked for this size (F_SETPIPE_SZ; the
// default 64 KiB when refused, e.g. over /proc/sys/fs/pipe-max-size for an unprivileged user).
constexpr int kPipeBytes = 1024 * 1024;
// The writer's reads from the pipe: up to this much at once (the loop writes up to its buffer's
// whole content at once, ~32 KiB when busy), each written to a file with one write.
constexpr size_t kWriterChunk = size_t{64} * 1024;
// Its writes to a stderr shared with bulkheadd's own lines: at most PIPE_BUF and cut after a
// newline, so that a line is not interleaved with another writer's when stderr is a pipe.
constexpr size_t kAtomicWrite = PIPE_BUF;

// Numbers with std::to_chars, not printf: formatting was most of a line's cost.
void AppendNumber(std::string* out, uint64_t value) {
  char text[24];
  const std::to_chars_result end = std::to_chars(text, text + sizeof text, value);
  out->append(text, end.ptr);
}

// `value` (below 10^width) as exactly `width` digits, zeros in front.
void AppendDigits(std::string* out, uint64_t value, int width) {
  char text[8];
  for (int i = width - 1; i >= 0; --i) {
    text[i] = static_cast<char>('0' + value % 10);
    value /= 10;
  }
  out->append(text, static_cast<size_t>(width));
}

// `us` as milliseconds with three decimals ("3.400").
void AppendMs(std::string* out, uint64_t us) {
  AppendNumber(out, us / 1000);
  out->push_back('.');
  AppendDigits(out, us % 1000, 3);
}

// `time` as RFC 3339 UTC with milliseconds ("2026-12-04T00:31:07.123Z"); the civil date by
// std::chrono's calendar arithmetic, with no time zone lookup or lock (gmtime_r takes one).
void AppendUtcTime(std::string* out, const timespec& time) {
  using std::chrono::days;
  const std::chrono::sys_seconds at{std::chrono::seconds(time.tv_sec)};
  const std::chrono::sys_days day = std::chrono::floor<days>(at);
  const std::chrono::year_month_day date{day};
  const auto in_day = static_cast<uint64_t>((at - day).count());
  AppendDigits(out, static_cast<uint64_t>(static_cast<int>(date.year())), 4);
  out->push_back('-');
  AppendDigits(out, static_cast<unsigned>(date.month()), 2);
  out->push_back('-');
  AppendDigits(out, static_cast<unsigned>(date.day()), 2);
  out->push_back('T');
  AppendDigits(out, in_day / 3600, 2);
  out->push_back(':');
  AppendDigits(out, in_day / 60 % 60, 2);
  out->push_back(':');
  AppendDigits(out, in_day % 60, 2);
  out->push_back('.');
  AppendDigits(out, static_cast<uint64_t>(time.tv_nsec) / 1000000, 3);
  out->push_back('Z');
}

Result<int> OpenDestination(const std::string& destination) {
  if (destination == "stderr") {
    const int fd = ::fcntl(STDERR_FILENO, F_DUPFD_CLOEXEC, 3);
    if (fd < 0) return Status::FromErrno("dup stderr");
    return fd;
  }
  // O_NONBLOCK so that the loop never waits in open(2): a named pipe with no reader would hold
  // it until one comes (fifo(7)); non-blocking, that open fails with ENXIO at once. The writer
  // thread then writes blocking (a slow reader stalls that thread, never the loop).
  const int fd = ::open(destination.c_str(),
                        O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NONBLOCK | O_NOCTTY, 0640);
  if (fd < 0) {
    if (errno == ENXIO) {
      return Status::Error(destination + ": a named pipe with no reader (start its reader first)");
    }
    return Status::FromErrno(destination);
  }
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0) {
    Status status = Status::FromErrno(destination + ": fcntl");
    ::close(fd);
    return status;
  }
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
  AppendUtcTime(out, record.time);
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
  // Reads up to kWriterChunk bytes at a time into one buffer and writes the whole lines it holds
  // with one write (a line cut by the read waits at the front for the rest); a chunk with no
  // newline at all is written as it is.
  void Run() {
    std::string chunk(kWriterChunk, '\0');
    size_t held = 0;  // chunk[0, held): read and not written yet
    for (;;) {
      const ssize_t n = ::read(pipe_read_, chunk.data() + held, chunk.size() - held);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;  // EOF: the loop closed the pipe
      held += static_cast<size_t>(n);
      const size_t last_newline = std::string_view(chunk.data(), held).rfind('\n');
      size_t whole = last_newline == std::string_view::npos ? 0 : last_newline + 1;
      if (whole == 0 && held == chunk.size()) whole = held;
      if (whole == 0) continue;
      WriteAll(std::string_view(chunk.data(), whole));
      std::memmove(chunk.data(), chunk.data() + whole, held - whole);
      held -= whole;
    }
    WriteAll(std::string_view(chunk.data(), held));
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

Result<std::unique_ptr<AccessLog>> AccessLog::Open(uv_loop_t* loop, loop::TimeSource* time,
                                                   const std::string& destination,
                                                   size_t buffer_bytes) {
  Result<int> out = OpenDestination(destination);
  if (!out.ok()) return out.status();
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    ::close(*out);
    return Status::FromErrno("pipe");
  }
  ::fcntl(fds[1], F_SETPIPE_SZ, kPipeBytes);  // a smaller pipe serves too
  auto log = std::make_unique<AccessLog>(loop, time, fds[1], buffer_bytes);
  log->destination_ = destination;
  log->writer_ = std::make_unique<Writer>(fds[0], *out, destination == "stderr");
  return log;
}

AccessLog::AccessLog(uv_loop_t* loop, loop::TimeSource* time, int out_fd, size_t buffer_bytes)
    : loop_(loop),
      out_fd_(out_fd),
      flush_bytes_(std::max(size_t{1}, std::min(kFlushBytes, buffer_bytes / 2))) {
  const int flags = ::fcntl(out_fd_, F_GETFL);
  ::fcntl(out_fd_, F_SETFL, flags | O_NONBLOCK);
  buffer_.resize(buffer_bytes);
  line_.reserve(1024);
  flush_timer_ = time->CreateTimer([this] { Flush(); });
  Result<uv_poll_t*> poll = handles_.TryOpen(uv_poll_init, loop_, out_fd_);
  BH_CHECK(poll.ok());  // a pipe or a socket: libuv polls it
  poll_ = *poll;
  poll_->data = this;
}

AccessLog::~AccessLog() {
  BH_CHECK(state_ == State::kClosed);
  writer_.reset();
}

void AccessLog::Append(const AccessRecord& record) {
  if (state_ == State::kClosed) {
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
  if (state_ == State::kBlocked) return;  // the poll writes it when the pipe has room
  if (buffered() >= flush_bytes_) {
    Flush();
  } else if (state_ == State::kEmpty) {
    Enter(State::kWaiting);
  }
}

void AccessLog::Enter(State next) {
  if (next == state_) return;
  // The flush timer runs exactly while lines wait below the threshold, its deadline set on entry;
  // the poll exactly while the pipe is full.
  if (state_ == State::kWaiting) flush_timer_->Stop();
  if (state_ == State::kBlocked) uv_poll_stop(poll_);
  if (next == State::kWaiting) flush_timer_->Start(kFlushDelayMs);
  if (next == State::kBlocked) uv_poll_start(poll_, UV_WRITABLE, &AccessLog::OnWritable);
  state_ = next;
}

void AccessLog::OnWritable(uv_poll_t* poll, int status, int) {
  auto* self = static_cast<AccessLog*>(poll->data);
  if (status < 0) {
    // The pipe broke (the writer is gone): nothing more can be written; what waits is dropped.
    self->head_ = self->end_ = 0;
    self->Enter(State::kEmpty);
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
      Enter(State::kBlocked);
      return;
    }
    // Any other error (EPIPE): the bytes cannot go anywhere; counted lost as dropped would not be
    // exact (lines are cut), so they are discarded and the next lines try again.
    break;
  }
  head_ = end_ = 0;
  Enter(State::kEmpty);
}

Status AccessLog::Reopen() {
  if (state_ == State::kClosed) return Status::Ok();
  // What was logged before the reload goes into the pipe first (it may still land in either
  // file: the writer thread may not have read it yet).
  Flush();
  if (writer_ == nullptr || destination_ == "stderr") return Status::Ok();
  Result<int> out = OpenDestination(destination_);
  if (!out.ok()) return out.status();
  writer_->Replace(*out);
  return Status::Ok();
}

void AccessLog::Close(std::function<void()> on_closed) {
  if (state_ == State::kClosed) return;
  Flush();
  if (state_ == State::kBlocked && writer_ != nullptr) {
    // The pipe is full and shutdown waits for the writer thread anyway (below): the rest goes
    // into the pipe as the thread drains it, rather than being lost after it was counted.
    const int flags = ::fcntl(out_fd_, F_GETFL);
    ::fcntl(out_fd_, F_SETFL, flags & ~O_NONBLOCK);
    Flush();
  }
  Enter(State::kClosed);
  flush_timer_.reset();
  handles_.Close([this, on_closed = std::move(on_closed)] {
    // The poll handle is closed: the pipe may close now; the writer writes what it holds and ends.
    ::close(out_fd_);
    out_fd_ = -1;
    if (writer_ != nullptr) writer_->Join();
    if (on_closed) on_closed();
  });
}

}  // namespace bulkhead::proxy
