// SPDX-License-Identifier: MIT
#include "control/metrics_server.h"

#include <http_parser.h>
#include <unistd.h>

#include <utility>
#include <vector>

#include "base/check.h"
#include "base/log.h"
#include "control/metrics_text.h"
#include "ipc/listen_socket.h"
#include "proxy/stream_writer.h"

namespace bulkhead::control {

namespace {
constexpr int kBacklog = 64;
}  // namespace

// One client connection: reads one request through http-parser, writes one response, closes.
class MetricsConnection {
 public:
  explicit MetricsConnection(MetricsServer* server)
      : server_(server),
        writer_(
            reinterpret_cast<uv_stream_t*>(&handle_), [this](int) { Close(); },
            [this] {
              if (responded_) Close();
            }) {
    handle_.pipe.data = this;
    http_parser_init(&parser_, HTTP_REQUEST);
    parser_.data = this;
    http_parser_settings_init(&settings_);
    settings_.on_url = [](http_parser* p, const char* at, size_t n) {
      static_cast<MetricsConnection*>(p->data)->url_.append(at, n);
      return 0;
    };
    settings_.on_message_complete = [](http_parser* p) {
      auto* self = static_cast<MetricsConnection*>(p->data);
      self->Respond();
      http_parser_pause(p, 1);  // one request per connection: the rest is not read
      return 0;
    };
  }

  // REQUIRES: `tcp` tells how the server's listener was initialised.
  int Init(uv_loop_t* loop, bool tcp) {
    int rc = tcp ? uv_tcp_init(loop, &handle_.tcp) : uv_pipe_init(loop, &handle_.pipe, 0);
    handle_.pipe.data = this;
    if (rc == 0) {
      uv_timer_init(loop, &idle_timer_);
      idle_timer_.data = this;
      timer_open_ = true;
      ++handles_left_;
    }
    return rc;
  }
  uv_stream_t* stream() { return reinterpret_cast<uv_stream_t*>(&handle_); }

  void Start() {
    uv_timer_start(
        &idle_timer_,
        [](uv_timer_t* timer) { static_cast<MetricsConnection*>(timer->data)->Close(); },
        MetricsServer::kIdleMs, 0);
    uv_read_start(
        stream(),
        [](uv_handle_t* handle, size_t, uv_buf_t* buf) {
          auto* self = static_cast<MetricsConnection*>(handle->data);
          *buf = uv_buf_init(self->read_buf_, sizeof self->read_buf_);
        },
        [](uv_stream_t* stream, ssize_t nread, const uv_buf_t* buf) {
          auto* self = static_cast<MetricsConnection*>(stream->data);
          if (nread < 0) {
            self->Close();
            return;
          }
          self->OnBytes(buf->base, static_cast<size_t>(nread));
        });
  }

  void Close() {
    if (closing_) return;
    closing_ = true;
    writer_.Abandon();
    if (timer_open_) {
      ++server_->pending_closes_;
      uv_close(reinterpret_cast<uv_handle_t*>(&idle_timer_), [](uv_handle_t* handle) {
        static_cast<MetricsConnection*>(handle->data)->HandleClosed();
      });
    }
    ++server_->pending_closes_;
    uv_close(reinterpret_cast<uv_handle_t*>(&handle_), [](uv_handle_t* handle) {
      static_cast<MetricsConnection*>(handle->data)->HandleClosed();
    });
  }

 private:
  // Both handles closed: the connection is deleted.
  void HandleClosed() {
    MetricsServer* server = server_;
    if (--handles_left_ == 0) {
      server->connections_.erase(this);
      delete this;
    }
    server->HandleClosed();
  }

  void OnBytes(const char* data, size_t n) {
    if (responded_) return;
    received_ += n;
    size_t parsed = http_parser_execute(&parser_, &settings_, data, n);
    if (responded_) return;
    if (HTTP_PARSER_ERRNO(&parser_) != HPE_OK || parsed != n) {
      Send(400, "Bad Request", "text/plain; charset=utf-8",
           std::string("malformed HTTP request: ") + http_errno_name(HTTP_PARSER_ERRNO(&parser_)) +
               "\n");
    } else if (received_ > MetricsServer::kMaxRequestBytes) {
      Send(431, "Request Header Fields Too Large", "text/plain; charset=utf-8",
           "request larger than " + std::to_string(MetricsServer::kMaxRequestBytes) + " bytes\n");
    }
  }

  void Respond() {
    const auto method = static_cast<http_method>(parser_.method);
    if (method != HTTP_GET && method != HTTP_HEAD) {
      Send(405, "Method Not Allowed", "text/plain; charset=utf-8",
           "only GET and HEAD are allowed\n", "Allow: GET, HEAD\r\n");
      return;
    }
    http_parser_url url;
    http_parser_url_init(&url);
    std::string_view path;
    if (http_parser_parse_url(url_.data(), url_.size(), 0, &url) == 0 &&
        (url.field_set & (1 << UF_PATH)) != 0) {
      path =
          std::string_view(url_).substr(url.field_data[UF_PATH].off, url.field_data[UF_PATH].len);
    }
    if (path != "/metrics") {
      Send(404, "Not Found", "text/plain; charset=utf-8", "only /metrics is served here\n");
      return;
    }
    head_only_ = method == HTTP_HEAD;
    Send(200, "OK", kMetricsContentType, server_->render_());
  }

