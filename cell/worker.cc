// SPDX-License-Identifier: MIT
// Worker SDK: the accept loop runs on the calling thread; each connection on a detached thread
// that owns its socket and decoder. The handler is shared, read-only, by all threads.
#include "cell/worker.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
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
      ipc::FrameHeader reply;
      reply.type = ipc::FrameType::kReply;
      reply.status = result.ok ? ipc::ReplyStatus::kOk : ipc::ReplyStatus::kFailed;
      reply.reason = result.ok ? ipc::Reason::kNone : ipc::Reason::kWorkerError;
      reply.request_id = frame.header.request_id;
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
      std::thread(ServeConnection, std::move(connection), shared, max_payload).detach();
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
