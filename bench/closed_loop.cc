// SPDX-License-Identifier: MIT
// Each load thread drives its share of the connections on its own epoll(7) instance, with
// non-blocking sockets: a reply read is a request written, in the same loop iteration.
#include "bench/closed_loop.h"

#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <deque>
#include <latch>
#include <memory>
#include <thread>

#include "base/unique_fd.h"
#include "ipc/client.h"

namespace bulkhead::bench {

namespace {

using Clock = std::chrono::steady_clock;

// Samples reserved per thread up front, so the hot loop rarely reallocates.
constexpr size_t kReservedSamples = 1 << 16;
// Bytes read per read(2), and the largest HTTP response the client accepts.
constexpr size_t kReadChunk = size_t{64} * 1024;
constexpr size_t kMaxHttpResponse = 1 << 20;
constexpr int kMaxEvents = 256;

struct ThreadOutcome {
  uint64_t replies = 0;
  uint64_t unexpected = 0;
  uint64_t total_replies = 0;
  std::vector<uint32_t> latencies_ns;
  std::string error;
};

struct Reply {
  uint64_t slot = 0;      // the slot of the request it answers
  bool expected = false;  // it had LoadOptions' expected status
};

std::string_view HeaderValue(std::string_view head, std::string_view name) {
  size_t pos = 0;
  while ((pos = head.find("\r\n", pos)) != std::string_view::npos) {
    pos += 2;
    std::string_view line = head.substr(pos, head.find("\r\n", pos) - pos);
    if (line.size() > name.size() && line[name.size()] == ':' &&
        std::equal(name.begin(), name.end(), line.begin(), [](char a, char b) {
          return std::tolower(static_cast<unsigned char>(a)) ==
                 std::tolower(static_cast<unsigned char>(b));
        })) {
      line.remove_prefix(name.size() + 1);
      while (!line.empty() && (line.front() == ' ' || line.front() == '\t')) line.remove_prefix(1);
      while (!line.empty() && (line.back() == ' ' || line.back() == '\t')) line.remove_suffix(1);
      return line;
    }
  }
  return {};
}

// One connection of a load thread: its socket, what it has to send, what it received.
class LoadConnection {
 public:
  LoadConnection(UniqueFd fd, const LoadOptions& options, const std::string& http_request)
      : fd_(std::move(fd)),
        options_(options),
        http_request_(http_request),
        frames_(ipc::FrameType::kReply) {}

  int fd() const { return fd_.get(); }
  bool want_write() const { return out_sent_ < out_.size(); }
  bool closed() const { return closed_; }

  // Queues the request of `slot` (0..depth-1, not in flight); Flush sends it.
  void Queue(uint64_t slot) {
    if (options_.protocol == LoadProtocol::kHttp) {
      out_ += http_request_;
      http_in_flight_.push_back(slot);
    } else {
      ipc::AppendFrame(&out_, ipc::FrameHeader{.request_id = slot}, options_.payload);
    }
  }

  // Writes what is queued, until done or EAGAIN.
  Status Flush() {
    while (out_sent_ < out_.size()) {
      ssize_t n = ::send(fd_.get(), out_.data() + out_sent_, out_.size() - out_sent_, MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && errno == EAGAIN) return Status::Ok();
      if (n < 0) return Status::FromErrno("send " + options_.socket);
      out_sent_ += static_cast<size_t>(n);
    }
    out_.clear();
    out_sent_ = 0;
    return Status::Ok();
  }

  // Reads what has arrived (until EAGAIN) and appends the complete replies to *replies.
  Status Read(std::vector<Reply>* replies) {
    for (;;) {
      ssize_t n;
      size_t asked;
      if (options_.protocol == LoadProtocol::kHttp) {
        const size_t old = http_in_.size();
        http_in_.resize(old + kReadChunk);
        asked = kReadChunk;
        n = ::read(fd_.get(), http_in_.data() + old, asked);
        http_in_.resize(old + (n > 0 ? static_cast<size_t>(n) : 0));
      } else {
        std::span<char> room = frames_.PrepareWrite(kReadChunk);
        asked = room.size();
        n = ::read(fd_.get(), room.data(), asked);
        frames_.Commit(n > 0 ? static_cast<size_t>(n) : 0);
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && errno == EAGAIN) break;
      if (n < 0) return Status::FromErrno("read " + options_.socket);
      if (n == 0) {
        closed_ = true;
        break;
      }
      if (static_cast<size_t>(n) < asked) break;
    }
    Status parsed =
        options_.protocol == LoadProtocol::kHttp ? ParseHttp(replies) : ParseFrames(replies);
    if (!parsed.ok()) return parsed;
    if (closed_) return Error("connection closed");
    return Status::Ok();
  }

 private:
  Status Error(const std::string& what) const {
    return Status::Error(options_.socket + ": " + what);
  }

