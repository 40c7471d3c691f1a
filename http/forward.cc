// SPDX-License-Identifier: MIT
#include "http/forward.h"

#include <algorithm>
#include <array>
#include <cctype>

namespace bulkhead::http {
namespace {

// Always hop-by-hop (RFC 9110 section 7.6.1), or set anew by bulkheadd.
constexpr std::array<std::string_view, 9> kRemoved = {
    "Connection",        "Keep-Alive", "Proxy-Connection", "TE",    "Trailer",
    "Transfer-Encoding", "Upgrade",    "Content-Length",   "Expect"};

bool StartsWithIgnoreCase(std::string_view text, std::string_view prefix) {
  return text.size() >= prefix.size() && EqualsIgnoreCase(text.substr(0, prefix.size()), prefix);
}

void AppendField(std::string* out, std::string_view name, std::string_view value) {
  out->append(name);
  out->append(": ");
  out->append(value);
  out->append("\r\n");
}

// Appends "NAME: " and the values of every field of `headers` named NAME from `first` on (none
// when `first` is null) joined with ", ", and a last ", " when anything was: the caller appends
// the last value and the CRLF. Empty values count only after a non-empty one, as a join of the
// values one by one onto an empty string does.
void AppendJoined(std::string* out, std::string_view name, const std::vector<Header>& headers,
                  const Header* first) {
  out->append(name);
  out->append(": ");
  if (first == nullptr) return;
  bool any = false;
  for (const Header* header = first; header != headers.data() + headers.size(); ++header) {
    if (!EqualsIgnoreCase(header->name, name) || (!any && header->value.empty())) continue;
    if (any) out->append(", ");
    out->append(header->value);
    any = true;
  }
  if (any) out->append(", ");
}

}  // namespace

bool IsHopByHop(std::string_view name, const std::vector<Header>& headers) {
  for (std::string_view removed : kRemoved) {
    if (EqualsIgnoreCase(name, removed)) return true;
  }
  if (StartsWithIgnoreCase(name, "Proxy-")) return true;
  for (const Header& header : headers) {
    if (!EqualsIgnoreCase(header.name, "Connection")) continue;
    std::string_view rest = header.value;
    while (!rest.empty()) {
      const size_t comma = rest.find(',');
      std::string_view token = rest.substr(0, comma);
      while (!token.empty() && (token.front() == ' ' || token.front() == '\t')) {
        token.remove_prefix(1);
      }
      while (!token.empty() && (token.back() == ' ' || token.back() == '\t')) {
        token.remove_suffix(1);
      }
      if (!token.empty() && EqualsIgnoreCase(token, name)) return true;
      rest.remove_prefix(comma == std::string_view::npos ? rest.size() : comma + 1);
    }
  }
  return false;
}

namespace {

// The request line, the end-to-end fields and the added ones: all but the framing and the blank
// line.
void AppendLineAndFields(std::string* out, const RequestHead& head, const ForwardOptions& options) {
  out->append(head.method);
  out->push_back(' ');
  out->append(head.target);
  out->append(" HTTP/1.1\r\n");
  // First, where a user agent puts it (RFC 9110 section 7.2).
  if (!options.host.empty() && !head.Find("Host")) AppendField(out, "Host", options.host);
  // The client's X-Forwarded-For and Forwarded values, joined with ", " below and followed by the
  // client's address: their first field, if any, is appended to in place, later ones after it.
  bool has_request_id = false;
  const Header* forwarded_for = nullptr;
  const Header* forwarded = nullptr;
  for (const Header& header : head.headers) {
    if (IsHopByHop(header.name, head.headers)) continue;
    if (!options.client_address.empty()) {
      if (EqualsIgnoreCase(header.name, "X-Forwarded-For")) {
        if (forwarded_for == nullptr) forwarded_for = &header;
        continue;
      }
      if (EqualsIgnoreCase(header.name, "Forwarded")) {
        if (forwarded == nullptr) forwarded = &header;
        continue;
      }
    }
    if (EqualsIgnoreCase(header.name, "X-Request-Id")) has_request_id = true;
    AppendField(out, header.name, header.value);
  }
  if (!options.client_address.empty()) {
    AppendJoined(out, "X-Forwarded-For", head.headers, forwarded_for);
    out->append(options.client_address);
    out->append("\r\n");
    AppendJoined(out, "Forwarded", head.headers, forwarded);
    // RFC 7239 section 6: an IPv6 address is quoted and bracketed.
    const bool v6 = options.client_address.find(':') != std::string_view::npos;
    out->append(v6 ? "for=\"[" : "for=");
    out->append(options.client_address);
    out->append(v6 ? "]\"\r\n" : "\r\n");
  }
  if (!has_request_id && !options.request_id.empty()) {
    AppendField(out, "X-Request-Id", options.request_id);
  }
  // A worker that never reads this body would take it as its next request: it is asked to close
  // the connection after its answer instead (RFC 9112 section 9.6), and bulkheadd sends nothing
  // more on it whatever the worker does.
  if (head.body_on_bodiless_method) AppendField(out, "Connection", "close");
}

}  // namespace

void AppendForwardRequest(std::string* out, const RequestHead& head, std::string_view body,
                          const ForwardOptions& options) {
  AppendLineAndFields(out, head, options);
  if (!body.empty() || head.chunked || head.Find("Content-Length")) {
    AppendField(out, "Content-Length", std::to_string(body.size()));  // short: no allocation
  }
  out->append("\r\n");
  out->append(body);
}

void AppendForwardHeadStreamed(std::string* out, const RequestHead& head,
                               const ForwardOptions& options) {
  AppendLineAndFields(out, head, options);
  if (head.chunked) {
    AppendField(out, "Transfer-Encoding", "chunked");
  } else {
    AppendField(out, "Content-Length", std::to_string(head.content_length));
  }
  out->append("\r\n");
}

void AppendChunk(std::string* out, std::string_view piece) {
  if (piece.empty()) return;  // a zero-size chunk would end the body
  AppendHex(out, piece.size());
  out->append("\r\n");
  out->append(piece);
  out->append("\r\n");
}

bool IsIdempotentMethod(std::string_view method) {
  for (std::string_view idempotent : {"GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE"}) {
    if (method == idempotent) return true;
  }
  return false;
}

}  // namespace bulkhead::http
