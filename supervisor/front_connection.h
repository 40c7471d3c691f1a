// SPDX-License-Identifier: MIT
// FrontConnection: one client connected to a cell's front socket. Decodes REQUEST frames, hands
// each to its Cell for admission, and writes the replies (several per writev when pipelined). A
// malformed or oversized frame gets a BAD_REQUEST reply and the connection is closed after it is
// written. Owns itself: created by Accept(), deleted in its handle's close callback. REQUIRES: loop
// thread only.
#pragma once

#include <uv.h>

#include <cstdint>
#include <string_view>

#include "ipc/frame.h"
#include "supervisor/stream_writer.h"

namespace bulkhead::supervisor {

class Cell;
struct Request;

class FrontConnection {
 public:
  // Accepts one pending connection on `server` for `cell`. Errors are logged; nothing to return.
  static void Accept(Cell* cell, uv_stream_t* server, uint32_t max_payload);

  // Refuses one pending connection on `server`: accepts it, sends `frame` (one small REPLY, which
  // a fresh socket's send buffer always takes whole) without blocking, and closes it. A client that
  // is already gone is ignored.
  static void Refuse(uv_stream_t* server, std::string_view frame);

  // Queues a reply frame to this client; written at once unless a read is being processed, in which
  // case every reply produced by that read goes out in one write.
  void SendReply(const ipc::FrameHeader& header, std::string_view payload);

  // The client's live requests: linked on admission, unlinked when answered.
  void LinkRequest(Request* request);
  void UnlinkRequest(Request* request);

  // Closes the connection: queued requests are cancelled, running ones lose their client.
  void Close();

 private:
  FrontConnection(Cell* cell, uint32_t max_payload);
  ~FrontConnection() = default;

  static void OnAlloc(uv_handle_t* handle, size_t suggested, uv_buf_t* buf);
  static void OnRead(uv_stream_t* stream, ssize_t nread, const uv_buf_t* buf);
  static void OnClosed(uv_handle_t* handle);
  void ProcessFrames();
  void OnDrained();
  // After the client's EOF: closes once every request it sent is answered and written.
  void CloseIfDone();

  Cell* cell_;
  // Unsent reply bytes beyond which the client is dropped: room for two full-size replies.
  size_t max_backlog_;
  uv_pipe_t pipe_{};
  ipc::FrameDecoder decoder_;
  StreamWriter writer_;
  Request* requests_ = nullptr;  // head of the intrusive list
  bool in_read_ = false;
  bool closing_ = false;
  bool close_when_drained_ = false;
  bool read_closed_ = false;  // the client sent EOF (shutdown(SHUT_WR))
};

}  // namespace bulkhead::supervisor
