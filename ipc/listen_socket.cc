// SPDX-License-Identifier: MIT
#include "ipc/listen_socket.h"

#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "base/log.h"

namespace bulkhead::ipc {

namespace {

bool FillAddress(const std::string& path, sockaddr_un* addr) {
  if (path.empty() || path.size() >= sizeof addr->sun_path) return false;
  std::memset(addr, 0, sizeof *addr);
  addr->sun_family = AF_UNIX;
  std::memcpy(addr->sun_path, path.c_str(), path.size() + 1);
  return true;
}

// Who holds the socket file at `addr`.
enum class Holder {
  kNone,     // no one: connect(2) is refused (ECONNREFUSED), the file is stale
  kOrphans,  // a stream socket whose listen(2) caller is dead, kept open by its descendants
  kLive      // a live process
};

// Probes `addr` with a connect(2) of `type`. Accepted (or a full backlog: EAGAIN), or a socket of
// another type there (EPROTOTYPE): someone holds it. For an accepted stream connection,
// SO_PEERCRED names the process that called listen(2); when that process is gone, what keeps the
// socket open are processes it started that inherited it (a worker's fd 3 in a helper that escaped
// PR_SET_PDEATHSIG): kOrphans.
Result<Holder> HolderOf(const sockaddr_un& addr, int type) {
  UniqueFd probe(::socket(AF_UNIX, type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!probe) return Status::FromErrno("socket");
  if (::connect(probe.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0) {
    if (type != SOCK_STREAM) return Holder::kLive;
    ucred peer{};
    socklen_t size = sizeof peer;
    if (::getsockopt(probe.get(), SOL_SOCKET, SO_PEERCRED, &peer, &size) == 0 && peer.pid > 0 &&
        ::kill(peer.pid, 0) != 0 && errno == ESRCH) {
      return Holder::kOrphans;
    }
    return Holder::kLive;
  }
  if (errno == EAGAIN || errno == EPROTOTYPE) return Holder::kLive;
  if (errno == ECONNREFUSED || errno == ENOENT) return Holder::kNone;
  return Status::FromErrno(std::string("connect ") + addr.sun_path +
                           " (to tell whether it is in use)");
}

}  // namespace

Status ApplySocketAccess(int fd, const std::string& path, const SocketAccess& access,
                         BindPhase phase) {
  if (phase == BindPhase::kBeforeBind) {
    if (::fchmod(fd, access.mode) != 0) return Status::FromErrno("fchmod socket for " + path);
    return Status::Ok();
  }
  if (::chmod(path.c_str(), access.mode) != 0) return Status::FromErrno("chmod " + path);
  if (access.owner || access.group) {
    uid_t owner = access.owner.value_or(static_cast<uid_t>(-1));
    gid_t group = access.group.value_or(static_cast<gid_t>(-1));
    if (::lchown(path.c_str(), owner, group) != 0) {
      std::string to = access.owner ? "user " + std::to_string(*access.owner) : "";
      if (access.group)
        to += (to.empty() ? "group " : " and group ") + std::to_string(*access.group);
      return Status::FromErrno("chown " + path + " to " + to);
    }
  }
  return Status::Ok();
}

SocketFile::SocketFile(SocketFile&& other) noexcept
    : path_(std::move(other.path_)),
      dev_(other.dev_),
      ino_(other.ino_),
      recorded_(std::exchange(other.recorded_, false)) {}

SocketFile& SocketFile::operator=(SocketFile&& other) noexcept {
  if (this != &other) {
    path_ = std::move(other.path_);
    dev_ = other.dev_;
    ino_ = other.ino_;
    recorded_ = std::exchange(other.recorded_, false);
  }
  return *this;
}

Result<SocketFile> SocketFile::Record(const std::string& path) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) return Status::FromErrno("stat " + path);
  SocketFile file;
  file.path_ = path;
  file.dev_ = st.st_dev;
  file.ino_ = st.st_ino;
  file.recorded_ = true;
  return file;
}

bool SocketFile::Remove() {
  if (!std::exchange(recorded_, false)) return false;
  struct stat st;
  if (::lstat(path_.c_str(), &st) != 0) return false;
  if (st.st_dev != dev_ || st.st_ino != ino_) {
    Log(LogLevel::kWarning, {}, 0,
        "not removing " + path_ + ": another process has bound a new socket file there");
    return false;
  }
  return ::unlink(path_.c_str()) == 0;
}

Result<SocketFile> BindSocketFile(int fd, const std::string& path,
                                  const std::optional<SocketAccess>& access) {
  sockaddr_un addr;
  if (!FillAddress(path, &addr)) {
    return Status::Error("socket path " + path + " is empty or longer than " +
                         std::to_string(sizeof addr.sun_path - 1) + " bytes");
  }
  int type = 0;
  socklen_t type_size = sizeof type;
  if (::getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &type_size) != 0) {
    return Status::FromErrno("getsockopt SO_TYPE for " + path);
  }
  struct stat st;
  if (::lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) return Status::Error(path + " exists and is not a socket");
    Result<Holder> holder = HolderOf(addr, type);
    if (!holder.ok()) return holder.status();
    if (*holder == Holder::kLive) {
      return Status::Error("socket " + path +
                           " is in use by another process (is another bulkheadd running?)");
    }
    if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
      return Status::FromErrno("remove stale socket " + path);
    }
    Log(LogLevel::kInfo, {}, 0,
        "reclaimed stale socket " + path +
            (*holder == Holder::kOrphans
                 ? " (its listener is dead; processes it started still hold it open)"
                 : ""));
  } else if (errno != ENOENT) {
    return Status::FromErrno("stat " + path);
  }
  if (access) {
    Status before = ApplySocketAccess(fd, path, *access, BindPhase::kBeforeBind);
    if (!before.ok()) return before;
  }
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    return Status::FromErrno("bind " + path);
  }
  Result<SocketFile> file = SocketFile::Record(path);
  if (!file.ok()) return file.status();
  if (access) {
    Status after = ApplySocketAccess(fd, path, *access, BindPhase::kAfterBind);
    if (!after.ok()) {
      file->Remove();
      return after;
    }
  }
  return file;
}

