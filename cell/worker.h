// SPDX-License-Identifier: MIT
// Worker SDK: serves the frame protocol (docs/protocol.md) on the listening socket bulkheadd
// passes as fd 3 (sd_listen_fds(3)). One thread per accepted connection; on a multiplexed
// connection (BULKHEAD_WORKER_CONNECTIONS=multiplex) also a pool of handler threads, one per
// request in progress. The handler runs on those threads, concurrently, so it must be thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "base/status.h"

namespace bulkhead::cell {

// A handler's answer to one request. ok: REPLY OK with `payload`. !ok: REPLY FAILED with reason
// worker_error and `payload` as the error message.
struct HandlerResult {
  bool ok = true;
  std::string payload;

  static HandlerResult Ok(std::string payload) { return {true, std::move(payload)}; }
  static HandlerResult Error(std::string message) { return {false, std::move(message)}; }
};

// Called once per REQUEST with its payload (valid only during the call). May block (a slow
// dependency) and runs concurrently with other calls. An exception escaping the handler becomes
// REPLY FAILED/worker_error with its what(); a result over the payload limit (MaxPayloadFromEnv)
// becomes FAILED/worker_error "reply of N bytes exceeds the maximum of M".
using Handler = std::function<HandlerResult(std::string_view payload)>;

// The request a Handler is answering, as CurrentRequest() shows it to that handler.
struct RequestContext {
  int connection_fd = -1;   // the connection the request came on (owned by the SDK)
  uint64_t request_id = 0;  // the REQUEST frame's request_id, which its REPLY must carry
};

// Inside a Handler call: the request that handler is answering on the calling thread; nullopt
// anywhere else. For a handler that must write to the connection itself rather than return a
// result (the test worker sends half a reply and exits): such a handler never returns, since the
// SDK would then write a REPLY of its own after those bytes. On a multiplexed connection other
// threads write replies to the same connection at any time.
std::optional<RequestContext> CurrentRequest();

// Inside a Handler call: writes `bytes` whole to the connection of the request being answered.
// On a multiplexed connection it waits for a reply another thread is writing, and from then on
// until the handler returns nothing else is written to the connection, so the handler's bytes
// are never mixed with other replies. For the handler that writes (part of) its reply itself
// (CurrentRequest). False when the write failed or outside a Handler call.
bool WriteToCurrentConnection(std::string_view bytes);

// Takes the listening socket passed per sd_listen_fds(3): LISTEN_PID must equal getpid() and
// LISTEN_FDS must be 1, so the socket is fd 3 (SD_LISTEN_FDS_START); fd 3 must be a listening
// stream socket. Unsets LISTEN_PID, LISTEN_FDS and LISTEN_FDNAMES whether or not it succeeds (as
// sd_listen_fds(1) does), so the worker's own children do not inherit them, and sets FD_CLOEXEC on
// fd 3. The error names what is missing or wrong, e.g. "LISTEN_PID=41 is not this process
// (pid 57)". REQUIRES: called before the process starts threads (it calls unsetenv).
Result<int> ListenFdFromEnv();

// The environment variable in which bulkheadd passes its max_payload_bytes to the worker
// (docs/protocol.md, "Worker socket").
inline constexpr char kMaxPayloadEnv[] = "BULKHEAD_MAX_PAYLOAD_BYTES";

// The environment variable in which bulkheadd tells the worker that its connections are
// multiplexed (`worker_connections = "multiplex"`, docs/protocol.md, "Multiplexed worker
// connections"): set to kWorkerConnectionsMultiplex then, unset in the default mode.
inline constexpr char kWorkerConnectionsEnv[] = "BULKHEAD_WORKER_CONNECTIONS";
inline constexpr char kWorkerConnectionsMultiplex[] = "multiplex";

// Whether $BULKHEAD_WORKER_CONNECTIONS is kWorkerConnectionsMultiplex. Another value is reported
// on stderr and read as the default mode.
bool MultiplexFromEnv();

// The largest request and reply payload, in bytes: $BULKHEAD_MAX_PAYLOAD_BYTES when it is a number
// in 1..1073741824 (1 GiB), else the protocol's default of 4 MiB (ipc::kDefaultMaxPayload).
uint32_t MaxPayloadFromEnv();

// Serves forever on `listen_fd` (a listening SOCK_STREAM socket): accept(2)s connections and runs
// each on its own detached thread, which reads REQUEST frames and answers each, in order, with a
// REPLY carrying the same request_id (OK, or FAILED/worker_error). Requests on one connection are
// handled one after another; concurrency comes from several connections. When MultiplexFromEnv()
// (read once, when Serve starts), each connection is multiplexed (docs/protocol.md, "Multiplexed
// worker connections"): its thread keeps reading requests and hands each to an idle handler
// thread of that connection, or starts one, so requests run concurrently, as many as are in
// flight; replies are written as they finish, in any order, several in one write when they finish
// together. A connection that sends
// malformed bytes (ipc::FrameDecoder error) or a frame over MaxPayloadFromEnv() (read once, when
// Serve starts) is closed; others continue.
// Ignores SIGPIPE (a peer that went away is an EPIPE on that connection only).
// Returns an exit code (1) only when accept(2) fails fatally (EBADF, EINVAL, ENOTSOCK), after
// printing the error to stderr; EMFILE/ENFILE/ENOBUFS/ENOMEM pause accepting for 100 ms and retry.
int Serve(int listen_fd, Handler handler);

// ListenFdFromEnv then Serve. If no socket was passed, prints
// "<program>: <error>" to stderr and returns 1.
int ServeFromEnv(Handler handler);

}  // namespace bulkhead::cell
