// SPDX-License-Identifier: MIT
// The worker launcher: fork (or clone3 into a cgroup) + exec with a clean slate, exec failures
// reported synchronously. REQUIRES: called from one thread at a time (the supervisor's loop
// thread); no other thread of the process may fork while Spawn runs (see Spawn).
#pragma once

#include <sys/types.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/unique_fd.h"

namespace bulkhead::cell {

// PATH used to find a bare argv[0] when `environment` has no PATH entry (systemd's default).
inline constexpr char kDefaultSearchPath[] =
    "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

// The listening socket is passed as the first descriptor of sd_listen_fds(3): SD_LISTEN_FDS_START.
inline constexpr int kListenFdNumber = 3;

// Who the worker runs as (systemd.exec(5) User=, Group=, SupplementaryGroups=). Taking them needs
// CAP_SETUID and CAP_SETGID (a root supervisor); without, the spawn fails with EPERM.
struct Credentials {
  uid_t uid = 0;
  gid_t gid = 0;
  // The complete supplementary group list; empty clears it (setgroups(2) with size 0).
  std::vector<gid_t> supplementary_groups;
};

// The umask of a worker unless SpawnOptions says otherwise (systemd.exec(5) UMask= default).
inline constexpr mode_t kDefaultWorkerUmask = 0022;

struct SpawnOptions {
  // argv[0] is the program: a path with a '/' (absolute, or relative to `working_directory`
  // when one is set, since the child changes directory before exec), or a bare name searched in
  // the PATH of `environment` (kDefaultSearchPath when absent), as execvp(3) does. Not empty.
  std::vector<std::string> argv;
  // The complete environment of the child, "KEY=VALUE"; nothing is inherited. Entries named
  // LISTEN_PID, LISTEN_FDS or LISTEN_FDNAMES are dropped: Spawn sets them from `listen_fd`.
  std::vector<std::string> environment;
  // The child chdir()s here before exec; empty = the parent's working directory.
  std::string working_directory;
  // If >= 0: becomes descriptor 3 in the child (not close-on-exec), announced with LISTEN_FDS=1,
  // LISTEN_PID=<child pid> and, if `listen_fd_name` is not empty, LISTEN_FDNAMES=listen_fd_name
  // (sd_listen_fds(3), sd_listen_fds_with_names(3)). Still owned by the caller, whose copy is
  // left open; its close-on-exec flag in the parent does not matter.
  int listen_fd = -1;
  std::string listen_fd_name;
  // If >= 0: a descriptor of a cgroup v2 directory (opened O_RDONLY | O_DIRECTORY or O_PATH); the
  // child is created in that cgroup by clone3(2) with CLONE_INTO_CGROUP (Linux >= 5.7), so it
  // never runs outside it. If < 0: plain fork(2), the child stays in the caller's cgroup.
  int cgroup_fd = -1;
  // If not 0: the child asks the kernel for this signal when the thread that spawned it exits
  // (prctl(2) PR_SET_PDEATHSIG), so a supervisor killed with SIGKILL leaves no worker running
  // unnoticed. A child whose parent died before the request exits at once with that signal's
  // conventional status. Reaches the worker only, not what it forks later.
  int parent_death_signal = 0;
  // If >= 0: becomes descriptor 1 (stdout_fd) or 2 (stderr_fd) of the child in place of the
  // parent's, e.g. the write end of a pipe the supervisor reads the worker's output from
  // (docs/logging.md). The same descriptor may be given for both. Still owned by the caller, whose
  // copy is left open; its close-on-exec flag in the parent does not matter.
  int stdout_fd = -1;
  int stderr_fd = -1;
  // If set: the child drops to these credentials before exec (setgroups, setresgid, setresuid:
  // real, effective, saved and filesystem ids all change). The parent-death signal is requested
  // after the change, since the kernel clears it on a credential change (prctl(2)), and
  // `working_directory` is entered as the new user. Unset: the caller's credentials are kept.
  std::optional<Credentials> credentials;
  // umask(2) of the child, 0..0777; not inherited from the caller.
  mode_t umask = kDefaultWorkerUmask;
  // prctl(PR_SET_NO_NEW_PRIVS, 1) in the child: no execve of the worker or of anything it runs can
  // gain privileges (set-user-ID bits, file capabilities); inherited by its children and
  // irreversible (systemd.exec(5) NoNewPrivileges=).
  bool no_new_privileges = true;
  // If set: the child writes it to /proc/self/oom_score_adj (-1000..1000; proc(5)) before it
  // takes `credentials`, so that what the worker forks inherits it (systemd.exec(5)
  // OOMScoreAdjust=). Unset: the caller's value is inherited. Skipped when the caller already has
  // this value. Raising it is always allowed; going below the lowest value a process with
  // CAP_SYS_RESOURCE set for the caller (its oom_score_adj_min) needs CAP_SYS_RESOURCE, and the
  // spawn then fails with EACCES ("oom_score_adj -1000: Permission denied").
  std::optional<int> oom_score_adj;
};

// Starts a worker process and returns its pid once it has exec'd (the parent blocks only that
// long, as libuv's uv_spawn does).
//
// In the child, before execve(2): every signal disposition reset to SIG_DFL and the signal mask
// emptied (ignored or blocked signals would otherwise survive exec); setsid(), so the worker leads
// its own session and process group and kill(-pid, sig) reaches the whole cell; `oom_score_adj`
// written; `credentials` taken (see ApplyCredentials in process.cc), umask set,
// PR_SET_NO_NEW_PRIVS; stdin from /dev/null; stdout and stderr inherited (/dev/null if the parent
// has them closed), or `stdout_fd` / `stderr_fd` when given; `listen_fd` moved to descriptor 3;
// every other descriptor above 2 closed (close_range(2), or a loop up to RLIMIT_NOFILE on kernels
// before 5.9); chdir(working_directory); execve with `environment`. Only async-signal-safe calls
// run after the fork: argv, envp and PATH candidates are built before it.
//
// Errors: a failed step in the child is reported through a close-on-exec pipe with its errno; the
// child then exits 127 (ENOENT) or 126 (anything else) like a shell (base/exit_status.h) and is
// reaped here. The Status names the step, the path and the errno text, e.g.
// "exec /usr/bin/nope: No such file or directory", "chdir /srv/x: Permission denied", and carries
// that errno in error_number(). Failures before the fork (empty argv, pipe, fork/clone3 errors such
// as ENOSYS from a kernel without clone3) return without a child.
//
// Spawn installs no SIGCHLD handler and reaps nothing but a child that failed before exec: the
// caller owns the pid and must waitpid() it. While Spawn runs, all signals are blocked in the
// calling thread (restored before return), so a parent's signal handler never runs in the child.
// Threads: another thread forking concurrently could inherit the report pipe's write end and
// delay this call until its own child execs or exits.
Result<pid_t> Spawn(const SpawnOptions& options);

struct StartedChild;

// The exec of a child SpawnStarted started, not confirmed yet: what Spawn waits for, handed to the
// caller so that an event loop can wait for it on fd() instead (a child that runs its steps and
// execve on a busy machine takes milliseconds to get there, all of which Spawn blocks). Move-only.
class PendingExec {
 public:
  PendingExec();  // already confirmed: Poll() answers Ok
  ~PendingExec();
  PendingExec(PendingExec&&) noexcept;
  PendingExec& operator=(PendingExec&&) noexcept;

