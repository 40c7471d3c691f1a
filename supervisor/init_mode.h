// SPDX-License-Identifier: MIT
// Init mode: what bulkheadd does differently as PID 1 of a machine, VM or container (docs/pid1.md),
// and as a child subreaper elsewhere. Called from main() before and after Supervisor::Run, on the
// main thread, before the loop starts or after it ended; nothing here runs on the loop.
#pragma once

#include <sys/types.h>

#include <string>
#include <string_view>
#include <vector>

#include "base/log.h"
#include "base/status.h"
#include "config/config.h"

namespace bulkhead::supervisor {

// What init mode reads of one line of /proc/<pid>/mountinfo (proc(5)):
//   36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue
// field 5 is the mount point, the field after the "-" separator the file system type, the next one
// the source. Octal escapes of the mount point ("\040" for a space) are decoded.
struct MountInfoEntry {
  std::string mount_point;
  std::string fs_type;
  std::string source;
};

// Parses mountinfo text, one entry per well-formed line, in order (later entries are mounted on
// top of earlier ones at the same point). Malformed lines are skipped.
std::vector<MountInfoEntry> ParseMountInfo(std::string_view text);

// A file system PID 1 needs (mount(2) arguments).
struct EssentialMount {
  std::string_view target;  // absolute; created (0755) when missing
  std::string_view fs_type;
  std::string_view source;
  unsigned long flags;    // MS_* flags
  std::string_view data;  // file-system options; retried without them on EINVAL
};

// In mount order: /proc (proc), /dev (devtmpfs), /sys (sysfs), /sys/fs/cgroup (cgroup2, with
// nsdelegate, as systemd mounts it; Documentation/admin-guide/cgroup-v2.rst "Delegation") and /run
// (tmpfs, mode 0755).
const std::vector<EssentialMount>& EssentialMounts();

enum class MountDecision {
  kMount,           // nothing is mounted at the target: mount it
  kPresent,         // the same file system type is mounted there already
  kPresentAsOther,  // another type is mounted there (e.g. a cgroup v1 tmpfs): never mounted over
  kLeftToRuntime,   // nothing there, but in a container: what is mounted is the runtime's choice
};

struct MountStep {
  const EssentialMount* mount = nullptr;  // into EssentialMounts()
  MountDecision decision = MountDecision::kMount;
  std::string present_type;  // the type found at the target, for kPresent / kPresentAsOther
};

// One step per EssentialMounts() entry, in order, decided from what `mounted` (ParseMountInfo of
// /proc/self/mountinfo) shows at each target: the topmost mount there wins. In a container
// (`in_container`), a missing mount is kLeftToRuntime: the runtime mounts what it grants, and
// without CAP_SYS_ADMIN every mount(2) would fail.
std::vector<MountStep> PlanMounts(const std::vector<MountInfoEntry>& mounted,
                                  bool in_container = false);

// One line for the log, collected while stderr may not be open yet.
struct InitLogLine {
  LogLevel level;
  std::string message;
};

// As PID 1, before anything else: mounts /proc when /proc/self/mountinfo cannot be read, then
// every other essential mount PlanMounts says is missing; points whichever of descriptors 0, 1 and
// 2 are closed (the kernel starts init without them when the initramfs has no /dev/console) at
// /dev/console; and asks the kernel for SIGINT on ctrl-alt-del instead of an immediate reboot
// (reboot(2) RB_DISABLE_CAD). Never fails: each failure is one error line in the result (the
// cgroup2 mount's failure then surfaces again from `cgroup = "required"`), each mount done one info
// line. The caller logs the lines once stderr is usable, i.e. after this returns.
// In a container (`container` names the runtime, supervisor/container.h): nothing is mounted
// (PlanMounts), a file system of another type than a machine's (a tmpfs /dev) is an info line,
// not a warning, and ctrl-alt-del is left alone (it belongs to the host).
std::vector<InitLogLine> SetUpInit(std::string_view container = {});

// When not PID 1: prctl(2) PR_SET_CHILD_SUBREAPER, so that a process a cell's worker double-forks
// is reparented to bulkheadd (not to PID 1) when its parent exits, and reaped by it. Errors:
// the prctl errno.
Status BecomeChildSubreaper();

// How long EndProcess waits, as PID 1 before poweroff/reboot, for processes still running after
// every cell stopped (strays that left their cell) to exit after SIGTERM, before SIGKILL.
inline constexpr int kStrayTermGraceMs = 2000;

// What happens once Supervisor::Run returned `exit_code`, per `[supervisor] on_shutdown`:
// - kExit, or not PID 1: returns exit_code (a warning is logged when poweroff/reboot is asked for
//   without being PID 1). As PID 1 of a container that ends the container; as PID 1 of a machine
//   the kernel panics ("Attempted to kill init"): use "poweroff" there.
// - kPoweroff / kReboot as PID 1: SIGTERM to every other process (kill(-1)), reaps them for up to
//   kStrayTermGraceMs, SIGKILL to what is left and reaps it, sync(2), then reboot(2) with
//   RB_POWER_OFF / RB_AUTOBOOT, which does not return. In a PID namespace other than the initial
//   one the kernel ends the namespace instead (its init appears killed by SIGINT / SIGHUP to the
//   parent). If reboot fails (EPERM without CAP_SYS_BOOT), the error is logged and exit_code is
//   returned.
int EndProcess(config::ShutdownAction action, int exit_code, bool pid1);

// How a bulkheadd ends that cannot take a re-exec's state over and has no previous binary left to
// run (failure 5 of docs/reexec.md, the fallback image failing too; its workers are lost): as
// `on_shutdown` says, except that PID 1 of a machine (not `in_container`) never exits: the kernel
// would panic ("Attempted to kill init") and stay there, so kExit becomes kReboot, which starts
// every cell afresh. PID 1 of a container exits (that ends the container: its runtime decides
// what follows), as a bulkheadd that is not PID 1 does. Pure.
config::ShutdownAction TakeoverFailedAction(config::ShutdownAction on_shutdown, bool pid1,
                                            bool in_container);

}  // namespace bulkhead::supervisor
