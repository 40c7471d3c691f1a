// SPDX-License-Identifier: MIT
// SyntaxHint: a bare value with a unit, where toml++ stopped, is named and shown quoted; anything
// else gets no hint.
#include "config/syntax_hint.h"

#include <gtest/gtest.h>

namespace bulkhead::config {
namespace {

TEST(SyntaxHint, ABareDurationIsShownQuotedWithItsKey) {
  EXPECT_EQ(SyntaxHint("[cells.a]\nstall_timeout = 3s\n", {2, 18}),
            "durations are strings: stall_timeout = \"3s\"");
  // toml++ stops at the first letter, inside the value: the whole value is shown.
  EXPECT_EQ(SyntaxHint("queue_timeout=1m30s # wait\n", {1, 16}),
            "durations are strings: queue_timeout = \"1m30s\"");
  EXPECT_EQ(SyntaxHint("[cells.a]\n  restart_delay =  500ms\r\n", {2, 22}),
            "durations are strings: restart_delay = \"500ms\"");
}

TEST(SyntaxHint, SizesAndPercentagesToo) {
  EXPECT_EQ(SyntaxHint("memory_max = 256M\n", {1, 17}),
            "sizes with a unit are strings: memory_max = \"256M\"");
  EXPECT_EQ(SyntaxHint("cpu_max = 50%\n", {1, 13}), "percentages are strings: cpu_max = \"50%\"");
}

TEST(SyntaxHint, InsideAnArrayOrInlineTableOnlyTheValueIsShown) {
  EXPECT_EQ(SyntaxHint("x = [\"a\", 3s]\n", {1, 12}), "durations are strings: write \"3s\"");
  EXPECT_EQ(SyntaxHint("x = { t = 3s }\n", {1, 12}), "durations are strings: t = \"3s\"");
}

// `1.5s`, `3sec`, `3 s` are durations in another form: the hint shows the accepted one, where
// toml++ stops in each (its columns), in a table or an inline table.
TEST(SyntaxHint, ADurationInAnotherFormIsShownInTheAcceptedOne) {
  EXPECT_EQ(SyntaxHint("a = 1.5s\n", {1, 8}), "durations are strings: a = \"1500ms\"");
  EXPECT_EQ(SyntaxHint("a = 3sec\n", {1, 6}), "durations are strings: a = \"3s\"");
  EXPECT_EQ(SyntaxHint("a = 3 s\n", {1, 7}), "durations are strings: a = \"3s\"");
  EXPECT_EQ(SyntaxHint("x = { t = 3sec }\n", {1, 12}), "durations are strings: t = \"3s\"");
  EXPECT_EQ(SyntaxHint("x = { t = 1.5s }\n", {1, 14}), "durations are strings: t = \"1500ms\"");
  EXPECT_EQ(SyntaxHint("x = { t = 3 s }\n", {1, 13}), "durations are strings: t = \"3s\"");
  EXPECT_EQ(SyntaxHint("a = { command = [\"x\"], stall_timeout = 1.5s }\n", {1, 43}),
            "durations are strings: stall_timeout = \"1500ms\"");
}

// The error's key goes into an inline table: the key whose value toml++ stopped in.
TEST(SyntaxErrorKey, InsideAnInlineTableItsKey) {
  const std::string text =
      "[cells]\n"                                          // 1
      "a = { command = [\"x,=\"], stall_timeout = 3s }\n"  // 2
      "b = { restart_delay = 1.5s }\n"                     // 3
      "c = { x = { y = 3s } }\n";                          // 4
  EXPECT_EQ(SyntaxErrorKey(text, {2, 43}), "cells.a.stall_timeout");
  EXPECT_EQ(SyntaxErrorKey(text, {2, 20}), "cells.a.command");
  EXPECT_EQ(SyntaxErrorKey(text, {3, 26}), "cells.b.restart_delay");
  EXPECT_EQ(SyntaxErrorKey(text, {4, 18}), "cells.c");  // nested: not followed
  EXPECT_EQ(SyntaxErrorKey(text, {2, 3}), "cells.a");   // before the table
}

TEST(SyntaxErrorKey, TheEnclosingHeaderAndTheLinesKey) {
  const std::string text =
      "top = 1\n"                 // 1
      "[cells.a]  # the first\n"  // 2
      "stall_timeout = 3s\n"      // 3
      "\"quoted key\" = 3s\n"     // 4
      "s = '''\n"                 // 5
      "[cells.not_a_header]\n"    // 6
      "'''\n"                     // 7
      "a . b=1\n"                 // 8
      "[[cells]]\r\n"             // 9
      "x = = 1\n";                // 10
  EXPECT_EQ(SyntaxErrorKey(text, {1, 7}), "top");
  EXPECT_EQ(SyntaxErrorKey(text, {2, 3}), "cells.a");
  EXPECT_EQ(SyntaxErrorKey(text, {3, 18}), "cells.a.stall_timeout");
  EXPECT_EQ(SyntaxErrorKey(text, {4, 18}), "cells.a");  // not a bare key: the table alone
  EXPECT_EQ(SyntaxErrorKey(text, {6, 1}), "cells.a");   // inside a multi-line string
  EXPECT_EQ(SyntaxErrorKey(text, {8, 7}), "cells.a.a.b");
  EXPECT_EQ(SyntaxErrorKey(text, {10, 5}), "cells.x");
  EXPECT_EQ(SyntaxErrorKey(text, {11, 1}), "cells");
  EXPECT_EQ(SyntaxErrorKey(text, {0, 0}), "");
  EXPECT_EQ(SyntaxErrorKey("\n\n", {2, 1}), "");
}

// An error inside a multi-line array, or on the line after one that never closes, names the
// array's key, not the key of the line toml++ stopped at.
TEST(SyntaxErrorKey, InsideAMultiLineArrayTheArraysKey) {
  const std::string text =
      "[cells.a]\n"             // 1
      "command = [\n"           // 2
      "  \"python3\",  # [x\n"  // 3
      "  \"app.py\"\n"          // 4
      "  \"]x[\",\n"            // 5
      "]\n"                     // 6
      "[cells.b]\n"             // 7
      "env = [[\"A\"], [\n"     // 8
      "]]\n"                    // 9
      "max_queue = 1\n"         // 10
      "needs = [\"b\"\n"        // 11
      "max_concurrent = 4\n";   // 12
  EXPECT_EQ(SyntaxErrorKey(text, {3, 3}), "cells.a.command");
  EXPECT_EQ(SyntaxErrorKey(text, {5, 3}), "cells.a.command");  // the missing comma before it
  EXPECT_EQ(SyntaxErrorKey(text, {6, 1}), "cells.a.command");
  EXPECT_EQ(SyntaxErrorKey(text, {9, 1}), "cells.b.env");
  EXPECT_EQ(SyntaxErrorKey(text, {10, 11}), "cells.b.max_queue");  // closed again
  EXPECT_EQ(SyntaxErrorKey(text, {12, 1}), "cells.b.needs");       // needs never closed
}

TEST(SyntaxErrorKey, EndOfTheText) {
  EXPECT_EQ(EndOf(""), (SourcePosition{1, 1}));
  EXPECT_EQ(EndOf("a = 1\n"), (SourcePosition{2, 1}));
  EXPECT_EQ(EndOf("a = 1\nb"), (SourcePosition{2, 2}));
}

TEST(SyntaxHint, OtherErrorsGetNone) {
  EXPECT_EQ(SyntaxHint("max_concurrent = = 1\n", {1, 18}), "");
  EXPECT_EQ(SyntaxHint("a = 5days\n", {1, 6}), "");  // no unit the config takes
  EXPECT_EQ(SyntaxHint("a = 3s\n", {2, 1}), "");     // past the text
  EXPECT_EQ(SyntaxHint("a = 3s\n", {1, 40}), "");    // past the line
  EXPECT_EQ(SyntaxHint("a = 3s\n", {0, 0}), "");     // no position
  EXPECT_EQ(SyntaxHint("é = 3s\n", {1, 6}), "");     // columns in code points: left alone
}

}  // namespace
}  // namespace bulkhead::config
