// SPDX-License-Identifier: MIT
// FrontListener: a cell's front sockets, where its clients connect (the Unix `socket` and each TCP
// address of `listen`), and the client connections open on them (FrontConnection, or
// HttpFrontConnection for protocol = "http"). The limits count the connections of every front
// socket together: a connection beyond max_connections, or beyond the cell's share of the
// supervisor's descriptor budget (supervisor/connection_budget.h), is answered REJECTED
// too_many_connections (HTTP: 503 with Connection: close) and closed at once (docs/protocol.md),
// with one warning per second at most. REQUIRES: loop thread only.
#pragma once

#include <uv.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "admission/bulkhead.h"
#include "admission/cell_counters.h"
#include "base/status.h"
#include "base/unique_fd.h"
#include "config/config.h"
#include "ipc/listen_socket.h"
#include "loop/time_source.h"
#include "proxy/client.h"
#include "proxy/wire.h"

namespace bulkhead::proxy {

class FrontListener {
 public:
  // `time`, `config` (name, socket, listen, max_connections, protocol, header_timeout, read at
  // each use), `owner` (handed to every connection), `bulkhead` (figures of a refusal) and
  // `counters` (refused_connections) outlive the listener.
  FrontListener(uv_loop_t* loop, loop::TimeSource* time, const config::CellConfig* config,
                uint32_t max_payload, ClientOwner* owner, const admission::Bulkhead* bulkhead,
                admission::CellCounters* counters);
  ~FrontListener();
  FrontListener(const FrontListener&) = delete;
  FrontListener& operator=(const FrontListener&) = delete;

  // Claims and binds the Unix front socket with `access` (a stale file from a killed run is
  // reclaimed; a socket another live process serves is refused), binds each TCP address of
  // `listen` (SO_REUSEADDR, as libuv sets it; IPv6 ones IPV6_V6ONLY), and starts accepting
  // clients on all of them. An error names the socket or address: "listen 127.0.0.1:8081: bind:
  // address already in use". Call once; Close() is still required after an error.
  Status Bind(const ipc::SocketAccess& access);
  // The TCP addresses bound, in `listen` order, as getsockname(2) reports them (a port 0 of the
  // config replaced by the port the kernel picked): "127.0.0.1:43817", "[::1]:9000".
  const std::vector<std::string>& tcp_addresses() const { return tcp_addresses_; }
  // Lowers the limit below max_connections. Set before clients connect.
  void SetConnectionShare(uint32_t share) { connection_share_ = share; }
  // min(max_connections, the share).
  uint32_t connection_limit() const;

  // A connection accepted here has opened or closed (ClientOwner).
  void Opened(Client* conn) { clients_.insert(conn); }
  void Closed(Client* conn) { clients_.erase(conn); }
  size_t clients() const { return clients_.size(); }
  // Closes every client connection.
  void DisconnectAll();

  // --- Re-exec (docs/reexec.md). ---
  // Stops accepting: connections that arrive wait in the kernel backlog, except at most one per
  // listening socket that libuv accepted already, which is held unread (TakeHeldConnections).
  // REQUIRES: bound.
  void PauseAccept();
  // Accepts again, the held connections first.
  void ResumeAccept();
  bool paused() const { return paused_; }
  // The listening sockets' fds: the Unix front socket's, and each TCP one's in tcp_addresses()
  // order. Owned by their handles. REQUIRES: bound.
  int front_fd() const;
  std::vector<int> tcp_fds() const;
  // A client's connected socket taken out of libuv, TCP when `tcp`.
  struct HeldConnection {
    UniqueFd fd;
    bool tcp = false;
  };
  // The connections libuv accepted while paused, as sockets of their own (their handles close):
  // for the re-exec state, or AdoptClient when the exec failed. REQUIRES: paused.
  std::vector<HeldConnection> TakeHeldConnections();
  // Every client connection reads only to complete a request begun (Client::PauseReads), or reads
  // as before.
  void PauseClientReads(bool paused);
  // The client connections that sit between two requests (Client::HandOver), as sockets of their
  // own, each closed here: for the re-exec state, or AdoptClient when the exec failed. The others
  // stay (and close at the exec).
  std::vector<HeldConnection> HandOverIdleClients();
  // Instead of Bind, in an image a re-exec started: serves the listening sockets it handed over,
  // `front` (bound at the config's socket, whose file Close removes) and `tcp` (one per address
  // of `listen`, in its order), and starts accepting. A socket given as an empty fd (the state
  // named one that is not it: docs/reexec.md, failure 6) is bound afresh as Bind binds it, the
  // Unix one with `access`. Errors name the socket, as Bind's. Close() is still required.
  Status Adopt(UniqueFd front, std::vector<UniqueFd> tcp, const ipc::SocketAccess& access);
  // A client connection handed over: served from here as an accepted one.
  void AdoptClient(HeldConnection connection, const ClientSettings& settings);
  // What each accepted connection starts with.
  ClientSettings Settings() const;

  // Closes the listening handles and removes the socket file if it is still the one bound;
  // `on_closed` runs from the last close callback.
  void Close(std::function<void()> on_closed);

 private:
  static void OnConnection(uv_stream_t* server, int status);
  // Refuses one pending connection on `server`: accepts it, sends `answer` (one small REPLY frame,
  // or an HTTP 503, which a fresh socket's send buffer always takes whole) without blocking, and
  // closes it. A client that is already gone is ignored.
  static void Refuse(uv_stream_t* server, std::string_view answer);
  // Why a new connection is refused now ("max_connections of 1024 reached"), or "" to keep it.
  std::string Refusal() const;
  const std::string& name() const { return config_->name; }

  loop::TimeSource* time_;
  const config::CellConfig* config_;
  uint32_t max_payload_;
  ClientOwner* owner_;
  const admission::Bulkhead* bulkhead_;
  admission::CellCounters* counters_;
  // Claims and binds the Unix front socket with `access` (Bind's first step), then ServeFront.
  Status BindFront(const ipc::SocketAccess& access);
  // Listens on `fd`, the Unix front socket, through front_.
  Status ServeFront(UniqueFd fd);
  // Binds one TCP address of `listen` and listens on it.
  Status ListenTcp(uv_loop_t* loop, const config::ListenAddress& address);
  // Listens on the TCP handle `tcp` (opened or bound) and records the address it is bound to.
  Status StartTcp(uv_tcp_t* tcp);

  uv_pipe_t front_{};
  // One listening handle per TCP address bound (initialised ones only; each closed by Close).
  std::vector<std::unique_ptr<uv_tcp_t>> tcp_fronts_;
  std::vector<std::string> tcp_addresses_;
  int open_handles_ = 1;  // front_ and tcp_fronts_ until their close callbacks ran
  std::function<void()> on_closed_;
  ipc::SocketFile front_file_;  // the front socket file bound (removed on close if still ours)
  std::unordered_set<Client*> clients_;
  uint32_t connection_share_ = UINT32_MAX;
  bool paused_ = false;
  // While paused: the listening handles on which libuv holds an accepted connection.
  std::vector<uv_stream_t*> held_;
  // When a refusal was last logged (one warning per second at most, under a flood).
  uint64_t refusal_logged_ms_ = 0;
  uint64_t refusals_unlogged_ = 0;
};

}  // namespace bulkhead::proxy
