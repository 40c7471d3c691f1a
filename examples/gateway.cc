// SPDX-License-Identifier: MIT
// bulkhead-gateway --gates DIR: a worker in front of a dependency that can stall (the seeds'
// payment service). Requests run concurrently, one per connection (worker SDK).
//
// Payload "gate NAME": waits until the gate file DIR/NAME exists (checked every 5 ms), then
// answers from its first line:
//   ok TEXT      -> REPLY OK, payload TEXT
//   error TEXT   -> REPLY FAILED/worker_error, payload TEXT
// anything else in the file -> FAILED/worker_error "gate NAME: bad gate file ...". A gate stays
// open once created: every call waiting on it, and every later one, gets the same answer. NAME
// is a single path component (no '/', not "." or ".."). Whoever opens a gate writes DIR/NAME.tmp
// and then rename(2)s it to DIR/NAME, so a reader never sees a half-written file, e.g.
//   printf 'ok paid\n' > gates/p1.tmp && mv gates/p1.tmp gates/p1
// Any other payload is answered at once with the payload unchanged (a healthy dependency).
#include <poll.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <string_view>

#include "base/exit_status.h"
#include "cell/worker.h"

namespace {

using bulkhead::cell::HandlerResult;

// How often a waiting call looks for its gate file.
constexpr int kGatePollMs = 5;

bool IsValidGateName(std::string_view name) {
  return !name.empty() && name != "." && name != ".." && name.find('/') == std::string_view::npos &&
         name.find('\0') == std::string_view::npos;
}

HandlerResult WaitForGate(const std::string& gates_dir, std::string_view name) {
  if (!IsValidGateName(name)) {
    return HandlerResult::Error("bad gate name \"" + std::string(name) + "\"");
  }
  std::string path = gates_dir + "/" + std::string(name);
  while (true) {
    std::ifstream file(path);
    if (file) {
      std::string line;
      std::getline(file, line);
      if (line.starts_with("ok ")) return HandlerResult::Ok(line.substr(3));
      if (line.starts_with("error ")) return HandlerResult::Error(line.substr(6));
      return HandlerResult::Error("gate " + std::string(name) +
                                  ": bad gate file, first line must be \"ok TEXT\" or "
                                  "\"error TEXT\"");
    }
    ::poll(nullptr, 0, kGatePollMs);
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string gates_dir;
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (arg == "--gates" && i + 1 < argc) {
      gates_dir = argv[++i];
    } else {
      gates_dir.clear();
      break;
    }
  }
  if (gates_dir.empty()) {
    std::fprintf(stderr, "usage: bulkhead-gateway --gates DIR\n");
    return bulkhead::kExitUsage;
  }
  return bulkhead::cell::ServeFromEnv([gates_dir](std::string_view payload) {
    if (payload.starts_with("gate ")) return WaitForGate(gates_dir, payload.substr(5));
    return HandlerResult::Ok(std::string(payload));
  });
}
