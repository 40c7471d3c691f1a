// SPDX-License-Identifier: MIT
// Unix socket files of the supervisor: claims a path (reclaiming a stale socket file left by a
// killed run, refusing one that a live process still serves), binds it with an exact mode and
// owner, and remembers the inode it bound so that it never removes another process's file.
// Blocking calls, but each returns at once on a Unix socket: used at startup on the loop thread.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>

#include "base/status.h"
#include "base/unique_fd.h"

namespace bulkhead::ipc {

enum class Blocking {
  kNonBlocking,  // for the supervisor's own libuv listeners
  kBlocking      // for a socket handed to a worker, which may accept() in blocking mode
};

// Who may use a socket file: connect(2) and sendto(2) on a Unix socket need write permission on
// it (unix(7)), and search permission on every directory of its path.
struct SocketAccess {
  // Permission bits of the socket file, exactly (the process umask does not apply).
  unsigned mode = 0660;
  // The file's owner and group; unset = the creating process's fsuid / fsgid.
  std::optional<uid_t> owner;
  std::optional<gid_t> group;
};

// Makes the socket file of `fd` (bound or about to be) carry `access`: the mode is set on the
// socket inode before bind(2), which Linux copies (minus the umask) to the file, so the file is
// never wider than `access.mode`; after bind, chmod(2) and chown(2) on `path` make it exact.
// REQUIRES: kBeforeBind with an unbound `fd`, then kAfterBind once bind(2) succeeded. Errors name
// the path: "chown /run/bulkhead/a.sock to group 4: Operation not permitted".
enum class BindPhase { kBeforeBind, kAfterBind };
Status ApplySocketAccess(int fd, const std::string& path, const SocketAccess& access,
                         BindPhase phase);

// A socket file this process created with bind(2), known by the inode (st_dev, st_ino) the path
// named right after the bind. Remove() unlinks the path only while it still names that inode: a
// file that another instance has bound at the same path since ours was removed behind our back is
// left alone. The inode number cannot have been reused by then as long as the bound socket is
// still open: a bound Unix socket holds a reference to its file (unix(7)), so call Remove before
// closing it. (A replacement between the lstat(2) and the unlink(2) of Remove cannot be told
// apart; that window is one system call wide.) Move-only; the destructor does not unlink.
class SocketFile {
 public:
  SocketFile() = default;
  SocketFile(SocketFile&& other) noexcept;
  SocketFile& operator=(SocketFile&& other) noexcept;
  SocketFile(const SocketFile&) = delete;
  SocketFile& operator=(const SocketFile&) = delete;

  // Records the inode `path` names now. REQUIRES: called right after this process bound it.
  static Result<SocketFile> Record(const std::string& path);

  // Unlinks the path if it still names the recorded inode, then forgets it. True when it removed
  // the file; false when nothing was recorded, the file is gone, or it is another inode now.
  bool Remove();

  bool recorded() const { return recorded_; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  dev_t dev_ = 0;
  ino_t ino_ = 0;
  bool recorded_ = false;
};

// Claims `path` for `fd`, an unbound AF_UNIX socket of any type (SOCK_STREAM listeners,
// SOCK_DGRAM notify sockets), and binds it there. The claim, the same for every socket:
//   - nothing at `path`: bound;
//   - a socket file that accepts a connect(2) of `fd`'s type, or that is a socket of another
//     type, belongs to a live process: refused, "socket /run/x.sock is in use by another process
//     (is another bulkheadd running?)";
//   - a socket file that refuses it (ECONNREFUSED) is stale, left by a killed run: removed
//     (logged "reclaimed stale socket /run/x.sock"), then bound;
//   - a stream socket that accepts it but whose listen(2) caller (SO_PEERCRED) is dead is stale
//     too: only processes that inherited it from a killed run (a worker's helper holding fd 3)
//     keep it open; removed and bound likewise;
//   - anything else: refused ("/run/x.sock exists and is not a socket").
// With `access`, the file gets that mode and owner before it is returned (ApplySocketAccess), so
// no one outside them can ever use it; without, the mode follows the process umask. On an error
// after bind(2) the file is removed again.
Result<SocketFile> BindSocketFile(int fd, const std::string& path,
                                  const std::optional<SocketAccess>& access);

struct ListeningSocket {
  UniqueFd fd;
  SocketFile file;
};

// A listening SOCK_STREAM socket bound to `path` by BindSocketFile (SOCK_CLOEXEC, and
// SOCK_NONBLOCK unless kBlocking), with `backlog`. Errors name the path: "bind /run/x.sock:
// Permission denied".
Result<ListeningSocket> ClaimListeningSocket(
    const std::string& path, int backlog, Blocking blocking = Blocking::kNonBlocking,
    const std::optional<SocketAccess>& access = std::nullopt);

// Creates `path` and its missing parents with `mode` (like mkdir -p), whatever the umask; existing
// directories keep their mode. Error names the directory.
Status MakeDirectories(const std::string& path, unsigned mode);

}  // namespace bulkhead::ipc
