// SPDX-License-Identifier: MIT
// bulkhead-echo [--prefix TEXT]: the smallest worker. Answers each request with TEXT + payload
// (the catalog cell uses --prefix "item ": "list" -> "item list"). Started by bulkheadd, which
// passes the listening socket as fd 3 (LISTEN_FDS, sd_listen_fds(3)).
#include <cstdio>
#include <string>
#include <string_view>

#include "base/exit_status.h"
#include "cell/worker.h"

int main(int argc, char** argv) {
  std::string prefix;
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (arg == "--prefix" && i + 1 < argc) {
      prefix = argv[++i];
    } else {
      std::fprintf(stderr, "usage: bulkhead-echo [--prefix TEXT]\n");
      return bulkhead::kExitUsage;
    }
  }
  return bulkhead::cell::ServeFromEnv([prefix](std::string_view payload) {
    std::string reply = prefix;
    reply += payload;
    return bulkhead::cell::HandlerResult::Ok(std::move(reply));
  });
}
