// SPDX-License-Identifier: MIT
#include "lifecycle/worker_output.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <utility>
#include <vector>

#include "base/check.h"
#include "base/log.h"

namespace bulkhead::lifecycle {
namespace {

// The read buffer: one default pipe's capacity (pipe(7)).
constexpr size_t kReadBufferBytes = size_t{64} * 1024;

// The read buffer of every WorkerOutput of this thread, allocated at the first read (an idle cell
// whose worker never writes costs none of it; issue 25 section 8). One is enough: a read fills it
// and the same call (OnRead after OnAlloc, or Drain's loop) hands every byte read to the stream's
// LineSplitter, which copies what it keeps, before any other read can start, and nothing a line
// reaches (the log sinks) reads a worker's pipe.
char* SharedReadBuffer() {
  thread_local std::vector<char> buffer;
  if (buffer.empty()) buffer.resize(kReadBufferBytes);
  return buffer.data();
}

}  // namespace

struct WorkerOutput::Stream {
  Stream(WorkerOutput* owner, const char* name, pid_t pid)
      : owner(owner),
        name(name),
        pid(pid),
        splitter(owner->line_max_, [this](std::string_view line, bool truncated) {
          this->owner->OnLine(*this, line, truncated);
        }) {}

  uv_pipe_t* pipe = nullptr;  // a member of the owner's handles_
  WorkerOutput* owner;
  const char* name;  // "stdout" or "stderr", the stream= field
  pid_t pid;
  LineSplitter splitter;
};

WorkerOutput::WorkerOutput(uv_loop_t* loop, loop::TimeSource* time,
                           const config::CellConfig& config)
    : loop_(loop),
      time_(time),
      cell_(config.name),
      mode_(config.output),
      line_max_(config.log_line_max),
      limiter_(config.log_rate_limit_burst,
               static_cast<uint64_t>(config.log_rate_limit_interval.count())),
      interval_ms_(static_cast<uint64_t>(config.log_rate_limit_interval.count())),
      burst_(config.log_rate_limit_burst),
      suppression_timer_(time->CreateTimer([this] { OnSuppressionTimer(); })) {}

WorkerOutput::~WorkerOutput() = default;

Status WorkerOutput::Prepare(cell::SpawnOptions* options) {
  BH_CHECK(stdout_ == nullptr && stderr_ == nullptr && !handles_.closing());
  stdout_read_.Reset();
  stderr_read_.Reset();
  stdout_write_.Reset();
  stderr_write_.Reset();
  switch (mode_) {
    case config::OutputMode::kInherit:
      return Status::Ok();
    case config::OutputMode::kNull: {
      int null_fd = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
      if (null_fd < 0) return Status::FromErrno("open /dev/null for the worker's output");
      stdout_write_.Reset(null_fd);
      options->stdout_fd = options->stderr_fd = null_fd;
      return Status::Ok();
    }
    case config::OutputMode::kLog:
      break;
  }
  int out[2];
  int err[2];
  if (::pipe2(out, O_CLOEXEC) != 0) return Status::FromErrno("pipe2 for the worker's stdout");
  stdout_read_.Reset(out[0]);
  stdout_write_.Reset(out[1]);
  if (::pipe2(err, O_CLOEXEC) != 0) {
    Status failed = Status::FromErrno("pipe2 for the worker's stderr");
    stdout_read_.Reset();
    stdout_write_.Reset();
    return failed;
  }
  stderr_read_.Reset(err[0]);
  stderr_write_.Reset(err[1]);
  options->stdout_fd = stdout_write_.get();
  options->stderr_fd = stderr_write_.get();
  return Status::Ok();
}

void WorkerOutput::Spawned(pid_t pid) {
  // The child has its copies: with ours closed, EOF comes when the last writer is gone.
  stdout_write_.Reset();
  stderr_write_.Reset();
  if (pid <= 0 || !stdout_read_.valid()) {
    stdout_read_.Reset();
    stderr_read_.Reset();
    return;
  }
  stdout_ = Open(std::move(stdout_read_), "stdout", pid);
  stderr_ = Open(std::move(stderr_read_), "stderr", pid);
}

namespace {

int StreamFd(const uv_pipe_t* pipe) {
  uv_os_fd_t fd = -1;
  if (pipe == nullptr || uv_fileno(reinterpret_cast<const uv_handle_t*>(pipe), &fd) != 0) return -1;
  return fd;
}

}  // namespace

int WorkerOutput::stdout_fd() const { return stdout_ != nullptr ? StreamFd(stdout_->pipe) : -1; }
int WorkerOutput::stderr_fd() const { return stderr_ != nullptr ? StreamFd(stderr_->pipe) : -1; }

void WorkerOutput::Adopt(UniqueFd stdout_read, UniqueFd stderr_read, pid_t pid) {
  if (stdout_read) stdout_ = Open(std::move(stdout_read), "stdout", pid);
  if (stderr_read) stderr_ = Open(std::move(stderr_read), "stderr", pid);
}

WorkerOutput::Stream* WorkerOutput::Open(UniqueFd read_end, const char* name, pid_t pid) {
  auto* stream = new Stream(this, name, pid);
  stream->pipe = handles_.Open(uv_pipe_init, loop_, 0);
  stream->pipe->data = stream;
  // uv_pipe_open makes the descriptor non-blocking.
  int rc = uv_pipe_open(stream->pipe, read_end.get());
  if (rc == 0) {
    read_end.Release();
    rc = uv_read_start(reinterpret_cast<uv_stream_t*>(stream->pipe), &WorkerOutput::OnAlloc,
                       &WorkerOutput::OnRead);
  }
  if (rc != 0) {
    Log(LogLevel::kWarning, cell_, pid,
        std::string("worker ") + name + " not captured: " + uv_strerror(rc));
    CloseStream(stream);
    return nullptr;
  }
  return stream;
}

void WorkerOutput::CloseStream(Stream* stream) {
  if (stdout_ == stream) stdout_ = nullptr;
  if (stderr_ == stream) stderr_ = nullptr;
  // No callback of the pipe runs once it is closing (its reads stop with uv_close), so the stream
  // goes now; the pipe's memory goes with its close callback (handles_).
  handles_.Close(stream->pipe);
  delete stream;
}

void WorkerOutput::OnAlloc(uv_handle_t*, size_t, uv_buf_t* buf) {
  *buf = uv_buf_init(SharedReadBuffer(), kReadBufferBytes);
}

void WorkerOutput::OnRead(uv_stream_t* handle, ssize_t nread, const uv_buf_t* buf) {
  auto* stream = static_cast<Stream*>(handle->data);
  WorkerOutput* self = stream->owner;
  if (nread > 0) {
    stream->splitter.Feed(std::string_view(buf->base, static_cast<size_t>(nread)));
    return;
  }
  if (nread == 0) return;  // EAGAIN
  if (nread != UV_EOF) {
    Log(LogLevel::kWarning, self->cell_, stream->pid,
        std::string("reading worker ") + stream->name + ": " +
            uv_strerror(static_cast<int>(nread)));
  }
  // Every writer is gone (or the pipe broke): the last unterminated line, then close.
  stream->splitter.Finish();
  self->CloseStream(stream);
}

void WorkerOutput::Drain(Stream* stream) {
  int fd = -1;
  if (uv_fileno(reinterpret_cast<uv_handle_t*>(stream->pipe), &fd) == 0) {
    // Non-blocking: stops at an empty pipe even while a process it left behind holds a write end.
    size_t drained = 0;
    char* buffer = SharedReadBuffer();
    while (drained < kDrainMaxBytes) {
      ssize_t n = ::read(fd, buffer, kReadBufferBytes);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      drained += static_cast<size_t>(n);
      stream->splitter.Feed(std::string_view(buffer, static_cast<size_t>(n)));
    }
  }
  stream->splitter.Finish();
  CloseStream(stream);
}

void WorkerOutput::WorkerExited() {
  if (stdout_ != nullptr) Drain(stdout_);
  if (stderr_ != nullptr) Drain(stderr_);
}

void WorkerOutput::OnLine(const Stream& stream, std::string_view line, bool truncated) {
  LogLevel level = LogLevel::kInfo;
  if (std::optional<LogLevel> prefixed = StripPriorityPrefix(&line)) level = *prefixed;
  // Lines below the log level cost nothing and count against no limit.
  if (level < GetLogLevel()) return;
  LogRateLimiter::Decision decision = limiter_.Admit(time_->NowMs());
  if (decision.suppressed_before > 0) LogSuppressed(decision.suppressed_before, stream.pid);
  if (!decision.log) {
    last_pid_ = stream.pid;
    ArmSuppressionTimer();
    return;
  }
  LogField fields[2] = {{"stream", stream.name}, {"truncated", "true"}};
  Log(level, cell_, stream.pid, std::span<const LogField>(fields, truncated ? 2 : 1), line);
}

void WorkerOutput::LogSuppressed(uint64_t count, pid_t pid) {
  Log(LogLevel::kWarning, cell_, pid,
      "suppressed " + std::to_string(count) + " lines of worker output (more than " +
          std::to_string(burst_) + " lines in " + std::to_string(interval_ms_) +
          " ms: log_rate_limit_burst, log_rate_limit_interval)");
}

void WorkerOutput::ArmSuppressionTimer() {
  if (suppression_timer_->armed()) return;
  std::optional<uint64_t> ends_at = limiter_.SuppressionEndsAt();
  if (!ends_at) return;
  uint64_t now = time_->NowMs();
  suppression_timer_->Start(*ends_at > now ? *ends_at - now : 0);
}

void WorkerOutput::OnSuppressionTimer() {
  uint64_t dropped = limiter_.EndWindow(time_->NowMs());
  if (dropped > 0) LogSuppressed(dropped, last_pid_);
  // A window opened since the timer was armed may have dropped lines of its own.
  ArmSuppressionTimer();
}

void WorkerOutput::SetOptions(const config::CellConfig& config) {
  mode_ = config.output;
  line_max_ = config.log_line_max;
  const auto interval_ms = static_cast<uint64_t>(config.log_rate_limit_interval.count());
  if (config.log_rate_limit_burst == burst_ && interval_ms == interval_ms_) return;
  uint64_t dropped = limiter_.EndWindow(time_->NowMs(), /*force=*/true);
  if (dropped > 0) LogSuppressed(dropped, last_pid_);
  suppression_timer_->Stop();
  limiter_ = LogRateLimiter(config.log_rate_limit_burst, interval_ms);
  burst_ = config.log_rate_limit_burst;
  interval_ms_ = interval_ms;
}

void WorkerOutput::Close(std::function<void()> on_closed) {
  if (stdout_ != nullptr) Drain(stdout_);
  if (stderr_ != nullptr) Drain(stderr_);
  stdout_read_.Reset();
  stderr_read_.Reset();
  stdout_write_.Reset();
  stderr_write_.Reset();
  uint64_t dropped = limiter_.EndWindow(time_->NowMs(), /*force=*/true);
  if (dropped > 0) LogSuppressed(dropped, last_pid_);
  suppression_timer_->Stop();
  handles_.Close(std::move(on_closed));
}

}  // namespace bulkhead::lifecycle
