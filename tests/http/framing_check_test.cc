// SPDX-License-Identifier: MIT
// FramingCheck (http/framing_check.h): the line rules over a message's non-data bytes, handed
// over whole and in every split, so that a rule never depends on where a read ended.
#include "http/framing_check.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace bulkhead::http {
namespace {

using ::testing::HasSubstr;

// One message's non-data bytes: the head, then (chunked) its framing with the data left out.
struct Message {
  std::string head = {};
  bool chunked = false;
  std::string framing = {};
};

// Scans `m` split into pieces of `step` bytes (0: whole); the first error, "" when none.
std::string Check(const Message& m, size_t step) {
  FramingCheck check;
  check.StartMessage();
  auto scan = [&](std::string_view bytes) -> const char* {
    while (!bytes.empty()) {
      const size_t piece = step == 0 ? bytes.size() : std::min(step, bytes.size());
      if (const char* wrong = check.Scan(bytes.substr(0, piece))) return wrong;
      bytes.remove_prefix(piece);
    }
    return nullptr;
  };
  if (const char* wrong = scan(m.head)) return wrong;
  check.StartBody(m.chunked);
  if (const char* wrong = scan(m.framing)) return wrong;
  return "";
}

TEST(FramingCheck, WellFormedMessagesPassInEverySplit) {
  const std::vector<Message> good = {
      {"GET / HTTP/1.1\r\nHost: x\r\n\r\n"},
      {"GET / HTTP/1.1\nHost: x\n\n"},  // bare LF line ends in a head (RFC 9112 section 2.2)
      {"\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n"},  // an empty line before a request
      {"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", true,
       // "5\r\n" hello "\r\n" "1a;ext=\"v\"\r\n" <26 bytes> "\r\n" "0\r\n" "T: 1\r\n" "\r\n"
       "5\r\n\r\n1a;ext=\"v\"\r\n\r\n0\r\nT: 1\r\n\r\n"},
      {"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", true, "000\r\n\r\n"},
  };
  for (const Message& m : good) {
    for (size_t step : {size_t{0}, size_t{1}, size_t{2}, size_t{5}}) {
      EXPECT_EQ(Check(m, step), "") << m.head << m.framing << " step " << step;
    }
  }
}

TEST(FramingCheck, EachRuleHoldsInEverySplit) {
  struct Bad {
    Message message;
    const char* why;
  };
  const std::string head = "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n";
  const std::vector<Bad> bad = {
      {{"GET / HTTP/1.1\rHost: x\r\n\r\n"}, "bare CR"},
      {{"GET / HTTP/1.1\r\nHost: x\r\n\r"}, ""},  // a CR last waits for the byte after it
      {{"GET / HTTP/1.1\r\nHost: x\r\n \r\n\r\n"}, "obs-fold"},
      {{"GET / HTTP/1.1\r\nA: 1\n\tb\n\n"}, "obs-fold"},
      {{head, true, "5\rX"}, "bare CR"},
      {{head, true, "5\n"}, "CRLF"},
      {{head, true, "5;a\nb\r\n"}, "CRLF"},
      {{head, true, "5\r\nX\n"}, "chunk data not followed by CRLF"},
      {{head, true, "5\r\n\rX"}, "bare CR"},
      {{head, true, "0\r\nT: 1\n\r\n"}, "CRLF"},
      {{head, true, "0\r\nT: 1\r\n 2\r\n\r\n"}, "obs-fold"},
      {{head, true, "0\r\n\rX"}, "bare CR"},
      // A size with no digit other than 0 is the last chunk: what follows is the trailer section,
      // not a chunk's data end.
      {{head, true, "00;x\r\nT: 1\r\n\r\n"}, ""},
  };
  for (const Bad& b : bad) {
    for (size_t step : {size_t{0}, size_t{1}, size_t{3}}) {
      const std::string got = Check(b.message, step);
      if (std::string(b.why).empty()) {
        EXPECT_EQ(got, "") << b.message.head << b.message.framing;
      } else {
        EXPECT_THAT(got, HasSubstr(b.why))
            << b.message.head << b.message.framing << " step " << step;
      }
    }
  }
}

TEST(FramingCheck, AnErrorStaysAndCountsStartOverPerMessage) {
  FramingCheck check;
  check.StartMessage();
  EXPECT_EQ(check.Scan("GET / HTTP/1.1\r\n"), nullptr);
  EXPECT_EQ(check.head_bytes(), 16u);
  check.StartBody(true);
  EXPECT_EQ(check.Scan("0\r\nT: 12\r\n\r\n"), nullptr);
  EXPECT_EQ(check.trailer_bytes(), 9u);
  check.StartMessage();
  EXPECT_EQ(check.head_bytes(), 0u);
  EXPECT_EQ(check.trailer_bytes(), 0u);
  const char* wrong = check.Scan("GET\r/");
  ASSERT_NE(wrong, nullptr);
  EXPECT_EQ(check.Scan("GET / HTTP/1.1\r\n"), wrong);
}

}  // namespace
}  // namespace bulkhead::http
