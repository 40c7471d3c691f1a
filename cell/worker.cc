// SPDX-License-Identifier: MIT
// Worker SDK: the accept loop runs on the calling thread; each connection on a detached thread
// that owns its socket and decoder. A multiplexed connection's thread only reads: its requests
// run on a pool of handler threads of that connection, which write the replies. The handler is
// shared, read-only, by all threads.
#include "cell/worker.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <charconv>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <system_error>
#include <thread>

#include "base/unique_fd.h"
#include "cell/process.h"
#include "ipc/frame.h"
#include "ipc/io.h"

namespace bulkhead::cell {
namespace {

// Pause after accept(2) runs out of descriptors or memory, before trying again.
constexpr int kAcceptBackoffMs = 100;

// Set by ServeConnection around each Handler call on its thread (CurrentRequest).
thread_local std::optional<RequestContext> t_current_request;

class MuxConnection;
// Set around each Handler call on a multiplexed connection's handler thread
// (WriteToCurrentConnection).
thread_local MuxConnection* t_current_mux = nullptr;
// Held by a handler thread from its handler's first WriteToCurrentConnection until the handler
// returns: nothing else is written to the connection in between.
thread_local std::unique_lock<std::mutex> t_raw_write_lock;

std::optional<std::string> TakeEnv(const char* name) {
  const char* value = std::getenv(name);
  std::optional<std::string> copy;
  if (value != nullptr) copy = value;
  ::unsetenv(name);
  return copy;
}

std::optional<long> ParsePositive(const std::string& text) {
  long value = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (ec != std::errc() || ptr != end || value <= 0) return std::nullopt;
  return value;
}

void PrintError(const std::string& message) {
  std::fprintf(stderr, "%s: %s\n", program_invocation_short_name, message.c_str());
}

HandlerResult Invoke(const Handler& handler, std::string_view payload, uint32_t max_payload) {
  HandlerResult result;
  try {
    result = handler(payload);
  } catch (const std::exception& e) {
    result = HandlerResult::Error(std::string("handler threw: ") + e.what());
  } catch (...) {
    result = HandlerResult::Error("handler threw a non-std::exception");
  }
  if (result.payload.size() > max_payload) {
    result = HandlerResult::Error("reply of " + std::to_string(result.payload.size()) +
                                  " bytes exceeds the maximum of " + std::to_string(max_payload));
  }
  return result;
}

ipc::FrameHeader ReplyHeaderFor(uint64_t request_id, bool ok) {
  ipc::FrameHeader reply;
  reply.type = ipc::FrameType::kReply;
  reply.status = ok ? ipc::ReplyStatus::kOk : ipc::ReplyStatus::kFailed;
  reply.reason = ok ? ipc::Reason::kNone : ipc::Reason::kWorkerError;
  reply.request_id = request_id;
  return reply;
}

// Runs on its own thread until the peer closes, sends malformed bytes, or a write fails.
// `handler` by value: each connection thread shares ownership of the handler for its whole life.
// NOLINTNEXTLINE(performance-unnecessary-value-param): that shared ownership is the point.
void ServeConnection(UniqueFd connection, std::shared_ptr<const Handler> handler,
                     uint32_t max_payload) {
  ipc::FrameDecoder decoder(ipc::FrameType::kRequest, max_payload);
  while (true) {
    ipc::FrameView frame;
    ipc::DecodeResult decoded = decoder.Next(&frame);
    if (decoded == ipc::DecodeResult::kFrame) {
      // frame.payload points into the decoder: answer before reading more.
      t_current_request = RequestContext{connection.get(), frame.header.request_id};
      HandlerResult result = Invoke(*handler, frame.payload, max_payload);
      t_current_request.reset();
      ipc::FrameHeader reply = ReplyHeaderFor(frame.header.request_id, result.ok);
      if (!ipc::WriteFrame(connection.get(), reply, result.payload).ok()) return;
      continue;
    }
    if (decoded == ipc::DecodeResult::kError) {
      PrintError("closing connection: " + decoder.error_message());
      return;
    }
    Result<size_t> received = ipc::ReadOnce(connection.get(), &decoder);
    if (!received.ok() || *received == 0) return;
  }
}

// One multiplexed connection (docs/protocol.md, "Multiplexed worker connections"), shared by its
// reader thread and its handler threads; the last of them to finish closes the socket.
class MuxConnection {
 public:
  MuxConnection(UniqueFd fd, std::shared_ptr<const Handler> handler, uint32_t max_payload)
      : fd_(std::move(fd)), handler_(std::move(handler)), max_payload_(max_payload) {}

