// SPDX-License-Identifier: MIT
#include "bench/closed_loop.h"

#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <deque>
#include <latch>
#include <memory>
#include <thread>

#include "base/unique_fd.h"
#include "ipc/client.h"

namespace bulkhead::bench {

namespace {

using Clock = std::chrono::steady_clock;

// Samples reserved per client up front, so the hot loop rarely reallocates.
constexpr size_t kReservedSamples = 1 << 16;

struct ClientOutcome {
  uint64_t replies = 0;
  uint64_t unexpected = 0;
  uint64_t total_replies = 0;
  std::vector<uint32_t> latencies_ns;
  std::string error;
};

// One client's connection, whatever it speaks. Used by one thread.
class LoadConnection {
 public:
  struct Reply {
    uint64_t slot = 0;      // the slot of the request it answers
    bool expected = false;  // it had LoadOptions' expected status
  };
  virtual ~LoadConnection() = default;
  // Sends the request of `slot` (0..depth-1, not in flight).
  virtual Status Send(uint64_t slot) = 0;
  // Blocks for the next reply.
  virtual Result<Reply> Receive() = 0;
};

// Frames: the slot is the request id.
class FrameConnection : public LoadConnection {
 public:
  FrameConnection(ipc::Client client, const LoadOptions& options)
      : client_(std::move(client)), options_(options) {}
  Status Send(uint64_t slot) override { return client_.Send(slot, options_.payload); }
  Result<Reply> Receive() override {
    Result<ipc::Client::Reply> reply = client_.Receive();
    if (!reply.ok()) return reply.status();
    return Reply{reply->header.request_id, reply->header.status == options_.expected};
  }

 private:
  ipc::Client client_;
  const LoadOptions& options_;
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

// HTTP/1.1 keep-alive: responses come in request order, so the slots in flight form a FIFO.
class HttpConnection : public LoadConnection {
 public:
  HttpConnection(UniqueFd fd, const LoadOptions& options) : fd_(std::move(fd)), options_(options) {
    request_ =
        "POST /echo HTTP/1.1\r\nHost: bench\r\nContent-Type: text/plain\r\n"
        "Content-Length: " +
        std::to_string(options.payload.size()) + "\r\n\r\n" + options.payload;
  }

  // A connected Unix socket with SO_SNDTIMEO / SO_RCVTIMEO set to `timeout`.
  static Result<UniqueFd> Connect(const std::string& path, std::chrono::milliseconds timeout) {
    Result<UniqueFd> fd = ipc::ConnectUnix(path);
    if (!fd.ok()) return fd.status();
    timeval tv{.tv_sec = timeout.count() / 1000,
               .tv_usec = static_cast<suseconds_t>(timeout.count() % 1000 * 1000)};
    if (::setsockopt(fd->get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) != 0 ||
        ::setsockopt(fd->get(), SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv) != 0) {
      return Status::FromErrno("setsockopt " + path);
    }
    return fd;
  }

