// SPDX-License-Identifier: MIT
#include "ctl/reexec_command.h"

namespace bulkhead::ctl {

nlohmann::json ReexecRequest(std::optional<uint64_t> settle_timeout_ms) {
  nlohmann::json request = {{"command", "reexec"}};
  if (settle_timeout_ms) request["settle_timeout_ms"] = *settle_timeout_ms;
  return request;
}

ReexecVerdict JudgeReexec(const nlohmann::json& status, uint64_t count_before) {
  if (!status.is_object()) return {};
  auto supervisor = status.find("supervisor");
  if (supervisor == status.end() || !supervisor->is_object()) return {};
  auto reexec = supervisor->find("reexec");
  if (reexec == supervisor->end() || !reexec->is_object()) return {};
  auto count = reexec->find("count");
  if (count == reexec->end() || !count->is_number_unsigned()) return {};
  auto error = reexec->find("last_error");
  const bool failed = error != reexec->end() && error->is_string();
  if (count->get<uint64_t>() > count_before && !failed) {
    std::string text = "re-executed: bulkheadd " + supervisor->value("version", std::string("?")) +
                       ", pid " + std::to_string(supervisor->value("pid", 0)) + ", re-exec " +
                       std::to_string(count->get<uint64_t>());
    // The binary it ran, and the file that is when a symlink led there (older bulkheadd: none).
    const std::string binary = reexec->value("binary", std::string());
    const std::string file = reexec->value("binary_file", std::string());
    if (!binary.empty()) text += ", binary " + binary;
    if (!file.empty() && file != binary) text += (binary.empty() ? ", binary " : " -> ") + file;
    return {.kind = ReexecVerdict::Kind::kDone, .text = std::move(text)};
  }
  const std::string phase = reexec->value("phase", std::string());
  if (phase == "idle" && failed) {
    return {.kind = ReexecVerdict::Kind::kFailed, .text = error->get<std::string>()};
  }
  if (phase.empty() || phase == "idle") return {};
  std::string text = phase;
  auto waiting = reexec->find("waiting_for");
  if (waiting != reexec->end() && waiting->is_array()) {
    std::string whys;
    for (const nlohmann::json& why : *waiting) {
      if (why.is_string()) whys += (whys.empty() ? "" : "; ") + why.get<std::string>();
    }
    if (!whys.empty()) text += ", waiting for " + whys;
  }
  return {.kind = ReexecVerdict::Kind::kWaiting, .text = text};
}

ReexecJoin JudgeJoin(const nlohmann::json& status) {
  auto no_fields = [] {
    return ReexecJoin{.verdict = {.kind = ReexecVerdict::Kind::kFailed,
                                  .text = "bulkheadd's status says nothing of a re-exec"},
                      .count_before = 0,
                      .ends_within_ms = std::nullopt};
  };
  if (!status.is_object()) return no_fields();
  auto supervisor = status.find("supervisor");
  if (supervisor == status.end() || !supervisor->is_object()) return no_fields();
  auto reexec = supervisor->find("reexec");
  if (reexec == supervisor->end() || !reexec->is_object()) return no_fields();
  auto count = reexec->find("count");
  if (count == reexec->end() || !count->is_number_unsigned()) return no_fields();
  const uint64_t now = count->get<uint64_t>();
  if (reexec->value("phase", std::string()) != "idle") {
    ReexecJoin join{
        .verdict = JudgeReexec(status, now), .count_before = now, .ends_within_ms = std::nullopt};
    auto within = reexec->find("ends_within_ms");
    if (within != reexec->end() && within->is_number_unsigned()) {
      join.ends_within_ms = within->get<uint64_t>();
    }
    return join;
  }
  // None under way: the last one either failed (its reason kept) or went ahead (counted).
  if (now == 0) {
    auto error = reexec->find("last_error");
    const bool failed = error != reexec->end() && error->is_string();
    return {.verdict = {.kind = ReexecVerdict::Kind::kFailed,
                        .text = failed ? error->get<std::string>()
                                       : "no re-exec is under way, and this bulkheadd has not "
                                         "re-executed since it started"},
            .count_before = 0,
            .ends_within_ms = std::nullopt};
  }
  return {.verdict = JudgeReexec(status, now - 1),
          .count_before = now - 1,
          .ends_within_ms = std::nullopt};
}

}  // namespace bulkhead::ctl
