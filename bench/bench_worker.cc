// SPDX-License-Identifier: MIT
// bulkhead-bench-worker --protocol frames|http [--peak-file PATH]: the bench's echo worker, one
// thread on epoll(7), the same binary behind every target of a run (direct, HAProxy, bulkheadd).
// Serves the listening socket passed as fd 3 (LISTEN_FDS, sd_listen_fds(3)), as bulkheadd's workers
// do: a Unix socket, or a TCP one (the wrk run's direct target; its clients get TCP_NODELAY).
//   frames: each REQUEST frame (docs/protocol.md) is answered with REPLY OK carrying its payload
//           and request_id; pipelined requests are answered in order.
//   http:   HTTP/1.1 with keep-alive; each request (Content-Length body, no chunked bodies) is
//           answered `200 OK` with its body, or "ok\n" when it has none; answers in order;
//           `Connection: close` or HTTP/1.0 closes after the response. A request it cannot parse
//           gets 400 and the connection is closed; a chunked one 501.
// Peak concurrency: a request is in progress from the read that completes it until its answer is
// written out whole. After each batch of reads the worker compares the number in progress with its
// peak; a new peak is written to PATH at once (a decimal number and a newline), so a bench can
// check what the supervisor let through (issue 16: never more than max_concurrent). For a worker
// that one supervisor connection carries one request at a time, that is the connections with an
// unanswered request. Exits on SIGTERM (the default action: "signal 15").
// --io uring: the same worker on io_uring(7) instead of epoll(7)
// (liburing, io_uring_enter(2)): a receive stays armed on every connection, and each loop
// iteration hands the kernel every new receive and send in one io_uring_enter call that also
// waits for the next completion, so a request costs no system call of its own. The bench measures
// its CPU per reply beside the epoll worker's (docs/benchmarks.md, "client hop").
#include <fcntl.h>
#include <liburing.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/exit_status.h"
#include "base/unique_fd.h"
#include "cell/worker.h"
#include "ipc/frame.h"

namespace bulkhead::bench {
namespace {

enum class Protocol { kFrames, kHttp };

// Events taken per epoll_wait, and bytes read per read(2).
constexpr int kMaxEvents = 256;
constexpr size_t kReadChunk = size_t{64} * 1024;
// Largest HTTP request head the worker buffers before answering 431.
constexpr size_t kMaxHttpHead = size_t{16} * 1024;

struct Connection {
  UniqueFd fd;
  ipc::FrameDecoder frames{ipc::FrameType::kRequest, cell::MaxPayloadFromEnv()};
  std::string http_in;       // HTTP bytes received and not yet parsed
  std::string out;           // answers not yet written
  size_t out_sent = 0;       // bytes of `out` already written
  uint32_t in_progress = 0;  // requests read whose answer is not yet written out whole
  bool close_after = false;  // close once `out` is written (an error, or Connection: close)
  bool peer_closed = false;  // read(2) returned 0
  bool want_write = false;   // registered for EPOLLOUT
};

bool IEquals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

void AppendHttpResponse(std::string* out, std::string_view status_line, std::string_view body,
                        bool close) {
  out->append("HTTP/1.1 ").append(status_line).append("\r\nContent-Type: text/plain\r\n");
  if (close) out->append("Connection: close\r\n");
  out->append("Content-Length: ").append(std::to_string(body.size())).append("\r\n\r\n");
  out->append(body);
}

// Answers the complete requests buffered in `c`. Returns how many it answered.
uint32_t ServeHttp(Connection& c) {
  uint32_t answered = 0;
  size_t pos = 0;
  while (!c.close_after) {
    const std::string_view rest = std::string_view(c.http_in).substr(pos);
    const size_t head_end = rest.find("\r\n\r\n");
    if (head_end == std::string_view::npos) {
      if (rest.size() > kMaxHttpHead) {
        AppendHttpResponse(&c.out, "431 Request Header Fields Too Large", "head too large\n", true);
        c.close_after = true;
        ++answered;
      }
      break;
    }
    const std::string_view head = rest.substr(0, head_end);
    const size_t line_end = head.find("\r\n");
    const std::string_view request_line = head.substr(0, line_end);
    bool keep_alive = request_line.ends_with(" HTTP/1.1");
    bool bad = !keep_alive && !request_line.ends_with(" HTTP/1.0");
    bool chunked = false;
    uint64_t content_length = 0;
    std::string_view headers =
        line_end == std::string_view::npos ? std::string_view() : head.substr(line_end + 2);
    while (!headers.empty() && !bad) {
      const size_t eol = headers.find("\r\n");
      const std::string_view line = headers.substr(0, eol);
      headers = eol == std::string_view::npos ? std::string_view() : headers.substr(eol + 2);
      const size_t colon = line.find(':');
      if (colon == std::string_view::npos) {
        bad = true;
        break;
      }
      const std::string_view name = line.substr(0, colon);
      const std::string_view value = Trim(line.substr(colon + 1));
      if (IEquals(name, "content-length")) {
        auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), content_length);
        bad = ec != std::errc() || end != value.data() + value.size();
      } else if (IEquals(name, "transfer-encoding")) {
        chunked = true;
      } else if (IEquals(name, "connection")) {
        if (IEquals(value, "close")) keep_alive = false;
        if (IEquals(value, "keep-alive")) keep_alive = true;
      }
    }
    ++answered;
    if (bad || chunked) {
      AppendHttpResponse(&c.out, bad ? "400 Bad Request" : "501 Not Implemented",
                         bad ? "bad request\n" : "chunked bodies are not supported\n", true);
      c.close_after = true;
      break;
    }
    const size_t body_begin = head_end + 4;
    if (rest.size() - body_begin < content_length) {
      --answered;  // the body is still coming
      break;
    }
    const std::string_view body = rest.substr(body_begin, content_length);
    AppendHttpResponse(&c.out, "200 OK", body.empty() ? std::string_view("ok\n") : body,
                       !keep_alive);
    c.close_after = !keep_alive;
    pos += body_begin + content_length;
  }
  c.http_in.erase(0, pos);
  return answered;
}

