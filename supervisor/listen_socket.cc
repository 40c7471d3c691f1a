// SPDX-License-Identifier: MIT
#include "supervisor/listen_socket.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "base/log.h"

namespace bulkhead::supervisor {

namespace {

bool FillAddress(const std::string& path, sockaddr_un* addr) {
  if (path.empty() || path.size() >= sizeof addr->sun_path) return false;
  std::memset(addr, 0, sizeof *addr);
  addr->sun_family = AF_UNIX;
  std::memcpy(addr->sun_path, path.c_str(), path.size() + 1);
  return true;
}

// True when something accepts connections on `path` now.
bool SomeoneListens(const sockaddr_un& addr) {
  UniqueFd probe(::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!probe) return false;
  int rc = ::connect(probe.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr);
  // EAGAIN: a live listener whose backlog is full.
  return rc == 0 || errno == EAGAIN;
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

Result<UniqueFd> ClaimListeningSocket(const std::string& path, int backlog, StaleCheck check,
                                      Blocking blocking,
                                      const std::optional<SocketAccess>& access) {
  sockaddr_un addr;
  if (!FillAddress(path, &addr)) {
    return Status::Error("socket path " + path + " is empty or longer than " +
                         std::to_string(sizeof addr.sun_path - 1) + " bytes");
  }
  struct stat st;
  if (::lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) return Status::Error(path + " exists and is not a socket");
    if (check == StaleCheck::kRefuseLive && SomeoneListens(addr)) {
      return Status::Error("socket " + path +
                           " is in use by another process (is another bulkheadd running?)");
    }
    if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
      return Status::FromErrno("remove stale socket " + path);
    }
    Log(LogLevel::kInfo, {}, 0, "reclaimed stale socket " + path);
  } else if (errno != ENOENT) {
    return Status::FromErrno("stat " + path);
  }
  int type = SOCK_STREAM | SOCK_CLOEXEC | (blocking == Blocking::kNonBlocking ? SOCK_NONBLOCK : 0);
  UniqueFd fd(::socket(AF_UNIX, type, 0));
  if (!fd) return Status::FromErrno("socket");
  if (access) {
    Status before = ApplySocketAccess(fd.get(), path, *access, BindPhase::kBeforeBind);
    if (!before.ok()) return before;
  }
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    return Status::FromErrno("bind " + path);
  }
  if (access) {
    Status after = ApplySocketAccess(fd.get(), path, *access, BindPhase::kAfterBind);
    if (!after.ok()) {
      ::unlink(path.c_str());
      return after;
    }
  }
  if (::listen(fd.get(), backlog) != 0) return Status::FromErrno("listen " + path);
  return fd;
}

Status MakeDirectories(const std::string& path, unsigned mode) {
  if (path.empty()) return Status::Error("empty directory path");
  std::string partial;
  size_t pos = 0;
  while (pos != std::string::npos) {
    pos = path.find('/', pos + 1);
    partial = path.substr(0, pos);
    if (partial.empty()) continue;
    if (::mkdir(partial.c_str(), mode) != 0 && errno != EEXIST) {
      return Status::FromErrno("mkdir " + partial);
    }
  }
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return Status::FromErrno("stat " + path);
  if (!S_ISDIR(st.st_mode)) return Status::Error(path + " exists and is not a directory");
  return Status::Ok();
}

}  // namespace bulkhead::supervisor