  Status Send(uint64_t slot) override {
    size_t sent = 0;
    while (sent < request_.size()) {
      ssize_t n = ::send(fd_.get(), request_.data() + sent, request_.size() - sent, MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return Status::FromErrno("send " + options_.socket);
      sent += static_cast<size_t>(n);
    }
    in_flight_.push_back(slot);
    return Status::Ok();
  }

  Result<Reply> Receive() override {
    for (;;) {
      Result<Reply> reply = Parse();
      if (!reply.ok() || reply->slot != kNoReply) return reply;
      if (in_.size() - begin_ > kMaxResponse) return Error("response over 1 MiB");
      if (begin_ > 0 && begin_ == in_.size()) {
        in_.clear();
        begin_ = 0;
      }
      const size_t old = in_.size();
      in_.resize(old + kReadChunk);
      ssize_t n = ::read(fd_.get(), in_.data() + old, kReadChunk);
      in_.resize(old + (n > 0 ? static_cast<size_t>(n) : 0));
      if (n == 0) return Error("connection closed");
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return Error("timed out");
      if (n < 0) return Status::FromErrno("read " + options_.socket);
    }
  }

 private:
  static constexpr uint64_t kNoReply = UINT64_MAX;
  static constexpr size_t kReadChunk = 16 * 1024;
  static constexpr size_t kMaxResponse = 1 << 20;

  Status Error(const std::string& what) const {
    return Status::Error(options_.socket + ": HTTP: " + what);
  }

  // One complete response from in_ (consumed), or slot kNoReply when more bytes are needed.
  Result<Reply> Parse() {
    const std::string_view rest = std::string_view(in_).substr(begin_);
    const size_t head_end = rest.find("\r\n\r\n");
    if (head_end == std::string_view::npos) return Reply{kNoReply, false};
    const std::string_view head = rest.substr(0, head_end + 2);
    int status = 0;
    if (!head.starts_with("HTTP/1.") || head.size() < 12 ||
        std::from_chars(head.data() + 9, head.data() + 12, status).ec != std::errc()) {
      return Error("bad status line: " + std::string(head.substr(0, head.find('\r'))));
    }
    const std::string_view length = HeaderValue(head, "content-length");
    size_t body = 0;
    if (length.empty() ||
        std::from_chars(length.data(), length.data() + length.size(), body).ec != std::errc()) {
      return Error("response without a Content-Length: " + std::string(head));
    }
    if (rest.size() < head_end + 4 + body) return Reply{kNoReply, false};
    if (in_flight_.empty()) return Error("response to no request");
    begin_ += head_end + 4 + body;
    const uint64_t slot = in_flight_.front();
    in_flight_.pop_front();
    return Reply{slot, status == options_.expected_http_status};
  }

  UniqueFd fd_;
  const LoadOptions& options_;
  std::string request_;
  std::string in_;
  size_t begin_ = 0;  // first unparsed byte of in_
  std::deque<uint64_t> in_flight_;
};

Result<std::unique_ptr<LoadConnection>> Connect(const LoadOptions& options) {
  if (options.protocol == LoadProtocol::kHttp) {
    Result<UniqueFd> fd = HttpConnection::Connect(options.socket, options.reply_timeout);
    if (!fd.ok()) return fd.status();
    return std::unique_ptr<LoadConnection>(
        std::make_unique<HttpConnection>(std::move(fd).value(), options));
  }
  Result<ipc::Client> client = ipc::Client::Connect(options.socket);
  if (!client.ok()) return client.status();
  Status timeout = client->SetTimeout(options.reply_timeout);
  if (!timeout.ok()) return timeout;
  return std::unique_ptr<LoadConnection>(
      std::make_unique<FrameConnection>(std::move(client).value(), options));
}

uint32_t SaturatingNs(Clock::duration d) {
  auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(d).count();
  return ns < 0 ? 0 : ns > UINT32_MAX ? UINT32_MAX : static_cast<uint32_t>(ns);
}

// One client's loop. Request ids are slot numbers 0..depth-1: a reply frees its slot, whose id
// the next request reuses, so replies may come back in any order (bulkheadd answers in completion
// order). `start` is the common time zero, written before `ready` opens.
void RunClient(const LoadOptions& options, LoadConnection& client, const Clock::time_point& start,
               std::latch& ready, ClientOutcome* out) {
  ready.arrive_and_wait();
  const Clock::time_point window_begin = start + options.warmup;
  const Clock::time_point window_end = window_begin + options.duration;
  std::vector<Clock::time_point> sent_at(static_cast<size_t>(options.depth));
  out->latencies_ns.reserve(kReservedSamples);

  int in_flight = 0;
  for (int slot = 0; slot < options.depth; ++slot) {
    sent_at[slot] = Clock::now();
    Status sent = client.Send(static_cast<uint64_t>(slot));
    if (!sent.ok()) {
      out->error = sent.message();
      break;
    }
    ++in_flight;
  }
  bool sending = out->error.empty();
  while (in_flight > 0) {
    Result<LoadConnection::Reply> reply = client.Receive();
    const Clock::time_point now = Clock::now();
    if (!reply.ok()) {
      out->error = reply.status().message();
      return;
    }
    --in_flight;
    ++out->total_replies;
    const uint64_t slot = reply->slot;
    if (slot >= sent_at.size()) {
      out->error = "reply to unknown request id " + std::to_string(slot);
      return;
    }
    if (now >= window_begin && now < window_end) {
      if (reply->expected) {
        ++out->replies;
        if (sent_at[slot] >= window_begin)
          out->latencies_ns.push_back(SaturatingNs(now - sent_at[slot]));
      } else {
        ++out->unexpected;
      }
    }
    if (now >= window_end || (options.interrupted && options.interrupted->load())) sending = false;
    if (!sending) continue;
    sent_at[slot] = now;
    Status sent = client.Send(slot);
    if (!sent.ok()) {
      out->error = sent.message();
      return;
    }
    ++in_flight;
  }
}

}  // namespace

LoadResult RunClosedLoop(const LoadOptions& options) {
  LoadResult result;
  const int clients = std::max(options.clients, 1);
  // Connections are made before the clock starts.
  std::vector<std::unique_ptr<LoadConnection>> connections;
  for (int i = 0; i < clients; ++i) {
    Result<std::unique_ptr<LoadConnection>> connection = Connect(options);
    if (!connection.ok()) {
      result.error = connection.status().message();
      return result;
    }
    connections.push_back(std::move(connection).value());
  }

  std::vector<ClientOutcome> outcomes(static_cast<size_t>(clients));
  std::latch ready(clients + 1);
  Clock::time_point start;
  std::vector<std::thread> threads;
  threads.reserve(static_cast<size_t>(clients));
  for (int i = 0; i < clients; ++i) {
    threads.emplace_back(RunClient, std::cref(options), std::ref(*connections[i]), std::cref(start),
                         std::ref(ready), &outcomes[i]);
  }
  start = Clock::now();
  ready.arrive_and_wait();
  for (std::thread& thread : threads) thread.join();
  const Clock::time_point window_begin = start + options.warmup;
  const Clock::time_point end = std::min(Clock::now(), window_begin + options.duration);
  result.seconds = std::max(0.0, std::chrono::duration<double>(end - window_begin).count());

  for (ClientOutcome& outcome : outcomes) {
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
