// SPDX-License-Identifier: MIT
// libFuzzer target for http::RequestParser: arbitrary bytes, fed in arbitrary pieces, must never
// crash, always make progress, and every request it completes must respect the limits and its own
// framing; its head must be the one handed out at kHead (no trailer field merged into it), with
// token field names, a request-target of allowed bytes, and body_on_bodiless_method as its method
// and framing say. Built with -DBULKHEAD_FUZZ=ON and clang; run:
// build/tests/http/http_request_fuzzer -max_total_time=60
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "base/check.h"
#include "http/request_parser.h"
#include "http/syntax.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  // Byte 0: small limits, so that 413 and 431 are reachable. Byte 1: seed of the piece sizes.
  bulkhead::http::Limits limits;
  limits.max_head_bytes = 64u + (data[0] & 0x0f) * 64u;
  limits.max_headers = 1u + (data[0] >> 4);
  limits.max_body_bytes = (data[0] & 0x30) * 4u;
  uint32_t piece_seed = data[1];
  std::string_view input(reinterpret_cast<const char*>(data) + 2, size - 2);

  using Event = bulkhead::http::RequestParser::Event;
  bulkhead::http::RequestParser parser(limits);
  size_t offset = 0;
  bool failed = false;
  // The head as handed out at kHead: the head at kMessage must be the same.
  std::vector<bulkhead::http::Header> head_fields;
  while (offset < input.size() && !failed) {
    piece_seed = piece_seed * 1103515245u + 12345u;
    const size_t piece = 1 + (piece_seed >> 16) % 64;
    std::string_view chunk = input.substr(offset, piece);
    offset += chunk.size();
    while (true) {
      size_t consumed = 0;
      const Event event = parser.Parse(chunk, &consumed);
      BH_CHECK(consumed <= chunk.size());
      chunk.remove_prefix(consumed);
      if (event == Event::kError) {
        BH_CHECK(parser.error().status >= 400 && parser.error().status < 600);
        failed = true;
        break;
      }
      if (event == Event::kHead) {
        const bulkhead::http::RequestHead& head = parser.head();
        head_fields = head.headers;
        for (const bulkhead::http::Header& field : head.headers) {
          BH_CHECK(bulkhead::http::IsToken(field.name));
          BH_CHECK(bulkhead::http::IsFieldValue(field.value));
        }
        BH_CHECK(bulkhead::http::IsTargetText(head.target));
        const bool bodiless = head.method == "GET" || head.method == "HEAD" ||
                              head.method == "DELETE" || head.method == "OPTIONS" ||
                              head.method == "TRACE";
        const bool has_body = head.chunked || head.content_length > 0;
        BH_CHECK(head.body_on_bodiless_method == (bodiless && has_body));
      }
      if (event == Event::kMessage) {
        // Trailer fields never join the head (RFC 9110 section 6.5.1).
        BH_CHECK(parser.head().headers.size() == head_fields.size());
        for (size_t i = 0; i < head_fields.size(); ++i) {
          BH_CHECK(parser.head().headers[i].name == head_fields[i].name);
          BH_CHECK(parser.head().headers[i].value == head_fields[i].value);
        }
        BH_CHECK(parser.body().size() <= limits.max_body_bytes);
        if (!parser.head().chunked) BH_CHECK(parser.body().size() == parser.head().content_length);
        BH_CHECK(parser.head().headers.size() <= limits.max_headers);
        // Only HTTP/1.0 and HTTP/1.1 come out (a higher 1.x is taken as 1.1).
        BH_CHECK(parser.head().version_major == 1 && parser.head().version_minor <= 1);
      }
      if (event == Event::kNeedMore) {
        BH_CHECK(chunk.empty());
        break;
      }
    }
  }
  if (failed) {
    size_t consumed = 1;
    BH_CHECK(parser.Parse("GET / HTTP/1.1\r\nHost: x\r\n\r\n", &consumed) == Event::kError);
    BH_CHECK(consumed == 0);
  } else {
    parser.Finish();
  }
  return 0;
}
