// SPDX-License-Identifier: MIT
// GoogleTest glue for the e2e tests: harness options whose failures become test failures, a
// start assertion that prints bulkheadd's log, and reply formatting for assertion messages.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

#include "ipc/frame.h"
#include "tests/e2e/harness.h"
#include "tests/helpers/test_support.h"

namespace bulkhead::e2e {

// For cells that still hold a request that never finishes (`hang`) when the test ends: on SIGTERM
// bulkheadd lets in-flight requests finish for up to stop_timeout (default 5 s) before it signals
// the worker; a short one keeps the test short.
inline constexpr char kQuickStop[] = "stop_timeout = \"300ms\"\n";

inline HarnessOptions TestOptions(std::vector<CellSpec> cells, std::string supervisor_toml = "") {
  HarnessOptions options;
  options.cells = std::move(cells);
  options.supervisor_toml = std::move(supervisor_toml);
  options.on_failure = [](const std::string& message) { ADD_FAILURE() << message; };
  return options;
}

// "OK \"hello\"", "REJECTED/full \"...\"", or the transport error.
inline std::string Describe(const Result<ipc::Client::Reply>& reply) {
  if (!reply.ok()) return "error: " + reply.status().message();
  return std::string(ipc::StatusName(reply->header.status)) + "/" +
         ipc::ReasonName(reply->header.reason) + " id " + std::to_string(reply->header.request_id) +
         " \"" + reply->payload + "\"";
}

inline bool IsReply(const Result<ipc::Client::Reply>& reply, ipc::ReplyStatus status,
                    ipc::Reason reason) {
  return reply.ok() && reply->header.status == status && reply->header.reason == reason;
}

// "FILE:LINE:COL" of the value written after the first `prefix` ("listen = ") in the config file
// `path`, as config errors place a value (1-based); "" when the file does not hold `prefix`.
inline std::string PlaceInConfig(const std::string& path, std::string_view prefix) {
  const std::string text = testing::ReadFile(path).value_or("");
  const size_t at = text.find(prefix);
  if (at == std::string::npos) return "";
  const size_t line_start =
      text.rfind('\n', at) == std::string::npos ? 0 : text.rfind('\n', at) + 1;
  const auto line = 1 + std::count(text.begin(), text.begin() + static_cast<ptrdiff_t>(at), '\n');
  return path + ":" + std::to_string(line) + ":" +
         std::to_string(at - line_start + prefix.size() + 1);
}

}  // namespace bulkhead::e2e

// Starts `harness` or fails the test with bulkheadd's log.
#define ASSERT_STARTED(harness)                                     \
  do {                                                              \
    ::bulkhead::Status started_status_ = (harness).Start();         \
    ASSERT_TRUE(started_status_.ok()) << started_status_.message(); \
  } while (0)

// The reply is OK with `payload`.
#define EXPECT_OK_REPLY(reply, expected_payload)                                    \
  do {                                                                              \
    const auto& reply_ = (reply);                                                   \
    EXPECT_TRUE(::bulkhead::e2e::IsReply(reply_, ::bulkhead::ipc::ReplyStatus::kOk, \
                                         ::bulkhead::ipc::Reason::kNone) &&         \
                reply_->payload == (expected_payload))                              \
        << "expected OK \"" << (expected_payload) << "\", got "                     \
        << ::bulkhead::e2e::Describe(reply_);                                       \
  } while (0)
