// SPDX-License-Identifier: MIT
#include "tests/lifecycle/lifecycle_fixture.h"

#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "ctl/control_client.h"

namespace bulkhead::lifecycle_test {

void Tally::Count(const Result<ipc::Client::Reply>& reply) {
  std::lock_guard<std::mutex> lock(mu_);
  ++counts_.sent;
  if (!reply.ok()) {
    ++counts_.lost;
    return;
  }
  switch (reply->header.status) {
    case ipc::ReplyStatus::kOk:
      ++counts_.ok;
      break;
    case ipc::ReplyStatus::kRejected:
      ++counts_.rejected;
      break;
    case ipc::ReplyStatus::kFailed:
      ++counts_.failed;
      break;
    default:
      ++counts_.lost;
      break;
  }
}

void Tally::CountAbandoned() {
  std::lock_guard<std::mutex> lock(mu_);
  ++counts_.sent;
  ++counts_.abandoned;
}

Tally::Counts Tally::counts() const {
  std::lock_guard<std::mutex> lock(mu_);
  return counts_;
}

void ExpectCountersMatch(Harness& h, const std::string& cell, const Tally& tally) {
  const Tally::Counts seen = tally.counts();
  EXPECT_EQ(seen.lost, 0u) << "requests of cell " << cell << " without a reply";
  const nlohmann::json c = h.Cell(cell);
  ASSERT_FALSE(c.is_null()) << h.Status().dump();
  EXPECT_EQ(c["ok"].get<uint64_t>(), seen.ok) << c.dump();
  EXPECT_EQ(c["rejected"].get<uint64_t>(), seen.rejected) << c.dump();
  EXPECT_EQ(c["failed"].get<uint64_t>(), seen.failed) << c.dump();
  EXPECT_EQ(c["cancelled"].get<uint64_t>() + c["dropped"].get<uint64_t>() +
                c["undelivered"].get<uint64_t>(),
            seen.abandoned)
      << c.dump();
  EXPECT_EQ(c["ok"].get<uint64_t>() + c["rejected"].get<uint64_t>() + c["failed"].get<uint64_t>() +
                c["cancelled"].get<uint64_t>() + c["dropped"].get<uint64_t>() +
                c["undelivered"].get<uint64_t>(),
            seen.sent)
      << c.dump();
  EXPECT_EQ(c["running"], 0) << c.dump();
  EXPECT_EQ(c["queued"], 0) << c.dump();
}

::testing::AssertionResult Served(Harness& h, const std::string& cell, std::string_view payload,
                                  const std::string& expected_payload, Tally& tally) {
  Result<ipc::Client::Reply> reply = h.Call(cell, payload);
  tally.Count(reply);
  if (IsReply(reply, ReplyStatus::kOk, Reason::kNone) && reply->payload == expected_payload) {
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure()
         << "expected OK \"" << expected_payload << "\", got " << Describe(reply);
}

int WorkerPid(Harness& h, const std::string& cell) { return h.Cell(cell)["pid"].get<int>(); }

::testing::AssertionResult CellShows(Harness& h, const std::string& cell, const char* key,
                                     const nlohmann::json& value) {
  if (h.WaitForCell(cell, [&](const nlohmann::json& c) { return c[key] == value; })) {
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure() << "cell " << cell << " never showed " << key << " = "
                                       << value.dump() << ": " << h.Status().dump() << "\n"
                                       << h.Log();
}

::testing::AssertionResult NewWorkerRuns(Harness& h, const std::string& cell, int old_pid) {
  if (h.WaitForCell(cell, [&](const nlohmann::json& c) {
        return c["state"] == "running" && c["pid"].is_number_integer() && c["pid"] != old_pid;
      })) {
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure() << "cell " << cell << " runs no worker but " << old_pid
                                       << ": " << h.Status().dump() << "\n"
                                       << h.Log();
}

Result<ipc::Client> SendOn(Harness& h, const std::string& cell, uint64_t id,
                           std::string_view payload) {
  Result<ipc::Client> client = h.Connect(cell);
  if (!client.ok()) return client;
  if (Status sent = client->Send(id, payload); !sent.ok()) return sent;
  if (Status set = client->SetTimeout(std::chrono::seconds(10)); !set.ok()) return set;
  return client;
}

Result<ipc::Client> SendThenWaitFor(Harness& h, const std::string& cell, uint64_t id,
                                    std::string_view payload, const char* key,
                                    const nlohmann::json& value) {
  Result<ipc::Client> client = SendOn(h, cell, id, payload);
  if (!client.ok()) return client;
  ::testing::AssertionResult shown = CellShows(h, cell, key, value);
  if (!shown) return Status::Error(shown.message());
  return client;
}

nlohmann::json Control(Harness& h, const std::string& command, const std::string& cell) {
  ctl::ControlReply reply =
      ctl::QueryControl(h.control_socket(), ctl::CellCommandRequest(command, cell),
                        std::chrono::steady_clock::now() + std::chrono::seconds(5));
  if (!reply.response) return {{"ok", false}, {"error", reply.error}};
  return *reply.response;
}

std::vector<LogEvent> CellLogEvents(const std::string& log, std::string_view cell,
                                    std::string_view needle) {
  // 2024-05-01T12:00:00.123Z level=info cell=NAME pid=42 msg="..." (base/log.cc).
  const std::string cell_field = " cell=" + std::string(cell) + " ";
  std::vector<LogEvent> events;
  size_t start = 0;
  while (start < log.size()) {
    size_t end = log.find('\n', start);
    if (end == std::string::npos) end = log.size();
    std::string_view line(log.data() + start, end - start);
    start = end + 1;
    size_t msg = line.find(" msg=\"");
    if (msg == std::string_view::npos || line.find(cell_field) == std::string_view::npos ||
        line.find(cell_field) > msg) {
      continue;
    }
    std::string_view message = line.substr(msg + 6);
    if (!message.empty() && message.back() == '"') message.remove_suffix(1);
    if (message.find(needle) == std::string_view::npos) continue;
    tm utc{};
    int millis = 0;
    if (std::sscanf(std::string(line.substr(0, 24)).c_str(), "%d-%d-%dT%d:%d:%d.%dZ", &utc.tm_year,
                    &utc.tm_mon, &utc.tm_mday, &utc.tm_hour, &utc.tm_min, &utc.tm_sec,
                    &millis) != 7) {
      continue;
    }
    utc.tm_year -= 1900;
    utc.tm_mon -= 1;
    events.push_back(
        LogEvent{static_cast<int64_t>(::timegm(&utc)) * 1000 + millis, std::string(message)});
  }
  return events;
}

std::vector<std::string> WorkerWhenFlagExists(const std::string& flag,
                                              const std::vector<std::string>& worker_args) {
  std::vector<std::string> command = {"/bin/sh", "-c",
                                      "if [ -e \"$0\" ]; then exec \"$@\"; fi; exit 1", flag,
                                      e2e::TestWorkerPath()};
  command.insert(command.end(), worker_args.begin(), worker_args.end());
  return command;
}

std::vector<std::string> WorkerAfterStarts(const std::string& count_file, int failures) {
  // The count of earlier starts is in `count_file`; the start after `failures` of them serves.
  return {"/bin/sh", "-c",
          "n=$(cat \"$0\" 2>/dev/null || echo 0); echo $((n + 1)) > \"$0\"; "
          "if [ \"$n\" -ge " +
              std::to_string(failures) + " ]; then exec \"$@\"; fi; exit 1",
          count_file, e2e::TestWorkerPath()};
}

bool WaitForWorkerThatSawTheFlag(Harness& h, const std::string& cell,
                                 std::chrono::milliseconds timeout) {
  const std::string worker = e2e::TestWorkerPath();
  return h.WaitForCell(
      cell,
      [&](const nlohmann::json& c) {
        if (c["state"] != "running" || !c["pid"].is_number_integer()) return false;
        std::error_code error;
        const std::filesystem::path exe = std::filesystem::read_symlink(
            "/proc/" + std::to_string(c["pid"].get<int>()) + "/exe", error);
        return !error && std::filesystem::equivalent(exe, worker, error) && !error;
      },
      timeout);
}

void CreateFlag(const std::string& path) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0) << path << ": " << std::strerror(errno);
  ::close(fd);
}

void RemoveFlag(const std::string& path) {
  ASSERT_EQ(::unlink(path.c_str()), 0) << path << ": " << std::strerror(errno);
}

}  // namespace bulkhead::lifecycle_test
