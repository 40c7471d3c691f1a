// SPDX-License-Identifier: MIT
#include "http/framing_check.h"

#include <cstring>

namespace bulkhead::http {
namespace {

constexpr const char* kBareCr = "bare CR (a CR not followed by LF)";
constexpr const char* kObsFold = "obs-fold (a header line starting with whitespace)";
constexpr const char* kBareLfInChunked = "chunk or trailer line not ended by CRLF";
constexpr const char* kNoCrlfAfterData = "chunk data not followed by CRLF";

bool IsHexDigit(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

// The next `c` in [from, end), or nullptr.
const char* Find(const char* from, const char* end, char c) {
  return static_cast<const char*>(std::memchr(from, c, static_cast<size_t>(end - from)));
}

}  // namespace

void FramingCheck::StartMessage() {
  part_ = Part::kHead;
  previous_ = '\0';
  chunk_size_digits_ = true;
  chunk_nonzero_ = false;
  line_bytes_ = 0;
  head_bytes_ = 0;
  trailer_bytes_ = 0;
}

void FramingCheck::StartBody(bool chunked) {
  part_ = chunked ? Part::kChunkLine : Part::kNoFraming;
  chunk_size_digits_ = true;
  chunk_nonzero_ = false;
}

const char* FramingCheck::Fail(const char* why) {
  if (error_ == nullptr) error_ = why;
  return error_;
}

const char* FramingCheck::Scan(std::string_view bytes) {
  if (error_ != nullptr) return error_;
  if (bytes.empty()) return nullptr;
  switch (part_) {
    case Part::kHead:
      head_bytes_ += bytes.size();
      return ScanLines(bytes);
    case Part::kNoFraming:
    case Part::kDone:
      return ScanLines(bytes);
    case Part::kChunkLine:
    case Part::kDataCr:
    case Part::kDataLf:
    case Part::kTrailer:
      return ScanChunked(bytes);
  }
  return nullptr;
}

const char* FramingCheck::ScanLines(std::string_view bytes) {
  const char* begin = bytes.data();
  const char* end = begin + bytes.size();
  // The last byte of the previous piece against the first of this one.
  if (previous_ == '\r' && *begin != '\n') return Fail(kBareCr);
  if (previous_ == '\n' && (*begin == ' ' || *begin == '\t')) return Fail(kObsFold);
  // Each CR and LF against the byte after it; the last byte waits for the next piece.
  for (const char* cr = Find(begin, end, '\r'); cr != nullptr && cr + 1 < end;
       cr = Find(cr + 1, end, '\r')) {
    if (cr[1] != '\n') return Fail(kBareCr);
  }
  for (const char* lf = Find(begin, end, '\n'); lf != nullptr && lf + 1 < end;
       lf = Find(lf + 1, end, '\n')) {
    if (lf[1] == ' ' || lf[1] == '\t') return Fail(kObsFold);
  }
  previous_ = end[-1];
  return nullptr;
}

const char* FramingCheck::ScanChunked(std::string_view bytes) {
  for (size_t i = 0; i < bytes.size(); ++i) {
    // The trailer section ended: what follows is under the head rules.
    if (part_ == Part::kDone) return ScanLines(bytes.substr(i));
    const char c = bytes[i];
    if (previous_ == '\r' && c != '\n') return Fail(kBareCr);
    switch (part_) {
      case Part::kChunkLine:
        if (c == '\n') {
          if (previous_ != '\r') return Fail(kBareLfInChunked);
          // http-parser read the size from the same digits: data follows unless it is 0.
          part_ = chunk_nonzero_ ? Part::kDataCr : Part::kTrailer;
          chunk_size_digits_ = true;
          chunk_nonzero_ = false;
          line_bytes_ = 0;
        } else if (chunk_size_digits_) {
          if (!IsHexDigit(c)) {
            chunk_size_digits_ = false;
          } else if (c != '0') {
            chunk_nonzero_ = true;
          }
        }
        break;
      case Part::kDataCr:
        if (c != '\r') return Fail(kNoCrlfAfterData);
        part_ = Part::kDataLf;
        break;
      case Part::kDataLf:
        part_ = Part::kChunkLine;  // c is LF: a CR is never followed by anything else here
        break;
      case Part::kTrailer:
        ++trailer_bytes_;
        if (previous_ == '\n' && (c == ' ' || c == '\t')) return Fail(kObsFold);
        if (c == '\n') {
          if (previous_ != '\r') return Fail(kBareLfInChunked);
          if (line_bytes_ == 0) part_ = Part::kDone;
          line_bytes_ = 0;
        } else if (c != '\r') {
          ++line_bytes_;
        }
        break;
      case Part::kHead:
      case Part::kNoFraming:
      case Part::kDone:
        return ScanLines(bytes.substr(i));  // not reached: Scan sends these to ScanLines
    }
    previous_ = c;
  }
  return nullptr;
}

}  // namespace bulkhead::http
