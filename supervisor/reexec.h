// SPDX-License-Identifier: MIT
// Re-executing bulkheadd in place (docs/reexec.md): its phases, and the process-level steps the
// Supervisor takes through them: find its own binary as it is on disk now, ask it which state
// versions it reads, exec it with the state and the descriptors to keep, and, in the new image,
// take those descriptors back. Blocking calls, each bounded; on the loop thread of bulkheadd.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "base/unique_fd.h"

namespace bulkhead::supervisor {

// Where a re-exec stands in the image that was asked for it. (Adopting runs in the new image,
// before its loop: not a phase the loop ever sees.)
enum class ReexecPhase : uint8_t {
  // No re-exec under way: every cell accepts and admits as usual.
  kIdle,
  // A re-exec was asked while some cell cannot be carried yet: it is starting, stopping, swapping
  // workers or tearing its last generation down, its start is held for the cells it needs, or a
  // reload's removed cells still drain (Supervisor::ReexecWaitingFor, status's
  // reexec.waiting_for). Every cell accepts and admits as in kIdle; the re-exec looks again at
  // each change that may settle a cell (a state change, a worker reaped, a teardown or swap
  // ended: ReexecWait), not on a poll, until none is unsettled (then the checks run and lead to
  // kChecking, or to kDraining when the binary was checked already), or refuses at the
  // settling's deadline (ReexecSettleBoundMs from the request, the one timer) naming the cell and
  // its state (JudgeSettle). A second re-exec is refused; a shutdown cancels it.
  kSettling,
  // The request's checks passed (no shutdown, reload or swap under way, cells carried, the config
  // file the one in force, the binary found) and the new binary is being asked which state
  // versions it reads (ReexecCheck: a child process, read on the loop, bounded by a timer). Every
  // cell accepts and admits as in kIdle; a second re-exec is refused; a shutdown cancels the
  // check. Its end leads to kDraining (the checks pass again), or back to kIdle with the reason
  // kept for status.
  kChecking,
  // The new binary was found and reads our state version. Accept is paused on every front socket
  // (new connections wait in the kernel backlog, their listening fds kept open); connections
  // already open are served; the re-exec waits until no request is in flight (running, queued or
  // an answer unsent: it looks when a cell's last request ended, CellDataPath::SetQuietObserver),
  // or until the drain deadline, the longest stop_timeout from its start (the one timer).
  kDraining,
  // Nothing is in flight (or the deadline passed as for kExecuting), and the access log is
  // closing: its writer thread writes every line it was handed and ends (AccessLog::Close), so
  // that no line of the last moments is lost with the thread at the exec. Accept stays paused;
  // no request runs, so no line is added. Only with an access log; its close leads to kExecuting
  // (or, when a shutdown dropped the re-exec meanwhile, to a log opened again).
  kClosingLog,
  // Nothing is in flight, or the deadline passed and what was left was answered as on shutdown.
  // The state is in a memfd and execve runs; a return from it is a failure that puts the cells
  // back to kIdle as they were (accept resumed), logged and kept for status.
  kExecuting,
};
// "idle", "settling", "checking", "draining", "closing-log", "executing": as status shows it.
const char* ReexecPhaseName(ReexecPhase phase);

// The file /proc/self/exe names now, without the " (deleted)" the kernel appends once a package
// upgrade replaced it: the binary on disk, the new one after an upgrade (but the old one when it
// was moved aside: the Supervisor reads it at the first start and re-executes that path).
// Errors: readlink's.
Result<std::string> OwnBinaryPath();

// Which file a path names: stat(2)'s st_dev and st_ino.
struct FileId {
  dev_t dev = 0;
  ino_t ino = 0;
  bool operator==(const FileId&) const = default;
};
// The file `path` names, symlinks followed ("/proc/self/exe": the file this process runs, also
// once a package upgrade replaced it or it was moved aside). nullopt when stat(2) fails.
std::optional<FileId> FileIdOf(const std::string& path);

// argv[0] made absolute against `cwd` and lexically normal, symlinks kept as they are
// ("current/bulkheadd" in /opt/bulkhead: "/opt/bulkhead/current/bulkheadd"); "" when argv[0] has
// no '/' (the shell found it through PATH: argv alone does not say where). Pure.
std::string AbsoluteArgv0(std::string_view argv0, std::string_view cwd);
// The path a re-exec executes, read at the first start: AbsoluteArgv0 of this process when it
// names the same file as /proc/self/exe (same device and inode), so that an upgrade repointing a
// symlink on that path (/opt/bulkhead/current -> v2) is followed; else OwnBinaryPath() (argv[0]
// not a path, or a file replaced since). Errors: OwnBinaryPath's.
Result<std::string> StartedAsPath();

// This process's command line (/proc/self/cmdline) without the flags an earlier re-exec added
// (kStateFlag, kFallbackExeFlag, kFellBackFlag and their values). Errors: reading the file.
Result<std::vector<std::string>> OwnArguments();

// `binary --reexec-state-versions` started (stdin /dev/null, stdout a pipe, stderr inherited, no
// signal blocked, every signal at its default): its pid and the pipe's read end (O_NONBLOCK).
// ReexecCheck reads it on the loop; the caller's reaper reaps the child. Errors: the spawn's
// ("exec /usr/sbin/bulkheadd: No such file or directory"), pipe2's, fcntl's.
struct VersionsChild {
  pid_t pid = 0;
  UniqueFd stdout_read;
};
Result<VersionsChild> SpawnVersionsChild(const std::string& binary);
// Whether a binary that printed `output` and ended with `wait_status` (waitpid's) reads
// `version`. Errors, one line naming the binary: killed by a signal, exit non-zero (a binary too
// old to know the flag: CLI11 exits 2), no version printed, or not ours ("reads 2 3, this
// bulkheadd writes 1").
Status JudgeStateVersions(const std::string& binary, int version, std::string_view output,
                          int wait_status);

// The command-line flags a re-exec adds (argv, not the environment: workers inherit bulkheadd's
// environment and must not see them), each followed by its value:
// "--reexec-state FD": the state's memfd;
inline constexpr std::string_view kStateFlag = "--reexec-state";
// "--reexec-fallback-exe FD": the previous image's binary (OpenOwnBinary), for failure 5. On the
// command line, not in the state, since it must be found when the state cannot be read.
inline constexpr std::string_view kFallbackExeFlag = "--reexec-fallback-exe";
// "--reexec-fell-back WHY": this image is the previous binary run again by a new image that
// could not take the state over (failure 5), WHY being what that image said. It has no fallback:
// a second failure exits.
inline constexpr std::string_view kFellBackFlag = "--reexec-fell-back";

// The binary this process runs, opened O_PATH | O_CLOEXEC through /proc/self/exe: the running
// file even once an upgrade replaced it on disk (execveat runs it by this fd). Errors: open's.
Result<UniqueFd> OpenOwnBinary();

// Execs `binary` with `arguments` (argv[0] first) plus "--reexec-state STATE_FD" and, when
// `fallback_exe_fd` >= 0, "--reexec-fallback-exe FALLBACK_EXE_FD", keeping those fds and every fd
// of `keep` open across it (FD_CLOEXEC cleared) with the signals bulkheadd handles blocked, so
// that none arrives between the exec and the new image's handlers (the signal mask survives
// execve; the new image unblocks them: UnblockReexecSignals). Returns only on failure, after
// putting FD_CLOEXEC and the signal mask back as they were: execve's errno ("execve
// /usr/sbin/bulkheadd: Exec format error"), or fcntl's.
Status ExecWithState(const std::string& binary, const std::vector<std::string>& arguments,
                     int state_fd, const std::vector<int>& keep, int fallback_exe_fd = -1);

// Failure 5 of docs/reexec.md, in a new image that cannot take the state over: execs the previous
// image's binary by `exe_fd` (execveat AT_EMPTY_PATH) with `arguments` plus "--reexec-state
// STATE_FD --reexec-fell-back WHY", keeping `state_fd` and `keep` open as ExecWithState does.
// `exe_fd` itself is not kept. Returns only on failure: execveat's errno, or fcntl's.
Status ExecFallback(int exe_fd, const std::vector<std::string>& arguments, int state_fd,
                    const std::vector<int>& keep, const std::string& why);

// What a new image keeps until it has taken the state over, to run the previous binary again if
// it cannot (failure 5): the state's memfd and the previous binary (kFallbackExeFlag; not open
// in an image that is itself the fallback).
struct ReexecFallback {
  UniqueFd state;
  UniqueFd exe;
};
// Logs `why` at error and, when `fallback.exe` is open, execs it (ExecFallback) with this
// process's arguments (OwnArguments), the same state and `keep` (the fds the state names that
// this image set FD_CLOEXEC on again). Returns when it cannot, after logging why: the caller
// exits.
void ReexecFallBack(ReexecFallback fallback, const std::vector<int>& keep, const std::string& why);

// The signals ExecWithState blocks; the new image unblocks them once its handlers are installed,
// and a signal that came meanwhile is delivered then.
void UnblockReexecSignals();

// Takes back an fd named in the state: it must be a listening socket of the kind and address the
// state says (`address`: a path for a Unix socket, "HOST:PORT" or "[V6]:PORT" for TCP, compared
// with SocketAddress). FD_CLOEXEC is set again. Errors say what it is instead ("fd 7: not a
// socket", "fd 7: not listening", "fd 7: bound to /x, not /y"). `also`, when not empty, is a
// second address accepted: a worker socket a swap bound at its next path and renamed into place
// (lifecycle::NextSocketPath), whose getsockname still names the path it was bound at.
Result<UniqueFd> TakeListeningFd(int fd, const std::string& address,
                                 const std::string& also = "");
// What getsockname says of `fd`, spelled as the state keeps it: a Unix socket's path, or a TCP
// socket's "127.0.0.1:8080" / "[::1]:8080" (config::ListenAddress::ToString). Errors:
// getsockname's, or another family.
Result<std::string> SocketAddress(int fd);

// Sets FD_CLOEXEC on `fd` again (a pipe taken back from the state). Errors: fcntl's.
Status SetCloexec(int fd);

}  // namespace bulkhead::supervisor
