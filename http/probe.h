// SPDX-License-Identifier: MIT
// The HTTP health probe as a wire format (ready = "http:/PATH", docs/config.md): the request
// bulkheadd sends on a fresh connection to the worker socket, and ProbeResponse, which takes the
// status code from the head of the worker's answer (RFC 9112 section 4, status line) and reads the
// body to its end (RFC 9112 section 6.3: Content-Length, chunked, or the close) without keeping it,
// so the probe closes only once the worker has written its whole answer, as kubelet's httpGet and
// HAProxy's httpchk do. Interim 1xx responses other than 101 are skipped (RFC 9110 section 15.2).
// Pure: no I/O. Thread-compatible.
#pragma once

#include <http_parser.h>

#include <string>
#include <string_view>

namespace bulkhead::http {

// "GET PATH HTTP/1.1" with Host: localhost, User-Agent: bulkheadd-probe, Accept: */* and
// Connection: close (one request per connection, as Kubernetes' httpGet probe sends).
// REQUIRES: `path` in origin-form as config validates it (starts with '/', visible ASCII).
std::string ProbeRequest(std::string_view path);

// Whether a probe's status code counts as healthy: 200 to 299, as Kubernetes' httpGet probe (which
// also takes 3xx; a redirect here means the path is wrong, so it does not count).
inline bool ProbeHealthy(int status_code) { return status_code >= 200 && status_code <= 299; }

// The most body bytes a probe reads: past it, the answer is judged on its status and the
// connection closed (a health endpoint that sends more is not waited for).
inline constexpr size_t kProbeMaxBodyBytes = 64 * 1024;

class ProbeResponse {
 public:
  ProbeResponse();
  ProbeResponse(const ProbeResponse&) = delete;
  ProbeResponse& operator=(const ProbeResponse&) = delete;

  enum class Result {
    kNeedMore,  // the final response has not ended yet: feed more
    kStatus,    // the final response ended, or its body passed kProbeMaxBodyBytes: status_code()
    kError,     // not an HTTP/1.x response: error() says why
  };

  // Parses the worker's bytes, in the order they came. After kStatus or kError, further bytes are
  // ignored and the same result is returned.
  Result Feed(std::string_view data);
  // The worker closed the connection (or the read failed): kStatus if the head of the final
  // response was in (a close-delimited body ends here; a shorter one than announced is still
  // judged on its status), else kError ("connection closed before the status line" or the
  // parser's complaint).
  Result Closed();

  // The final response's status code once its head is in (before kStatus), else 0.
  int status_code() const { return status_code_; }
  const std::string& error() const { return error_; }

 private:
  static int OnHeadersComplete(http_parser* parser);
  static int OnBody(http_parser* parser, const char* at, size_t length);
  static int OnMessageComplete(http_parser* parser);

  http_parser parser_{};
  http_parser_settings settings_{};
  int status_code_ = 0;
  size_t body_bytes_ = 0;  // of the final response, up to kProbeMaxBodyBytes
  bool ended_ = false;     // the final response ended, or its body reached the bound
  bool started_ = false;   // bytes were fed
  std::string error_;
};

}  // namespace bulkhead::http