  Status ParseFrames(std::vector<Reply>* replies) {
    ipc::FrameView frame;
    for (;;) {
      ipc::DecodeResult result = frames_.Next(&frame);
      if (result == ipc::DecodeResult::kNeedMore) return Status::Ok();
      if (result == ipc::DecodeResult::kError) {
        return Error("malformed reply: " + frames_.error_message());
      }
      replies->push_back(Reply{frame.header.request_id, frame.header.status == options_.expected});
    }
  }

  // HTTP/1.1 responses come in request order, so the slots in flight form a FIFO. Each must carry
  // a Content-Length (no chunked or close-delimited bodies).
  Status ParseHttp(std::vector<Reply>* replies) {
    size_t pos = 0;
    for (;;) {
      const std::string_view rest = std::string_view(http_in_).substr(pos);
      const size_t head_end = rest.find("\r\n\r\n");
      if (head_end == std::string_view::npos) break;
      const std::string_view head = rest.substr(0, head_end + 2);
      int status = 0;
      if (!head.starts_with("HTTP/1.") || head.size() < 12 ||
          std::from_chars(head.data() + 9, head.data() + 12, status).ec != std::errc()) {
        return Error("HTTP: bad status line: " + std::string(head.substr(0, head.find('\r'))));
      }
      const std::string_view length = HeaderValue(head, "content-length");
      size_t body = 0;
      if (length.empty() ||
          std::from_chars(length.data(), length.data() + length.size(), body).ec != std::errc()) {
        return Error("HTTP: response without a Content-Length: " + std::string(head));
      }
      if (rest.size() < head_end + 4 + body) break;
      if (http_in_flight_.empty()) return Error("HTTP: a response to no request");
      pos += head_end + 4 + body;
      replies->push_back(Reply{http_in_flight_.front(), status == options_.expected_http_status});
      http_in_flight_.pop_front();
    }
    http_in_.erase(0, pos);
    if (http_in_.size() > kMaxHttpResponse) return Error("HTTP: response over 1 MiB");
    return Status::Ok();
  }

  UniqueFd fd_;
  const LoadOptions& options_;
  const std::string& http_request_;
  std::string out_;
  size_t out_sent_ = 0;
  bool closed_ = false;
  ipc::FrameDecoder frames_;
  std::string http_in_;
  std::deque<uint64_t> http_in_flight_;
};

uint32_t SaturatingNs(Clock::duration d) {
  auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(d).count();
  return ns < 0 ? 0 : ns > UINT32_MAX ? UINT32_MAX : static_cast<uint32_t>(ns);
}

Status WatchWrites(int epoll_fd, LoadConnection& c, size_t index, bool on) {
  epoll_event ev{.events = on ? uint32_t{EPOLLIN | EPOLLOUT} : uint32_t{EPOLLIN},
                 .data = {.u64 = index}};
  if (::epoll_ctl(epoll_fd, EPOLL_CTL_MOD, c.fd(), &ev) != 0) return Status::FromErrno("epoll_ctl");
  return Status::Ok();
}

// One load thread over `connections`. Request slots are 0..depth-1 per connection: a reply frees
// its slot, which the next request reuses, so frame replies may come back in any order (bulkheadd
// answers in completion order). `start` is the common time zero, written before `ready` opens.
void RunThread(const LoadOptions& options, std::vector<LoadConnection*> connections,
               const Clock::time_point& start, std::latch& ready, ThreadOutcome* out) {
  UniqueFd epoll(::epoll_create1(EPOLL_CLOEXEC));
  const size_t depth = static_cast<size_t>(options.depth);
  std::vector<Clock::time_point> sent_at(connections.size() * depth);
  std::vector<bool> watching_writes(connections.size(), false);
  out->latencies_ns.reserve(kReservedSamples);
  if (!epoll) out->error = "epoll_create1: " + std::string(std::strerror(errno));
  for (size_t i = 0; i < connections.size() && out->error.empty(); ++i) {
    epoll_event ev{.events = EPOLLIN, .data = {.u64 = i}};
    if (::epoll_ctl(epoll.get(), EPOLL_CTL_ADD, connections[i]->fd(), &ev) != 0) {
      out->error = "epoll_ctl: " + std::string(std::strerror(errno));
    }
  }
  ready.arrive_and_wait();
  if (!out->error.empty()) return;
  const Clock::time_point window_begin = start + options.warmup;
  const Clock::time_point window_end = window_begin + options.duration;

  // Flushes connection i, watching for writability while some of its bytes wait.
  auto flush = [&](size_t i) -> Status {
    Status status = connections[i]->Flush();
    if (!status.ok()) return status;
    if (connections[i]->want_write() != watching_writes[i]) {
      watching_writes[i] = connections[i]->want_write();
      return WatchWrites(epoll.get(), *connections[i], i, watching_writes[i]);
    }
    return Status::Ok();
  };

  uint64_t in_flight = 0;
  const Clock::time_point first = Clock::now();
  for (size_t i = 0; i < connections.size(); ++i) {
    for (size_t slot = 0; slot < depth; ++slot) {
      sent_at[i * depth + slot] = first;
      connections[i]->Queue(slot);
      ++in_flight;
    }
    Status sent = flush(i);
    if (!sent.ok()) {
      out->error = sent.message();
      return;
    }
  }
  const int timeout_ms = static_cast<int>(options.reply_timeout.count());
  std::vector<epoll_event> events(kMaxEvents);
  std::vector<Reply> replies;
  bool sending = true;
  while (in_flight > 0) {
    int n = ::epoll_wait(epoll.get(), events.data(), kMaxEvents, timeout_ms);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      out->error = "epoll_wait: " + std::string(std::strerror(errno));
      return;
    }
    if (n == 0) {
      out->error = options.socket + ": no reply for " + std::to_string(timeout_ms) + " ms";
      return;
    }
    for (int e = 0; e < n; ++e) {
      const size_t i = events[e].data.u64;
      LoadConnection& c = *connections[i];
      if (events[e].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
        replies.clear();
        Status read = c.Read(&replies);
        const Clock::time_point now = Clock::now();
        if (now >= window_end || (options.interrupted && options.interrupted->load())) {
          sending = false;
        }
        for (const Reply& reply : replies) {
          if (reply.slot >= depth) {
            out->error = "reply to unknown request id " + std::to_string(reply.slot);
            return;
          }
          --in_flight;
          ++out->total_replies;
          Clock::time_point& sent = sent_at[i * depth + reply.slot];
          if (now >= window_begin && now < window_end) {
            if (reply.expected) {
              ++out->replies;
              if (sent >= window_begin) out->latencies_ns.push_back(SaturatingNs(now - sent));
            } else {
              ++out->unexpected;
            }
          }
          if (!sending) continue;
          sent = now;
          c.Queue(reply.slot);
          ++in_flight;
        }
        if (!read.ok()) {
          out->error = read.message();
          return;
        }
      }
      Status sent = flush(i);
      if (!sent.ok()) {
        out->error = sent.message();
        return;
      }
    }
  }
}

}  // namespace

