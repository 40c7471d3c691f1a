// SPDX-License-Identifier: MIT
// libFuzzer target for http::ResponseRelay: arbitrary worker bytes, fed in arbitrary pieces, for
// a HEAD or other request, a client that keeps alive or not, speaks HTTP/1.1 or 1.0. Beyond "does
// not crash", every response the relay completes must reach the client as exactly one well-formed
// HTTP/1.1 response, read here by a strict parser of our own (not http-parser, whose leniency is
// what the relay guards against): a token for every field name, one framing field at most and the
// relay's own, no hop-by-hop field of the worker's, no body where RFC 9112 section 6.3 says there
// is none, exactly the bytes its framing announces and nothing after them. A failure before the
// head went out leaves the client nothing (it gets a 502). Built with -DBULKHEAD_FUZZ=ON and clang;
// run: build-asan/tests/http/http_response_relay_fuzzer -max_total_time=60
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "base/check.h"
#include "http/request_parser.h"
#include "http/response_relay.h"
#include "http/syntax.h"

namespace {

using bulkhead::http::EqualsIgnoreCase;
using bulkhead::http::IsToken;
using bulkhead::http::ResponseRelay;

// What the relay chose, as the client reads it.
struct ClientResponse {
  int status = 0;
  bool chunked = false;
  bool has_length = false;
  uint64_t length = 0;
  bool close = false;  // "Connection: close"
};

// Reads one line ending in CRLF from `*text` (no bare CR or LF inside); false if there is none.
bool TakeLine(std::string_view* text, std::string_view* line) {
  const size_t end = text->find("\r\n");
  if (end == std::string_view::npos) return false;
  *line = text->substr(0, end);
  text->remove_prefix(end + 2);
  return line->find_first_of("\r\n") == std::string_view::npos;
}

// Parses the head the client got, strictly; removes it from `*text`.
ClientResponse ParseHead(std::string_view* text) {
  ClientResponse response;
  std::string_view line;
  BH_CHECK(TakeLine(text, &line));
  BH_CHECK(line.size() >= 13 && line.substr(0, 9) == "HTTP/1.1 " && line[12] == ' ');
  for (size_t i = 9; i < 12; ++i) BH_CHECK(line[i] >= '0' && line[i] <= '9');
  response.status = (line[9] - '0') * 100 + (line[10] - '0') * 10 + (line[11] - '0');
  // Interim responses and 101 never reach the client.
  BH_CHECK(response.status >= 200);
  int lengths = 0;
  int encodings = 0;
  int connections = 0;
  while (true) {
    BH_CHECK(TakeLine(text, &line));
    if (line.empty()) break;
    const size_t colon = line.find(':');
    BH_CHECK(colon != std::string_view::npos);
    const std::string_view name = line.substr(0, colon);
    std::string_view value = line.substr(colon + 1);
    BH_CHECK(IsToken(name));
    BH_CHECK(!value.empty() && value.front() == ' ');
    value.remove_prefix(1);
    // The worker's hop-by-hop fields are gone (http/forward.h); Connection is the relay's own.
    for (std::string_view hop : {"Keep-Alive", "Proxy-Connection", "TE", "Trailer", "Upgrade"}) {
      BH_CHECK(!EqualsIgnoreCase(name, hop));
    }
    if (EqualsIgnoreCase(name, "Content-Length")) {
      ++lengths;
      BH_CHECK(!value.empty() && value.size() <= 20);
      uint64_t n = 0;
      for (char c : value) {
        BH_CHECK(c >= '0' && c <= '9');
        n = n * 10 + static_cast<uint64_t>(c - '0');
      }
      response.has_length = true;
      response.length = n;
    } else if (EqualsIgnoreCase(name, "Transfer-Encoding")) {
      ++encodings;
      BH_CHECK(value == "chunked");
      response.chunked = true;
    } else if (EqualsIgnoreCase(name, "Connection")) {
      ++connections;
      BH_CHECK(value == "close" || value == "keep-alive");
      response.close = value == "close";
    }
  }
  BH_CHECK(lengths <= 1 && encodings <= 1 && connections <= 1);
  BH_CHECK(lengths + encodings <= 1);
  return response;
}

// Checks `text`, a whole chunked body as the relay writes it: chunks (lowercase hex sizes), the
// last chunk, no trailers, nothing after it.
void CheckChunkedBody(std::string_view text) {
  while (true) {
    std::string_view line;
    BH_CHECK(TakeLine(&text, &line));
    BH_CHECK(!line.empty() && line.size() <= 16);
    uint64_t size = 0;
    for (char c : line) {
      const bool digit = c >= '0' && c <= '9';
      const bool lower = c >= 'a' && c <= 'f';
      BH_CHECK(digit || lower);
      size = size * 16 + static_cast<uint64_t>(digit ? c - '0' : c - 'a' + 10);
    }
    if (size == 0) {
      BH_CHECK(text == "\r\n");  // no trailers, nothing after the response
      return;
    }
    BH_CHECK(text.size() >= size + 2);
    BH_CHECK(text.substr(size, 2) == "\r\n");
    text.remove_prefix(size + 2);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  // Byte 0: bit 0 a HEAD request, bit 1 the client keeps alive, bit 2 it speaks HTTP/1.1, bit 3
  // the worker closes the connection after its last byte. Byte 1: seed of the piece sizes.
  const bool head_request = (data[0] & 1) != 0;
  const bool keep_alive = (data[0] & 2) != 0;
  const bool http11 = (data[0] & 4) != 0;
  const bool worker_closes = (data[0] & 8) != 0;
  uint32_t piece_seed = data[1];
  std::string_view input(reinterpret_cast<const char*>(data) + 2, size - 2);

  using Event = ResponseRelay::Event;
  ResponseRelay relay;
  // Responses one after the other on one connection, as long as the relay keeps it.
  for (int response = 0; response < 4; ++response) {
    relay.Begin(head_request, keep_alive, http11);
    std::string out;
    Event event = Event::kNeedMore;
    while (!input.empty() && event == Event::kNeedMore) {
      piece_seed = piece_seed * 1103515245u + 12345u;
      const size_t piece = 1 + (piece_seed >> 16) % 64;
      const std::string_view chunk = input.substr(0, piece);
      size_t consumed = 0;
      event = relay.Feed(chunk, &consumed, &out);
      BH_CHECK(consumed <= chunk.size());
      if (event == Event::kNeedMore) BH_CHECK(consumed == chunk.size());
      input.remove_prefix(consumed);
    }
    if (event == Event::kNeedMore && worker_closes) event = relay.WorkerClosed(&out);
    if (event == Event::kError) {
      BH_CHECK(!relay.error().empty());
      // Nothing went out: the client gets a 502 instead.
      if (!relay.head_sent()) BH_CHECK(out.empty());
      return 0;
    }
    if (!relay.head_sent()) BH_CHECK(out.empty());
    if (event == Event::kNeedMore) {
      if (relay.head_sent()) {
        std::string_view text = out;
        ParseHead(&text);
      }
      return 0;
    }
    // kComplete: exactly one response, framed as the relay said.
    std::string_view text = out;
    const ClientResponse client = ParseHead(&text);
    BH_CHECK(client.status == relay.status_code());
    BH_CHECK(client.close == relay.client_must_close());
    if (!keep_alive) BH_CHECK(client.close);
    const bool no_body = head_request || client.status == 204 || client.status == 304;
    if (no_body) {
      BH_CHECK(text.empty());
      BH_CHECK(!client.chunked);
      if (client.status == 204) BH_CHECK(!client.has_length);
    } else if (client.chunked) {
      BH_CHECK(http11);
      CheckChunkedBody(text);
    } else if (client.has_length) {
      BH_CHECK(text.size() == client.length);
    } else {
      // Close-delimited: only for an HTTP/1.0 client, whose connection then ends.
      BH_CHECK(!http11 && client.close);
    }
    if (!relay.worker_keep_alive()) return 0;
  }
  return 0;
}
