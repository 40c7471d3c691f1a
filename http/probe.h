// SPDX-License-Identifier: MIT
// The HTTP health probe as a wire format (ready = "http:/PATH", docs/config.md): the request
// bulkheadd sends on a fresh connection to the worker socket, and ProbeResponse, which takes the
// status code from the head of the worker's answer (RFC 9112 section 4, status line) and ignores
// the body. Interim 1xx responses other than 101 are skipped (RFC 9110 section 15.2). Pure: no
// I/O. Thread-compatible.
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

class ProbeResponse {
 public:
  ProbeResponse();
  ProbeResponse(const ProbeResponse&) = delete;
  ProbeResponse& operator=(const ProbeResponse&) = delete;

  enum class Result {
    kNeedMore,  // no final status yet: feed more
    kStatus,    // the head of the final response is in: status_code()
    kError,     // not an HTTP/1.x response: error() says why
  };

  // Parses the worker's bytes, in the order they came. After kStatus or kError, further bytes are
  // ignored and the same result is returned.
  Result Feed(std::string_view data);
  // The worker closed the connection: kStatus if the head was in, else kError ("connection closed
  // before the status line" or the parser's complaint).
  Result Closed();

  int status_code() const { return status_code_; }
  const std::string& error() const { return error_; }

 private:
  static int OnHeadersComplete(http_parser* parser);

  http_parser parser_{};
  http_parser_settings settings_{};
  int status_code_ = 0;
  bool started_ = false;  // bytes were fed
  std::string error_;
};

}  // namespace bulkhead::http
