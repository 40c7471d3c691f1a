// SPDX-License-Identifier: MIT
// Status and Result<T>: how runtime code (libuv callbacks included) reports failure without
// throwing. A failed Status carries a message and, for system calls, the errno it captured.
#pragma once

#include <cerrno>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "base/check.h"

namespace bulkhead {

class Status {
 public:
  // Success.
  static Status Ok() { return Status(); }
  // Failure described by `message`.
  static Status Error(std::string message) { return Status(std::move(message), 0); }
  // Failure of a system call: message is "<what>: <strerror(err)>", error_number() is `err`.
  static Status FromErrno(std::string_view what, int err = errno);

  bool ok() const { return !failed_; }
  const std::string& message() const { return message_; }
  // The errno captured by FromErrno, or 0.
  int error_number() const { return errno_; }

 private:
  Status() = default;
  Status(std::string message, int err) : failed_(true), message_(std::move(message)), errno_(err) {}

  bool failed_ = false;
  std::string message_;
  int errno_ = 0;
};

// Either a value of T or a failed Status.
template <typename T>
class Result {
 public:
  Result(T value)
      : value_(std::move(value)), status_(Status::Ok()) {}  // NOLINT: implicit by design
  Result(Status status) : status_(std::move(status)) {      // NOLINT: implicit by design
    BH_CHECK(!status_.ok());
  }

  bool ok() const { return value_.has_value(); }
  const Status& status() const { return status_; }
  T& value() & {
    BH_CHECK(ok());
    return *value_;
  }
  const T& value() const& {
    BH_CHECK(ok());
    return *value_;
  }
  T&& value() && {
    BH_CHECK(ok());
    return std::move(*value_);
  }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }

 private:
  std::optional<T> value_;
  Status status_;
};

}  // namespace bulkhead
