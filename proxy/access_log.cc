// SPDX-License-Identifier: MIT
#include "proxy/access_log.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <climits>
#include <cstring>
#include <csignal>
#include <mutex>
#include <optional>
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

// Opens the destination so that a write that cannot go on now returns EAGAIN rather than waiting
// (the writer thread then polls, where a reopen or the close's grace still reach it): files and
// named pipes are opened O_NONBLOCK (a regular file ignores it). Stderr is bulkheadd's own: a
// pipe, named pipe or terminal is opened again through /proc/self/fd/2, a description of our own
// that can be made non-blocking without changing bulkheadd's stderr; a socket (journald's stream)
// is dup'd and sent to with MSG_DONTWAIT; a regular file is dup'd.
Result<int> OpenDestination(const std::string& destination) {
  if (destination == "stderr") {
    struct stat st {};
    if (::fstat(STDERR_FILENO, &st) == 0 && !S_ISREG(st.st_mode) && !S_ISSOCK(st.st_mode)) {
      const int fd = ::open("/proc/self/fd/2",
                            O_WRONLY | O_APPEND | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
      if (fd >= 0) return fd;
    }
    const int fd = ::fcntl(STDERR_FILENO, F_DUPFD_CLOEXEC, 3);
    if (fd < 0) return Status::FromErrno("dup stderr");
    return fd;
  }
  // O_NONBLOCK also keeps the loop from waiting in open(2): a named pipe with no reader would hold
  // it until one comes (fifo(7)); non-blocking, that open fails with ENXIO at once.
  const int fd = ::open(destination.c_str(),
                        O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NONBLOCK | O_NOCTTY, 0640);
  if (fd < 0) {
    if (errno == ENXIO) {
      return Status::Error(destination + ": a named pipe with no reader (start its reader first)");
    }
    return Status::FromErrno(destination);
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

// The writer thread: copies the pipe to the destination until the pipe's write end closes and
// what followed it (the tail Finish hands over) is written. The loop never waits for it: a new
// destination (Replace) and the close (Finish) reach it through atomics and the wake eventfd, and
// it says it ended by `on_done` (the loop's async handle). A destination that takes nothing (a
// pipe whose reader stopped reading) stalls this thread alone, in poll(2), where a wake still
// reaches it: a reopened destination takes the bytes it holds, and after Finish it gives up once
// the grace passed. What it cannot write (EPIPE: the reader left; the grace passed) is counted by
// line ends in lost().
class AccessLog::Writer {
 public:
  Writer(int pipe_read, int destination, bool shared_stderr, std::function<void()> on_done)
      : pipe_read_(pipe_read),
        wake_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)),
        destination_(destination),
        shared_stderr_(shared_stderr),
        on_done_(std::move(on_done)) {
    BH_CHECK(wake_ >= 0);
    socket_ = IsSocket(destination_);
    thread_ = std::thread([this] { Run(); });
  }
  ~Writer() {
    if (thread_.joinable()) thread_.join();
    ::close(pipe_read_);
    ::close(wake_);
    ::close(destination_);
    const int pending = pending_.exchange(-1);
    if (pending >= 0) ::close(pending);
  }
  Writer(const Writer&) = delete;
  Writer& operator=(const Writer&) = delete;

  // The thread ended (on_done ran, or is running): joins it at once.
  void Join() {
    if (thread_.joinable()) thread_.join();
  }

  // Hands `destination` (owned from here) to the thread, which switches to it before its next
  // write, a stalled one included. Never waits. A destination handed before and not taken yet is
  // closed unused.
  void Replace(int destination) {
    const int unused = pending_.exchange(destination);
    if (unused >= 0) ::close(unused);
    Wake();
  }

  // Called before the pipe's write end closes: `tail` (lines the pipe had no room for) is written
  // after what the pipe holds, and from now the destination gets at most `grace_ms` to take the
  // rest when it takes nothing.
  void Finish(std::string tail, uint64_t grace_ms) {
    {
      const std::lock_guard<std::mutex> lock(tail_mutex_);
      tail_ = std::move(tail);
    }
    grace_ms_.store(grace_ms);
    finishing_.store(true);
    Wake();
  }

  // Lines written into the pipe that never reached the destination.
  uint64_t lost() const { return lost_.load(std::memory_order_relaxed); }

 private:
  static bool IsSocket(int fd) {
    struct stat st {};
    return ::fstat(fd, &st) == 0 && S_ISSOCK(st.st_mode);
  }

  void Wake() {
    const uint64_t one = 1;
    [[maybe_unused]] const ssize_t n = ::write(wake_, &one, sizeof one);
  }

  // Reads the wake counter to zero, switches to a destination handed over, and starts the
  // grace's clock when Finish was called.
  void Woken() {
    uint64_t count;
    [[maybe_unused]] const ssize_t n = ::read(wake_, &count, sizeof count);
    const int next = pending_.exchange(-1);
    if (next >= 0) {
      ::close(std::exchange(destination_, next));
      socket_ = IsSocket(destination_);
    }
    if (finishing_.load() && !deadline_) {
      deadline_ = std::chrono::steady_clock::now() + std::chrono::milliseconds(grace_ms_.load());
    }
  }

  // Waits until `fd` is ready for `events` (or in error), or a wake came (handled by Woken), or
  // the grace after Finish is over (at once if it is already).
  enum class Waited { kReady, kWoken, kGraceOver };
  Waited Wait(int fd, short events) {
    int timeout = -1;
    if (deadline_) {
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(
          *deadline_ - std::chrono::steady_clock::now());
      if (left.count() <= 0) return Waited::kGraceOver;
      timeout = static_cast<int>(std::min<int64_t>(left.count(), INT_MAX));
    }
    pollfd fds[2] = {{fd, events, 0}, {wake_, POLLIN, 0}};
    const int n = ::poll(fds, 2, timeout);
    if (n > 0 && (fds[1].revents & POLLIN) != 0) Woken();
    if (n > 0 && fds[0].revents != 0) return Waited::kReady;  // POLLERR, POLLHUP too
    return Waited::kWoken;  // or EINTR, or the poll's timeout: the caller looks again
  }

  // Reads up to kWriterChunk bytes at a time into one buffer and writes the whole lines it holds
  // with one write (a line cut by the read waits at the front for the rest); a chunk with no
  // newline at all is written as it is.
  void Run() {
    // Signals are the loop thread's (SIGPIPE included: a reader that left is EPIPE here).
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, nullptr);
    std::string chunk(kWriterChunk, '\0');
    size_t held = 0;  // chunk[0, held): read and not written yet
    for (;;) {
      // After the grace the pipe's write end is closed: the read cannot wait.
      if (Wait(pipe_read_, POLLIN) == Waited::kWoken) continue;
      const ssize_t n = ::read(pipe_read_, chunk.data() + held, chunk.size() - held);
      if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
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
    std::string tail;
    {
      const std::lock_guard<std::mutex> lock(tail_mutex_);
      tail.swap(tail_);
    }
    WriteAll(tail);
    on_done_();
  }

  void WriteAll(std::string_view bytes) {
    if (pending_.load() >= 0) Woken();  // a reopen is in: what follows goes to the new file
    while (!bytes.empty()) {
      size_t size = bytes.size();
      if (shared_stderr_ && size > kAtomicWrite) {
        // Cut after the last newline within PIPE_BUF, when there is one.
        const size_t cut = bytes.substr(0, kAtomicWrite).rfind('\n');
        size = cut == std::string_view::npos ? kAtomicWrite : cut + 1;
      }
      // A socket (journald's stdout stream) shares its file description with bulkheadd's own
      // stderr, so it is not made non-blocking: each send is.
      const ssize_t n = socket_ ? ::send(destination_, bytes.data(), size,
                                         MSG_DONTWAIT | MSG_NOSIGNAL)
                                : ::write(destination_, bytes.data(), size);
      if (n > 0) {
        bytes.remove_prefix(static_cast<size_t>(n));
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) &&
          Wait(destination_, POLLOUT) != Waited::kGraceOver) {
        continue;
      }
      // EPIPE (the reader left), another error, or the grace over: these lines are lost; the
      // next ones try again.
      lost_.fetch_add(static_cast<uint64_t>(std::count(bytes.begin(), bytes.end(), '\n')),
                      std::memory_order_relaxed);
      return;
    }
  }

  int pipe_read_;
  int wake_;                      // eventfd: Replace and Finish
  int destination_;               // the writer thread's alone
  bool socket_ = false;           // destination_ is a socket: send(MSG_DONTWAIT)
  bool shared_stderr_;
  std::atomic<int> pending_{-1};  // a destination handed over, not taken yet
  std::atomic<bool> finishing_{false};
  std::atomic<uint64_t> grace_ms_{0};
  std::optional<std::chrono::steady_clock::time_point> deadline_;  // set once finishing is seen
  std::mutex tail_mutex_;         // guards tail_ (the loop sets it, the thread takes it at EOF)
  std::string tail_;
  std::atomic<uint64_t> lost_{0};
  std::function<void()> on_done_;
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
  uv_async_t* done = log->handles_.Open(uv_async_init, loop, &AccessLog::OnWriterDone);
  done->data = log.get();
  log->done_ = done;
  log->writer_ = std::make_unique<Writer>(fds[0], *out, destination == "stderr",
                                          [done] { uv_async_send(done); });
  return log;
}

