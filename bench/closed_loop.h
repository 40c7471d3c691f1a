// SPDX-License-Identifier: MIT
// RunClosedLoop: the bench's load generator. `clients` connections to a Unix socket speaking frames
// (docs/protocol.md) or HTTP/1.1 (bulkheadd's front socket, HAProxy's, or a worker's own socket),
// each keeping `depth` requests in flight (closed loop: a reply lets the next request go), driven
// by `threads` threads, each with its own epoll(7) over its share of the connections (non-blocking
// sockets), so that the load generator itself costs little CPU per request on a small machine.
// Measures replies per second and per-request latency. Blocks the calling thread for warmup +
// duration (+ draining, bounded by the reply timeout); starts and joins its own threads.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "ipc/frame.h"

namespace bulkhead::bench {

enum class LoadProtocol {
  kFrames,  // REQUEST frames carrying the payload; replies may come back in any order
  // HTTP/1.1 keep-alive `POST /echo` with the payload as a Content-Length body; responses come back
  // in order and must carry a Content-Length (no chunked or close-delimited bodies).
  kHttp,
};

struct LoadOptions {
  std::string socket;  // Unix socket to connect to
  LoadProtocol protocol = LoadProtocol::kFrames;
  int clients = 1;  // connections; >= 1
  int threads = 1;  // load threads, each driving every `threads`-th connection; 1..clients
  int depth = 1;    // requests in flight per connection (1 = request/reply); >= 1
  std::string payload;
  // Replies sent before warmup ends are not counted; the measuring window lasts `duration`.
  std::chrono::milliseconds warmup{50};
  std::chrono::milliseconds duration{500};
  // The status every reply should have: kOk for echo, kRejected for the rejection path (frames);
  // the HTTP status code of every response (HTTP).
  ipc::ReplyStatus expected = ipc::ReplyStatus::kOk;
  int expected_http_status = 200;
  // A thread that receives nothing for this long fails the run.
  std::chrono::milliseconds reply_timeout{5000};
  // When set to true (by a signal handler), clients stop sending and the run ends early.
  const std::atomic<bool>* interrupted = nullptr;
};

struct LoadResult {
  // Replies with the expected status received inside the window.
  uint64_t replies = 0;
  // Replies inside the window with any other status (a failed request, an unexpected rejection).
  uint64_t unexpected = 0;
  // Every reply received, counted or not (warmup and draining included): the supervisor's counters
  // must account for exactly these.
  uint64_t total_replies = 0;
  // Length of the measuring window, seconds (shorter if interrupted).
  double seconds = 0;
  // Latency of each expected reply both sent and received inside the window, nanoseconds
  // (saturating at UINT32_MAX, about 4.3 s). Unsorted.
  std::vector<uint32_t> latencies_ns;
  // The first connect/send/receive error of any client, or empty.
  std::string error;
};

LoadResult RunClosedLoop(const LoadOptions& options);

}  // namespace bulkhead::bench
