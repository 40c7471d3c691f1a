// SPDX-License-Identifier: MIT
// A raw HTTP/1.1 client for the e2e tests of HTTP cells (http_test.cc, http_framing_test.cc): what
// is sent is exactly what the test writes, responses are read one at a time by a small parser of
// its own (Content-Length, chunked, or until the close), and a refusal helper. Deadlines only bound
// how long a read may wait; no test asserts a duration with them.
#pragma once

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/unique_fd.h"
#include "tests/e2e/harness.h"

namespace bulkhead::e2e {

inline constexpr std::chrono::milliseconds kReadTimeout{10000};

inline std::string ToLower(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

struct Response {
  int status = 0;
  std::vector<std::pair<std::string, std::string>> headers;  // names lowercased
  std::string body;
  // The value of the first field named `name` (lowercase), "" when absent.
  std::string Header(std::string_view name) const {
    for (const auto& [key, value] : headers) {
      if (key == name) return value;
    }
    return "";
  }
};

inline std::string Describe(const std::optional<Response>& response) {
  if (!response) return "no response";
  std::string out = std::to_string(response->status);
  for (const auto& [key, value] : response->headers) out += "\n" + key + ": " + value;
  return out + "\n\n" + response->body;
}

// A raw HTTP/1.1 client connection to a cell's Unix socket: what is sent is exactly what the test
// writes, and responses are read one at a time.
class HttpConn {
 public:
  static std::optional<HttpConn> Open(const std::string& path) {
    UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!fd) return std::nullopt;
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
    if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      return std::nullopt;
    }
    return HttpConn(std::move(fd));
  }

