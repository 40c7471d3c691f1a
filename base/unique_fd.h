// SPDX-License-Identifier: MIT
// UniqueFd: sole owner of one file descriptor. Move-only; closes in its destructor.
// Thread-compatible: one owner at a time, like any value type.
#pragma once

#include <utility>

namespace bulkhead {

class UniqueFd {
 public:
  UniqueFd() = default;
  // Takes ownership of `fd` (-1 means "none").
  explicit UniqueFd(int fd) : fd_(fd) {}
  ~UniqueFd() { Reset(); }

  UniqueFd(UniqueFd&& other) noexcept : fd_(other.Release()) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept {
    if (this != &other) Reset(other.Release());
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  explicit operator bool() const { return valid(); }

  // Gives up ownership without closing; returns the descriptor.
  int Release() { return std::exchange(fd_, -1); }

  // Closes the held descriptor (once; never retried on EINTR, since Linux frees the descriptor
  // even when close() reports EINTR) and takes ownership of `fd`.
  void Reset(int fd = -1);

 private:
  int fd_ = -1;
};

}  // namespace bulkhead
