// SPDX-License-Identifier: MIT
#include "http/forward.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdio>

namespace bulkhead::http {
namespace {

// Always hop-by-hop (RFC 9110 section 7.6.1), or set anew by bulkheadd.
constexpr std::array<std::string_view, 9> kRemoved = {
    "Connection",        "Keep-Alive", "Proxy-Connection", "TE",    "Trailer",
    "Transfer-Encoding", "Upgrade",    "Content-Length",   "Expect"};

std::string Lowercase(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

bool StartsWithIgnoreCase(std::string_view text, std::string_view prefix) {
  return text.size() >= prefix.size() && EqualsIgnoreCase(text.substr(0, prefix.size()), prefix);
}

// RFC 7239 section 6: an IPv6 address is quoted and bracketed.
std::string ForwardedFor(std::string_view address) {
  if (address.find(':') != std::string_view::npos) return "for=\"[" + std::string(address) + "]\"";
  return "for=" + std::string(address);
}

void AppendField(std::string* out, std::string_view name, std::string_view value) {
  out->append(name);
  out->append(": ");
  out->append(value);
  out->append("\r\n");
}

}  // namespace

std::vector<std::string> ConnectionOptions(const std::vector<Header>& headers) {
  std::vector<std::string> options;
  for (const Header& header : headers) {
    if (!EqualsIgnoreCase(header.name, "Connection")) continue;
    std::string_view rest = header.value;
    while (!rest.empty()) {
      const size_t comma = rest.find(',');
      std::string_view token = rest.substr(0, comma);
      while (!token.empty() && (token.front() == ' ' || token.front() == '\t')) {
        token.remove_prefix(1);
      }
      while (!token.empty() && (token.back() == ' ' || token.back() == '\t'))
        token.remove_suffix(1);
      if (!token.empty()) options.push_back(Lowercase(token));
      rest.remove_prefix(comma == std::string_view::npos ? rest.size() : comma + 1);
    }
  }
  return options;
}

bool IsHopByHop(std::string_view name, const std::vector<std::string>& connection_options) {
  for (std::string_view removed : kRemoved) {
    if (EqualsIgnoreCase(name, removed)) return true;
  }
  if (StartsWithIgnoreCase(name, "Proxy-")) return true;
  const std::string lower = Lowercase(name);
  return std::find(connection_options.begin(), connection_options.end(), lower) !=
         connection_options.end();
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
  const std::vector<std::string> connection_options = ConnectionOptions(head.headers);
  std::string forwarded_for;
  std::string forwarded;
  bool has_request_id = false;
  for (const Header& header : head.headers) {
    if (IsHopByHop(header.name, connection_options)) continue;
    if (!options.client_address.empty()) {
      // Appended to below, with the client's address last.
      if (EqualsIgnoreCase(header.name, "X-Forwarded-For")) {
        forwarded_for += (forwarded_for.empty() ? "" : ", ") + header.value;
        continue;
      }
      if (EqualsIgnoreCase(header.name, "Forwarded")) {
        forwarded += (forwarded.empty() ? "" : ", ") + header.value;
        continue;
      }
    }
    if (EqualsIgnoreCase(header.name, "X-Request-Id")) has_request_id = true;
    AppendField(out, header.name, header.value);
  }
  if (!options.client_address.empty()) {
    AppendField(out, "X-Forwarded-For",
                (forwarded_for.empty() ? "" : forwarded_for + ", ") + options.client_address);
    AppendField(out, "Forwarded",
                (forwarded.empty() ? "" : forwarded + ", ") + ForwardedFor(options.client_address));
  }
  if (!has_request_id && !options.request_id.empty()) {
    AppendField(out, "X-Request-Id", options.request_id);
  }
}

}  // namespace

void AppendForwardRequest(std::string* out, const RequestHead& head, std::string_view body,
                          const ForwardOptions& options) {
  AppendLineAndFields(out, head, options);
  if (!body.empty() || head.chunked || head.Find("Content-Length")) {
    AppendField(out, "Content-Length", std::to_string(body.size()));
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
  char size[20];
  const int n = std::snprintf(size, sizeof size, "%zx\r\n", piece.size());
  out->append(size, static_cast<size_t>(n));
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