// Answers the complete REQUEST frames buffered in `c`. Returns how many it answered.
uint32_t ServeFrames(Connection& c) {
  uint32_t answered = 0;
  ipc::FrameView frame;
  for (;;) {
    ipc::DecodeResult result = c.frames.Next(&frame);
    if (result == ipc::DecodeResult::kNeedMore) break;
    if (result == ipc::DecodeResult::kError) {
      c.close_after = true;
      break;
    }
    ipc::AppendFrame(
        &c.out,
        ipc::FrameHeader{.type = ipc::FrameType::kReply, .request_id = frame.header.request_id},
        frame.payload);
    ++answered;
  }
  return answered;
}

// Room for the next read into `c`'s input (kReadChunk bytes or more); CommitRead(c, protocol, got)
// keeps the `got` bytes read into it (0 for none), before anything else touches `c`'s input.
std::span<char> ReadRoom(Connection& c, Protocol protocol) {
  if (protocol == Protocol::kFrames) return c.frames.PrepareWrite(kReadChunk);
  const size_t old = c.http_in.size();
  c.http_in.resize(old + kReadChunk);
  return {c.http_in.data() + old, kReadChunk};
}

void CommitRead(Connection& c, Protocol protocol, size_t got) {
  if (protocol == Protocol::kFrames) {
    c.frames.Commit(got);
  } else {
    c.http_in.resize(c.http_in.size() - kReadChunk + got);
  }
}

// Answers the complete requests buffered in `c` and counts them in progress, in `c` and in
// `*in_progress`.
void Serve(Connection& c, Protocol protocol, uint64_t* in_progress) {
  const uint32_t answered = protocol == Protocol::kFrames ? ServeFrames(c) : ServeHttp(c);
  c.in_progress += answered;
  *in_progress += answered;
}