  // The reader: runs on the connection's own thread until the peer closes, sends malformed bytes
  // or a frame over max_payload; then the handler threads finish the requests already read and
  // end.
  static void Read(const std::shared_ptr<MuxConnection>& self) {
    ipc::FrameDecoder decoder(ipc::FrameType::kRequest, self->max_payload_);
    while (true) {
      ipc::FrameView frame;
      ipc::DecodeResult decoded = decoder.Next(&frame);
      if (decoded == ipc::DecodeResult::kFrame) {
        self->Queue(self, frame.header.request_id, frame.payload);
        continue;
      }
      if (decoded == ipc::DecodeResult::kError) {
        PrintError("closing connection: " + decoder.error_message());
        break;
      }
      Result<size_t> received = ipc::ReadOnce(self->fd_.get(), &decoder);
      if (!received.ok() || *received == 0) break;
    }
    // No more requests will come: the supervisor reads the replies to those in progress, or the
    // connection is gone and their writes fail.
    std::lock_guard lock(self->mu_);
    self->reading_ = false;
    self->work_.notify_all();
  }

 private:
  struct Job {
    uint64_t request_id;
    std::string payload;
  };

  // Hands a request to an idle handler thread, or to a new one when every thread is busy, so a
  // slow request never holds back the others.
  void Queue(const std::shared_ptr<MuxConnection>& self, uint64_t request_id,
             std::string_view payload) {
    std::unique_lock lock(mu_);
    jobs_.push_back(Job{request_id, std::string(payload)});
    if (jobs_.size() <= idle_) {
      work_.notify_one();
      return;
    }
    lock.unlock();
    try {
      std::thread(&MuxConnection::Work, self).detach();
    } catch (const std::system_error& e) {
      // The threads already running take the request when one is free.
      PrintError(std::string("cannot start a handler thread: ") + e.what());
    }
  }

  // A handler thread: runs requests until the reader ended and none is left.
  static void Work(const std::shared_ptr<MuxConnection>& self) {
    std::unique_lock lock(self->mu_);
    while (true) {
      ++self->idle_;
      self->work_.wait(lock, [&] { return !self->jobs_.empty() || !self->reading_; });
      --self->idle_;
      if (self->jobs_.empty()) return;
      Job job = std::move(self->jobs_.front());
      self->jobs_.pop_front();
      lock.unlock();
      t_current_request = RequestContext{self->fd_.get(), job.request_id};
      t_current_mux = self.get();
      HandlerResult result = Invoke(*self->handler_, job.payload, self->max_payload_);
      t_current_mux = nullptr;
      if (t_raw_write_lock.owns_lock()) t_raw_write_lock.unlock();
      t_current_request.reset();
      self->Reply(ReplyHeaderFor(job.request_id, result.ok), result.payload);
      lock.lock();
    }
  }

  // Appends one reply; the thread that finds no write under way writes every reply appended
  // until none is left, so replies finished together leave in one write.
  void Reply(const ipc::FrameHeader& header, std::string_view payload) {
    std::unique_lock lock(out_mu_);
    ipc::AppendFrame(&out_, header, payload);
    if (writing_) return;
    writing_ = true;
    std::string batch;
    while (!out_.empty()) {
      batch.swap(out_);
      lock.unlock();
      {
        std::lock_guard write_lock(write_mu_);
        WriteLocked(batch);
      }
      batch.clear();
      lock.lock();
    }
    writing_ = false;
  }

