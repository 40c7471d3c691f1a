// SPDX-License-Identifier: MIT
// Supervisor: bulkheadd's core. One libuv loop on one thread runs every cell, the control socket
// and the signal handling: SIGCHLD reaps every exited child (a worker's status goes to its cell,
// orphans adopted as PID 1 or subreaper are discarded), SIGTERM/SIGINT stop every cell, a cell
// before the cells it needs and unrelated cells in parallel, and end Run() with 0. A start of a
// cell waits until the cells it needs run (supervisor/start_order.h). REQUIRES: constructed, run
// and destroyed on one thread; SIGPIPE ignored by the caller.
#pragma once

#include <uv.h>

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "cell/cgroup.h"
#include "config/config.h"
#include "control/command_table.h"
#include "control/control_server.h"
#include "control/metrics_server.h"
#include "control/metrics_text.h"
#include "control/reload_plan.h"
#include "lifecycle/cell_logs.h"
#include "loop/handle_group.h"
#include "loop/time_source.h"
#include "loop/write_batch.h"
#include "proxy/access_log.h"
#include "proxy/exchange.h"
#include "supervisor/cell.h"
#include "supervisor/cgroup_poll.h"
#include "supervisor/connection_budget.h"
#include "supervisor/reexec.h"
#include "supervisor/reexec_check.h"
#include "supervisor/reexec_hooks.h"
#include "supervisor/reexec_state.h"
#include "supervisor/reexec_wait.h"
#include "supervisor/runtime_dir_lock.h"
#include "supervisor/service_notifier.h"

namespace bulkhead::supervisor {

// The outcome of Supervisor::Reload.
struct ReloadResult {
  bool ok = false;
  // When !ok: why nothing changed, one line each. Config errors as config/ gives them
  // ("file:line:col: cells.NAME.key: message"), or a refusal ("FILE: supervisor.runtime_dir:
  // changed, ...", "cells.NAME: ...").
  std::vector<std::string> errors;
  // When ok: "reloaded: payments unchanged, catalog restarted (command changed), search added",
  // followed by notes ("; ...") where a cell could not do all the plan says.
  std::string summary;
  // When ok: cgroup limits the reload wrote that are not in force, "cells.NAME: memory_max: write
  // ...", one per cell. The reload applied; the control answer reports it as a failure.
  std::vector<std::string> limit_errors;
  // Applied or refused: the access log's file could not be opened again ("supervisor.access_log:
  // not reopened, still writing the old file: ..."). The control answer reports it as a failure.
  std::string access_log_error;
  // The config file's warnings ("file:line:col: cells.NAME.key: message", as --check-config
  // prints them), whether or not the reload applied.
  std::vector<std::string> warnings;
  // What was planned per cell (empty when the file was refused before planning).
  control::ReloadPlan plan;
  // When ok: the cells whose worker this reload restarts or starts (restarted and added cells;
  // not a stopped or stopping one), each with its starts counter from before: a new worker is up
  // once starts exceeds it and the cell runs (what `bulkheadctl reload` waits for).
  std::map<std::string, uint64_t> starts_before;
};

class Supervisor {
 public:
  explicit Supervisor(config::Config config);
  ~Supervisor();
  Supervisor(const Supervisor&) = delete;
  Supervisor& operator=(const Supervisor&) = delete;

  // The log level given on the command line (`--log-level`): it wins over the file's log_level,
  // at startup and at every reload. Call before Run().
  void PinLogLevel(std::string level) { pinned_log_level_ = std::move(level); }

  // This image was started by a re-exec (docs/reexec.md): Run() takes the sockets, workers and
  // counters of `state` over instead of binding and starting; if it cannot before its loop runs,
  // it runs the previous binary again through `fallback` (failure 5). `fell_back`: this image is
  // that previous binary, and why the new one could not ("" when not). Call before Run().
  void AdoptState(ReexecState state, ReexecFallback fallback, std::string fell_back) {
    adopted_ = std::move(state);
    reexec_fallback_ = std::move(fallback);
    reexec_fell_back_ = std::move(fell_back);
  }

  // Test-only faults at a re-exec's failure points (supervisor/reexec_hooks.h); bulkheadd never
  // calls it. Call before Run().
  void SetReexecHooks(ReexecHooks hooks) { reexec_hooks_ = std::move(hooks); }

