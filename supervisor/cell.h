// SPDX-License-Identifier: MIT
// Cell: one compartment, the small owner that wires a cell's data path (proxy::CellDataPath: front
// socket, admission, worker links, per-request timers, counters) to its worker's side
// (lifecycle::WorkerRunner: lifecycle table, spawn into the cgroup, notify socket, output,
// teardown). Each reaches the other only through the narrow interface it needs (proxy::Upstream,
// lifecycle::DataPathControl), which Cell implements by forwarding. REQUIRES: loop thread only.
#pragma once

#include <sys/types.h>
#include <uv.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "admission/adaptive_limit.h"
#include "base/status.h"
#include "base/unique_fd.h"
#include "cell/cgroup.h"
#include "config/config.h"
#include "control/cell_snapshot.h"
#include "lifecycle/compartment.h"
#include "lifecycle/lifecycle.h"
#include "lifecycle/worker_runner.h"
#include "loop/after_poll.h"
#include "loop/handle_group.h"
#include "loop/time_source.h"
#include "loop/write_batch.h"
#include "proxy/cell_data_path.h"
#include "proxy/exchange.h"
#include "supervisor/cgroup_poll.h"
#include "supervisor/reexec_state.h"
#include "supervisor/start_order.h"

namespace bulkhead::supervisor {

class Cell : public CgroupPoll::Polled,
             private proxy::Upstream,
             private lifecycle::DataPathControl {
 public:
  // `time` (the clock and timers of both halves), `pool` and `write_batch` outlive the cell.
  Cell(uv_loop_t* loop, loop::TimeSource* time, const config::CellConfig& config,
       lifecycle::CellCompartment compartment, uint32_t max_payload, proxy::ExchangePool* pool,
       loop::WriteBatch* write_batch);
  ~Cell() override;
  Cell(const Cell&) = delete;
  Cell& operator=(const Cell&) = delete;

  const std::string& name() const { return runner_.config().name; }
  // The live worker's pid, 0 when none (or when it was reaped and its cgroup is being emptied).
  pid_t pid() const { return runner_.pid(); }
  lifecycle::Lifecycle::State state() const { return runner_.lifecycle().state(); }
  // Workers started so far, swaps' next workers included once they took over (status "starts").
  uint64_t starts() const { return runner_.lifecycle().starts(); }
  // `observer` (may be null) runs whenever the cell has moved to another state, once the actions
  // of the event that moved it ran. It may read any cell's state() but must feed no cell an event.
  void SetStateObserver(std::function<void()> observer) {
    runner_.SetStateObserver(std::move(observer));
  }
  // `observer` (may be null) runs whenever what a re-exec waits for may have changed in this cell:
  // ReexecBlocker() (WorkerRunner::SetSettleObserver) or, with nothing left in flight, the end of
  // its last request (CellDataPath::SetQuietObserver). It must feed no cell an event.
  void SetReexecObserver(const std::function<void()>& observer) {
    runner_.SetSettleObserver(observer);
    data_path_.SetQuietObserver(observer);
  }
  // --- The supervisor's cgroup poll and whose CPU (docs/adaptive-concurrency.md). ---
  // CgroupPoll::Polled: one read of the cell's cgroup (WorkerRunner::PollCgroup).
  std::optional<uint64_t> PollCgroup() override { return runner_.PollCgroup(); }
  bool RunsInCgroup() const override { return runner_.has_cgroup() && runner_.pid() != 0; }
  bool adaptive() const override {
    return runner_.config().concurrency == config::ConcurrencyMode::kAdaptive;
  }
  // Who says, at this cell's cpu.pressure events, whether another cell waits for a CPU
  // (CgroupPoll::Judge); unset: kUnknown (every event cuts).
  void SetCpuNeighboursJudge(std::function<admission::CpuNeighbours()> judge) {
    cpu_neighbours_judge_ = std::move(judge);
  }
  // Where the cell stands in the start and stop order (supervisor/start_order.h); set by the
  // Supervisor only.
  OrderStep order_step() const { return order_step_; }
  void set_order_step(OrderStep step) {
    if (step == OrderStep::kWaitingToStart && order_step_ != step) held_since_ms_ = time_->NowMs();
    if (step != OrderStep::kWaitingToStart) held_start_ = {};
    order_step_ = step;
    SetAvailability(lifecycle_availability_);  // a held start is a start due
  }
  // While held (kWaitingToStart), what its callers are told of the start (HeldStartOf): stuck
  // behind a stopped or failed cell down the chain of its needs, no start is due until an
  // operator starts that one (no Retry-After, as a stopped cell's callers); else due when the
  // last of its needs in backoff starts again, or at a time not known. Set by the Supervisor only.
  void set_held_start(const HeldStart& held) {
    if (held == held_start_) return;
    held_start_ = held;
    SetAvailability(lifecycle_availability_);
  }
  // When its next worker starts (Clock ms), read in backoff only.
  uint64_t next_start_at_ms() const { return runner_.lifecycle().next_start_at_ms(); }
  // Client connections open on the front socket now.
  size_t clients() const { return data_path_.clients(); }
  // Answer bytes its clients have not read yet (the data path's unsent_bytes).
  uint64_t unsent_bytes() const { return data_path_.unsent_bytes(); }
  // The cell's stop_timeout, ms.
  uint64_t stop_timeout_ms() const {
    return static_cast<uint64_t>(runner_.config().stop_timeout.count());
  }
  // Connections to the worker open now, idle or carrying a request (also for DataPathControl).
  size_t worker_connections() const override { return data_path_.worker_connections(); }

  // Creates the cell's cgroup and writes its limits (when enforced), claims and binds the front,
  // worker and notify sockets (stale files from a killed run are reclaimed; a front socket another
  // live process serves is refused) and starts accepting clients. Nothing is started when it fails.
  Status Bind();

  // Operator commands and boot: feed the lifecycle (lifecycle/lifecycle.h) and return its answer
  // ("ok", "already started", "restart in progress", ...).
  std::string Start() { return runner_.Start(); }
  // `overlap`: a running worker is replaced by a worker swap when the cell's restart_overlap
  // allows it (a reload's restart passes false: it stops first).
  std::string Restart(bool overlap = true) {
    return runner_.Restart(data_path_.bulkhead().running(), overlap);
  }
  // A reload's restart (a key that needs a new worker changed; Reconfigure ran first): it overlaps
  // as `restart` does when it can (restart_overlap, no cgroup, running); a swap already under way
  // started its next worker with the config of before, so it is cancelled and this restart goes
  // without overlap. Never answered "restart in progress".
  std::string RestartForReload() {
    return runner_.Restart(data_path_.bulkhead().running(), /*overlap=*/!swapping());
  }
  // A worker swap (an overlapping restart) is under way: its next worker has not taken over, or
  // the previous one is still stopping.
  bool swapping() const { return runner_.swap().phase() != lifecycle::WorkerSwap::Phase::kIdle; }
  // `on_stopped` (may be null) runs once the cell has no worker and is stopped; at once if it is.
  std::string Stop(std::function<void()> on_stopped) {
    return runner_.Stop(data_path_.bulkhead().running(), std::move(on_stopped));
  }

  // Reload (control/reload_plan.h): `next` becomes the cell's config, without touching the
  // worker. The data path applies its keys at once (CellDataPath::Reconfigure); lifecycle options
  // apply from the next event; `cgroup_limits`, when set, are written to the cell's cgroup now
  // (when limits are enforced) and shown by status. Keys that need a new worker (command,
  // environment, ...) take effect at the next spawn: the caller restarts the cell. Returns the
  // cgroup write's error, if any; the rest is applied regardless. REQUIRES: same name, socket,
  // worker_socket and notify_socket.
  Status Reconfigure(const config::CellConfig& next,
                     const std::optional<cell::CgroupLimits>& cgroup_limits);

  // Closes every handle; `on_closed` runs when the last close callback has run.
  // REQUIRES: stopped (no worker), no clients left.
  void CloseHandles(std::function<void()> on_closed);
  // Closes every client connection (queued requests cancelled).
  void DisconnectClients() { data_path_.DisconnectClients(); }
  // Every request answered gets a line in `log` (CellDataPath::SetAccessLog); nullptr: none.
  void SetAccessLog(proxy::AccessLog* log) { data_path_.SetAccessLog(log); }

  // The supervisor reaped the worker: `wait_status` as from waitpid.
  void OnWorkerExit(int wait_status) { runner_.OnWorkerExit(wait_status); }
  // `pid` is one of the cell's workers: the live one, or the other of a worker swap.
  bool IsWorker(pid_t pid) const { return runner_.IsWorker(pid); }
  // The supervisor reaped `pid` (IsWorker).
  void OnProcessExit(pid_t pid, int wait_status) { runner_.OnProcessExit(pid, wait_status); }

  control::CellSnapshot Snapshot() const;

  // --- Re-exec (docs/reexec.md). ---
  // Admitted requests without an outcome yet (CellDataPath::in_flight).
  uint32_t in_flight() const { return data_path_.in_flight(); }
  // A re-exec past its drain's deadline, as a shutdown answers them: queued requests REJECTED
  // unavailable, running ones FAILED worker_died with `message` (their worker connections close).
  void AbandonInFlight(const std::string& message) {
    data_path_.RejectQueued();
    data_path_.FailInFlight(ipc::Reason::kWorkerDied, message);
  }
  // Why the cell cannot be carried across a re-exec now, "" when it can
  // (WorkerRunner::ReexecBlocker).
  std::string ReexecBlocker() const { return runner_.ReexecBlocker(); }
  // A re-exec's drain: accept paused on the front sockets and the clients' reads stopped at their
  // next request boundary (FrontListener::PauseAccept, PauseClientReads); and both resumed.
  void PauseAccept() {
    data_path_.front().PauseAccept();
    data_path_.front().PauseClientReads(true);
  }
  void ResumeAccept() {
    data_path_.front().PauseClientReads(false);
    data_path_.front().ResumeAccept();
  }
  // The client connections accepted while paused, not read yet (FrontListener::
  // TakeHeldConnections); and one of them served here (the exec failed, or in the new image).
  // Then those between two requests (FrontListener::HandOverIdleClients).
  std::vector<proxy::FrontListener::HeldConnection> TakeHeldConnections() {
    std::vector<proxy::FrontListener::HeldConnection> taken =
        data_path_.front().TakeHeldConnections();
    for (auto& idle : data_path_.front().HandOverIdleClients()) taken.push_back(std::move(idle));
    return taken;
  }
  void AdoptClient(proxy::FrontListener::HeldConnection connection) {
    data_path_.front().AdoptClient(std::move(connection), data_path_.front().Settings());
  }
  // Adds the cell to `state`: its listening sockets and its entry (lifecycle figures, worker,
  // counters). REQUIRES: ReexecBlocker() is "".
  void Capture(ReexecState* state) const;
  // In the new image, instead of Bind: creates (opens) the cell's cgroup and serves the sockets
  // taken back from the state, then restores the entry's counters. A front or TCP socket given as
  // an empty fd is bound afresh (FrontListener::Adopt). Errors name the socket.
  Status Adopt(const ReexecState::Cell& entry, UniqueFd front, std::vector<UniqueFd> tcp,
               UniqueFd worker_listen, UniqueFd notify);
  // In the new image, instead of Start: the entry's worker is this cell's again (running), or,
  // without one, the cell stays stopped with its counts. Errors: WorkerRunner::AdoptWorker's.
  Status AdoptWorker(const ReexecState::Cell& entry, UniqueFd stdout_read, UniqueFd stderr_read);

  // Lowers the cell's limit on client connections below max_connections: its share of the
  // supervisor's descriptor budget (supervisor/connection_budget.h). Set before clients connect.
  void SetConnectionShare(uint32_t share) { data_path_.SetConnectionShare(share); }

 private:
  // proxy::Upstream: what the data path asks of the worker's side.
  pid_t worker_pid() const override { return runner_.pid(); }
  bool HasUnacceptedConnection() const override { return runner_.HasUnacceptedConnection(); }
  void Stalled(std::string why) override { runner_.Stalled(std::move(why)); }
  void Drained() override { runner_.Drained(); }
  void RetiredLinksDrained() override { runner_.RetiredLinksDrained(); }
  // lifecycle::DataPathControl: what the lifecycle's actions ask of the data path.
  // The lifecycle's Availability, except that a cell whose start is held for the cells it needs
  // (stopped, with a start due) tells its callers a start is due (Retry-After), not none
  // (ShownAvailability).
  void SetAvailability(const admission::Availability& availability) override {
    lifecycle_availability_ = availability;
    data_path_.SetAvailability(ShownAvailability(availability, order_step_, held_start_));
  }
  void OpenAdmission() override { data_path_.OpenAdmission(); }
  void CloseAdmission() override { data_path_.CloseAdmission(); }
  void RejectQueued() override { data_path_.RejectQueued(); }
  void FailInFlight(ipc::Reason reason, const std::string& message) override {
    data_path_.FailInFlight(reason, message);
  }
  void WorkerStarting() override { data_path_.WorkerStarting(); }
  bool RetireWorkerLinks() override { return data_path_.RetireWorkerLinks(); }
  void PreviousWorkerExited(const std::string& message) override {
    data_path_.PreviousWorkerExited(message);
  }
  void PressureFired(admission::Signal signal) override {
    const admission::CpuNeighbours neighbours =
        signal == admission::Signal::kCpuPressure && cpu_neighbours_judge_
            ? cpu_neighbours_judge_()
            : admission::CpuNeighbours::kUnknown;
    data_path_.PressureFired(signal, neighbours);
  }
  void CgroupUsagePolled(const cell::CgroupUsage& usage) override {
    data_path_.CgroupUsagePolled({.nr_periods = usage.cpu.nr_periods,
                                  .nr_throttled = usage.cpu.nr_throttled,
                                  .working_set = usage.has_memory ? usage.working_set() : 0,
                                  .memory_max = usage.memory_max.value_or(0)});
  }
  void AdaptiveSignals(uint8_t live) override { data_path_.SetKernelSignals(live); }

  loop::TimeSource* time_;
  // Who judges its cpu.pressure events.
  std::function<admission::CpuNeighbours()> cpu_neighbours_judge_;
  // Shared by the runner (watchdog) and the data path (stall, request_timeout): a timer whose
  // deadline passed asks it for a verdict after the next poll, the watchdog's taken first.
  loop::AfterPoll after_poll_;
  proxy::CellDataPath data_path_;
  lifecycle::WorkerRunner runner_;
  // Closes data_path_, runner_ and after_poll_ as its parts.
  loop::HandleGroup handles_;
  OrderStep order_step_ = OrderStep::kFree;
  // The runner's last SetAvailability (its lifecycle begins stopped).
  admission::Availability lifecycle_availability_ = admission::Availability::NoneDue();
  HeldStart held_start_;        // kWaitingToStart only: set_held_start
  uint64_t held_since_ms_ = 0;  // kWaitingToStart: when the start was held (status's "waiting for")
};

}  // namespace bulkhead::supervisor