  void Send(int code, const char* reason, const char* content_type, const std::string& body,
            const char* extra_headers = "") {
    responded_ = true;
    uv_read_stop(stream());
    std::string head = "HTTP/1.1 " + std::to_string(code) + " " + reason +
                       "\r\nContent-Type: " + content_type +
                       "\r\nContent-Length: " + std::to_string(body.size()) + "\r\n" +
                       extra_headers + "Connection: close\r\n\r\n";
    writer_.AppendBytes(head);
    if (!head_only_) writer_.AppendBytes(body);
    writer_.Flush();
  }

  MetricsServer* server_;
  union {
    uv_tcp_t tcp;
    uv_pipe_t pipe;
  } handle_{};
  uv_timer_t idle_timer_{};
  bool timer_open_ = false;
  int handles_left_ = 1;  // the stream, plus the timer once initialised
  proxy::StreamWriter writer_;
  http_parser parser_{};
  http_parser_settings settings_{};
  std::string url_;
  size_t received_ = 0;
  bool responded_ = false;
  bool head_only_ = false;
  bool closing_ = false;
  char read_buf_[4096];
};

MetricsServer::MetricsServer(uv_loop_t* loop, std::function<std::string()> render)
    : loop_(loop), render_(std::move(render)) {}

MetricsServer::~MetricsServer() { BH_CHECK(pending_closes_ == 0 && connections_.empty()); }

Status MetricsServer::Listen(const config::ListenAddress& address) {
  const std::string where = "metrics_listen " + address.ToString();
  is_tcp_ = address.is_tcp();
  int rc = 0;
  if (is_tcp_) {
    uv_tcp_init(loop_, &listener_.tcp);
    listener_.tcp.data = this;
    initialized_ = true;
    sockaddr_storage addr{};
    bool v6 = address.host.find(':') != std::string::npos;
    rc =
        v6 ? uv_ip6_addr(address.host.c_str(), address.port, reinterpret_cast<sockaddr_in6*>(&addr))
           : uv_ip4_addr(address.host.c_str(), address.port, reinterpret_cast<sockaddr_in*>(&addr));
    if (rc == 0) rc = uv_tcp_bind(&listener_.tcp, reinterpret_cast<sockaddr*>(&addr), 0);
    if (rc != 0) return Status::Error(where + ": bind: " + uv_strerror(rc));
    rc = uv_listen(reinterpret_cast<uv_stream_t*>(&listener_.tcp), kBacklog, &OnConnection);
    if (rc != 0) return Status::Error(where + ": listen: " + uv_strerror(rc));
    int len = sizeof addr;
    rc = uv_tcp_getsockname(&listener_.tcp, reinterpret_cast<sockaddr*>(&addr), &len);
    if (rc != 0) return Status::Error(where + ": getsockname: " + uv_strerror(rc));
    char host[64] = {};
    uint16_t port = 0;
    if (addr.ss_family == AF_INET6) {
      auto* in6 = reinterpret_cast<sockaddr_in6*>(&addr);
      uv_ip6_name(in6, host, sizeof host);
      port = ntohs(in6->sin6_port);
      bound_ = "[" + std::string(host) + "]:" + std::to_string(port);
    } else {
      auto* in4 = reinterpret_cast<sockaddr_in*>(&addr);
      uv_ip4_name(in4, host, sizeof host);
      port = ntohs(in4->sin_port);
      bound_ = std::string(host) + ":" + std::to_string(port);
    }
    return Status::Ok();
  }
  uv_pipe_init(loop_, &listener_.pipe, 0);
  listener_.pipe.data = this;
  initialized_ = true;
  Result<ipc::ListeningSocket> socket = ipc::ClaimListeningSocket(address.path, kBacklog);
  if (!socket.ok()) return Status::Error(where + ": " + socket.status().message());
  unix_file_ = std::move(socket->file);
  rc = uv_pipe_open(&listener_.pipe, socket->fd.get());
  if (rc != 0) return Status::Error(where + ": uv_pipe_open: " + uv_strerror(rc));
  socket->fd.Release();
  rc = uv_listen(reinterpret_cast<uv_stream_t*>(&listener_.pipe), kBacklog, &OnConnection);
  if (rc != 0) return Status::Error(where + ": listen: " + uv_strerror(rc));
  bound_ = address.path;
  return Status::Ok();
}

void MetricsServer::OnConnection(uv_stream_t* server, int status) {
  auto* self = static_cast<MetricsServer*>(server->data);
  if (status < 0) {
    LogWarning(std::string("metrics endpoint: accept: ") + uv_strerror(status));
    return;
  }
  auto* conn = new MetricsConnection(self);
  if (conn->Init(self->loop_, self->is_tcp_) != 0) {
    delete conn;
    return;
  }
  self->connections_.insert(conn);
  if (uv_accept(server, conn->stream()) != 0 ||
      self->connections_.size() > MetricsServer::kMaxConnections) {
    conn->Close();
    return;
  }
  conn->Start();
}

void MetricsServer::Close(std::function<void()> on_closed) {
  on_closed_ = std::move(on_closed);
  std::vector<MetricsConnection*> conns(connections_.begin(), connections_.end());
  for (MetricsConnection* conn : conns) conn->Close();
  unix_file_.Remove();
  if (!initialized_) {
    if (pending_closes_ == 0 && on_closed_) std::exchange(on_closed_, nullptr)();
    return;
  }
  ++pending_closes_;
  uv_close(reinterpret_cast<uv_handle_t*>(&listener_),
           [](uv_handle_t* handle) { static_cast<MetricsServer*>(handle->data)->HandleClosed(); });
}

void MetricsServer::HandleClosed() {
  BH_CHECK(pending_closes_ > 0);
  if (--pending_closes_ == 0 && on_closed_) std::exchange(on_closed_, nullptr)();
}

}  // namespace bulkhead::control
