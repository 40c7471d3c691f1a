// SPDX-License-Identifier: MIT
#include "supervisor/cell.h"

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

control::CellSnapshot Cell::Snapshot() const {
  control::CellSnapshot s;
  const lifecycle::Lifecycle& lifecycle = runner_.lifecycle();
  const uint64_t now = time_->NowMs();
  const config::CellConfig& config = runner_.config();
  s.name = config.name;
  s.state = lifecycle.state();
  s.state_since_ms = now - std::min(now, lifecycle.since_ms());
  s.state_detail = lifecycle.StateDetail();
  s.pid = runner_.pid();
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
