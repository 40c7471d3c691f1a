// SPDX-License-Identifier: MIT
#include "control/metrics_server.h"

#include <http_parser.h>

#include <memory>
#include <utility>

#include "control/metrics_text.h"
#include "ipc/listen_socket.h"

namespace bulkhead::control {

namespace {

constexpr int kBacklog = 64;

// One connection's side of the protocol: reads one request through http-parser, sends one
// response, closes.
class MetricsProtocol : public ConnectionProtocol {
 public:
  explicit MetricsProtocol(const std::function<std::string()>& render) : render_(render) {
    http_parser_init(&parser_, HTTP_REQUEST);
    parser_.data = this;
    http_parser_settings_init(&settings_);
    settings_.on_url = [](http_parser* p, const char* at, size_t n) {
      static_cast<MetricsProtocol*>(p->data)->url_.append(at, n);
      return 0;
    };
    settings_.on_message_complete = [](http_parser* p) {
      auto* self = static_cast<MetricsProtocol*>(p->data);
      self->Respond();
      http_parser_pause(p, 1);  // one request per connection: the rest is not read
      return 0;
    };
  }

  void OnBytes(StreamConnection& conn, std::string_view bytes) override {
    if (responded_) return;
    conn_ = &conn;
    received_ += bytes.size();
    size_t parsed = http_parser_execute(&parser_, &settings_, bytes.data(), bytes.size());
    if (responded_) return;
    if (HTTP_PARSER_ERRNO(&parser_) != HPE_OK || parsed != bytes.size()) {
      Send(400, "Bad Request", "text/plain; charset=utf-8",
           std::string("malformed HTTP request: ") + http_errno_name(HTTP_PARSER_ERRNO(&parser_)) +
               "\n");
    } else if (received_ > MetricsServer::kMaxRequestBytes) {
      Send(431, "Request Header Fields Too Large", "text/plain; charset=utf-8",
           "request larger than " + std::to_string(MetricsServer::kMaxRequestBytes) + " bytes\n");
    }
  }

 private:
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
    Send(200, "OK", kMetricsContentType, render_());
  }

  void Send(int code, const char* reason, const char* content_type, const std::string& body,
            const char* extra_headers = "") {
    responded_ = true;
    std::string response = "HTTP/1.1 " + std::to_string(code) + " " + reason +
                           "\r\nContent-Type: " + content_type +
                           "\r\nContent-Length: " + std::to_string(body.size()) + "\r\n" +
                           extra_headers + "Connection: close\r\n\r\n";
    if (!head_only_) response += body;
    conn_->Send(response);
    conn_->CloseWhenSent();
  }

  const std::function<std::string()>& render_;
  StreamConnection* conn_ = nullptr;  // the connection of the OnBytes call under way
  http_parser parser_{};
  http_parser_settings settings_{};
  std::string url_;
  size_t received_ = 0;
  bool responded_ = false;
  bool head_only_ = false;
};

}  // namespace

MetricsServer::MetricsServer(uv_loop_t* loop, loop::TimeSource* time,
                             std::function<std::string()> render)
    : render_(std::move(render)),
      server_(loop, time, "metrics endpoint",
              StreamServer::Limits{.timeout_ms = kTimeoutMs,
                                   .timeout_from = StreamServer::TimeoutFrom::kAccept,
                                   .max_connections = kMaxConnections},
              [this](StreamConnection&) -> std::unique_ptr<ConnectionProtocol> {
                return std::make_unique<MetricsProtocol>(render_);
              }) {}

Status MetricsServer::Adopt(UniqueFd fd, const config::ListenAddress& address,
                            const std::string& bound) {
  const std::string where = "metrics_listen " + address.ToString();
  Status status = address.is_tcp() ? server_.AdoptTcp(std::move(fd), kBacklog)
                                   : server_.AdoptUnix(std::move(fd), address.path, kBacklog);
  if (!status.ok()) return Status::Error(where + ": " + status.message());
  bound_ = bound;
  return Status::Ok();
}

Status MetricsServer::Listen(const config::ListenAddress& address) {
  const std::string where = "metrics_listen " + address.ToString();
  if (!address.is_tcp()) {
    Result<ipc::ListeningSocket> socket = ipc::ClaimListeningSocket(address.path, kBacklog);
    if (!socket.ok()) return Status::Error(where + ": " + socket.status().message());
    Status status = server_.ListenUnix(std::move(socket).value(), kBacklog);
    if (!status.ok()) return Status::Error(where + ": " + status.message());
    bound_ = address.path;
    return Status::Ok();
  }
  sockaddr_storage addr = address.ToSockaddr();
  Status status = server_.ListenTcp(reinterpret_cast<sockaddr*>(&addr), kBacklog);
  if (!status.ok()) return Status::Error(where + ": " + status.message());
  Result<sockaddr_storage> bound = server_.TcpAddress();
  if (!bound.ok()) return Status::Error(where + ": " + bound.status().message());
  Result<config::ListenAddress> bound_address =
      config::ListenAddressFromSockaddr(reinterpret_cast<const sockaddr*>(&*bound));
  if (!bound_address.ok()) return Status::Error(where + ": " + bound_address.status().message());
  bound_ = bound_address->ToString();
  return Status::Ok();
}

void MetricsServer::Close(std::function<void()> on_closed) { server_.Close(std::move(on_closed)); }

}  // namespace bulkhead::control
