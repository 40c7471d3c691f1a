// SPDX-License-Identifier: MIT
// Cell: one compartment. Owns the cell's front socket (clients), the worker-facing listening socket
// (passed to the worker as fd 3), the worker process, up to max_concurrent WorkerLinks, the
// Bulkhead that admits requests, and the counters. Every request admitted here is answered exactly
// once: OK, REJECTED (full, queue_timeout, unavailable) or FAILED (worker_error, worker_died),
// unless its client went away first. REQUIRES: loop thread only.
#pragma once

#include <sys/types.h>
#include <uv.h>

#include <cstdint>
#include <functional>
#include <string>
#include <unordered_set>
#include <vector>

#include "base/status.h"
#include "base/unique_fd.h"
#include "config/config.h"
#include "ipc/frame.h"
#include "supervisor/bulkhead.h"
#include "supervisor/request.h"

namespace bulkhead::supervisor {

class FrontConnection;
class WorkerLink;

// Lifecycle states, named as in `bulkheadctl status`.
enum class CellState { kStopped, kRunning, kBackoff, kStopping };
const char* CellStateName(CellState state);

// Outcome counters since the supervisor started. Every admitted request ends in exactly one of
// ok, rejected_*, failed_* or cancelled (queued when its client disconnected).
struct CellCounters {
  uint64_t ok = 0;
  uint64_t rejected_full = 0;
  uint64_t rejected_queue_timeout = 0;
  uint64_t rejected_unavailable = 0;
  uint64_t failed_worker_error = 0;
  uint64_t failed_worker_died = 0;
  uint64_t cancelled = 0;
  uint64_t bad_request = 0;  // frames refused before admission (connection closed)
  uint64_t rejected() const {
    return rejected_full + rejected_queue_timeout + rejected_unavailable;
  }
  uint64_t failed() const { return failed_worker_error + failed_worker_died; }
};

// A consistent copy of a cell's figures, for the control socket.
struct CellSnapshot {
  std::string name;
  CellState state = CellState::kStopped;
  pid_t pid = 0;
  std::string socket;
  std::string worker_socket;
  Bulkhead::Limits limits;
  uint32_t running = 0;
  uint32_t queued = 0;
  uint32_t clients = 0;
  uint32_t worker_connections = 0;
  uint64_t starts = 0;
  uint64_t restarts = 0;
  std::string last_exit;          // "exit 3", "signal 9", "exec failed: ...", or empty
  uint64_t uptime_ms = 0;         // of the current worker, 0 when none
  uint64_t next_start_in_ms = 0;  // in backoff: time until the next start
  CellCounters counters;
};

class Cell {
 public:
  Cell(uv_loop_t* loop, config::CellConfig config, uint32_t max_payload, RequestPool* pool);
  ~Cell();
  Cell(const Cell&) = delete;
  Cell& operator=(const Cell&) = delete;

  const std::string& name() const { return config_.name; }
  pid_t pid() const { return pid_; }
  CellState state() const { return state_; }

  // Claims and binds the front and worker sockets (stale files from a killed run are reclaimed;
  // a front socket another live process serves is refused) and starts accepting clients.
  Status Bind();
  // Starts the worker. An exec failure is logged and retried after restart_delay.
  void Start();
  // Stops admitting, rejects what waits, signals the worker's process group with SIGTERM and, after
  // `kill_after_ms`, SIGKILL. `on_stopped` runs once no worker is left.
  void Stop(uint64_t kill_after_ms, std::function<void()> on_stopped);
  // Closes every handle; `on_closed` runs when the last close callback has run.
  // REQUIRES: stopped (no worker), no clients left.
  void CloseHandles(std::function<void()> on_closed);
  // Closes every client connection (queued requests cancelled).
  void DisconnectClients();

  // The supervisor reaped the worker: `wait_status` as from waitpid.
  void OnWorkerExit(int wait_status);

  CellSnapshot Snapshot() const;

  // Called by FrontConnection.
  void OnClientConnected(FrontConnection* conn);
  void OnClientDisconnected(FrontConnection* conn);
  void OnRequest(FrontConnection* conn, const ipc::FrameView& frame);
  void OnClientGone(Request* request);
  void OnBadRequest(const std::string& why);

  // Called by WorkerLink. `request` has been taken off the link.
  void OnWorkerReply(WorkerLink* link, Request* request, const ipc::FrameView& frame);
  void OnLinkBroken(WorkerLink* link, std::string why);

 private:
  static void OnConnection(uv_stream_t* server, int status);
  static void OnRestartTimer(uv_timer_t* timer);
  static void OnQueueTimer(uv_timer_t* timer);
  static void OnOrphanTimer(uv_timer_t* timer);
  static void OnKillTimer(uv_timer_t* timer);
  static void OnHandleClosed(uv_handle_t* handle);

  uint64_t Now() const { return uv_now(loop_); }
  void Dispatch(Request* request, std::string_view payload);
  void StartQueued();
  void Complete(Request* request, const ipc::FrameHeader& header, std::string_view payload);
  void Fail(Request* request, ipc::Reason reason, std::string_view message);
  void Reject(Request* request, ipc::Reason reason);
  void ArmQueueTimer();
  void RemoveBusy(WorkerLink* link);
  void DropLink(WorkerLink* link);
  void ScheduleRestart();

  uv_loop_t* loop_;
  config::CellConfig config_;
  uint32_t max_payload_;
  RequestPool* pool_;
  Bulkhead bulkhead_;

  uv_pipe_t front_{};
  bool front_open_ = false;
  UniqueFd worker_listen_fd_;
  uv_timer_t restart_timer_{};
  uv_timer_t queue_timer_{};
  uv_timer_t orphan_timer_{};
  uv_timer_t kill_timer_{};
  int open_handles_ = 0;
  std::function<void()> on_closed_;

  CellState state_ = CellState::kStopped;
  pid_t pid_ = 0;
  uint64_t started_at_ms_ = 0;
  uint64_t next_start_at_ms_ = 0;
  bool stopping_ = false;
  std::function<void()> on_stopped_;

  std::vector<WorkerLink*> idle_links_;
  std::vector<WorkerLink*> busy_links_;
  // Requests whose link broke while the worker still ran: failed with the exit reason when the
  // worker exits, or as worker_error once `orphan_deadline_ms_` passes.
  std::vector<Request*> orphans_;
  std::unordered_set<FrontConnection*> clients_;

  uint64_t starts_ = 0;
  uint64_t restarts_ = 0;
  std::string last_exit_;
  CellCounters counters_;
  std::string scratch_;  // reused for reply payloads built here
};

}  // namespace bulkhead::supervisor