  // Creates the runtime directory, claims and binds every socket, starts every worker and runs the
  // loop until a stop signal. Returns a process exit code (base/exit_status.h); a socket that
  // cannot be claimed fails startup before any worker starts.
  int Run();
  // After Run: this image adopted a re-exec's state, could not take it over, and no previous
  // binary took it back (failure 5 of docs/reexec.md): main ends as TakeoverFailedAction says.
  bool takeover_failed() const { return takeover_failed_; }

  // The control socket's request handler: one JSON request line in, one JSON response line out,
  // through the command table (control/command_table.h). Commands that are not read-only are
  // refused unless `peer` may run them (ControlAccess).
  std::string HandleControl(const std::string& request_line, const control::ControlPeer& peer);
  // As above, from this process itself (every command allowed).
  std::string HandleControl(const std::string& request_line);

  // Re-executes bulkheadd in place (docs/reexec.md), for SIGUSR2 and the control command
  // "reexec" (`why` names which, for the log): refuses what cannot pass (a shutdown, a re-exec
  // under way, ReexecRefused), waits for the cells that cannot be carried yet to settle
  // (ReexecPhase::kSettling, at most `settle_timeout_ms`, or ReexecSettleBoundMs of the cells
  // when not given), asks the binary on disk whether it reads our state version (kChecking), then
  // drains (kDraining). Returns "" when the re-exec is under way, else why nothing changed (also
  // logged); a refusal after the return (a settling past its deadline, a failed version check) is
  // logged and kept as reexec.last_error for status. REQUIRES: loop thread, inside Run().
  std::string BeginReexec(std::string_view why, std::optional<uint64_t> settle_timeout_ms);

  // Re-reads the config file bulkheadd was started with (config.source) and applies it as a diff
  // (control/reload_plan.h, docs/config.md "Reload"): an invalid file, a changed [supervisor]
  // key other than log_level, a changed cell socket, or a new cell that cannot bind changes
  // nothing. Otherwise unchanged cells are not touched, live keys apply to the running cell,
  // cells whose worker must change are restarted (front socket, clients and queue kept), removed
  // cells stop admitting, drain within stop_timeout, stop and remove their sockets, and new cells
  // bind and start. Logs the outcome. The one entry point of SIGHUP and the control command
  // "reload". Once READY=1 was sent, the service manager is told RELOADING=1 before and READY=1
  // after (sd_notify(3)), whatever the outcome. REQUIRES: loop thread, inside Run().
  ReloadResult Reload();

 private:
  // Handles SIGCHLD, SIGTERM, SIGINT, SIGHUP, SIGUSR1, SIGUSR2, SIGRTMIN+3 and SIGRTMIN+4 with
  // OnSignal.
  Status HandleSignals();
  static void OnSignal(uv_signal_t* handle, int signum);
  ReloadResult ApplyReload();
  void ReapChildren();
  void BeginShutdown(int signum);
  void FinishShutdown();
  // Closes every handle; `closed_message` (if any) is logged once all closed, after what their
  // closes logged (the access log's last drop warning).
  void CloseAll(std::string closed_message = "");
  // A cell changed state: sends READY=1 once every cell has left `starting` after boot, and the
  // STATUS= summary (supervisor/service_notifier.h).
  void OnCellStateChanged();

