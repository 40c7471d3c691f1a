// SPDX-License-Identifier: MIT
#include "proxy/front_listener.h"

#include <fcntl.h>
#include <sys/socket.h>

#include <algorithm>
#include <utility>
#include <vector>

#include "base/check.h"
#include "base/log.h"

namespace bulkhead::proxy {

namespace {
// Front socket backlog: clients waiting for accept().
constexpr int kFrontBacklog = 1024;
}  // namespace

FrontListener::FrontListener(uv_loop_t* loop, loop::TimeSource* time,
                             const config::CellConfig* config, uint32_t max_payload,
                             ClientOwner* owner, const admission::Bulkhead* bulkhead,
                             admission::CellCounters* counters)
    : time_(time),
      config_(config),
      max_payload_(max_payload),
      owner_(owner),
      bulkhead_(bulkhead),
      counters_(counters) {
  uv_pipe_init(loop, &front_, 0);
  front_.data = this;
}

FrontListener::~FrontListener() { BH_CHECK(open_handles_ == 0); }

Status FrontListener::Bind(const ipc::SocketAccess& access) {
  Status front = BindFront(access);
  if (!front.ok()) return front;
  for (const config::ListenAddress& address : config_->listen) {
    Status status = ListenTcp(front_.loop, address);
    if (!status.ok())
      return Status::Error("listen " + address.ToString() + ": " + status.message());
  }
  return Status::Ok();
}

Status FrontListener::BindFront(const ipc::SocketAccess& access) {
  Result<ipc::ListeningSocket> front = ipc::ClaimListeningSocket(
      config_->socket, kFrontBacklog, ipc::Blocking::kNonBlocking, access);
  if (!front.ok()) return front.status();
  front_file_ = std::move(front->file);
  return ServeFront(std::move(front->fd));
}

Status FrontListener::ServeFront(UniqueFd fd) {
  const std::string& path = config_->socket;
  int rc = uv_pipe_open(&front_, fd.get());
  if (rc != 0) return Status::Error("uv_pipe_open " + path + ": " + uv_strerror(rc));
  fd.Release();
  rc = uv_listen(reinterpret_cast<uv_stream_t*>(&front_), kFrontBacklog,
                 &FrontListener::OnConnection);
  if (rc != 0) return Status::Error("listen " + path + ": " + uv_strerror(rc));
  return Status::Ok();
}

Status FrontListener::ListenTcp(uv_loop_t* loop, const config::ListenAddress& address) {
  auto& tcp = tcp_fronts_.emplace_back(std::make_unique<uv_tcp_t>());
  uv_tcp_init(loop, tcp.get());  // without flags it only fills in the handle: it cannot fail
  tcp->data = this;
  ++open_handles_;
  const sockaddr_storage addr = address.ToSockaddr();
  // libuv sets SO_REUSEADDR before bind(2), so a restarted bulkheadd rebinds at once over
  // connections of the previous one still in TIME_WAIT.
  int rc = uv_tcp_bind(tcp.get(), reinterpret_cast<const sockaddr*>(&addr),
                       address.is_v6() ? UV_TCP_IPV6ONLY : 0);
  if (rc != 0) return Status::Error(std::string("bind: ") + uv_strerror(rc));
  // libuv may report bind(2)'s EADDRINUSE only here.
  return StartTcp(tcp.get());
}

Status FrontListener::StartTcp(uv_tcp_t* tcp) {
  int rc =
      uv_listen(reinterpret_cast<uv_stream_t*>(tcp), kFrontBacklog, &FrontListener::OnConnection);
  if (rc != 0) return Status::Error(std::string("listen: ") + uv_strerror(rc));
  sockaddr_storage bound{};
  int len = sizeof bound;
  rc = uv_tcp_getsockname(tcp, reinterpret_cast<sockaddr*>(&bound), &len);
  if (rc != 0) return Status::Error(std::string("getsockname: ") + uv_strerror(rc));
  Result<config::ListenAddress> bound_address =
      config::ListenAddressFromSockaddr(reinterpret_cast<const sockaddr*>(&bound));
  if (!bound_address.ok()) return bound_address.status();
  tcp_addresses_.push_back(bound_address->ToString());
  return Status::Ok();
}

uint32_t FrontListener::connection_limit() const {
  return std::min(config_->max_connections, connection_share_);
}

void FrontListener::OnConnection(uv_stream_t* server, int status) {
  auto* self = static_cast<FrontListener*>(server->data);
  if (status < 0) {
    Log(LogLevel::kWarning, self->name(), 0, std::string("accept: ") + uv_strerror(status));
    return;
  }
  if (self->paused_) {
    // Not accepted: libuv keeps the connection it took and stops watching this socket until it
    // is (ResumeAccept, TakeHeldConnections); the next ones wait in the backlog.
    self->held_.push_back(server);
    return;
  }
  std::string refusal = self->Refusal();
  const Wire& wire = WireFor(self->config_->protocol);
  if (refusal.empty()) {
    wire.accept(self->owner_, server, self->Settings());
    return;
  }
  // libuv has accepted the connection already (it asks only whether to keep it): answer it once
  // (a REPLY frame; HTTP: 503 with Retry-After and Connection: close, docs/http.md) and close it,
  // so the client learns why rather than hang in the backlog.
  ++self->counters_->refused_connections;
  std::string answer;
  wire.append_refusal(&answer, self->name(),
                      Outcome::Rejected(ipc::Reason::kTooManyConnections,
                                        self->bulkhead_->running(), self->bulkhead_->queued()));
  Refuse(server, answer);
  uint64_t now = self->time_->NowMs();
  ++self->refusals_unlogged_;
  if (self->refusal_logged_ms_ == 0 || now - self->refusal_logged_ms_ >= 1000) {
    Log(LogLevel::kWarning, self->name(), 0,
        "refused " + std::to_string(self->refusals_unlogged_) +
            " client connection(s): " + refusal);
    self->refusal_logged_ms_ = now;
    self->refusals_unlogged_ = 0;
  }
}

void FrontListener::Refuse(uv_stream_t* server, std::string_view answer) {
  union AnyClient {
    uv_pipe_t pipe;
    uv_tcp_t tcp;
  };
  auto* client = new AnyClient{};
  InitLike(server, client);
  auto* handle = reinterpret_cast<uv_handle_t*>(client);
  if (uv_accept(server, reinterpret_cast<uv_stream_t*>(client)) == 0) {
    uv_os_fd_t fd;
    if (uv_fileno(handle, &fd) == 0) {
      ssize_t sent = ::send(fd, answer.data(), answer.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      (void)sent;  // a client that left already needs no answer
    }
  }
  uv_close(handle, [](uv_handle_t* closed) { delete reinterpret_cast<AnyClient*>(closed); });
}

std::string FrontListener::Refusal() const {
  if (clients_.size() >= config_->max_connections) {
    return "max_connections of " + std::to_string(config_->max_connections) + " reached";
  }
  if (clients_.size() >= connection_share_) {
    return "its share of the client connection budget (" + std::to_string(connection_share_) +
           ", from RLIMIT_NOFILE) is used up";
  }
  return {};
}

ClientSettings FrontListener::Settings() const {
  ClientSettings settings;
  settings.max_payload = max_payload_;
  settings.header_timeout_ms = static_cast<uint64_t>(config_->header_timeout.count());
  settings.idle_timeout_ms = static_cast<uint64_t>(config_->idle_timeout.count());
  return settings;
}

void FrontListener::PauseAccept() { paused_ = true; }

void FrontListener::ResumeAccept() {
  paused_ = false;
  std::vector<uv_stream_t*> held;
  held.swap(held_);
  for (uv_stream_t* server : held) OnConnection(server, 0);
}

int FrontListener::front_fd() const {
  uv_os_fd_t fd = -1;
  BH_CHECK(uv_fileno(reinterpret_cast<const uv_handle_t*>(&front_), &fd) == 0);
  return fd;
}

std::vector<int> FrontListener::tcp_fds() const {
  std::vector<int> fds;
  for (const auto& tcp : tcp_fronts_) {
    uv_os_fd_t fd = -1;
    BH_CHECK(uv_fileno(reinterpret_cast<const uv_handle_t*>(tcp.get()), &fd) == 0);
    fds.push_back(fd);
  }
  return fds;
}

std::vector<FrontListener::HeldConnection> FrontListener::TakeHeldConnections() {
  BH_CHECK(paused_);
  union AnyClient {
    uv_pipe_t pipe;
    uv_tcp_t tcp;
  };
  std::vector<HeldConnection> taken;
  std::vector<uv_stream_t*> held;
  held.swap(held_);
  for (uv_stream_t* server : held) {
    auto* client = new AnyClient{};
    const bool tcp = InitLike(server, client);
    auto* handle = reinterpret_cast<uv_handle_t*>(client);
    uv_os_fd_t fd = -1;
    if (uv_accept(server, reinterpret_cast<uv_stream_t*>(client)) == 0 &&
        uv_fileno(handle, &fd) == 0) {
      // A descriptor of its own: the handle closes its one. libuv watches the listening socket
      // again after uv_accept; paused_ holds what comes next.
      UniqueFd own(::fcntl(fd, F_DUPFD_CLOEXEC, 0));
      if (own) taken.push_back({std::move(own), tcp});
    }
    uv_close(handle, [](uv_handle_t* closed) { delete reinterpret_cast<AnyClient*>(closed); });
  }
  return taken;
}

void FrontListener::PauseClientReads(bool paused) {
  for (Client* conn : clients_) conn->PauseReads(paused);
}

std::vector<FrontListener::HeldConnection> FrontListener::HandOverIdleClients() {
  std::vector<HeldConnection> handed;
  std::vector<Client*> clients(clients_.begin(), clients_.end());
  for (Client* conn : clients) {
    int fd = -1;
    bool tcp = false;
    if (conn->HandOver(&fd, &tcp)) handed.push_back({UniqueFd(fd), tcp});
  }
  return handed;
}

Status FrontListener::Adopt(UniqueFd front, std::vector<UniqueFd> tcp,
                            const ipc::SocketAccess& access) {
  if (front) {
    const std::string& path = config_->socket;
    Result<ipc::SocketFile> file = ipc::SocketFile::Record(path);
    if (!file.ok()) return Status::Error("socket " + path + ": " + file.status().message());
    front_file_ = std::move(file).value();
    Status served = ServeFront(std::move(front));
    if (!served.ok()) return served;
  } else {
    Status bound = BindFront(access);
    if (!bound.ok()) return bound;
  }
  for (size_t i = 0; i < tcp.size(); ++i) {
    const std::string where =
        i < config_->listen.size() ? config_->listen[i].ToString() : "fd " + std::to_string(i);
    if (!tcp[i]) {
      Status bound = i < config_->listen.size()
                         ? ListenTcp(front_.loop, config_->listen[i])
                         : Status::Error("not in the config, cannot be bound afresh");
      if (!bound.ok()) return Status::Error("listen " + where + ": " + bound.message());
      continue;
    }
    auto& handle = tcp_fronts_.emplace_back(std::make_unique<uv_tcp_t>());
    uv_tcp_init(front_.loop, handle.get());
    handle->data = this;
    ++open_handles_;
    const int rc = uv_tcp_open(handle.get(), tcp[i].get());
    if (rc != 0) return Status::Error("listen " + where + ": uv_tcp_open: " + uv_strerror(rc));
    tcp[i].Release();
    Status status = StartTcp(handle.get());
    if (!status.ok()) return Status::Error("listen " + where + ": " + status.message());
  }
  return Status::Ok();
}

void FrontListener::AdoptClient(HeldConnection connection, const ClientSettings& settings) {
  WireFor(config_->protocol)
      .adopt(owner_, front_.loop, connection.fd.Release(), connection.tcp, settings);
}

void FrontListener::DisconnectAll() {
  std::vector<Client*> clients(clients_.begin(), clients_.end());
  for (Client* conn : clients) conn->Close();
}

void FrontListener::Close(std::function<void()> on_closed) {
  on_closed_ = std::move(on_closed);
  auto closed = [](uv_handle_t* handle) {
    auto* self = static_cast<FrontListener*>(handle->data);
    BH_CHECK(self->open_handles_ > 0);
    if (--self->open_handles_ == 0 && self->on_closed_) std::exchange(self->on_closed_, nullptr)();
  };
  uv_close(reinterpret_cast<uv_handle_t*>(&front_), closed);
  for (auto& tcp : tcp_fronts_) uv_close(reinterpret_cast<uv_handle_t*>(tcp.get()), closed);
  // Only the socket file this cell bound is removed, while it is still the one it bound.
  front_file_.Remove();
}

}  // namespace bulkhead::proxy
