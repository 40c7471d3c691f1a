// SPDX-License-Identifier: MIT
#include "lifecycle/oom_watch.h"

#include <utility>

#include "base/log.h"
#include "cell/process.h"

namespace bulkhead::lifecycle {

namespace {
// How long after an OOM kill is seen the worker is checked for having survived it, in ms. The
// kernel raises memory.events oom_kill just before it queues SIGKILL to the victim (mm/oom_kill.c),
// so a look at the very moment of the rise could find a victim not yet signalled; this long after,
// a victim is dying (SIGKILL pending, exiting) or dead, whatever the load.
constexpr uint64_t kSurvivalCheckMs = 200;
// How often memory.events is read when it cannot be watched (uv_fs_event failed), in ms.
constexpr uint64_t kPollMs = 1000;
}  // namespace

OomWatch::OomWatch(uv_loop_t* loop, loop::TimeSource* time, const std::string* cell_name,
                   std::function<pid_t()> worker_pid)
    : time_(time),
      cell_name_(cell_name),
      worker_pid_(std::move(worker_pid)),
      watch_(handles_.Open(uv_fs_event_init, loop)),
      timer_(time->CreateTimer([this] { OnTimer(); })) {
  watch_->data = this;
}

OomWatch::~OomWatch() = default;

void OomWatch::Start(const cell::CellCgroup* cgroup, const cell::CgroupLimits* limits) {
  cgroup_ = cgroup;
  limits_ = limits;
  Result<cell::MemoryEvents> events = cgroup_->ReadMemoryEvents();
  if (!events.ok()) {
    Log(LogLevel::kWarning, *cell_name_, 0, "OOM kills: " + events.status().message());
  }
  // Kills before this run are not counted: they are the earlier run's.
  tracker_.emplace(events.ok() ? *events : cell::MemoryEvents{});
  const std::string path = cgroup_->memory_events_path();
  int rc = uv_fs_event_start(watch_, &OomWatch::OnMemoryEvents, path.c_str(), 0);
  if (rc != 0) {
    Log(LogLevel::kWarning, *cell_name_, 0,
        "cannot watch " + path + " (" + uv_strerror(rc) + "): reading it every " +
            std::to_string(kPollMs) + " ms instead");
    polling_ = true;
    timer_->Start(kPollMs);
  }
}

void OomWatch::WorkerStarted() {
  if (!tracker_) return;
  Look();
  tracker_->WorkerStarted();
}

bool OomWatch::WorkerDied(int wait_status) {
  if (!tracker_) return false;
  const bool oom_killed = tracker_->WorkerDied(wait_status, Look());
  if (!polling_) timer_->Stop();
  return oom_killed;
}

cell::OomKillTracker::Look OomWatch::Look() {
  if (!tracker_ || cgroup_ == nullptr) return {};
  Result<cell::MemoryEvents> events = cgroup_->ReadMemoryEvents();
  if (!events.ok()) return {};  // the cgroup is being removed (shutdown)
  const bool group_kill = limits_->oom_group;
  const pid_t pid = worker_pid_();
  cell::OomKillTracker::Look look = tracker_->Observe(*events, group_kill, pid != 0);
  if (!look.rose) return look;
  auto counter = [](const char* key, uint64_t before, uint64_t now) {
    return std::string(key) + " " + std::to_string(now) + " (+" +
           std::to_string(now >= before ? now - before : 0) + ")";
  };
  // The kernel names the victim (pid, command, oom_score_adj) only in its log; memory.events
  // holds counters alone.
  Log(LogLevel::kWarning, *cell_name_, pid,
      "OOM kill in the cell: memory.events " +
          counter("oom_kill", look.before.oom_kill, look.now.oom_kill) + ", " +
          counter("oom_group_kill", look.before.oom_group_kill, look.now.oom_group_kill) +
          " (oom_policy " + (group_kill ? "kill" : "continue") +
          (limits_->memory_max ? ", memory.max " + std::to_string(*limits_->memory_max)
                               : std::string()) +
          "); the kernel log names the victim");
  if (tracker_->pending()) {
    seen_ms_ = time_->NowMs();
    if (!polling_) timer_->Start(kSurvivalCheckMs);
  }
  return look;
}

void OomWatch::OnMemoryEvents(uv_fs_event_t* handle, const char* /*filename*/, int /*events*/,
                              int status) {
  auto* self = static_cast<OomWatch*>(handle->data);
  if (status < 0) {
    Log(LogLevel::kWarning, *self->cell_name_, 0,
        std::string("watching memory.events: ") + uv_strerror(status));
  }
  self->Look();
}

void OomWatch::OnTimer() {
  if (polling_) timer_->Start(kPollMs);
  Look();
  const pid_t pid = worker_pid_();
  if (!tracker_ || !tracker_->pending() || pid == 0) return;
  const uint64_t since = time_->NowMs() - seen_ms_;
  if (since < kSurvivalCheckMs) {
    if (!polling_) timer_->Start(kSurvivalCheckMs - since);
    return;
  }
  // A victim is dying or dead by now: its reap settles its fate (WorkerDied). A worker that is
  // neither survived, and its later death is not blamed on this OOM kill.
  Result<bool> dying = cell::ProcessIsDying(pid);
  if (!dying.ok() || *dying) return;
  tracker_->WorkerSurvived();
  Log(LogLevel::kWarning, *cell_name_, pid, "the worker survived the OOM kill and keeps serving");
}

void OomWatch::Close(std::function<void()> on_closed) {
  timer_->Stop();
  handles_.Close(std::move(on_closed));
}

}  // namespace bulkhead::lifecycle
