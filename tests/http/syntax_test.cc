// SPDX-License-Identifier: MIT
// The character classes bulkheadd checks on top of http-parser (http/syntax.h).
#include "http/syntax.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace bulkhead::http
