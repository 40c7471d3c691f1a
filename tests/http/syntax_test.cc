// SPDX-License-Identifier: MIT
// The character classes bulkheadd checks on top of http-parser (http/syntax.h).
#include "http/syntax.h"

#include <gtest/gtest.h>

#include <cctype>
#include <string>

namespace bulkhead::http {
namespace {

TEST(Syntax, TokensAreTcharsOnly) {
  EXPECT_TRUE(IsToken("Content-Length"));
  EXPECT_TRUE(IsToken("X-!#$%&'*+.^_`|~09az"));
  EXPECT_FALSE(IsToken(""));
  EXPECT_FALSE(IsToken("Content-Length "));
  EXPECT_FALSE(IsToken("Bad Name"));
  EXPECT_FALSE(IsToken("A:B"));
  EXPECT_FALSE(IsToken("A\tB"));
  EXPECT_FALSE(IsToken("caf\xc3\xa9"));
  EXPECT_FALSE(IsToken("a\"b"));
}

TEST(Syntax, FieldValuesHoldNoControlCharacterButTab) {
  EXPECT_TRUE(IsFieldValue(""));
  EXPECT_TRUE(IsFieldValue("text/plain; q=0.5\tx"));
  EXPECT_TRUE(IsFieldValue("caf\xc3\xa9"));  // obs-text
  EXPECT_FALSE(IsFieldValue("a\rb"));
  EXPECT_FALSE(IsFieldValue("a\nb"));
  EXPECT_FALSE(IsFieldValue(std::string("a\0b", 3)));
  EXPECT_FALSE(IsFieldValue("a\x7f"));
}

TEST(Syntax, TargetsAreVisibleAsciiWithoutFragment) {
  EXPECT_TRUE(IsTargetText("/a/b?c=d&e=%20f"));
  EXPECT_TRUE(IsTargetText("http://x:8080/p;q"));
  EXPECT_TRUE(IsTargetText("/q={\"a\"|<b>}^`\\"));
  EXPECT_TRUE(IsTargetText("*"));
  for (char c : std::string("\t\f\r\n \x01\x7f\x80\xff#")) {
    EXPECT_FALSE(IsTargetText(std::string("/a") + c)) << static_cast<int>(c);
  }
}

// Table-driven against the definition: equal but for the case of ASCII letters. Pairs that differ
// only in the 0x20 bit but are not letters ('@' and '`', '[' and '{', bytes above 0x7f) are not.
TEST(Syntax, EqualsIgnoreCaseFoldsAsciiLettersOnly) {
  EXPECT_TRUE(EqualsIgnoreCase("Content-Length", "content-LENGTH"));
  EXPECT_TRUE(EqualsIgnoreCase("", ""));
  EXPECT_FALSE(EqualsIgnoreCase("Host", "Hos"));
  EXPECT_FALSE(EqualsIgnoreCase("Host", "Hosu"));
  for (int x = 0; x < 256; ++x) {
    for (int y = 0; y < 256; ++y) {
      const bool letters = std::isalpha(x) != 0 && std::tolower(x) == std::tolower(y);
      const bool expected = x == y || letters;
      const std::string a(1, static_cast<char>(x));
      const std::string b(1, static_cast<char>(y));
      ASSERT_EQ(EqualsIgnoreCase(a, b), expected) << x << " " << y;
    }
  }
}

TEST(Syntax, AppendHexWritesChunkSizesAndPadding) {
  const struct {
    unsigned long long value;
    int min_digits;
    std::string_view text;
  } cases[] = {
      {0, 1, "0"},
      {9, 1, "9"},
      {10, 1, "a"},
      {255, 1, "ff"},
      {4096, 1, "1000"},
      {0xdeadbeef, 1, "deadbeef"},
      {1, 12, "000000000001"},
      {~0ULL, 1, "ffffffffffffffff"},
      {~0ULL, 12, "ffffffffffffffff"},
  };
  for (const auto& c : cases) {
    std::string out = "x";
    AppendHex(&out, c.value, c.min_digits);
    EXPECT_EQ(out, "x" + std::string(c.text)) << c.value;
  }
}

}  // namespace
}  // namespace bulkhead::http
