// SPDX-License-Identifier: MIT
#include "ctl/status_view.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <utility>
#include <vector>

#include "ctl/status_table.h"

namespace bulkhead::ctl {
namespace {

struct FieldError {
  std::string key;
  std::string problem;
};

const nlohmann::json& Field(const nlohmann::json& object, const std::string& key) {
  if (!object.is_object()) throw FieldError{"", "not an object"};
  auto it = object.find(key);
  if (it == object.end()) throw FieldError{key, "missing"};
  return *it;
}

uint64_t Number(const nlohmann::json& object, const std::string& key) {
  const nlohmann::json& value = Field(object, key);
  if (!value.is_number_unsigned() && !(value.is_number_integer() && value.get<int64_t>() >= 0)) {
    throw FieldError{key, "not an unsigned integer"};
  }
  return value.get<uint64_t>();
}

std::string Text(const nlohmann::json& object, const std::string& key) {
  const nlohmann::json& value = Field(object, key);
  if (value.is_null()) return "-";
  if (!value.is_string()) throw FieldError{key, "not a string"};
  return value.get<std::string>();
}

// Any JSON scalar as text: strings bare, null as "-", the rest as JSON.
std::string Scalar(const nlohmann::json& value) {
  if (value.is_null()) return "-";
  if (value.is_string()) return value.get<std::string>();
  return value.dump();
}

// A cell stopped since bulkheadd made it, without a worker ever: "never started" (as systemctl
// shows an inactive unit without a "since"); else how long it has been in its state.
bool NeverStarted(const nlohmann::json& cell) {
  return Text(cell, "state") == "stopped" && Number(cell, "starts") == 0;
}

std::string Since(const nlohmann::json& cell) {
  return NeverStarted(cell) ? "-" : FormatAge(Number(cell, "state_since_ms"));
}

std::string Uptime(const nlohmann::json& cell) {
  if (Field(cell, "pid").is_null()) return "-";
  return FormatAge(Number(cell, "uptime_ms"));
}

// "3 (full 1, queue_timeout 2, unavailable 0)"
std::string ByReason(const nlohmann::json& cell, const char* total, const char* by_reason) {
  std::string out = std::to_string(Number(cell, total));
  const nlohmann::json& reasons = Field(cell, by_reason);
  if (!reasons.is_object()) throw FieldError{by_reason, "not an object"};
  std::string parts;
  for (auto it = reasons.begin(); it != reasons.end(); ++it) {
    if (!parts.empty()) parts += ", ";
    parts += it.key() + " " + Scalar(it.value());
  }
  return parts.empty() ? out : out + " (" + parts + ")";
}

}  // namespace

std::string FormatAge(uint64_t ms) {
  char out[48];
  const uint64_t s = ms / 1000;
  if (s < 60) {
    std::snprintf(out, sizeof out, "%.1fs", static_cast<double>(ms) / 1000.0);
  } else if (s < 3600) {
    std::snprintf(out, sizeof out, "%llum%llus", static_cast<unsigned long long>(s / 60),
                  static_cast<unsigned long long>(s % 60));
  } else if (s < 86400) {
    std::snprintf(out, sizeof out, "%lluh%llum", static_cast<unsigned long long>(s / 3600),
                  static_cast<unsigned long long>(s % 3600 / 60));
  } else {
    std::snprintf(out, sizeof out, "%llud%lluh", static_cast<unsigned long long>(s / 86400),
                  static_cast<unsigned long long>(s % 86400 / 3600));
  }
  return out;
}

std::string FormatTimeLeft(uint64_t ms) {
  const uint64_t up = ms < 10'000 ? (ms + 99) / 100 * 100 : (ms + 999) / 1000 * 1000;
  if (up >= 10'000 && up < 60'000) return std::to_string(up / 1000) + "s";
  return FormatAge(up);
}

std::string FormatLatency(const nlohmann::json& ms) {
  if (!ms.is_number()) return "-";
  const double value = ms.get<double>();
  char out[32];
  if (value >= 1000.0) {
    std::snprintf(out, sizeof out, "%.3gs", value / 1000.0);
  } else {
    std::snprintf(out, sizeof out, "%.3gms", value);
  }
  return out;
}

std::string FormatRunning(const nlohmann::json& cell) {
  const std::string running = std::to_string(Number(cell, "running")) + "/";
  // Older bulkheadd have no "concurrency": their cells are all fixed at max_concurrent.
  if (!cell.contains("concurrency") || !Field(cell, "concurrency").is_object()) {
    return running + std::to_string(Number(cell, "max_concurrent"));
  }
  const nlohmann::json& concurrency = Field(cell, "concurrency");
  std::string out = running + std::to_string(Number(concurrency, "limit"));
  if (Text(concurrency, "mode") == "adaptive") {
    out += " (adaptive limit; ceiling " + std::to_string(Number(concurrency, "ceiling")) + ")";
  }
  return out;
}

std::string FormatSwap(const nlohmann::json& cell) {
  if (!cell.contains("swap") || !cell["swap"].is_object()) return "";
  const nlohmann::json& swap = cell["swap"];
  std::string out = Text(swap, "phase");
  if (swap.contains("pid") && swap["pid"].is_number()) {
    // Before the handover the other worker is the next one; after it, the previous one.
    const std::string phase = Text(swap, "phase");
    const bool next = phase == "starting" || phase == "abandoning";
    out +=
        std::string(next ? ", next worker pid " : ", previous worker pid ") + Scalar(swap["pid"]);
  }
  const std::string detail = swap.contains("detail") ? Text(swap, "detail") : "";
  if (!detail.empty() && detail != "-") out += ": " + detail;
  return out;
}

std::string FormatClients(const nlohmann::json& cell) {
  std::string out = std::to_string(Number(cell, "clients"));
  if (cell.contains("connection_limit")) {
    out += "/" + std::to_string(Number(cell, "connection_limit"));
  }
  // Older bulkheadd have neither counter.
  std::string counts;
  if (cell.contains("connections_refused")) {
    counts = std::to_string(Number(cell, "connections_refused")) + " refused";
  }
  if (cell.contains("connections_idle_closed")) {
    if (!counts.empty()) counts += ", ";
    counts += std::to_string(Number(cell, "connections_idle_closed")) + " closed idle";
  }
  return counts.empty() ? out : out + " (" + counts + ")";
}

std::string FormatConcurrency(const nlohmann::json& concurrency) {
  const std::string limit = std::to_string(Number(concurrency, "limit"));
  if (Text(concurrency, "mode") != "adaptive") return limit + " (fixed)";
  std::string out = limit + " of " + std::to_string(Number(concurrency, "floor")) + ".." +
                    std::to_string(Number(concurrency, "ceiling")) + " (adaptive; ";
  const nlohmann::json& changes = Field(concurrency, "changes");
  if (!changes.is_array() || changes.empty()) return out + "no change yet)";
  const nlohmann::json& last = changes[0];
  const int64_t delta =
      static_cast<int64_t>(Number(last, "to")) - static_cast<int64_t>(Number(last, "from"));
  const std::string at = Text(last, "at");  // "2025-01-01T14:02:11Z"
  out += (delta > 0 ? "+" : "") + std::to_string(delta) + " at " +
         (at.size() >= 19 ? at.substr(11, 8) : at) + ": " + Text(last, "text") + ")";
  return out;
}

std::string FormatAdaptiveState(const nlohmann::json& concurrency) {
  const nlohmann::json& base_us = Field(concurrency, "base_us");
  std::string base = "base measuring";
  if (base_us.is_number()) {
    base = "base " + FormatLatency(base_us.get<double>() / 1000.0) + " (" +
           FormatAge(Number(concurrency, "base_age_ms")) + " ago)";
  }
  char ratio[32];
  std::snprintf(ratio, sizeof ratio, "%.2f", Field(concurrency, "ratio").get<double>());
  std::string signals;
  for (const nlohmann::json& signal : Field(concurrency, "signals")) {
    if (!signals.empty()) signals += ",";
    signals += Scalar(signal);
  }
  std::string out = Text(concurrency, "phase") + ", " + base + ", ratio " + ratio + ", holding " +
                    Text(concurrency, "hold") + ", signals " + signals;
  // Older bulkheadd have neither "memory_ceiling" nor "cpu_pressure_spared".
  if (concurrency.contains("memory_ceiling") && concurrency["memory_ceiling"].is_number()) {
    out += ", memory ceiling " + Scalar(concurrency["memory_ceiling"]) + " for " +
           FormatAge(Number(concurrency, "memory_ceiling_left_ms"));
  }
  if (concurrency.contains("cpu_pressure_spared")) {
    out += ", cpu events spared " + std::to_string(Number(concurrency, "cpu_pressure_spared"));
  }
  return out;
}

std::string FormatSignalsOff(const nlohmann::json& concurrency) {
  if (!concurrency.contains("signals_off") || !concurrency["signals_off"].is_object()) return "";
  // Reasons in order of first appearance, each with its signals.
  std::vector<std::pair<std::string, std::string>> groups;
  for (const auto& [signal, why] : concurrency["signals_off"].items()) {
    const std::string reason = Scalar(why);
    auto group = std::find_if(groups.begin(), groups.end(),
                              [&](const auto& g) { return g.first == reason; });
    if (group == groups.end()) {
      groups.emplace_back(reason, signal);
    } else {
      group->second += ", " + signal;
    }
  }
  std::string out;
  for (const auto& [reason, signals] : groups) {
    if (!out.empty()) out += "; ";
    out += signals + ": " + reason;
  }
  return out;
}

Result<std::string> FormatActivityTable(const nlohmann::json& response) {
  if (!response.is_object() || !response.contains("cells") || !response["cells"].is_array()) {
    return Status::Error("status response: no \"cells\" array");
  }
  const nlohmann::json& cells = response["cells"];
  if (cells.empty()) return std::string();
  for (const nlohmann::json& cell : cells) {
    if (!cell.is_object() || !cell.contains("recent")) return std::string();
  }
  size_t index = 0;
  try {
    std::vector<std::vector<std::string>> rows;
    rows.push_back({"CELL", "IN STATE FOR", "WORKER UPTIME", "IN FLIGHT", "CANCELLED", "DROPPED",
                    "UNDELIVERED", "P50", "P99", "WAIT P50", "WAIT P99"});
    for (index = 0; index < cells.size(); ++index) {
      const nlohmann::json& cell = cells[index];
      const nlohmann::json& recent = Field(cell, "recent");
      rows.push_back({
          Text(cell, "name"),
          Since(cell),
          Uptime(cell),
          std::to_string(Number(cell, "in_flight")),
          std::to_string(Number(cell, "cancelled")),
          std::to_string(Number(cell, "dropped")),
          std::to_string(Number(cell, "undelivered")),
          FormatLatency(Field(recent, "latency_p50_ms")),
          FormatLatency(Field(recent, "latency_p99_ms")),
          FormatLatency(Field(recent, "queue_wait_p50_ms")),
          FormatLatency(Field(recent, "queue_wait_p99_ms")),
      });
    }
    return RenderColumns(rows);
  } catch (const FieldError& e) {
    std::string where = "status response: cells[" + std::to_string(index) + "]";
    if (!e.key.empty()) where += "." + e.key;
    return Status::Error(where + ": " + e.problem);
  }
}

Result<std::string> FormatCellLong(const nlohmann::json& cell) {
  try {
    std::string out;
    auto line = [&out](const std::string& key, const std::string& value) {
      std::string label = key + ":";
      if (label.size() < 18) label.append(18 - label.size(), ' ');
      out += "    " + label + " " + value + "\n";
    };
    out += "● " + Text(cell, "name") + " - " + Text(cell, "state") +
           (NeverStarted(cell) ? ", never started" : " for " + Since(cell)) + "\n";
    if (cell.contains("state_detail") && !cell["state_detail"].is_null()) {
      line("state detail", Text(cell, "state_detail"));
    }
    line("pid", Scalar(Field(cell, "pid")));
    line("uptime", Uptime(cell));
    if (Number(cell, "next_start_in_ms") > 0) {
      line("next start in", FormatTimeLeft(Number(cell, "next_start_in_ms")));
    }
    line("starts", std::to_string(Number(cell, "starts")));
    std::string restarts = std::to_string(Number(cell, "restarts"));
    if (cell.contains("restarts_by_reason")) {
      std::string parts;
      const nlohmann::json& by_reason = Field(cell, "restarts_by_reason");
      for (auto it = by_reason.begin(); it != by_reason.end(); ++it) {
        if (Scalar(it.value()) == "0") continue;
        if (!parts.empty()) parts += ", ";
        parts += it.key() + " " + Scalar(it.value());
      }
      if (!parts.empty()) restarts += " (" + parts + ")";
    }
    line("restarts", restarts);
    // An overlapping restart under way, and why the last one failed (restart_failed).
    if (const std::string swap = FormatSwap(cell); !swap.empty()) line("swap", swap);
    if (cell.contains("restart_failed") && cell["restart_failed"].is_string()) {
      line("restart failed", cell["restart_failed"].get<std::string>());
    }
    line("last exit", Text(cell, "last_exit"));
    if (Text(cell, "reason") != "-") line("reason", Text(cell, "reason"));
    line("status text", Text(cell, "status_text"));
    // Older bulkheadd have no "protocol": their cells all speak frames.
    line("protocol", cell.contains("protocol") ? Text(cell, "protocol") : "frames");
    line("socket", Text(cell, "socket"));
    // Older bulkheadd have no "listen"; a cell without TCP addresses shows none.
    if (cell.contains("listen") && cell["listen"].is_array() && !cell["listen"].empty()) {
      std::string listen;
      for (const nlohmann::json& address : cell["listen"]) {
        if (!listen.empty()) listen += ", ";
        listen += Scalar(address);
      }
      line("listen", listen);
    }
    line("worker socket", Text(cell, "worker_socket"));
    // Older bulkheadd have no "concurrency": their cells are all fixed.
    if (cell.contains("concurrency") && Field(cell, "concurrency").is_object()) {
      const nlohmann::json& concurrency = Field(cell, "concurrency");
      line("concurrency", FormatConcurrency(concurrency));
      if (Text(concurrency, "mode") == "adaptive") {
        line("adaptive", FormatAdaptiveState(concurrency));
        const std::string off = FormatSignalsOff(concurrency);
        if (!off.empty()) line("signals off", off);
      }
    }
    line("running", FormatRunning(cell));
    line("queued", std::to_string(Number(cell, "queued")) + "/" +
                       std::to_string(Number(cell, "max_queue")) + " (queue_timeout " +
                       std::to_string(Number(cell, "queue_timeout_ms")) + " ms)");
    line("clients", FormatClients(cell));
    line("admitted", std::to_string(Number(cell, "admitted")));
    line("in flight", std::to_string(Number(cell, "in_flight")));
    line("ok", std::to_string(Number(cell, "ok")));
    line("rejected", ByReason(cell, "rejected", "rejected_by_reason") + ", " +
                         std::to_string(Number(cell, "rejected_at_admission")) + " at admission");
    line("failed", ByReason(cell, "failed", "failed_by_reason"));
    line("cancelled", std::to_string(Number(cell, "cancelled")));
    line("dropped", std::to_string(Number(cell, "dropped")));
    line("undelivered", std::to_string(Number(cell, "undelivered")) + " (" +
                            std::to_string(Number(cell, "unsent_bytes")) + " bytes unsent now)");
    line("bad requests", std::to_string(Number(cell, "bad_request")));
    const nlohmann::json& recent = Field(cell, "recent");
    const std::string window = " (last " + std::to_string(Number(recent, "window_s")) + " s, ";
    line("latency", "p50 " + FormatLatency(Field(recent, "latency_p50_ms")) + ", p99 " +
                        FormatLatency(Field(recent, "latency_p99_ms")) + window +
                        std::to_string(Number(recent, "requests")) + " requests)");
    line("queue wait", "p50 " + FormatLatency(Field(recent, "queue_wait_p50_ms")) + ", p99 " +
                           FormatLatency(Field(recent, "queue_wait_p99_ms")) + window +
                           std::to_string(Number(recent, "dispatched")) + " dispatched)");
    if (cell.contains("policy") && Field(cell, "policy").is_object()) {
      const nlohmann::json& policy_json = Field(cell, "policy");
      std::string policy;
      for (auto it = policy_json.begin(); it != policy_json.end(); ++it) {
        if (!policy.empty()) policy += " ";
        // A signal by its name, as systemd.kill(5) writes KillSignal= ("SIGTERM", not 15).
        const char* signal = it.key() == "stop_signal" && it.value().is_number_integer()
                                 ? ::sigabbrev_np(it.value().get<int>())
                                 : nullptr;
        policy +=
            it.key() + "=" + (signal != nullptr ? std::string("SIG") + signal : Scalar(it.value()));
      }
      line("policy", policy);
    }
    const nlohmann::json& limits = Field(cell, "limits");
    std::string limit_text;
    for (auto it = limits.begin(); it != limits.end(); ++it) {
      if (!limit_text.empty()) limit_text += " ";
      // An unset limit is the kernel's default: "max" (no limit) for every file but cpu.weight,
      // whose default is 100 (cgroup-v2.rst, "cpu.weight").
      const std::string unset = it.key() == "cpu_weight" ? "100" : "max";
      limit_text += it.key() + "=" + (it.value().is_null() ? unset : Scalar(it.value()));
    }
    line("limits", limit_text);
    if (!Field(cell, "limits_enforced").get<bool>()) {
      line("limits enforced", "no: " + Text(cell, "limits_note"));
    }
    // Per limit, for the limits that are set (unset ones have nothing to enforce).
    auto enforcement = cell.find("limits_enforcement");
    if (enforcement != cell.end() && enforcement->is_object()) {
      std::string states;
      for (auto it = enforcement->begin(); it != enforcement->end(); ++it) {
        if (!it.value().is_string() || it.value().get<std::string>() == "unlimited") continue;
        if (!states.empty()) states += ", ";
        states += it.key() + " " + it.value().get<std::string>();
      }
      if (!states.empty()) line("enforcement", states);
    }
    const nlohmann::json& kernel = Field(cell, "cgroup");
    if (kernel.is_object()) {
      line("cgroup", Text(kernel, "path"));
      if (!Field(kernel, "memory_current").is_null()) {
        line("memory", std::to_string(Number(kernel, "memory_current")) + " bytes of " +
                           (Field(kernel, "memory_max").is_null()
                                ? std::string("max")
                                : std::to_string(Number(kernel, "memory_max"))));
      }
      line("cpu", std::to_string(Number(kernel, "cpu_usage_usec")) + " µs used, " +
                      std::to_string(Number(kernel, "cpu_throttled_usec")) + " µs throttled");
      if (!Field(kernel, "pids_current").is_null()) {
        line("tasks", std::to_string(Number(kernel, "pids_current")) + " of " +
                          (Field(kernel, "pids_max").is_null() ? std::string("max")
                                                               : Scalar(kernel["pids_max"])));
      }
    }
    line("oom kills", std::to_string(Number(cell, "oom_kills")));
    return out;
  } catch (const FieldError& e) {
    std::string where = "status response: cell";
    if (!e.key.empty()) where += "." + e.key;
    return Status::Error(where + ": " + e.problem);
  } catch (const nlohmann::json::exception& e) {
    return Status::Error(std::string("status response: ") + e.what());
  }
}

}  // namespace bulkhead::ctl
