// SPDX-License-Identifier: MIT
#include "control/stream_server.h"

#include <fcntl.h>

#include <utility>
#include <vector>

#include "base/check.h"
#include "base/log.h"

namespace bulkhead::control {

namespace {

// uv_tcp_init and uv_pipe_init without flags only fill in the handle: they cannot fail.
uv_stream_t* OpenStream(loop::HandleGroup& handles, uv_loop_t* loop, bool tcp) {
  return tcp ? reinterpret_cast<uv_stream_t*>(handles.Open(uv_tcp_init, loop))
             : reinterpret_cast<uv_stream_t*>(handles.Open(uv_pipe_init, loop, 0));
}

}  // namespace

StreamConnection::StreamConnection(StreamServer* server, bool tcp)
    : server_(server),
      stream_(OpenStream(handles_, server->loop_, tcp)),
      timer_(server->time_->CreateTimer([this] {
        timed_out_ = true;
        server_->timeout_check_.Request();
      })),
      writer_(
          stream_, [this](int) { Close(); },
          [this] {
            if (close_when_sent_) Close();
          }) {
  stream_->data = this;
  writer_.SetOnWritten([this] { OnActivity(); });
}

int StreamConnection::fd() const {
  uv_os_fd_t fd = -1;
  return uv_fileno(reinterpret_cast<const uv_handle_t*>(stream_), &fd) == 0 ? fd : -1;
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
  // The loop's clock (what a LoopTimeSource reads) was read before this iteration's callbacks
  // ran; a slow callback (a status that read many cgroup files) must not shorten the next idle
  // period.
  uv_update_time(server_->loop_);
  StartTimer();
}

void StreamConnection::StartTimer() {
  if (server_->limits_.timeout_ms == 0) return;
  timer_->Start(server_->limits_.timeout_ms);
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
  timer_->Stop();
  // The server's Close waits for this connection's handles too.
  handles_.Close([this, server = server_, closed = server_->handles_.Part()] {
    server->connections_.erase(this);
    delete this;
    closed();
  });
}

StreamServer::StreamServer(uv_loop_t* loop, loop::TimeSource* time, std::string name, Limits limits,
                           Accept accept)
    : loop_(loop),
      time_(time),
      name_(std::move(name)),
      limits_(limits),
      accept_(std::move(accept)),
      timeout_check_(loop, [this] { CloseTimedOutConnections(); }) {}

StreamServer::~StreamServer() { BH_CHECK(handles_.closed() && connections_.empty()); }

Status StreamServer::ListenUnix(ipc::ListeningSocket socket, int backlog) {
  BH_CHECK(listener_ == nullptr);
  tcp_ = false;
  auto* pipe = handles_.Open(uv_pipe_init, loop_, 0);
  listener_ = reinterpret_cast<uv_stream_t*>(pipe);
  listener_->data = this;
  file_ = std::move(socket.file);
  int rc = uv_pipe_open(pipe, socket.fd.get());
  if (rc != 0) return Status::Error(std::string("uv_pipe_open: ") + uv_strerror(rc));
  socket.fd.Release();
  rc = uv_listen(listener_, backlog, &OnConnection);
  if (rc != 0) return Status::Error(std::string("listen: ") + uv_strerror(rc));
  return Status::Ok();
}

int StreamServer::listen_fd() const {
  uv_os_fd_t fd = -1;
  if (listener_ == nullptr ||
      uv_fileno(reinterpret_cast<const uv_handle_t*>(listener_), &fd) != 0) {
    return -1;
  }
  return fd;
}

Status StreamServer::AdoptUnix(UniqueFd fd, const std::string& path, int backlog) {
  Result<ipc::SocketFile> file = ipc::SocketFile::Record(path);
  if (!file.ok()) return file.status();
  return ListenUnix(ipc::ListeningSocket{std::move(fd), std::move(file).value()}, backlog);
}

Status StreamServer::AdoptTcp(UniqueFd fd, int backlog) {
  BH_CHECK(listener_ == nullptr);
  tcp_ = true;
  auto* tcp = handles_.Open(uv_tcp_init, loop_);
  listener_ = reinterpret_cast<uv_stream_t*>(tcp);
  listener_->data = this;
  int rc = uv_tcp_open(tcp, fd.get());
  if (rc != 0) return Status::Error(std::string("uv_tcp_open: ") + uv_strerror(rc));
  fd.Release();
  rc = uv_listen(listener_, backlog, &OnConnection);
  if (rc != 0) return Status::Error(std::string("listen: ") + uv_strerror(rc));
  return Status::Ok();
}

Status StreamServer::ListenTcp(const sockaddr* addr, int backlog) {
  BH_CHECK(listener_ == nullptr);
  tcp_ = true;
  auto* tcp = handles_.Open(uv_tcp_init, loop_);
  listener_ = reinterpret_cast<uv_stream_t*>(tcp);
  listener_->data = this;
  int rc = uv_tcp_bind(tcp, addr, 0);
  if (rc != 0) return Status::Error(std::string("bind: ") + uv_strerror(rc));
  rc = uv_listen(listener_, backlog, &OnConnection);
  if (rc != 0) return Status::Error(std::string("listen: ") + uv_strerror(rc));
  return Status::Ok();
}

Result<sockaddr_storage> StreamServer::TcpAddress() const {
  BH_CHECK(tcp_ && listener_ != nullptr && !handles_.closing());
  sockaddr_storage addr{};
  int len = sizeof addr;
  int rc = uv_tcp_getsockname(reinterpret_cast<const uv_tcp_t*>(listener_),
                              reinterpret_cast<sockaddr*>(&addr), &len);
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
  self->Serve(conn, uv_accept(listener, conn->stream()));
}

void StreamServer::Serve(StreamConnection* conn, int attached) {
  if (attached != 0 ||
      (limits_.max_connections != 0 && connections_.size() > limits_.max_connections)) {
    conn->Close();
    return;
  }
  conn->protocol_ = accept_(*conn);
  conn->Start();
}

std::vector<UniqueFd> StreamServer::HandOver() {
  std::vector<UniqueFd> handed;
  auto take = [&handed](const StreamConnection& conn) {
    const int fd = conn.fd();
    UniqueFd own(fd >= 0 ? ::fcntl(fd, F_DUPFD_CLOEXEC, 0) : -1);
    if (own) handed.push_back(std::move(own));
  };
  std::vector<StreamConnection*> conns(connections_.begin(), connections_.end());
  for (StreamConnection* conn : conns) {
    if (conn->closing_ || conn->protocol_ == nullptr || !conn->protocol_->BetweenRequests() ||
        !conn->writer_.idle()) {
      continue;
    }
    take(*conn);
    conn->Close();
  }
  return handed;
}

void StreamServer::AdoptConnection(UniqueFd fd) {
  auto* conn = new StreamConnection(this, tcp_);
  connections_.insert(conn);
  int rc = tcp_ ? uv_tcp_open(reinterpret_cast<uv_tcp_t*>(conn->stream()), fd.get())
                : uv_pipe_open(reinterpret_cast<uv_pipe_t*>(conn->stream()), fd.get());
  if (rc == 0) fd.Release();
  Serve(conn, rc);
}

void StreamServer::CloseTimedOutConnections() {
  std::vector<StreamConnection*> timed_out;
  for (StreamConnection* conn : connections_) {
    if (conn->timed_out_) timed_out.push_back(conn);
  }
  for (StreamConnection* conn : timed_out) conn->Close();
}

void StreamServer::Close(std::function<void()> on_closed) {
  std::vector<StreamConnection*> conns(connections_.begin(), connections_.end());
  for (StreamConnection* conn : conns) conn->Close();
  // Only the socket file this server bound is removed: not a live instance's that refused this
  // one, nor one that another instance bound at the same path since.
  file_.Remove();
  timeout_check_.Close(handles_.Part());
  handles_.Close(std::move(on_closed));
}

}  // namespace bulkhead::control