  // The same over TCP to `address`, "127.0.0.1:PORT" (as a cell's status lists its listen).
  static std::optional<HttpConn> OpenTcp(const std::string& address) {
    const size_t colon = address.rfind(':');
    if (colon == std::string::npos) return std::nullopt;
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(std::stoi(address.substr(colon + 1))));
    if (::inet_pton(AF_INET, address.substr(0, colon).c_str(), &addr.sin_addr) != 1) {
      return std::nullopt;
    }
    UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!fd || ::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      return std::nullopt;
    }
    return HttpConn(std::move(fd));
  }

  bool Send(std::string_view bytes) {
    while (!bytes.empty()) {
      ssize_t n = ::send(fd_.get(), bytes.data(), bytes.size(), MSG_NOSIGNAL);
      if (n <= 0) return false;
      bytes.remove_prefix(static_cast<size_t>(n));
    }
    return true;
  }

  // One response (an interim 100 included), or nullopt when the connection ended or the time ran
  // out before it was whole.
  std::optional<Response> Read(std::chrono::milliseconds timeout = kReadTimeout) {
    return ReadOne(timeout, /*head_request=*/false);
  }
  // The answer to a HEAD request: it ends at its empty line whatever its fields say.
  std::optional<Response> ReadAnswerToHead(std::chrono::milliseconds timeout = kReadTimeout) {
    return ReadOne(timeout, /*head_request=*/true);
  }

  // Every byte until the peer closes the connection (or `timeout` passes), unparsed.
  std::string ReadUntilClosed(std::chrono::milliseconds timeout = kReadTimeout) {
    const std::chrono::steady_clock::time_point deadline =
        std::chrono::steady_clock::now() + timeout;
    while (Fill(deadline)) {
    }
    return std::exchange(buffer_, std::string());
  }

  // True when the peer closed the connection within `timeout` (bytes before the end are skipped).
  bool EndsWithin(std::chrono::milliseconds timeout = kReadTimeout) {
    const std::chrono::steady_clock::time_point deadline =
        std::chrono::steady_clock::now() + timeout;
    while (Fill(deadline)) {
    }
    return eof_;
  }

  // Sends what the socket takes now, without waiting; returns how many bytes that was.
  size_t SendSome(std::string_view bytes) {
    size_t sent = 0;
    while (sent < bytes.size()) {
      ssize_t n =
          ::send(fd_.get(), bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n <= 0) break;
      sent += static_cast<size_t>(n);
    }
    return sent;
  }

  void Close() { fd_.Reset(); }

 private:
  std::optional<Response> ReadOne(std::chrono::milliseconds timeout, bool head_request) {
    const std::chrono::steady_clock::time_point deadline =
        std::chrono::steady_clock::now() + timeout;
    size_t head_end;
    while ((head_end = buffer_.find("\r\n\r\n")) == std::string::npos) {
      if (!Fill(deadline)) return std::nullopt;
    }
    Response response;
    std::string_view head(buffer_.data(), head_end);
    size_t line_end = head.find("\r\n");
    std::string_view status_line = head.substr(0, line_end);
    if (status_line.size() < 12) return std::nullopt;
    response.status = std::stoi(std::string(status_line.substr(9, 3)));
    while (line_end != std::string_view::npos) {
      head.remove_prefix(line_end + 2);
      line_end = head.find("\r\n");
      std::string_view line = head.substr(0, line_end);
      size_t colon = line.find(':');
      if (colon == std::string_view::npos) continue;
      std::string_view value = line.substr(colon + 1);
      while (!value.empty() && value.front() == ' ') value.remove_prefix(1);
      response.headers.emplace_back(ToLower(line.substr(0, colon)), std::string(value));
    }
    buffer_.erase(0, head_end + 4);
    if (head_request || response.status < 200 || response.status == 204 || response.status == 304) {
      return response;
    }
    const std::string length = response.Header("content-length");
    if (!length.empty()) {
      const size_t n = std::stoul(length);
      while (buffer_.size() < n) {
        if (!Fill(deadline)) return std::nullopt;
      }
      response.body = buffer_.substr(0, n);
      buffer_.erase(0, n);
    } else if (ToLower(response.Header("transfer-encoding")) == "chunked") {
      for (;;) {
        size_t size_end;
        while ((size_end = buffer_.find("\r\n")) == std::string::npos) {
          if (!Fill(deadline)) return std::nullopt;
        }
        const size_t n = std::stoul(buffer_.substr(0, size_end), nullptr, 16);
        while (buffer_.size() < size_end + 2 + n + 2) {
          if (!Fill(deadline)) return std::nullopt;
        }
        response.body += buffer_.substr(size_end + 2, n);
        buffer_.erase(0, size_end + 2 + n + 2);
        if (n == 0) break;  // no trailers from bulkheadd
      }
    } else {
      while (Fill(deadline)) {
      }
      response.body = std::move(buffer_);
      buffer_.clear();
    }
    return response;
  }

  explicit HttpConn(UniqueFd fd) : fd_(std::move(fd)) {}

  // Reads more into buffer_; false at EOF, on an error or when the deadline passed.
  bool Fill(std::chrono::steady_clock::time_point deadline) {
    if (eof_) return false;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                          deadline - std::chrono::steady_clock::now())
                          .count();
    if (left <= 0) return false;
    pollfd p{fd_.get(), POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left)) != 1) return false;
    char chunk[65536];
    ssize_t n = ::recv(fd_.get(), chunk, sizeof chunk, 0);
    if (n <= 0) {
      eof_ = true;
      return false;
    }
    buffer_.append(chunk, static_cast<size_t>(n));
    return true;
  }

  UniqueFd fd_;
  std::string buffer_;
  bool eof_ = false;
};

// Sends `attempt` and a good request after it on a fresh connection to the cell "web": the
// attempt must be answered `status` with Connection: close, and the connection end there (the
// request after it never reaches the worker).
inline ::testing::AssertionResult RefusedAndClosed(Harness& h, const std::string& attempt,
                                                   int status) {
  std::optional<HttpConn> conn = HttpConn::Open(h.CellSocket("web"));
  if (!conn) return ::testing::AssertionFailure() << "cannot connect to " << h.CellSocket("web");
  if (!conn->Send(attempt + "GET /hello HTTP/1.1\r\nHost: web\r\n\r\n")) {
    return ::testing::AssertionFailure() << "send failed: " << attempt;
  }
  std::optional<Response> response = conn->Read();
  if (!response || response->status != status || response->Header("connection") != "close") {
    return ::testing::AssertionFailure() << attempt << "\nexpected " << status
                                         << " and Connection: close, got " << Describe(response);
  }
  if (!conn->EndsWithin()) return ::testing::AssertionFailure() << "still open after " << attempt;
  return ::testing::AssertionSuccess();
}

}  // namespace bulkhead::e2e
