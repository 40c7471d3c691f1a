// SPDX-License-Identifier: MIT
// `bulkheadctl reexec`: the request, and how the status answers that follow it are judged
// (docs/reexec.md, docs/control.md "reexec"). Pure: no I/O. Thread-compatible.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace bulkhead::ctl {

// {"command":"reexec"}, with "settle_timeout_ms" when `settle_timeout_ms` is given.
nlohmann::json ReexecRequest(std::optional<uint64_t> settle_timeout_ms = std::nullopt);

// Where a re-exec stands, judged from one status response after the "reexec" answer said
// {"count": `count_before`}.
struct ReexecVerdict {
  enum class Kind { kWaiting, kDone, kFailed };
  Kind kind = Kind::kWaiting;
  // kDone: "re-executed: bulkheadd 0.1.0, pid 4242, re-exec 3, binary /usr/sbin/bulkheadd" (with
  // " -> FILE" when reexec.binary_file differs); kFailed: the supervisor's reexec.last_error;
  // kWaiting: where a re-exec under way stands when the status says ("settling, waiting for
  // cells.b: it is starting (...)", "draining"), "" when it does not (idle, or no fields).
  std::string text;
};
// kDone once supervisor.reexec.count exceeds `count_before` without a last_error (the new image
// runs); kFailed once the phase is "idle" again with a last_error: with the count unchanged the
// old image goes on, with the count passed the new binary could not take the state over and the
// previous binary runs again (failure 5 of docs/reexec.md); else kWaiting (settling, draining, or a
// response without the fields).
ReexecVerdict JudgeReexec(const nlohmann::json& status, uint64_t count_before);

// `bulkheadctl reexec --join`, judged from the first status response: it asks for no re-exec,
// it waits for the one under way, or says how the last one ended when none is (the one a
// `reexec` that exited 75 left under way may have ended before this looked).
struct ReexecJoin {
  // kWaiting: one is under way (`text` as JudgeReexec's); kDone: none is, and the last one went
  // ahead (JudgeReexec's "re-executed: ..."); kFailed: none is, and the last one failed
  // (supervisor.reexec.last_error), or there was none, or the response has no re-exec fields.
  ReexecVerdict verdict;
  uint64_t count_before = 0;  // supervisor.reexec.count: JudgeReexec's `count_before` after
  // kWaiting: the most bulkheadd says the re-exec may still last (reexec.ends_within_ms);
  // nullopt from a bulkheadd that does not say.
  std::optional<uint64_t> ends_within_ms;
};
ReexecJoin JudgeJoin(const nlohmann::json& status);

}  // namespace bulkhead::ctl
