// SPDX-License-Identifier: MIT
#include "control/control_server.h"

#include <malloc.h>

#include <memory>
#include <utility>

#include "base/log.h"

namespace bulkhead::control {

namespace {

constexpr int kBacklog = 64;
// A request line longer than this closes the connection: control requests are small.
constexpr size_t kMaxLine = size_t{64} * 1024;

// One connection's side of the protocol: splits the bytes into lines and answers each.
class ControlProtocol : public ConnectionProtocol {
 public:
  ControlProtocol(const ControlServer::Handler& handler, ControlPeer peer)
      : handler_(handler), peer_(std::move(peer)) {}

  // Answers every whole line of `bytes`.
  void OnBytes(StreamConnection& conn, std::string_view bytes) override {
    line_.append(bytes);
    std::string responses;
    size_t start = 0;
    for (;;) {
      size_t end = line_.find('\n', start);
      if (end == std::string::npos) break;
      std::string request = line_.substr(start, end - start);
      start = end + 1;
      if (request.empty()) continue;
      responses += handler_(request, peer_);
      responses.push_back('\n');
    }
    line_.erase(0, start);
    if (line_.size() > kMaxLine) {
      responses += R"({"ok":false,"error":"request line too long"})"
                   "\n";
      conn.Send(responses);
      conn.CloseWhenSent();
      return;
    }
    if (!responses.empty()) conn.Send(responses);
  }
  bool BetweenRequests() const override { return line_.empty(); }

 private:
  const ControlServer::Handler& handler_;
  ControlPeer peer_;
  std::string line_;
};

// The caller's credentials. One that cannot be read is an unknown user: it may still read, and is
// refused every mutating command.
ControlPeer PeerOfConnection(const StreamConnection& conn) {
  int fd = conn.fd();
  Result<ControlPeer> peer =
      fd >= 0 ? PeerOf(fd) : Result<ControlPeer>(Status::Error("no descriptor"));
  if (peer.ok()) return std::move(peer).value();
  LogWarning("control connection: " + peer.status().message());
  ControlPeer unknown;
  unknown.uid = static_cast<uid_t>(-1);
  unknown.gid = static_cast<gid_t>(-1);
  return unknown;
}

// A status of every cell builds a JSON tree of some 25 KiB per cell and frees it once the text is
// made: without a trim, the heap pages it took stay resident (glibc returns only a free top of the
// heap past M_TRIM_THRESHOLD), and a host with 100 idle cells kept 2.5 MiB after one `bulkheadctl
// status` (issue 25 section 8, bench/idle_rss.cc). malloc_trim(3) gives the free pages anywhere in
// the heap back (MADV_DONTNEED on each free run of pages): it walks every free chunk of the heap
// and makes a system call per run, on the loop thread, so it runs once per
// kReleaseHeapDelayMs at most (ReleaseHeapSoon), not after each answer.
void MallocTrim() {
#ifdef __GLIBC__
  ::malloc_trim(0);
#endif
}

}  // namespace

ControlServer::ControlServer(uv_loop_t* loop, loop::TimeSource* time, Handler handler,
                             uint64_t idle_timeout_ms, std::function<void()> release_heap)
    : handler_([this, handler = std::move(handler)](const std::string& request_line,
                                                    const ControlPeer& peer) {
        ReleaseHeapSoon();
        return handler(request_line, peer);
      }),
      release_heap_(release_heap ? std::move(release_heap) : &MallocTrim),
      release_timer_(time->CreateTimer([this] { release_heap_(); })),
      server_(loop, time, "control socket",
              StreamServer::Limits{.timeout_ms = idle_timeout_ms,
                                   .timeout_from = StreamServer::TimeoutFrom::kLastActivity,
                                   .max_connections = kMaxConnections},
              [this](StreamConnection& conn) -> std::unique_ptr<ConnectionProtocol> {
                return std::make_unique<ControlProtocol>(handler_, PeerOfConnection(conn));
              }) {}

Status ControlServer::Adopt(UniqueFd fd, const std::string& path) {
  Status status = server_.AdoptUnix(std::move(fd), path, kBacklog);
  if (!status.ok()) return Status::Error(path + ": " + status.message());
  return Status::Ok();
}

Status ControlServer::Listen(const std::string& path,
                             const std::optional<ipc::SocketAccess>& access) {
  Result<ipc::ListeningSocket> socket =
      ipc::ClaimListeningSocket(path, kBacklog, ipc::Blocking::kNonBlocking, access);
  if (!socket.ok()) return socket.status();
  Status status = server_.ListenUnix(std::move(socket).value(), kBacklog);
  if (!status.ok()) return Status::Error(path + ": " + status.message());
  return Status::Ok();
}

void ControlServer::ReleaseHeapSoon() {
  // Armed by the first answer since the last release, not moved by later ones: one release a
  // kReleaseHeapDelayMs at most, and every answer is followed by one within that time (what an
  // answer frees later, its text once written, included). An idle server arms nothing.
  if (release_timer_ != nullptr && !release_timer_->armed()) {
    release_timer_->Start(kReleaseHeapDelayMs);
  }
}

void ControlServer::Close(std::function<void()> on_closed) {
  release_timer_.reset();  // a release still owed is moot: bulkheadd is stopping
  server_.Close(std::move(on_closed));
}

}  // namespace bulkhead::control
