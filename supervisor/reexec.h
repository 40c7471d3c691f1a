// SPDX-License-Identifier: MIT
// Re-executing bulkheadd in place (docs/reexec.md): its phases, and the process-level steps the
// Supervisor takes through them: find its own binary as it is on disk now, ask it which state
// versions it reads, exec it with the state and the descriptors to keep, and, in the new image,
// take those descriptors back. Blocking calls, each bounded; on the loop thread of bulkheadd.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/unique_fd.h"

namespace bulkhead::supervisor {

// Where a re-exec stands in the image that was asked for it. (Checking the new binary runs inside
// the request, before kDraining; adopting runs in the new image, before its loop: neither is a
// phase the loop ever sees.)
enum class ReexecPhase : uint8_t {
  // No re-exec under way: every cell accepts and admits as usual.
  kIdle,
  // The new binary was found and reads our state version. Accept is paused on every front socket
  // (new connections wait in the kernel backlog, their listening fds kept open); connections
  // already open are served; the re-exec waits until no request is in flight (running, queued or
  // an answer unsent), or until the drain deadline, the longest stop_timeout from its start.
  kDraining,
  // Nothing is in flight, or the deadline passed and what was left was answered as on shutdown.
  // The state is in a memfd and execve runs; a return from it is a failure that puts the cells
  // back to kIdle as they were (accept resumed), logged and kept for status.
  kExecuting,
};
// "idle", "draining", "executing": as status shows it.
const char* ReexecPhaseName(ReexecPhase phase);

// The file /proc/self/exe names now, without the " (deleted)" the kernel appends once a package
// upgrade replaced it: the binary on disk, the new one after an upgrade. Errors: readlink's.
Result<std::string> OwnBinaryPath();

// This process's command line (/proc/self/cmdline) without any "--reexec-state FD" of an earlier
// re-exec. Errors: reading the file.
Result<std::vector<std::string>> OwnArguments();

// Runs `binary --reexec-state-versions` (stdin /dev/null, stdout a pipe, stderr inherited) and
// checks that `version` is among the versions it prints. Waits at most `timeout_ms` for it to
// exit (then SIGKILLs and reaps it). Errors, one line naming the binary: it cannot be started
// ("exec /usr/sbin/bulkheadd: No such file or directory"), it exits non-zero (a binary too old
// to know the flag: CLI11 exits 2), it prints no version, or not ours ("reads 2 3, this bulkheadd
// writes 1"), or it times out.
Status CheckStateVersions(const std::string& binary, int version, uint64_t timeout_ms);

// Execs `binary` with `arguments` (argv[0] first) plus "--reexec-state STATE_FD", keeping
// `state_fd` and every fd of `keep` open across it (FD_CLOEXEC cleared) with the signals bulkheadd
// handles blocked, so that none arrives between the exec and the new image's handlers (the signal
// mask survives execve; the new image unblocks them: UnblockReexecSignals). Returns only on
// failure, after putting FD_CLOEXEC and the signal mask back as they were: execve's errno
// ("execve /usr/sbin/bulkheadd: Exec format error"), or fcntl's.
Status ExecWithState(const std::string& binary, const std::vector<std::string>& arguments,
                     int state_fd, const std::vector<int>& keep);

// The signals ExecWithState blocks; the new image unblocks them once its handlers are installed,
// and a signal that came meanwhile is delivered then.
void UnblockReexecSignals();

// Takes back an fd named in the state: it must be a listening socket of the kind and address the
// state says (`address`: a path for a Unix socket, "HOST:PORT" or "[V6]:PORT" for TCP, compared
// with SocketAddress). FD_CLOEXEC is set again. Errors say what it is instead ("fd 7: not a
// socket", "fd 7: not listening", "fd 7: bound to /x, not /y").
Result<UniqueFd> TakeListeningFd(int fd, const std::string& address);
// What getsockname says of `fd`, spelled as the state keeps it: a Unix socket's path, or a TCP
// socket's "127.0.0.1:8080" / "[::1]:8080" (config::ListenAddress::ToString). Errors:
// getsockname's, or another family.
Result<std::string> SocketAddress(int fd);

// Sets FD_CLOEXEC on `fd` again (a pipe taken back from the state). Errors: fcntl's.
Status SetCloexec(int fd);

}  // namespace bulkhead::supervisor