Result<ListeningSocket> ClaimListeningSocket(const std::string& path, int backlog,
                                             Blocking blocking,
                                             const std::optional<SocketAccess>& access) {
  int type = SOCK_STREAM | SOCK_CLOEXEC | (blocking == Blocking::kNonBlocking ? SOCK_NONBLOCK : 0);
  ListeningSocket socket;
  socket.fd.Reset(::socket(AF_UNIX, type, 0));
  if (!socket.fd) return Status::FromErrno("socket");
  Result<SocketFile> file = BindSocketFile(socket.fd.get(), path, access);
  if (!file.ok()) return file.status();
  socket.file = std::move(file).value();
  if (::listen(socket.fd.get(), backlog) != 0) {
    Status error = Status::FromErrno("listen " + path);
    socket.file.Remove();
    return error;
  }
  return socket;
}

Status MakeDirectories(const std::string& path, unsigned mode) {
  if (path.empty()) return Status::Error("empty directory path");
  std::string partial;
  size_t pos = 0;
  while (pos != std::string::npos) {
    pos = path.find('/', pos + 1);
    partial = path.substr(0, pos);
    if (partial.empty()) continue;
    if (::mkdir(partial.c_str(), mode) == 0) {
      // mkdir(2) applies the umask: a directory made here gets `mode` exactly, whatever umask
      // bulkheadd was started with (a 0700 runtime_dir would lock cell users out of it).
      if (::chmod(partial.c_str(), mode) != 0) return Status::FromErrno("chmod " + partial);
    } else if (errno != EEXIST) {
      return Status::FromErrno("mkdir " + partial);
    }
  }
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return Status::FromErrno("stat " + path);
  if (!S_ISDIR(st.st_mode)) return Status::Error(path + " exists and is not a directory");
  return Status::Ok();
}

}  // namespace bulkhead::ipc