LoadResult RunClosedLoop(const LoadOptions& options) {
  LoadResult result;
  const int clients = std::max(options.clients, 1);
  const int threads = std::clamp(options.threads, 1, clients);
  const std::string http_request =
      "POST /echo HTTP/1.1\r\nHost: bench\r\nContent-Type: text/plain\r\nContent-Length: " +
      std::to_string(options.payload.size()) + "\r\n\r\n" + options.payload;
  // Connections are made before the clock starts.
  std::vector<std::unique_ptr<LoadConnection>> connections;
  for (int i = 0; i < clients; ++i) {
    Result<UniqueFd> fd = ipc::ConnectUnix(options.socket);
    if (!fd.ok()) {
      result.error = fd.status().message();
      return result;
    }
    const int flags = ::fcntl(fd->get(), F_GETFL);
    if (flags < 0 || ::fcntl(fd->get(), F_SETFL, flags | O_NONBLOCK) != 0) {
      result.error = "fcntl O_NONBLOCK: " + std::string(std::strerror(errno));
      return result;
    }
    connections.push_back(
        std::make_unique<LoadConnection>(std::move(fd).value(), options, http_request));
  }

  std::vector<ThreadOutcome> outcomes(static_cast<size_t>(threads));
  std::latch ready(threads + 1);
  Clock::time_point start;
  std::vector<std::thread> workers;
  workers.reserve(static_cast<size_t>(threads));
  for (int t = 0; t < threads; ++t) {
    std::vector<LoadConnection*> share;
    for (int i = t; i < clients; i += threads) share.push_back(connections[i].get());
    workers.emplace_back(RunThread, std::cref(options), std::move(share), std::cref(start),
                         std::ref(ready), &outcomes[t]);
  }
  start = Clock::now();
  ready.arrive_and_wait();
  for (std::thread& worker : workers) worker.join();
  const Clock::time_point window_begin = start + options.warmup;
  const Clock::time_point end = std::min(Clock::now(), window_begin + options.duration);
  result.seconds = std::max(0.0, std::chrono::duration<double>(end - window_begin).count());

  for (ThreadOutcome& outcome : outcomes) {
    result.replies += outcome.replies;
    result.unexpected += outcome.unexpected;
    result.total_replies += outcome.total_replies;
    result.latencies_ns.insert(result.latencies_ns.end(), outcome.latencies_ns.begin(),
                               outcome.latencies_ns.end());
    if (result.error.empty() && !outcome.error.empty()) result.error = outcome.error;
  }
  return result;
}

}  // namespace bulkhead::bench
