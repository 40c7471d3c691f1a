// SPDX-License-Identifier: MIT
// FramingCheck: the line rules of RFC 9112 that http-parser 2.9, as Debian builds it (without
// HTTP_PARSER_STRICT), does not enforce, checked over the bytes of one HTTP/1.1 message that are
// not body data: its head, and a chunked body's chunk lines, the CRLF after each chunk's data and
// its trailer section. Without them a peer could make http-parser read a message differently from
// the next hop (request smuggling, response splitting: RFC 9112 section 11.2).
//
//   everywhere             a CR is followed by LF (no bare CR, section 2.2; http-parser takes the
//                          byte after a CR as the LF at the end of a line, whatever it is)
//   head, trailer section  no line starts with SP or HTAB (obs-fold, section 5.2)
//   chunked framing        a chunk line and a trailer line end with CRLF, never a bare LF (section
//                          7.1: http-parser skips a LF inside a chunk extension); each chunk's data
//                          is followed by CRLF (http-parser takes any two bytes there)
//
// A head may end its lines with a bare LF (section 2.2 lets a recipient take it; curl, HAProxy and
// nginx do). The caller hands over the bytes in order, in pieces of any size, leaving out the body
// data (http-parser's on_body says which bytes those are). A head is scanned with memchr; only
// chunked framing, which is a few bytes a chunk, goes byte by byte. No allocation.
// Pure; thread-compatible.
#pragma once

#include <cstdint>
#include <string_view>

namespace bulkhead::http {

class FramingCheck {
 public:
  // A message begins: a head comes next (a request or response, or the final response after an
  // interim 1xx).
  void StartMessage();
  // The head ended, its last byte scanned. `chunked`: chunked framing follows; else nothing that
  // is not body data (a body delimited by Content-Length or by the close, or none).
  void StartBody(bool chunked);

  // Scans the next bytes of the message that are not body data. Returns nullptr when they keep
  // the rules, else what breaks them ("bare CR (a CR not followed by LF)"), a string literal;
  // once broken, every call returns the same.
  const char* Scan(std::string_view bytes);

  // Bytes of the current message's head scanned so far.
  uint64_t head_bytes() const { return head_bytes_; }
  // Bytes of its trailer section (after the last chunk's line) scanned so far.
  uint64_t trailer_bytes() const { return trailer_bytes_; }

 private:
  // Where the next byte belongs.
  enum class Part : uint8_t {
    kHead,       // the start line and field lines, up to StartBody
    kNoFraming,  // after a head without chunked framing: no byte is expected; head rules apply
    kChunkLine,  // chunk-size [chunk-ext] CRLF; `chunk_size_digits_`, `chunk_nonzero_` describe it
    kDataCr,     // the CR after a chunk's data (the data itself is never scanned)
    kDataLf,     // the LF after it
    kTrailer,    // trailer field lines, then the empty line; `line_bytes_` counts the line's bytes
    kDone,       // the empty line ended the trailer section; head rules apply
  };

  // Head rules (bare CR, obs-fold) over `bytes`, with memchr.
  const char* ScanLines(std::string_view bytes);
  // Chunked framing, byte by byte.
  const char* ScanChunked(std::string_view bytes);
  const char* Fail(const char* why);

  Part part_ = Part::kHead;
  char previous_ = '\0';           // the last byte scanned in this message ('\0' before the first)
  bool chunk_size_digits_ = true;  // still in the chunk line's hex digits
  bool chunk_nonzero_ = false;     // a digit other than 0 was seen: data follows, not trailers
  uint32_t line_bytes_ = 0;        // of the trailer line, its CR and LF left out
  uint64_t head_bytes_ = 0;
  uint64_t trailer_bytes_ = 0;
  const char* error_ = nullptr;
};

}  // namespace bulkhead::http