// Writes `peak` to `path` (a decimal number and a newline); nothing when `path` is empty.
void WritePeak(const std::string& path, uint64_t peak) {
  if (path.empty()) return;
  UniqueFd file(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  const std::string text = std::to_string(peak) + "\n";
  if (!file || ::write(file.get(), text.data(), text.size()) != static_cast<ssize_t>(text.size())) {
    std::fprintf(stderr, "bulkhead-bench-worker: cannot write %s: %s\n", path.c_str(),
                 std::strerror(errno));
  }
}

class Worker {
 public:
  Worker(Protocol protocol, std::string peak_file)
      : protocol_(protocol), peak_file_(std::move(peak_file)) {}

  int Run(int listen_fd) {
    listen_fd_ = listen_fd;
    int domain = 0;
    socklen_t length = sizeof domain;
    tcp_ = ::getsockopt(listen_fd_, SOL_SOCKET, SO_DOMAIN, &domain, &length) == 0 &&
           (domain == AF_INET || domain == AF_INET6);
    epoll_.Reset(::epoll_create1(EPOLL_CLOEXEC));
    if (!epoll_) return Fail("epoll_create1");
    int flags = ::fcntl(listen_fd_, F_GETFL);
    if (flags < 0 || ::fcntl(listen_fd_, F_SETFL, flags | O_NONBLOCK) != 0) return Fail("fcntl");
    epoll_event ev{.events = EPOLLIN, .data = {.fd = listen_fd_}};
    if (::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, listen_fd_, &ev) != 0) return Fail("epoll_ctl");
    WritePeak();
    std::vector<epoll_event> events(kMaxEvents);
    std::vector<int> touched;
    for (;;) {
      int n = ::epoll_wait(epoll_.get(), events.data(), kMaxEvents, -1);
      if (n < 0) {
        if (errno == EINTR) continue;
        return Fail("epoll_wait");
      }
      // Reads first, answers after: what this batch brought in is in progress at once.
      touched.clear();
      for (int i = 0; i < n; ++i) {
        const int fd = events[i].data.fd;
        if (fd == listen_fd_) {
          Accept();
          continue;
        }
        auto it = connections_.find(fd);
        if (it == connections_.end()) continue;
        if (events[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) Read(*it->second);
        touched.push_back(fd);
      }
      if (in_progress_ > peak_) {
        peak_ = in_progress_;
        WritePeak();
      }
      for (int fd : touched) {
        auto it = connections_.find(fd);
        if (it != connections_.end()) Flush(*it->second);
      }
    }
  }

 private:
  int Fail(const char* what) {
    std::fprintf(stderr, "bulkhead-bench-worker: %s: %s\n", what, std::strerror(errno));
    return kExitFailure;
  }

  void Accept() {
    for (;;) {
      int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) return;  // EAGAIN, or a transient error: epoll reports the socket again
      auto c = std::make_unique<Connection>();
      c->fd.Reset(fd);
      if (tcp_) {
        // Answers are written whole: Nagle would only delay them (bulkheadd, HAProxy and nginx
        // set it on their clients too).
        const int on = 1;
        ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
      }
      epoll_event ev{.events = EPOLLIN, .data = {.fd = fd}};
      if (::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, fd, &ev) != 0) continue;  // c closes fd
      connections_.emplace(fd, std::move(c));
    }
  }

  void Read(Connection& c) {
    while (!c.peer_closed && !c.close_after) {
      std::span<char> room = ReadRoom(c, protocol_);
      const size_t asked = room.size();
      const ssize_t got = ::read(c.fd.get(), room.data(), room.size());
      CommitRead(c, protocol_, got > 0 ? static_cast<size_t>(got) : 0);
      if (got == 0) c.peer_closed = true;
      if (got < 0) {
        if (errno == EINTR) continue;
        if (errno != EAGAIN) c.peer_closed = true;
        break;
      }
      // Most likely drained; level-triggered epoll reports the rest, if any, next time.
      if (got > 0 && static_cast<size_t>(got) < asked) break;
    }
    Serve(c, protocol_, &in_progress_);
  }

  // Writes what `c` has to say; closes it when done and the peer left or asked for a close.
  void Flush(Connection& c) {
    while (c.out_sent < c.out.size()) {
      ssize_t sent =
          ::send(c.fd.get(), c.out.data() + c.out_sent, c.out.size() - c.out_sent, MSG_NOSIGNAL);
      if (sent < 0) {
        if (errno == EINTR) continue;
        if (errno == EAGAIN) break;
        Close(c);
        return;
      }
      c.out_sent += static_cast<size_t>(sent);
    }
    const bool done = c.out_sent == c.out.size();
    if (done) {
      c.out.clear();
      c.out_sent = 0;
      in_progress_ -= c.in_progress;
      c.in_progress = 0;
      if (c.close_after || c.peer_closed) {
        Close(c);
        return;
      }
    }
    if (done == c.want_write) {
      c.want_write = !done;
      epoll_event ev{.events = done ? uint32_t{EPOLLIN} : uint32_t{EPOLLIN | EPOLLOUT},
                     .data = {.fd = c.fd.get()}};
      ::epoll_ctl(epoll_.get(), EPOLL_CTL_MOD, c.fd.get(), &ev);
    }
  }

  void Close(Connection& c) {
    in_progress_ -= c.in_progress;
    connections_.erase(c.fd.get());  // destroys c; closing the fd removes it from epoll
  }

  void WritePeak() { bench::WritePeak(peak_file_, peak_); }

  Protocol protocol_;
  std::string peak_file_;
  int listen_fd_ = -1;
  bool tcp_ = false;  // the listening socket is TCP (the bench's wrk run): clients get TCP_NODELAY
  UniqueFd epoll_;
  std::unordered_map<int, std::unique_ptr<Connection>> connections_;
  uint64_t in_progress_ = 0;
  uint64_t peak_ = 0;
};