 public:
  // WriteToCurrentConnection on a handler thread: writes `bytes` whole, between two batches of
  // replies, and keeps the connection's output until the handler returns.
  bool WriteRaw(std::string_view bytes) {
    if (!t_raw_write_lock.owns_lock()) t_raw_write_lock = std::unique_lock(write_mu_);
    return WriteLocked(bytes);
  }

 private:
  // REQUIRES: write_mu_ held. False once a write failed: the supervisor is gone; the reader sees
  // it too, and the rest is dropped.
  bool WriteLocked(std::string_view bytes) {
    if (!write_ok_) return false;
    const iovec iov{const_cast<char*>(bytes.data()), bytes.size()};
    if (ipc::WriteAll(fd_.get(), {&iov, 1}).ok()) return true;
    write_ok_ = false;
    ::shutdown(fd_.get(), SHUT_RDWR);
    return false;
  }

  const UniqueFd fd_;
  const std::shared_ptr<const Handler> handler_;
  const uint32_t max_payload_;

  std::mutex mu_;  // guards jobs_, idle_, reading_
  std::condition_variable work_;
  std::deque<Job> jobs_;
  size_t idle_ = 0;  // handler threads waiting for a job
  bool reading_ = true;

  std::mutex out_mu_;  // guards out_, writing_
  std::string out_;    // replies appended, not yet written
  bool writing_ = false;
  std::mutex write_mu_;  // held for each write to fd_; guards write_ok_
  bool write_ok_ = true;
};

// NOLINTNEXTLINE(performance-unnecessary-value-param): the thread shares ownership of the handler.
void ServeMuxConnection(UniqueFd connection, std::shared_ptr<const Handler> handler,
                        uint32_t max_payload) {
  MuxConnection::Read(
      std::make_shared<MuxConnection>(std::move(connection), std::move(handler), max_payload));
}

bool IsTransientAcceptError(int err) {
  switch (err) {
    case EINTR:
    case ECONNABORTED:
    case EPROTO:
    case EPERM:
    // accept(2): Linux passes pending network errors of the new socket to accept.
    case ENETDOWN:
    case ENOPROTOOPT:
    case EHOSTDOWN:
    case ENONET:
    case EHOSTUNREACH:
    case EOPNOTSUPP:
    case ENETUNREACH:
      return true;
    default:
      return false;
  }
}

bool IsResourceAcceptError(int err) {
  return err == EMFILE || err == ENFILE || err == ENOBUFS || err == ENOMEM;
}

}  // namespace

std::optional<RequestContext> CurrentRequest() { return t_current_request; }

bool WriteToCurrentConnection(std::string_view bytes) {
  if (t_current_mux != nullptr) return t_current_mux->WriteRaw(bytes);
  if (!t_current_request) return false;
  const iovec iov{const_cast<char*>(bytes.data()), bytes.size()};
  return ipc::WriteAll(t_current_request->connection_fd, {&iov, 1}).ok();
}

Result<int> ListenFdFromEnv() {
  std::optional<std::string> listen_pid = TakeEnv("LISTEN_PID");
  std::optional<std::string> listen_fds = TakeEnv("LISTEN_FDS");
  TakeEnv("LISTEN_FDNAMES");

  if (!listen_pid) {
    return Status::Error(
        "LISTEN_PID is not set: no listening socket was passed (workers are started by bulkheadd, "
        "see sd_listen_fds(3))");
  }
  std::optional<long> pid = ParsePositive(*listen_pid);
  if (!pid) return Status::Error("LISTEN_PID=" + *listen_pid + " is not a pid");
  if (*pid != ::getpid()) {
    return Status::Error("LISTEN_PID=" + *listen_pid + " is not this process (pid " +
                         std::to_string(::getpid()) + ")");
  }
  if (!listen_fds) return Status::Error("LISTEN_FDS is not set");
  std::optional<long> count = ParsePositive(*listen_fds);
  if (!count || *count != 1) {
    return Status::Error("LISTEN_FDS=" + *listen_fds + ": expected exactly 1 listening socket");
  }

  const int fd = kListenFdNumber;
  struct stat st {};
  if (::fstat(fd, &st) != 0) return Status::FromErrno("fd 3 (LISTEN_FDS=1)");
  if (!S_ISSOCK(st.st_mode)) return Status::Error("fd 3 (LISTEN_FDS=1) is not a socket");
  int type = 0;
  socklen_t length = sizeof type;
  if (::getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &length) != 0) {
    return Status::FromErrno("getsockopt(fd 3, SO_TYPE)");
  }
  if (type != SOCK_STREAM) return Status::Error("fd 3 (LISTEN_FDS=1) is not a stream socket");
  int listening = 0;
  length = sizeof listening;
  if (::getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &length) != 0) {
    return Status::FromErrno("getsockopt(fd 3, SO_ACCEPTCONN)");
  }
  if (listening == 0) return Status::Error("fd 3 (LISTEN_FDS=1) is not listening");

  int flags = ::fcntl(fd, F_GETFD);
  if (flags < 0 || ::fcntl(fd, F_SETFD, flags | FD_CLOEXEC) < 0) {
    return Status::FromErrno("fcntl(fd 3, F_SETFD, FD_CLOEXEC)");
  }
  return fd;
}

