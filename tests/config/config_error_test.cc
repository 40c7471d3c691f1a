// SPDX-License-Identifier: MIT
// ConfigError::ToString: "file:line:col: key: message" and its shortened forms.
#include "config/config_error.h"

#include <gtest/gtest.h>

namespace bulkhead::config {
namespace {

TEST(ConfigError, ToStringWithEverything) {
  ConfigError error{"/etc/bulkhead.toml", 7, 18, "cells.payments.max_queue", "must be ..."};
  EXPECT_EQ(error.ToString(), "/etc/bulkhead.toml:7:18: cells.payments.max_queue: must be ...");
}

TEST(ConfigError, ToStringWithoutKey) {
  ConfigError error{"b.toml", 3, 1, "", "error while parsing"};
  EXPECT_EQ(error.ToString(), "b.toml:3:1: error while parsing");
}

TEST(ConfigError, ToStringWithoutPosition) {
  ConfigError error{"b.toml", 0, 0, "cells", "no cells defined"};
  EXPECT_EQ(error.ToString(), "b.toml: cells: no cells defined");
}

TEST(ConfigError, ToStringWithLineOnly) {
  ConfigError error{"b.toml", 4, 0, "", "bad"};
  EXPECT_EQ(error.ToString(), "b.toml:4: bad");
}

}  // namespace
}  // namespace bulkhead::config