// The worker on io_uring. Every connection has one receive armed at all times (until its peer
// leaves) and at most one send in flight, of `sending`, while new answers gather in `out`. A
// completion's user_data is (the connection's slot in links_ + 1) shifted left by one, with the
// operation in the low bit (0 receive, 1 send); the multishot accept's is 0.
class UringWorker {
 public:
  UringWorker(Protocol protocol, std::string peak_file)
      : protocol_(protocol), peak_file_(std::move(peak_file)) {}
  UringWorker(const UringWorker&) = delete;
  UringWorker& operator=(const UringWorker&) = delete;
  ~UringWorker() {
    if (ring_ready_) io_uring_queue_exit(&ring_);
  }

  int Run(int listen_fd) {
    // DEFER_TASKRUN (Linux 6.1) runs completions only when this thread asks for them, in
    // io_uring_enter; older kernels get the plain ring.
    io_uring_params params{};
    params.flags = IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN;
    int rc = io_uring_queue_init_params(kRingEntries, &ring_, &params);
    if (rc == -EINVAL) rc = io_uring_queue_init(kRingEntries, &ring_, 0);
    if (rc < 0) return Fail("io_uring_queue_init", -rc);
    ring_ready_ = true;
    listen_fd_ = listen_fd;
    ArmAccept();
    WritePeak();
    std::vector<Link*> touched;
    for (;;) {
      rc = io_uring_submit_and_wait(&ring_, 1);
      if (rc < 0 && rc != -EINTR) return Fail("io_uring_submit_and_wait", -rc);
      // Completions first (reads are served at once), sends after: what this batch brought in is
      // in progress before any of it is answered.
      touched.clear();
      unsigned head;
      unsigned seen = 0;
      io_uring_cqe* cqe;
      io_uring_for_each_cqe(&ring_, head, cqe) {
        ++seen;
        const uint64_t data = cqe->user_data;
        if (data == 0) {
          OnAccept(cqe->res, (cqe->flags & IORING_CQE_F_MORE) != 0);
          continue;
        }
        Link* link = links_[(data >> 1) - 1].get();
        if ((data & 1) == 0) {
          OnReceived(*link, cqe->res);
        } else {
          OnSent(*link, cqe->res);
        }
        if (!link->touched) {
          link->touched = true;
          touched.push_back(link);
        }
      }
      io_uring_cq_advance(&ring_, seen);
      if (in_progress_ > peak_) {
        peak_ = in_progress_;
        WritePeak();
      }
      for (Link* link : touched) {
        link->touched = false;
        Settle(*link);
      }
    }
  }

 private:
  static constexpr unsigned kRingEntries = 4096;

  struct Link {
    uint32_t slot = 0;  // its index in links_
    UniqueFd fd;
    Connection c;
    std::string sending;           // handed to the kernel in a send, not yet all sent
    size_t sending_sent = 0;       // bytes of `sending` sent so far
    uint32_t sending_answers = 0;  // requests answered by `sending`
    bool receiving = false;        // a receive is armed
    bool send_in_flight = false;
    bool touched = false;  // in this iteration's list
  };

  int Fail(const char* what, int error) {
    std::fprintf(stderr, "bulkhead-bench-worker: %s: %s\n", what, std::strerror(error));
    return kExitFailure;
  }

  // A submission entry; when the ring is full, submits what it holds to make room.
  io_uring_sqe* Entry() {
    io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
    while (sqe == nullptr) {
      io_uring_submit(&ring_);
      sqe = io_uring_get_sqe(&ring_);
    }
    return sqe;
  }

  static uint64_t UserData(const Link& link, uint64_t operation) {
    return ((uint64_t{link.slot} + 1) << 1) | operation;
  }