bool MultiplexFromEnv() {
  const char* text = std::getenv(kWorkerConnectionsEnv);
  if (text == nullptr) return false;
  if (std::strcmp(text, kWorkerConnectionsMultiplex) == 0) return true;
  PrintError(std::string(kWorkerConnectionsEnv) + "=" + text + " is not " +
             kWorkerConnectionsMultiplex + "; serving one request at a time per connection");
  return false;
}

uint32_t MaxPayloadFromEnv() {
  const char* text = std::getenv(kMaxPayloadEnv);
  if (text == nullptr) return ipc::kDefaultMaxPayload;
  std::optional<long> value = ParsePositive(text);
  if (!value || *value > (1L << 30)) {
    PrintError(std::string(kMaxPayloadEnv) + "=" + text +
               " is not a size in 1..1073741824; using " + std::to_string(ipc::kDefaultMaxPayload));
    return ipc::kDefaultMaxPayload;
  }
  return static_cast<uint32_t>(*value);
}

int Serve(int listen_fd, Handler handler) {
  struct sigaction ignore = {};
  ignore.sa_handler = SIG_IGN;
  sigemptyset(&ignore.sa_mask);
  ::sigaction(SIGPIPE, &ignore, nullptr);

  auto shared = std::make_shared<const Handler>(std::move(handler));
  const uint32_t max_payload = MaxPayloadFromEnv();
  const bool multiplex = MultiplexFromEnv();
  while (true) {
    int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) {
      int err = errno;
      if (IsTransientAcceptError(err)) continue;
      if (IsResourceAcceptError(err)) {
        PrintError(Status::FromErrno("accept", err).message() + "; retrying");
        ::poll(nullptr, 0, kAcceptBackoffMs);
        continue;
      }
      PrintError(Status::FromErrno("accept on fd " + std::to_string(listen_fd), err).message());
      return 1;
    }
    UniqueFd connection(fd);
    try {
      std::thread(multiplex ? ServeMuxConnection : ServeConnection, std::move(connection), shared,
                  max_payload)
          .detach();
    } catch (const std::system_error& e) {
      // No thread for this connection: it is closed (if not moved), the peer sees EOF.
      PrintError(std::string("cannot start a connection thread: ") + e.what());
      ::poll(nullptr, 0, kAcceptBackoffMs);
    }
  }
}

int ServeFromEnv(Handler handler) {
  Result<int> fd = ListenFdFromEnv();
  if (!fd.ok()) {
    PrintError(fd.status().message());
    return 1;
  }
  return Serve(*fd, std::move(handler));
}

}  // namespace bulkhead::cell
