// SPDX-License-Identifier: MIT
#include "supervisor/cell.h"

#include <time.h>

#include <algorithm>
#include <utility>

#include "base/check.h"
#include "lifecycle/worker_launcher.h"
#include "lifecycle/worker_privileges.h"

namespace bulkhead::supervisor {

Cell::Cell(uv_loop_t* loop, loop::TimeSource* time, const config::CellConfig& config,
           lifecycle::CellCompartment compartment, uint32_t max_payload, proxy::ExchangePool* pool,
           loop::WriteBatch* write_batch)
    : time_(time),
      after_poll_(loop,
                  [this] {
                    runner_.OnAfterPoll();
                    data_path_.OnAfterPoll();
                  }),
      data_path_(loop, time, config, max_payload, pool, write_batch, &after_poll_, this),
      runner_(loop, time, config, std::move(compartment), max_payload, &after_poll_, this,
              &lifecycle::SystemWorkerLauncher()) {}

Cell::~Cell() { BH_CHECK(handles_.closed()); }

Status Cell::Bind() {
  Status cgroup = runner_.CreateCgroup();
  if (!cgroup.ok()) return cgroup;
  // The front socket first: it tells whether another live instance serves this cell.
  Status front = data_path_.Bind(lifecycle::FrontSocketAccess(runner_.config()));
  if (!front.ok()) return front;
  return runner_.BindSockets();
}

void Cell::Capture(ReexecState* state) const {
  const proxy::FrontListener& front = data_path_.front();
  const config::CellConfig& config = runner_.config();
  const lifecycle::WorkerRunner::ReexecFds fds = runner_.reexec_fds();
  state->listeners.push_back({"front", config.name, front.front_fd(), config.socket});
  const std::vector<int> tcp = front.tcp_fds();
  for (size_t i = 0; i < tcp.size(); ++i) {
    state->listeners.push_back({"listen", config.name, tcp[i], front.tcp_addresses()[i]});
  }
  state->listeners.push_back({"worker", config.name, fds.worker_listen, config.worker_socket});
  state->listeners.push_back({"notify", config.name, fds.notify, config.notify_socket});

  const lifecycle::Lifecycle& lifecycle = runner_.lifecycle();
  ReexecState::Cell entry;
  entry.name = config.name;
  entry.state = lifecycle::Lifecycle::StateName(lifecycle.state());
  entry.starts = lifecycle.starts();
  entry.restarts = lifecycle.restarts();
  entry.last_exit = lifecycle.last_exit();
  entry.in_state_ms = time_->NowMs() - std::min(time_->NowMs(), lifecycle.since_ms());
  entry.consecutive_failures = lifecycle.policy().steps();
  lifecycle::Lifecycle::CarriedCrashLoop crash_loop = lifecycle.CarryCrashLoop();
  entry.start_ages_ms = std::move(crash_loop.window.start_ages_ms);
  entry.crash_looping = crash_loop.window.crash_looping;
  entry.short_runs = crash_loop.window.short_runs;
  entry.crash_loop = std::move(crash_loop.words);
  entry.start_held = order_step() == OrderStep::kWaitingToStart;
  if (lifecycle.state() == lifecycle::Lifecycle::State::kBackoff) {
    const uint64_t now = time_->NowMs();
    entry.next_start_in_ms =
        lifecycle.next_start_at_ms() - std::min(now, lifecycle.next_start_at_ms());
  }
  if (lifecycle.state() == lifecycle::Lifecycle::State::kFailed) {
    entry.reason = lifecycle.reason();
    entry.gave_up = lifecycle.gave_up();
  }
  for (size_t i = 0; i < lifecycle::kRestartReasonCount; ++i) {
    const uint64_t count = runner_.restarts_by_reason()[i];
    if (count > 0) {
      entry.restarts_by_reason[std::string(
          lifecycle::RestartReasonName(static_cast<lifecycle::RestartReason>(i)))] = count;
    }
  }
  if (runner_.pid() != 0) {
    const uint64_t now = time_->NowMs();
    entry.worker =
        ReexecState::Worker{.pid = runner_.pid(),
                            .pgid = runner_.pid(),
                            .cgroup_path = runner_.generation_path(),
                            .stdout_fd = fds.stdout_read,
                            .stderr_fd = fds.stderr_read,
                            .ready = lifecycle.state() == lifecycle::Lifecycle::State::kRunning,
                            .uptime_ms = now - std::min(now, lifecycle.worker_started_at_ms())};
  }
  if (data_path_.adaptive() != nullptr) entry.adaptive = data_path_.adaptive()->Carry();
  entry.counters = data_path_.counters();
  entry.queue_wait = data_path_.queue_wait().total();
  entry.duration = data_path_.request_duration().total();
  state->cells.push_back(std::move(entry));
}

Status Cell::Adopt(const ReexecState::Cell& entry, UniqueFd front, std::vector<UniqueFd> tcp,
                   UniqueFd worker_listen, UniqueFd notify) {
  Status cgroup = runner_.CreateCgroup();
  if (!cgroup.ok()) return cgroup;
  Status status = data_path_.front().Adopt(std::move(front), std::move(tcp),
                                           lifecycle::FrontSocketAccess(runner_.config()));
  if (!status.ok()) return status;
  status = runner_.AdoptSockets(std::move(worker_listen), std::move(notify));
  if (!status.ok()) return status;
  data_path_.RestoreCounters(entry.counters, entry.queue_wait, entry.duration);
  if (entry.adaptive) data_path_.RestoreAdaptive(*entry.adaptive);
  return Status::Ok();
}

Status Cell::AdoptWorker(const ReexecState::Cell& entry, UniqueFd stdout_read,
                         UniqueFd stderr_read) {
  lifecycle::RestartCounts by_reason{};
  for (size_t i = 0; i < lifecycle::kRestartReasonCount; ++i) {
    auto it = entry.restarts_by_reason.find(
        std::string(lifecycle::RestartReasonName(static_cast<lifecycle::RestartReason>(i))));
    if (it != entry.restarts_by_reason.end()) by_reason[i] = it->second;
  }
  const lifecycle::Lifecycle::CarriedCrashLoop crash_loop = {
      .window = {.start_ages_ms = entry.start_ages_ms,
                 .crash_looping = entry.crash_looping,
                 .short_runs = entry.short_runs},
      .words = entry.crash_loop};
  if (!entry.worker) {
    runner_.AdoptStopped(entry.starts, entry.restarts, entry.last_exit, by_reason);
    if (entry.state == "backoff") {
      runner_.AdoptBackoff(entry.consecutive_failures, entry.next_start_in_ms, crash_loop);
    } else if (entry.state == "failed") {
      runner_.AdoptFailed(entry.reason, entry.gave_up);
    }
    runner_.AdoptInStateFor(entry.in_state_ms);
    return Status::Ok();
  }
  lifecycle::WorkerRunner::AdoptedWorker worker;
  worker.pid = entry.worker->pid;
  worker.pgid = entry.worker->pgid;
  worker.cgroup_path = entry.worker->cgroup_path;
  worker.stdout_read = std::move(stdout_read);
  worker.stderr_read = std::move(stderr_read);
  worker.starts = entry.starts;
  worker.restarts = entry.restarts;
  worker.last_exit = entry.last_exit;
  worker.uptime_ms = entry.worker->uptime_ms;
  worker.restarts_by_reason = by_reason;
  worker.crash_loop = crash_loop;
  worker.crash_loop.words.clear();  // a running cell has none (Lifecycle::StateDetail)
  Status adopted = runner_.AdoptWorker(std::move(worker));
  if (adopted.ok()) runner_.AdoptInStateFor(entry.in_state_ms);
  return adopted;
}

Status Cell::Reconfigure(const config::CellConfig& next,
                         const std::optional<cell::CgroupLimits>& cgroup_limits) {
  const config::CellConfig& now = runner_.config();
  BH_CHECK(next.name == now.name && next.socket == now.socket && next.listen == now.listen &&
           next.worker_socket == now.worker_socket && next.notify_socket == now.notify_socket);
  // The runner first: the worker socket's backlog grows before a raised max_concurrent opens
  // more links.
  Status written = runner_.Reconfigure(next, cgroup_limits);
  data_path_.Reconfigure(next);
  return written;
}

void Cell::CloseHandles(std::function<void()> on_closed) {
  BH_CHECK(runner_.pid() == 0);
  data_path_.Close(handles_.Part());
  runner_.Close(handles_.Part());
  after_poll_.Close(handles_.Part());
  handles_.Close(std::move(on_closed));
}

namespace {

// The limit in force and, for an adaptive cell, its controller's state; `now` on the controller's
// clock (the data path's TimeSource).
control::ConcurrencySnapshot ConcurrencyOf(const proxy::CellDataPath& data_path, uint64_t now) {
  control::ConcurrencySnapshot c;
  c.limit = data_path.bulkhead().limits().max_concurrent;
  const admission::AdaptiveLimit* adaptive = data_path.adaptive();
  if (adaptive == nullptr) return c;
  c.adaptive = true;
  c.floor = adaptive->floor();
  c.ceiling = adaptive->ceiling();
  c.phase = adaptive->phase();
  c.hold = adaptive->growth_hold();
  for (size_t i = 0; i < admission::kSignalCount; ++i) {
    c.signals[i] = adaptive->signal_live(static_cast<admission::Signal>(i));
  }
  c.base_us = adaptive->base_us();
  // No age without a base: base_measured_at_ms() is then not a time a base was measured.
  if (c.base_us) c.base_age_ms = now - std::min(now, adaptive->base_measured_at_ms());
  c.ratio_permille = adaptive->last_ratio_permille();
  c.throttled_permille = adaptive->throttled_permille();
  c.memory_permille = adaptive->memory_permille();
  c.memory_fit = adaptive->memory_fit();
  c.memory_ceiling = adaptive->memory_ceiling();
  c.memory_ceiling_left_ms = adaptive->memory_ceiling_left_ms();
  c.cpu_pressure_spared = adaptive->cpu_pressure_spared();
  timespec wall{};
  clock_gettime(CLOCK_REALTIME, &wall);
  c.wall_now_ms =
      static_cast<uint64_t>(wall.tv_sec) * 1000 + static_cast<uint64_t>(wall.tv_nsec) / 1'000'000;
  for (size_t i = 0; i < adaptive->change_count(); ++i) {
    const admission::LimitChange& change = adaptive->change(i);
    c.changes.push_back(
        {now - std::min(now, change.at_ms), change.from, change.to, change.cause, change.permille});
  }
  for (size_t i = 0; i < admission::kLimitCauseCount; ++i) {
    c.changes_by_cause[i] = adaptive->changes_by(static_cast<admission::LimitCause>(i));
  }
  return c;
}

}  // namespace

control::CellSnapshot Cell::Snapshot() const {
  control::CellSnapshot s;
  const lifecycle::Lifecycle& lifecycle = runner_.lifecycle();
  const uint64_t now = time_->NowMs();
  const config::CellConfig& config = runner_.config();
  s.name = config.name;
  s.state = lifecycle.state();
  s.state_since_ms = now - std::min(now, lifecycle.since_ms());
  if (order_step_ == OrderStep::kWaitingToStart)
    s.held_for_ms = now - std::min(now, held_since_ms_);
  s.state_detail = lifecycle.StateDetail();
  s.pid = runner_.pid();
  s.swap_phase = lifecycle::WorkerSwap::PhaseName(runner_.swap().phase());
  s.swap_pid = runner_.swap_pid();
  s.swap_detail = runner_.swap().Detail();
  s.restart_failed = runner_.swap().failure();
  s.socket = config.socket;
  s.listen = data_path_.tcp_addresses();
  s.worker_socket = config.worker_socket;
  s.starts = lifecycle.starts();
  s.restarts = lifecycle.restarts();
  s.last_exit = lifecycle.last_exit();
  s.reason = lifecycle.reason();
  s.status_text = runner_.status_text();
  if (s.pid != 0) s.uptime_ms = now - std::min(now, lifecycle.worker_started_at_ms());
  if (lifecycle.next_start_at_ms() > now) s.next_start_in_ms = lifecycle.next_start_at_ms() - now;
  s.crash_looping = lifecycle.CrashLooping();
  s.restarts_by_reason = runner_.restarts_by_reason();
  lifecycle::WorkerRunner::CompartmentStatus compartment = runner_.ReadCompartment();
  s.limits_enforced = compartment.limits_enforced;
  s.limits_note = std::move(compartment.limits_note);
  s.limit_states = compartment.limit_states;
  s.cgroup_path = std::move(compartment.cgroup_path);
  s.cgroup_limits = compartment.cgroup_limits;
  s.cgroup = compartment.cgroup;
  s.oom_kills = compartment.oom_kills;

  s.limits = data_path_.bulkhead().limits();
  s.limits.max_concurrent = config.max_concurrent;
  s.concurrency = ConcurrencyOf(data_path_, now);
  if (s.concurrency.adaptive) s.concurrency.signals_off = runner_.KernelSignalsOff();
  s.running = data_path_.bulkhead().running();
  s.queued = data_path_.bulkhead().queued();
  s.clients = static_cast<uint32_t>(data_path_.clients());
  s.max_connections = config.max_connections;
  s.connection_limit = data_path_.connection_limit();
  s.worker_connections = static_cast<uint32_t>(data_path_.worker_connections());
  s.counters = data_path_.counters();
  s.in_flight = data_path_.in_flight();
  s.unsent_bytes = data_path_.unsent_bytes();
  const uint64_t now_ns = time_->NowNs();
  s.queue_wait = data_path_.queue_wait().total();
  s.request_duration = data_path_.request_duration().total();
  s.recent_queue_wait = data_path_.queue_wait().Recent(now_ns);
  s.recent_request_duration = data_path_.request_duration().Recent(now_ns);
  return s;
}

}  // namespace bulkhead::supervisor