AccessLog::AccessLog(uv_loop_t* loop, loop::TimeSource* time, int out_fd, size_t buffer_bytes)
    : loop_(loop),
      time_(time),
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
  ++lines_;  // every line made; the dropped ones are counted among them too
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
    WarnOfDrops(/*closing=*/false);
    return;
  }
  std::memcpy(buffer_.data() + end_, line_.data(), line_.size());
  end_ += line_.size();
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

void AccessLog::WarnOfDrops(bool closing) {
  const uint64_t dropped_now = dropped();
  if (dropped_now == dropped_told_) return;
  const uint64_t now = time_->NowMs();
  if (!closing && drop_warning_at_ms_ != 0 && now - drop_warning_at_ms_ < kDropWarningMs) return;
  LogWarning("access log: " + std::to_string(dropped_now - dropped_told_) + " lines dropped (" +
             std::to_string(dropped_now) + " of " + std::to_string(lines_) +
             " since bulkheadd started): " + destination_ +
             " does not keep up, or its reader left (bulkhead_access_log_dropped_total)");
  dropped_told_ = dropped_now;
  drop_warning_at_ms_ = std::max<uint64_t>(now, 1);
}

void AccessLog::Flush() {
  WarnOfDrops(/*closing=*/false);  // the writer thread's, counted since the last flush
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

void AccessLog::Close(std::function<void()> on_closed, uint64_t grace_ms) {
  if (state_ == State::kClosed) return;
  Flush();  // what the pipe takes now; the rest is the tail
  std::string tail(buffer_.data() + head_, end_ - head_);
  head_ = end_ = 0;
  Enter(State::kClosed);  // the poll stopped: the pipe may close
  flush_timer_.reset();
  if (writer_ == nullptr) {
    dropped_ += static_cast<uint64_t>(std::count(tail.begin(), tail.end(), '\n'));
    WarnOfDrops(/*closing=*/true);
    ::close(std::exchange(out_fd_, -1));
    handles_.Close(std::move(on_closed));
    return;
  }
  // The tail first, then the pipe's end: the thread writes it after what the pipe holds, and
  // says it ended through the async handle (OnWriterDone), which closes the handles.
  writer_->Finish(std::move(tail), grace_ms);
  ::close(std::exchange(out_fd_, -1));
  on_closed_ = std::move(on_closed);
  if (writer_ended_early_) OnWriterDone(done_);  // its async came and went before Close
}

void AccessLog::OnWriterDone(uv_async_t* async) {
  auto* self = static_cast<AccessLog*>(async->data);
  // The thread ends at the pipe's EOF, i.e. after Close; before it only if a read of the pipe
  // failed, which Close then finishes.
  if (self->state_ != State::kClosed) {
    self->writer_ended_early_ = true;
    return;
  }
  self->writer_->Join();
  self->WarnOfDrops(/*closing=*/true);  // what the shutdown's grace cost, before the exit
  self->handles_.Close(std::move(self->on_closed_));
}

uint64_t AccessLog::dropped() const {
  return dropped_ + (writer_ != nullptr ? writer_->lost() : 0);
}

}  // namespace bulkhead::proxy
