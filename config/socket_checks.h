// SPDX-License-Identifier: MIT
// SocketChecks: the cross-file checks of the Unix socket paths a config names or implies (the
// control socket, each cell's socket, worker socket and notify socket, a Unix metrics_listen):
// every path fits in sun_path, and no two uses share one; and of the TCP addresses it names (each
// cell's listen entries, a TCP metrics_listen): no two overlap. The section parsers record the
// uses; Check() runs once the whole file is read. Internal to config/; thread-compatible.
#pragma once

#include <string>
#include <vector>

#include "config/config.h"
#include "config/value_reader.h"

namespace bulkhead::config {

// A Unix socket path the config names or implies, for the length and uniqueness checks.
struct SocketUse {
  std::string path;
  // The key the error is reported under: "cells.a.socket", "supervisor.control_socket", or
  // "cells.a" for a worker socket.
  std::string key;
  // How another error names this use: the key, or "the worker socket of cells.a".
  std::string owner;
  // What the path is, at the start of a message: "socket", "default socket", "worker socket".
  std::string kind;
  SourcePosition position;
  // For paths derived from runtime_dir, what to shorten when the path is too long.
  std::string shorten;
};

// A TCP address the config names, for the overlap check.
struct TcpUse {
  ListenAddress address;
  // The key the error is reported under, and how another error names it: "cells.a.listen[1]",
  // "supervisor.metrics_listen".
  std::string key;
  SourcePosition position;
};

class SocketChecks {
 public:
  // A path the config names itself.
  void Add(SocketUse use) { uses_.push_back(std::move(use)); }
  void AddTcp(TcpUse use) { tcp_uses_.push_back(std::move(use)); }
  // A path derived from supervisor.runtime_dir: left out once runtime_dir had an error, since
  // that error is the one to fix.
  void AddDerived(SocketUse use) {
    if (runtime_dir_ok_) Add(std::move(use));
  }
  // supervisor.runtime_dir had an error.
  void RefuseRuntimeDir() { runtime_dir_ok_ = false; }

  // Every socket path fits in sun_path, no two uses share a path, and no two TCP addresses
  // overlap (ListenAddress::Overlaps). A clash is reported at the later use (in file order),
  // naming the earlier one.
  void Check(ValueReader& reader);

 private:
  bool runtime_dir_ok_ = true;
  std::vector<SocketUse> uses_;
  std::vector<TcpUse> tcp_uses_;
};

}  // namespace bulkhead::config
