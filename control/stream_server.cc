// SPDX-License-Identifier: MIT
#include "control/stream_server.h"

#include <utility>
#include <vector>

#include "base/check.h"
#include "base/log.h"

namespace bulkhead::control {

StreamConnection::StreamConnection(StreamServer* server, bool tcp)
    : server_(server),
      writer_(
          stream(), [this](int) { Close(); },
          [this] {
            if (close_when_sent_) Close();
          }) {
  // uv_tcp_init and uv_pipe_init without flags only fill in the handle: they cannot fail.
  if (tcp) {
    uv_tcp_init(server_->loop_, &handle_.tcp);
  } else {
    uv_pipe_init(server_->loop_, &handle_.pipe, 0);
  }
  handle_.pipe.data = this;
  ++open_handles_;
  uv_timer_init(server_->loop_, &timer_);
  timer_.data = this;
  ++open_handles_;
  writer_.SetOnWritten([this] { OnActivity(); });
}

int StreamConnection::fd() const {
  uv_os_fd_t fd = -1;
  return uv_fileno(reinterpret_cast<const uv_handle_t*>(&handle_), &fd) == 0 ? fd : -1;
}

void StreamConnection::Start() {
  StartTimer();
  uv_read_start(
      stream(),
      [](uv_handle_t* handle, size_t, uv_buf_t* buf) {
        auto* self = static_cast<StreamConnection*>(handle->data);
        *buf = uv_buf_init(self->read_buf_, sizeof self->read_buf_);
      },
      [](uv_stream_t* stream, ssize_t nread, const uv_buf_t* buf) {
        auto* self = static_cast<StreamConnection*>(stream->data);
        if (nread < 0) {
          self->Close();
          return;
        }
        if (nread == 0) return;  // EAGAIN: nothing read
        self->OnActivity();
        self->protocol_->OnBytes(*self, std::string_view(buf->base, static_cast<size_t>(nread)));
      });
}

void StreamConnection::OnActivity() {
  if (closing_ || server_->limits_.timeout_from != StreamServer::TimeoutFrom::kLastActivity) {
    return;
  }
  timed_out_ = false;
  // The loop's clock was read before this iteration's callbacks ran; a slow callback (a status
  // that read many cgroup files) must not shorten the next idle period.
  uv_update_time(server_->loop_);
  StartTimer();
}

void StreamConnection::StartTimer() {
  if (server_->limits_.timeout_ms == 0) return;
  uv_timer_start(
      &timer_,
      [](uv_timer_t* timer) {
        auto* self = static_cast<StreamConnection*>(timer->data);
        self->timed_out_ = true;
        self->server_->timeout_check_.Request();
      },
      server_->limits_.timeout_ms, 0);
}

void StreamConnection::Send(std::string_view bytes) {
  if (closing_) return;
  writer_.AppendBytes(bytes);
  writer_.Flush();
}

void StreamConnection::CloseWhenSent() {
  if (closing_) return;
  close_when_sent_ = true;
  uv_read_stop(stream());
  if (writer_.idle()) Close();
}

void StreamConnection::Close() {
  if (closing_) return;
  closing_ = true;
  writer_.Abandon();
  for (uv_handle_t* handle :
       {reinterpret_cast<uv_handle_t*>(&timer_), reinterpret_cast<uv_handle_t*>(&handle_)}) {
    ++server_->pending_closes_;
    uv_close(handle,
             [](uv_handle_t* h) { static_cast<StreamConnection*>(h->data)->HandleClosed(); });
  }
}

void StreamConnection::HandleClosed() {
  StreamServer* server = server_;
  if (--open_handles_ == 0) {
    server->connections_.erase(this);
    delete this;
  }
  server->HandleClosed();
}

StreamServer::StreamServer(uv_loop_t* loop, std::string name, Limits limits, Accept accept)
    : loop_(loop),
      name_(std::move(name)),
      limits_(limits),
      accept_(std::move(accept)),
      timeout_check_(loop, [this] { CloseTimedOutConnections(); }) {}

StreamServer::~StreamServer() { BH_CHECK(closed_ && pending_closes_ == 0 && connections_.empty()); }

Status StreamServer::ListenUnix(ipc::ListeningSocket socket, int backlog) {
  BH_CHECK(!listener_open_);
  tcp_ = false;
  uv_pipe_init(loop_, &listener_.pipe, 0);
  listener_.pipe.data = this;
  listener_open_ = true;
  file_ = std::move(socket.file);
  int rc = uv_pipe_open(&listener_.pipe, socket.fd.get());
  if (rc != 0) return Status::Error(std::string("uv_pipe_open: ") + uv_strerror(rc));
  socket.fd.Release();
  rc = uv_listen(reinterpret_cast<uv_stream_t*>(&listener_.pipe), backlog, &OnConnection);
  if (rc != 0) return Status::Error(std::string("listen: ") + uv_strerror(rc));
  return Status::Ok();
}

Status StreamServer::ListenTcp(const sockaddr* addr, int backlog) {
  BH_CHECK(!listener_open_);
  tcp_ = true;
  uv_tcp_init(loop_, &listener_.tcp);
  listener_.tcp.data = this;
  listener_open_ = true;
  int rc = uv_tcp_bind(&listener_.tcp, addr, 0);
  if (rc != 0) return Status::Error(std::string("bind: ") + uv_strerror(rc));
  rc = uv_listen(reinterpret_cast<uv_stream_t*>(&listener_.tcp), backlog, &OnConnection);
  if (rc != 0) return Status::Error(std::string("listen: ") + uv_strerror(rc));
  return Status::Ok();
}

Result<sockaddr_storage> StreamServer::TcpAddress() const {
  BH_CHECK(tcp_ && listener_open_);
  sockaddr_storage addr{};
  int len = sizeof addr;
  int rc = uv_tcp_getsockname(&listener_.tcp, reinterpret_cast<sockaddr*>(&addr), &len);
  if (rc != 0) return Status::Error(std::string("getsockname: ") + uv_strerror(rc));
  return addr;
}

void StreamServer::OnConnection(uv_stream_t* listener, int status) {
  auto* self = static_cast<StreamServer*>(listener->data);
  if (status < 0) {
    LogWarning(self->name_ + ": accept: " + uv_strerror(status));
    return;
  }
  auto* conn = new StreamConnection(self, self->tcp_);
  self->connections_.insert(conn);
  if (uv_accept(listener, conn->stream()) != 0 ||
      (self->limits_.max_connections != 0 &&
       self->connections_.size() > self->limits_.max_connections)) {
    conn->Close();
    return;
  }
  conn->protocol_ = self->accept_(*conn);
  conn->Start();
}

void StreamServer::CloseTimedOutConnections() {
  std::vector<StreamConnection*> timed_out;
  for (StreamConnection* conn : connections_) {
    if (conn->timed_out_) timed_out.push_back(conn);
  }
  for (StreamConnection* conn : timed_out) conn->Close();
}

void StreamServer::Close(std::function<void()> on_closed) {
  BH_CHECK(!closed_);
  closed_ = true;
  on_closed_ = std::move(on_closed);
  std::vector<StreamConnection*> conns(connections_.begin(), connections_.end());
  for (StreamConnection* conn : conns) conn->Close();
  // Only the socket file this server bound is removed: not a live instance's that refused this
  // one, nor one that another instance bound at the same path since.
  file_.Remove();
  ++pending_closes_;
  timeout_check_.Close([this] { HandleClosed(); });
  if (listener_open_) {
    ++pending_closes_;
    uv_close(reinterpret_cast<uv_handle_t*>(&listener_),
             [](uv_handle_t* handle) { static_cast<StreamServer*>(handle->data)->HandleClosed(); });
  }
}

void StreamServer::HandleClosed() {
  BH_CHECK(pending_closes_ > 0);
  if (--pending_closes_ == 0 && closed_ && on_closed_) std::exchange(on_closed_, nullptr)();
}

}  // namespace bulkhead::control