  // The cells as the ordering reads them (supervisor/start_order.h), in cells_ order.
  std::vector<OrderNode> OrderNodes() const;
  // Starts `cell` at once, or, when it has no worker and a cell it needs is not running, holds
  // its start (kWaitingToStart) until they all are; AdvanceOrder lets it go. Returns the
  // lifecycle's answer, or "ok" for a held start. `restart` restarts a cell that has a worker.
  std::string RequestStart(Cell& cell, bool restart);
  // RequestStart for each of `cells` (boot: all; a reload: those it added), each after the cells
  // it needs among them (NeedsFirst), so that a held start's log line names its needs' states.
  void StartInNeedsOrder(std::span<Cell* const> cells);
  // Starts the held cells whose needs now run and, in a shutdown, stops the cells no running
  // dependent needs any more. Never from inside a cell's state observer or on_stopped (it feeds
  // the cells events): OnCellStateChanged arms order_timer_ for it.
  void AdvanceOrder();
  // The cgroup poll follows the cells, the cgroups and the shutdown (CgroupPoll::Follow): at
  // boot, after a reload, at shutdown.
  void FollowCgroupPoll();
  // Arms order_timer_ when some cell's start or stop is held.
  void ScheduleOrder();
  // Delegates the cgroup subtree per the config's `cgroup` mode. Fails only in "required" mode.
  Status SetUpCgroups();
  const config::CellConfig& ConfigOf(const std::string& name) const;
  // The cell named `name` of `config`. REQUIRES: there is one.
  static const config::CellConfig& CellNamed(const config::Config& config, const std::string& name);
  std::unique_ptr<Cell> MakeCell(const config::CellConfig& cell_config);
  // Whether a cell handed to Retire was ever in service.
  enum class Retirement {
    kRemoved,     // removed by a reload: "cell closed" is logged once it is gone
    kNeverAdded,  // made for a reload that was then refused: gone without a word at info
  };
  // Takes a cell out of service (removed by a reload, or added by a refused one): stops it (new
  // requests REJECTED unavailable, in-flight ones drain within stop_timeout), closes its clients
  // and handles and removes its sockets and cgroup, then destroys it.
  void Retire(std::unique_ptr<Cell> cell, Retirement retirement);
  // Ends the shutdown once every cell, retiring ones included, has stopped.
  void MaybeFinishShutdown();
  // The handlers of the control commands (control/command_table.h), one per row.
  control::CommandHandlers ControlHandlers();
  // The cells' names, in config order.
  std::vector<std::string> CellNames() const;
  // "status" for the cell `only`, or every cell when it is "".
  std::string StatusControl(const std::string& only);
  // "start", "stop" or "restart" (`command`) of the cell `name`.
  std::string CellCommandControl(std::string_view command, const std::string& name);
  std::string ReloadControl();
  // "reexec": BeginReexec, with the request's "settle_timeout_ms" when it has one.
  std::string ReexecControl(const nlohmann::json& request);
  // One look of the re-exec's wait (reexec_wait_: after an event, or at the bound): settles
  // (kSettling), or drains: execs once nothing is in flight, or past the deadline after failing
  // what is left; back to kSettling when a cell became unsettled meanwhile.
  void AdvanceReexec();
  // Enters `phase` and arms the re-exec's one timer for it (ArmReexecBound).
  void SetReexecPhase(ReexecPhase phase);
  // The re-exec's bound follows from its phase, here only: kSettling its settle deadline,
  // kDraining its drain deadline (or the answers' grace once abandoned); no other phase has one
  // (kChecking is bounded by ReexecCheck, kClosingLog ends with the log's close).
  void ArmReexecBound();
  // Something a waiting re-exec waits for may have changed (a cell moved, a worker was reaped,
  // a cell's last request was answered, a reload's removed cell closed): it looks again after this
  // loop iteration's poll. Nothing when no re-exec waits.
  void NotifyReexec();
  // Why a re-exec cannot go ahead, and waiting would not help ("" when nothing says so): a
  // shutdown, a config file that is not the one in force.
  std::string ReexecRefused();
  // Why a re-exec cannot go ahead now but may soon, one "cells.NAME: why" each (empty when it
  // can): a cell that cannot be carried yet (Cell::ReexecBlocker: starting, stopping, swapping
  // workers, tearing down), a start held for the cells it needs, a reload's removed cells still
  // draining. What kSettling waits for; status shows it as reexec.waiting_for.
  std::vector<std::string> ReexecWaitingFor() const;
  // The first of ReexecWaitingFor(), "" when none.
  std::string ReexecUnsettled() const;
  // status's reexec.ends_within_ms: ReexecEndsWithinMs of the re-exec under way (settling,
  // checking or draining), null in the other phases.
  nlohmann::json ReexecEndsWithin() const;
  // One look of kSettling (JudgeSettle): waits, refuses past the deadline, or goes on to the
  // version check (kChecking), or to kDraining when the binary was checked already.
  void SettleReexec();
  // What a re-exec executes: binary_path_, else OwnBinaryPath(). Errors: OwnBinaryPath's.
  Result<std::string> ReexecBinaryPath() const;
  // The file at ReexecBinaryPath() is another one than this image runs (binary_file_id_): a
  // package upgrade replaced it, so a re-exec would run a new binary (status's
  // reexec.binary_replaced). False when either cannot be read (stat(2) per call).
  bool BinaryReplaced() const;
  // Starts the version check of reexec_binary_ (kChecking). Errors: ReexecCheck::Start's.
  Status StartReexecCheck();
  // Back to kIdle with `why` kept as reexec.last_error, logged.
  void ReexecRefusedNow(const std::string& why);
  // The new binary's version check ended (ReexecCheck): drains (kDraining) when it reads our
  // version and nothing refuses the re-exec, settles again (kSettling) when a cell became
  // unsettled meanwhile, else back to kIdle with the reason. REQUIRES: kChecking.
  void OnReexecChecked(const Status& readable);
  // Pauses accept and drains (kDraining), bounded by the longest stop_timeout.
  void BeginReexecDrain();
  // Once the drain is over: closes the access log (kClosingLog) and execs from its close, or execs
  // now without one. REQUIRES: kDraining.
  void CloseLogAndExec();
  // Opens the access log again after CloseLogAndExec closed it (the exec failed, or a shutdown
  // dropped the re-exec) and hands it to every cell; logs why not when it cannot be opened.
  void ReopenAccessLog();
  // Writes the state and execs; returns only when the exec failed, after putting every cell back
  // to serving. REQUIRES: kDraining or kClosingLog.
  void ExecNow();
  // The exec failed (`why`): cells serve again as before the re-exec, the reason is kept.
  void ReexecFailed(const std::string& why);
  // Claims and binds the config's control_socket with its control_socket_mode and
  // control_socket_group (ControlServer::Listen) and starts accepting: at a start, and in an
  // adopted image whose control socket is not the one the state names (failure 6 of
  // docs/reexec.md). The one place the control socket is bound. Errors: Listen's, naming the path.
  // REQUIRES: control_ made and not listening yet.
  Status ListenControl();
  // Run()'s start of an adopted image: takes the state's sockets and workers; errors name what
  // could not be taken back.
  Status AdoptListeners();
  void AdoptWorkers();
  // The cells of reload_starts_ whose new worker never took over: in backoff or failed, or running
  // only a worker from before the reload (its overlapping restart failed). Forgets the cells whose
  // new worker runs, the ones stopped since (their next start takes the config as it is) and the
  // ones gone.
  std::set<std::string> NotTakenOver();
  // The cell named `name` in service (not a retiring one); null when there is none.
  Cell* FindCell(const std::string& name) const;
  // A worker started after `starts_before` was read runs: a reload's new worker took over.
  static bool TookOver(const Cell& cell, uint64_t starts_before);
  // Every cell's figures, in config order; and them in the Prometheus text format.
  std::vector<control::CellSnapshot> Snapshots() const;
  std::string RenderMetrics() const;
  // Computes the client connection budget from RLIMIT_NOFILE once every socket is bound, and gives
  // each cell its share (supervisor/connection_budget.h).
  void SetUpConnectionBudget();

