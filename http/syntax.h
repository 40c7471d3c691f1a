// SPDX-License-Identifier: MIT
// The character classes of HTTP/1.1 that bulkheadd checks itself on top of http-parser, which
// Debian builds without HTTP_PARSER_STRICT and which then lets some bytes through: a space in a
// field name, a TAB, form feed or non-ASCII byte in a request-target. One 256-entry table lookup a
// byte, no allocation. Pure; thread-safe.
#pragma once

#include <string>
#include <string_view>

namespace bulkhead::http {

// A field name: 1*tchar (RFC 9110 section 5.6.2, RFC 9112 section 5.1: no whitespace between the
// name and the colon).
bool IsToken(std::string_view text);

// A field value: no NUL, CR, LF or other control character but HTAB (RFC 9110 section 5.5).
bool IsFieldValue(std::string_view text);

// Every byte of `piece` (of a request-target) is one RFC 3986 lets a URI hold, or one that clients
// send unencoded and front proxies take (`"`, `<`, `>`, `\`, `^`, `` ` ``, `{`, `|`, `}`, as
// HAProxy does): a visible ASCII character (0x21-0x7e) other than `#` (a fragment is never sent,
// RFC 9112 section 3.2). Refused: control characters (a TAB among them), DEL, bytes above 0x7f.
bool IsTargetText(std::string_view piece);

// An authority as a Host field value carries it, and as an http or https URI must: uri-host [ ":"
// port ] (RFC 9110 sections 4.2.3 and 7.2, RFC 3986 section 3.2.2). uri-host is an IP-literal in
// brackets ("[::1]", "[v1.x]"), or a reg-name (an IPv4 address is one): unreserved characters,
// sub-delims and %HH; the port is digits. Refused: an empty host (an http URI's host is never
// empty, RFC 9110 section 4.2.1), userinfo ("a@b", RFC 9110 section 4.2.4), a space, any other
// byte.
bool IsHostAuthority(std::string_view text);

// `a` and `b` are equal but for the case of ASCII letters (field names, tokens: RFC 9110 section
// 5.1). Bytes above 0x7f compare as they are, as no locale is consulted.
bool EqualsIgnoreCase(std::string_view a, std::string_view b);

// Appends `value` in lower-case hexadecimal without leading zeros ("0" for 0), as a chunk size is
// written (RFC 9112 section 7.1), padded with zeros to at least `min_digits`. No allocation beyond
// `out`'s own growth.
void AppendHex(std::string* out, unsigned long long value, int min_digits = 1);

}  // namespace bulkhead::http