  void ArmAccept() {
    io_uring_sqe* sqe = Entry();
    io_uring_prep_multishot_accept(sqe, listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    io_uring_sqe_set_data64(sqe, 0);
  }

  void OnAccept(int fd, bool more) {
    if (!more) ArmAccept();  // the multishot accept ended (an error): arm it again
    if (fd < 0) return;
    uint32_t slot;
    if (free_slots_.empty()) {
      slot = static_cast<uint32_t>(links_.size());
      links_.emplace_back();
    } else {
      slot = free_slots_.back();
      free_slots_.pop_back();
    }
    links_[slot] = std::make_unique<Link>();
    links_[slot]->slot = slot;
    links_[slot]->fd.Reset(fd);
    ArmReceive(*links_[slot]);
  }

  void ArmReceive(Link& link) {
    std::span<char> room = ReadRoom(link.c, protocol_);
    io_uring_sqe* sqe = Entry();
    io_uring_prep_recv(sqe, link.fd.get(), room.data(), room.size(), 0);
    io_uring_sqe_set_data64(sqe, UserData(link, 0));
    link.receiving = true;
  }

  void OnReceived(Link& link, int res) {
    Connection& c = link.c;
    link.receiving = false;
    CommitRead(c, protocol_, res > 0 ? static_cast<size_t>(res) : 0);
    if (res == -EINTR || res == -EAGAIN) return;  // Settle arms it again
    if (res <= 0) {
      c.peer_closed = true;
      return;
    }
    Serve(c, protocol_, &in_progress_);
  }

  void OnSent(Link& link, int res) {
    link.send_in_flight = false;
    if (res == -EINTR || res == -EAGAIN) return;  // Settle sends the rest again
    if (res < 0) {
      link.c.peer_closed = true;
      link.c.close_after = true;
      return;
    }
    link.sending_sent += static_cast<size_t>(res);
    if (link.sending_sent == link.sending.size()) {
      in_progress_ -= link.sending_answers;
      link.c.in_progress -= link.sending_answers;
      link.sending_answers = 0;
      link.sending.clear();
      link.sending_sent = 0;
    }
  }

  // After a completion of `link`: starts its next send, re-arms its receive, or closes it once
  // nothing of it is in flight.
  void Settle(Link& link) {
    Connection& c = link.c;
    if (!link.send_in_flight && link.sending.empty() && !c.out.empty()) {
      link.sending.swap(c.out);
      link.sending_answers = c.in_progress;
    }
    if (!link.send_in_flight && link.sending_sent < link.sending.size()) {
      io_uring_sqe* sqe = Entry();
      io_uring_prep_send(sqe, link.fd.get(), link.sending.data() + link.sending_sent,
                         link.sending.size() - link.sending_sent, MSG_NOSIGNAL);
      io_uring_sqe_set_data64(sqe, UserData(link, 1));
      link.send_in_flight = true;
    }
    const bool done = !link.send_in_flight && link.sending.empty() && c.out.empty();
    if ((c.peer_closed || c.close_after) && done) {
      if (link.receiving) {
        ::shutdown(link.fd.get(), SHUT_RDWR);  // ends the armed receive; closed at its completion
        return;
      }
      in_progress_ -= c.in_progress;
      free_slots_.push_back(link.slot);
      links_[link.slot].reset();  // closes the fd
      return;
    }
    if (!link.receiving && !c.peer_closed && !c.close_after) ArmReceive(link);
  }

  void WritePeak() { bench::WritePeak(peak_file_, peak_); }

  Protocol protocol_;
  std::string peak_file_;
  io_uring ring_{};
  bool ring_ready_ = false;
  int listen_fd_ = -1;
  std::vector<std::unique_ptr<Link>> links_;  // by slot; null: free
  std::vector<uint32_t> free_slots_;
  uint64_t in_progress_ = 0;
  uint64_t peak_ = 0;
};

int Main(int argc, char** argv) {
  Protocol protocol = Protocol::kFrames;
  std::string peak_file;
  bool uring = false;
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    const std::string_view value = i + 1 < argc ? argv[i + 1] : "";
    if (arg == "--protocol" && (value == "frames" || value == "http")) {
      protocol = value == "frames" ? Protocol::kFrames : Protocol::kHttp;
      ++i;
    } else if (arg == "--io" && (value == "epoll" || value == "uring")) {
      uring = value == "uring";
      ++i;
    } else if (arg == "--peak-file" && i + 1 < argc) {
      peak_file = argv[++i];
    } else {
      std::fprintf(stderr,
                   "usage: bulkhead-bench-worker [--protocol frames|http] [--io epoll|uring] "
                   "[--peak-file PATH]\n");
      return kExitUsage;
    }
  }
  Result<int> listen_fd = cell::ListenFdFromEnv();
  if (!listen_fd.ok()) {
    std::fprintf(stderr, "bulkhead-bench-worker: %s\n", listen_fd.status().message().c_str());
    return kExitFailure;
  }
  if (uring) return UringWorker(protocol, std::move(peak_file)).Run(*listen_fd);
  return Worker(protocol, std::move(peak_file)).Run(*listen_fd);
}

}  // namespace
}  // namespace bulkhead::bench

int main(int argc, char** argv) { return bulkhead::bench::Main(argc, argv); }
