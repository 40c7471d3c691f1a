// SPDX-License-Identifier: MIT
#include "control/control_server.h"

#include <unistd.h>

#include <utility>

#include "base/check.h"
#include "base/log.h"
#include "ipc/listen_socket.h"
#include "proxy/stream_writer.h"

namespace bulkhead::control {

namespace {
// A request line longer than this closes the connection: control requests are small.
constexpr size_t kMaxLine = size_t{64} * 1024;
}  // namespace

class ControlConnection {
 public:
  explicit ControlConnection(ControlServer* server)
      : server_(server),
        writer_(
            reinterpret_cast<uv_stream_t*>(&pipe_), [this](int) { Close(); },
            [this] {
              if (close_when_drained_) Close();
            }) {
    pipe_.data = this;
  }

  uv_pipe_t* pipe() { return &pipe_; }

  void Start() {
    // A connection whose credentials cannot be read is treated as an unknown user: it may still
    // read, and is refused every mutating command.
    uv_os_fd_t fd = -1;
    Result<ControlPeer> peer = uv_fileno(reinterpret_cast<uv_handle_t*>(&pipe_), &fd) == 0
                                   ? PeerOf(fd)
                                   : Result<ControlPeer>(Status::Error("no descriptor"));
    if (peer.ok()) {
      peer_ = std::move(peer).value();
    } else {
      peer_.uid = static_cast<uid_t>(-1);
      peer_.gid = static_cast<gid_t>(-1);
      LogWarning("control connection: " + peer.status().message());
    }
    uv_read_start(
        reinterpret_cast<uv_stream_t*>(&pipe_),
        [](uv_handle_t* handle, size_t, uv_buf_t* buf) {
          auto* self = static_cast<ControlConnection*>(handle->data);
          *buf = uv_buf_init(self->read_buf_, sizeof self->read_buf_);
        },
        [](uv_stream_t* stream, ssize_t nread, const uv_buf_t* buf) {
          auto* self = static_cast<ControlConnection*>(stream->data);
          if (nread < 0) {
            self->Close();
            return;
          }
          self->OnBytes(buf->base, static_cast<size_t>(nread));
        });
  }

  void Close() {
    if (closing_) return;
    closing_ = true;
    writer_.Abandon();
    ++server_->pending_closes_;
    uv_close(reinterpret_cast<uv_handle_t*>(&pipe_), [](uv_handle_t* handle) {
      auto* self = static_cast<ControlConnection*>(handle->data);
      ControlServer* server = self->server_;
      server->Forget(self);
      delete self;
      server->HandleClosed();
    });
  }

 private:
  void OnBytes(const char* data, size_t n) {
    line_.append(data, n);
    size_t start = 0;
    for (;;) {
      size_t end = line_.find('\n', start);
      if (end == std::string::npos) break;
      std::string request = line_.substr(start, end - start);
      start = end + 1;
      if (request.empty()) continue;
      std::string response = server_->handler_(request, peer_);
      response.push_back('\n');
      writer_.AppendBytes(response);
    }
    line_.erase(0, start);
    if (line_.size() > kMaxLine) {
      writer_.AppendBytes(R"({"ok":false,"error":"request line too long"})"
                          "\n");
      close_when_drained_ = true;
      uv_read_stop(reinterpret_cast<uv_stream_t*>(&pipe_));
    }
    writer_.Flush();
  }

  ControlServer* server_;
  uv_pipe_t pipe_{};
  proxy::StreamWriter writer_;
  char read_buf_[4096];
  std::string line_;
  ControlPeer peer_;
  bool closing_ = false;
  bool close_when_drained_ = false;
};

ControlServer::ControlServer(uv_loop_t* loop, Handler handler)
    : loop_(loop), handler_(std::move(handler)) {
  uv_pipe_init(loop_, &listener_, 0);
  listener_.data = this;
}

ControlServer::~ControlServer() { BH_CHECK(pending_closes_ == 0 && connections_.empty()); }

Status ControlServer::Listen(const std::string& path,
                             const std::optional<ipc::SocketAccess>& access) {
  Result<ipc::ListeningSocket> socket =
      ipc::ClaimListeningSocket(path, 64, ipc::Blocking::kNonBlocking, access);
  if (!socket.ok()) return socket.status();
  file_ = std::move(socket->file);
  int rc = uv_pipe_open(&listener_, socket->fd.get());
  if (rc != 0) return Status::Error("uv_pipe_open " + path + ": " + uv_strerror(rc));
  socket->fd.Release();
  rc = uv_listen(reinterpret_cast<uv_stream_t*>(&listener_), 64, &ControlServer::OnConnection);
  if (rc != 0) return Status::Error("listen " + path + ": " + uv_strerror(rc));
  return Status::Ok();
}

void ControlServer::OnConnection(uv_stream_t* server, int status) {
  auto* self = static_cast<ControlServer*>(server->data);
  if (status < 0) return;
  auto* conn = new ControlConnection(self);
  uv_pipe_init(self->loop_, conn->pipe(), 0);
  self->connections_.insert(conn);
  if (uv_accept(server, reinterpret_cast<uv_stream_t*>(conn->pipe())) != 0) {
    conn->Close();
    return;
  }
  conn->Start();
}

void ControlServer::Forget(ControlConnection* conn) { connections_.erase(conn); }

void ControlServer::Close(std::function<void()> on_closed) {
  on_closed_ = std::move(on_closed);
  std::vector<ControlConnection*> conns(connections_.begin(), connections_.end());
  for (ControlConnection* conn : conns) conn->Close();
  // Only the socket file this instance bound is removed: not a live instance's that refused this
  // one, nor one that another instance bound at the same path since.
  file_.Remove();
  ++pending_closes_;
  uv_close(reinterpret_cast<uv_handle_t*>(&listener_), &ControlServer::OnClosed);
}

void ControlServer::OnClosed(uv_handle_t* handle) {
  static_cast<ControlServer*>(handle->data)->HandleClosed();
}

void ControlServer::HandleClosed() {
  BH_CHECK(pending_closes_ > 0);
  if (--pending_closes_ == 0 && on_closed_) std::exchange(on_closed_, nullptr)();
}

}  // namespace bulkhead::control