  config::Config config_;
  // Installed as the LogSink from construction to destruction: cells' recent lines, the journal.
  lifecycle::CellLogs cell_logs_;
  std::string pinned_log_level_;  // empty: the file's log_level applies
  std::optional<cell::CgroupTree> cgroup_tree_;
  std::string cgroup_note_;  // why limits are not enforced ("" when they are)
  uv_loop_t loop_{};
  // The loop's clock and timers, for everything bulkheadd runs (loop/time_source.h).
  loop::LoopTimeSource time_{&loop_};
  proxy::ExchangePool pool_;
  // The socket writes of a loop iteration (client answers, HTTP requests to workers), sent together
  // (loop/write_batch.h); from Run() until CloseAll() closes it.
  std::optional<loop::WriteBatch> write_batch_;
  // `access_log` (docs/access-log.md): from Run() until CloseAll() closes it; null without one.
  std::unique_ptr<proxy::AccessLog> access_log_;
  // CloseLogAndExec closed access_log_ and its close has not ended yet; CloseAll meanwhile leaves
  // its part of the handles to that close (access_log_part_).
  bool access_log_closing_ = false;
  std::function<void()> access_log_part_;
  // The counters of the access logs before access_log_ (earlier images, carried in the re-exec
  // state, and logs ReopenAccessLog replaced), which the metrics add to access_log_'s.
  uint64_t access_log_lines_before_ = 0;
  uint64_t access_log_dropped_before_ = 0;
  uint64_t client_budget_ = UINT64_MAX;
  std::vector<std::unique_ptr<Cell>> cells_;
  // Cells retired by a reload, until their handles are closed. Their workers are still reaped.
  std::vector<std::unique_ptr<Cell>> retiring_;
  int retiring_stopping_ = 0;        // retiring cells whose worker has not stopped yet
  RuntimeDirLock runtime_dir_lock_;  // held from startup until every socket file is removed
  std::unique_ptr<control::ControlServer> control_;
  std::unique_ptr<control::MetricsServer> metrics_;  // null without metrics_listen
  control::ReloadCounts reloads_;  // every Reload(), for bulkhead_config_reloads_total
  // The cells a reload restarted or added, each with its "starts" before that reload, until a
  // worker started since runs (then it is in force): a reload of the same file restarts again the
  // ones whose new worker never took over (NotTakenOver, control::RetryRestarts).
  std::map<std::string, uint64_t> reload_starts_;
  // The control socket's commands: control/command_table.h's rows with this supervisor's handlers.
  control::CommandTable commands_;
  // The signal handles (HandleSignals); the cells, control_, metrics_ and write_batch_ close as
  // its parts (CloseAll).
  loop::HandleGroup handles_;
  uint64_t started_at_ms_ = 0;
  bool shutting_down_ = false;
  // After every cell stopped: the answers its clients have not read yet get until this loop time
  // (the shutdown's start + the longest stop_timeout) before the connections close. Polled by
  // client_drain_timer_.
  uint64_t client_drain_deadline_ms_ = 0;
  bool draining_clients_ = false;
  std::unique_ptr<loop::Timer> client_drain_timer_;
  // Runs AdvanceOrder at the loop's next turn after a cell changed state (ScheduleOrder).
  std::unique_ptr<loop::Timer> order_timer_;
  // systemd's $NOTIFY_SOCKET. The reload calls notifier_.Reloading(), then notifier_.Ready().
  ServiceNotifier notifier_;
  // A re-exec (docs/reexec.md): the state this image was started with (until Run() took it over),
  // the phase of one under way, its drain's deadline (loop ms), the binary it execs, how many
  // re-execs led to this image, and why the last one failed ("" when none did).
  std::optional<ReexecState> adopted_;
  ReexecFallback reexec_fallback_;  // until the state is taken over (AdoptWorkers)
  std::string reexec_fell_back_;
  ReexecPhase reexec_phase_ = ReexecPhase::kIdle;
  uint64_t reexec_deadline_ms_ = 0;
  // The settling's start and deadline (loop ms), set at every request (kSettling may come back
  // after the check or the drain, within the same deadline), and whether the binary passed its
  // version check already.
  uint64_t reexec_settle_started_ms_ = 0;
  uint64_t reexec_settle_deadline_ms_ = 0;
  bool reexec_checked_ = false;
  // RELOADING=1 was sent for this re-exec (its first drain); READY=1 follows its end either way.
  bool reexec_told_reloading_ = false;
  bool reexec_abandoned_ = false;  // past the deadline: what was in flight was answered
  std::string reexec_binary_;
  // The binary bulkheadd was first started as (/proc/self/exe at the first start, or the state's
  // `binary` in an adopting image): what a re-exec executes, also once the running file was moved
  // aside (`mv bulkheadd bulkheadd.old`, which /proc/self/exe follows). "" when not known: then
  // /proc/self/exe as it is at the re-exec (ReexecBinaryPath).
  std::string binary_path_;
  // The file this image runs, read once when it starts (the first start, or the takeover of a
  // re-exec): OwnBinaryPath() then, "" when unreadable (status's reexec.binary_file), and
  // FileIdOf("/proc/self/exe"), nullopt when unreadable (BinaryReplaced).
  std::string binary_file_;
  std::optional<FileId> binary_file_id_;
  uint64_t reexecs_ = 0;
  std::string reexec_error_;
  bool takeover_failed_ = false;  // takeover_failed()
  // Wakes a waiting re-exec on events and holds its one timer, the bound; Run() to CloseAll().
  std::unique_ptr<ReexecWait> reexec_wait_;
  std::string reexec_why_;    // BeginReexec's `why`, for the log lines of its later steps
  ReexecHooks reexec_hooks_;  // every hook empty but in the test build bulkheadd-reexec-faults
  // Runs the new binary's version check (kChecking); from Run() until CloseAll().
  std::unique_ptr<ReexecCheck> reexec_check_;
  // The one timer that reads the cells' cgroups, for their controllers and to judge whose CPU
  // (supervisor/cgroup_poll.h); from Run() until CloseAll().
  std::unique_ptr<CgroupPoll> cgroup_poll_;
  bool booted_ = false;      // every cell was given its first start
  bool ready_sent_ = false;  // READY=1 was sent after boot
  int cells_running_ = 0;
  int exit_code_ = 0;
};

}  // namespace bulkhead::supervisor