  // The read end of the child's report pipe (non-blocking, close-on-exec): readable (POLLIN or
  // POLLHUP) once the child exec'd or reported a failed step. -1 once Poll() gave the outcome.
  int fd() const { return report_.get(); }
  // Without blocking: nullopt while the child has done neither; then Ok (it exec'd) or the failed
  // step's Status, worded as Spawn's, and the same answer on every later call. After a failure
  // the child exits 126 or 127: the caller reaps it (SpawnStarted reaps nothing).
  std::optional<Status> Poll();

 private:
  friend Result<StartedChild> SpawnStarted(const SpawnOptions& options);
  struct Names;
  PendingExec(UniqueFd report, std::unique_ptr<Names> names);

  UniqueFd report_;
  std::unique_ptr<Names> names_;
  std::optional<Status> outcome_ = Status::Ok();
};

struct StartedChild {
  pid_t pid = 0;
  PendingExec exec;
};

// Spawn without the wait: forks (or clone3s), and returns the child's pid and its PendingExec at
// once. Errors before the fork as Spawn's; a step failing in the child comes through
// PendingExec::Poll.
Result<StartedChild> SpawnStarted(const SpawnOptions& options);

// Describes a status from waitpid(2): "exit 3", "signal 9", "signal 11 (core dumped)";
// "stopped by signal 19" and "continued" for WUNTRACED / WCONTINUED statuses.
std::string DescribeWaitStatus(int wait_status);

}  // namespace bulkhead::cell
