// SPDX-License-Identifier: MIT
// Helpers shared by the config/ tests: parse a config text and get its Config or its errors as
// "file:line:col: key: message" lines, the form bulkheadd prints.
#pragma once

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "config/config.h"

namespace bulkhead::config {

inline constexpr char kFile[] = "/etc/bulkhead/bulkhead.toml";

// Every error as "file:line:col: key: message", the form bulkheadd prints.
inline std::vector<std::string> ErrorLines(const LoadResult& result) {
  std::vector<std::string> lines;
  for (const ConfigError& error : result.errors) lines.push_back(error.ToString());
  return lines;
}

// `text` must be valid; returns its Config.
inline Config MustParse(std::string_view text, const std::string& source = kFile) {
  LoadResult result = ParseConfig(text, source);
  EXPECT_THAT(ErrorLines(result), ::testing::IsEmpty());
  EXPECT_TRUE(result.config.has_value());
  return result.config.value_or(Config{});
}

// `text` must be invalid; returns its errors as lines.
inline std::vector<std::string> Errors(std::string_view text, const std::string& source = kFile) {
  LoadResult result = ParseConfig(text, source);
  EXPECT_FALSE(result.config.has_value());
  EXPECT_FALSE(result.errors.empty());
  return ErrorLines(result);
}

inline std::string At(int line, int column, std::string_view key, std::string_view message) {
  std::string out = std::string(kFile) + ":" + std::to_string(line) + ":" + std::to_string(column);
  out += ": ";
  out.append(key);
  out += ": ";
  out.append(message);
  return out;
}

// Sets an environment variable for one test and puts the old value back.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = getenv(name)) old_ = old;
    setenv(name, value, 1);
  }
  ~ScopedEnv() {
    if (old_) {
      setenv(name_, old_->c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

// cgroup limits: a cell with one limit key, checked on a host with `cpus` CPUs. The key is on
// line 4.
inline std::string CellWith(std::string_view line) {
  return "[cells.a]\ncommand = [\"x\"]\nmax_concurrent = 1\n" + std::string(line) + "\n";
}

inline Config MustParseOn(uint32_t cpus, std::string_view text) {
  LoadResult result = ParseConfig(text, kFile, HostFacts{cpus});
  EXPECT_THAT(ErrorLines(result), ::testing::IsEmpty());
  EXPECT_TRUE(result.config.has_value());
  return result.config.value_or(Config{});
}

inline std::vector<std::string> ErrorsOn(uint32_t cpus, std::string_view text) {
  LoadResult result = ParseConfig(text, kFile, HostFacts{cpus});
  EXPECT_FALSE(result.config.has_value());
  EXPECT_FALSE(result.errors.empty());
  return ErrorLines(result);
}

}  // namespace bulkhead::config
