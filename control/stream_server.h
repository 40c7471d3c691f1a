// SPDX-License-Identifier: MIT
// StreamServer: the libuv plumbing that the control socket (ControlServer) and the metrics
// endpoint (MetricsServer) share: a listening stream (a Unix socket or TCP), one StreamConnection
// per accepted client with its read buffer, writer and idle timer, an optional cap on open
// connections, and a Close whose callback runs once every handle's close callback has run
// (loop::HandleGroup). What the bytes mean is
// the protocol's: one ConnectionProtocol per connection. REQUIRES: loop thread only.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>
#include <uv.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "base/status.h"
#include "base/unique_fd.h"
#include "ipc/listen_socket.h"
#include "loop/after_poll.h"
#include "loop/handle_group.h"
#include "loop/stream_writer.h"
#include "loop/time_source.h"

namespace bulkhead::control {

class StreamConnection;
class StreamServer;

// What a server does with one connection's bytes; made at accept, destroyed with the connection.
class ConnectionProtocol {
 public:
  virtual ~ConnectionProtocol() = default;
  // Bytes read from `conn`, in order. May call conn.Send(), CloseWhenSent() or Close(); `conn`
  // stays valid until this returns, whatever it called.
  virtual void OnBytes(StreamConnection& conn, std::string_view bytes) = 0;
  // Nothing of a next request has been read: the connection may be handed over at a re-exec
  // (StreamServer::HandOver). A protocol that does not say so is never handed over.
  virtual bool BetweenRequests() const { return false; }
};

// One accepted client connection, owned by its StreamServer. It closes when the peer closes or
// errs, when a write fails, when the protocol asks, when the server closes, and when the server's
// timeout runs out (Limits).
class StreamConnection {
 public:
  StreamConnection(const StreamConnection&) = delete;
  StreamConnection& operator=(const StreamConnection&) = delete;

  // Appends `bytes` and writes what the socket takes now; the rest follows as the peer reads.
  void Send(std::string_view bytes);
  // Reads no more; closes once everything sent so far is written.
  void CloseWhenSent();
  // Closes now; bytes not yet written are dropped. Safe to call more than once.
  void Close();
  bool closing() const { return closing_; }
  // The accepted socket's descriptor (for SO_PEERCRED), or -1.
  int fd() const;

 private:
  friend class StreamServer;
  StreamConnection(StreamServer* server, bool tcp);
  ~StreamConnection() = default;

  uv_stream_t* stream() { return stream_; }
  void Start();
  // Bytes moved either way: an idle timeout starts over.
  void OnActivity();
  void StartTimer();

  StreamServer* server_;
  // The accepted stream (a uv_tcp_t or a uv_pipe_t); its close callback deletes the connection.
  loop::HandleGroup handles_;
  uv_stream_t* stream_;
  // The timeout (Limits): fired, it marks the connection timed out and asks for a verdict.
  std::unique_ptr<loop::Timer> timer_;
  loop::StreamWriter writer_;
  std::unique_ptr<ConnectionProtocol> protocol_;
  bool closing_ = false;
  bool close_when_sent_ = false;
  // The timer fired (and, for an idle timeout, nothing moved since): closed after the loop's next
  // poll (AfterPoll).
  bool timed_out_ = false;
  char read_buf_[4096];
};

class StreamServer {
 public:
  // What a connection's timeout counts from.
  enum class TimeoutFrom {
    // The last byte read or written: an idle timeout (HAProxy's `timeout client`).
    kLastActivity,
    // The accept, whatever moves since: the time to send a request and read its answer.
    kAccept,
  };
  struct Limits {
    // A connection is closed when this runs out (0: never). The verdict is given after the loop
    // has polled once more (loop::AfterPoll), so that bytes that were waiting in the socket when
    // the timer fired (after bulkheadd was stopped, frozen or starved) are read first: an idle
    // connection that had sent a request is answered, not cut.
    uint64_t timeout_ms = 0;
    TimeoutFrom timeout_from = TimeoutFrom::kLastActivity;
    // Connections open at once; one accepted above this is closed at once (0: no cap).
    size_t max_connections = 0;
  };
  // Makes the protocol of a connection just accepted, before its first read.
  using Accept = std::function<std::unique_ptr<ConnectionProtocol>(StreamConnection& conn)>;

  // `name` starts log lines ("metrics endpoint: accept: ..."). Timeouts run on `time`, which
  // outlives the server.
  StreamServer(uv_loop_t* loop, loop::TimeSource* time, std::string name, Limits limits,
               Accept accept);
  // REQUIRES: Close() was called and its callback has run.
  ~StreamServer();
  StreamServer(const StreamServer&) = delete;
  StreamServer& operator=(const StreamServer&) = delete;

  // Serves a socket from ipc::ClaimListeningSocket (non-blocking); its file is removed on Close if
  // it still names the socket bound. Errors: "uv_pipe_open: <libuv error>", "listen: ...".
  Status ListenUnix(ipc::ListeningSocket socket, int backlog);
  // Binds `addr` (SO_REUSEADDR, as libuv sets it) and listens. Errors: "bind: <libuv error>",
  // "listen: ...".
  Status ListenTcp(const sockaddr* addr, int backlog);
  // The address ListenTcp bound (the port the kernel chose for port 0).
  Result<sockaddr_storage> TcpAddress() const;
  // A re-exec (docs/reexec.md): the listening socket's fd (owned by the listener; -1 before a
  // Listen*), and, in the new image instead of Listen*, serving a listening socket taken back: a
  // Unix one bound at `path` (whose file Close removes), or a TCP one. Errors as Listen*'s.
  int listen_fd() const;
  Status AdoptUnix(UniqueFd fd, const std::string& path, int backlog);
  Status AdoptTcp(UniqueFd fd, int backlog);

  // Closes the listener and every connection; `on_closed` runs after the last close callback.
  void Close(std::function<void()> on_closed);

  size_t connections() const { return connections_.size(); }

  // --- Re-exec (docs/reexec.md). ---
  // The connections to hand over at the exec, as sockets of their own (FD_CLOEXEC), each closed
  // here: those between two requests with nothing unsent (ConnectionProtocol::BetweenRequests;
  // a request that waits unread in the socket is read by the new image). The others stay (and
  // close at the exec). Accept goes on meanwhile: a connection accepted last is handed over too.
  std::vector<UniqueFd> HandOver();
  // A connection handed over: served from here as an accepted one.
  void AdoptConnection(UniqueFd fd);

 private:
  friend class StreamConnection;
  static void OnConnection(uv_stream_t* listener, int status);
  // Serves `conn`, attached (accepted or opened) when `attached` is 0, else closes it.
  void Serve(StreamConnection* conn, int attached);
  void CloseTimedOutConnections();

  uv_loop_t* loop_;
  loop::TimeSource* time_;
  std::string name_;
  Limits limits_;
  Accept accept_;
  // The listener; the connections and timeout_check_ close as parts of it.
  loop::HandleGroup handles_;
  uv_stream_t* listener_ = nullptr;  // a uv_tcp_t (ListenTcp) or a uv_pipe_t (ListenUnix)
  bool tcp_ = false;
  ipc::SocketFile file_;  // the Unix socket file ListenUnix served (removed on Close if ours)
  loop::AfterPoll timeout_check_;
  std::unordered_set<StreamConnection*> connections_;
};

}  // namespace bulkhead::control
