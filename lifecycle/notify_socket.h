// SPDX-License-Identifier: MIT
// NotifySocket: a cell's $NOTIFY_SOCKET, the datagram socket on which its worker reports READY=1,
// WATCHDOG=1 and STATUS= (sd_notify(3)). Each datagram is delivered with the sender's pid, taken
// from the kernel (SCM_CREDENTIALS, SO_PASSCRED), never from the message: the WorkerRunner decides
// whether that pid may speak for the cell. REQUIRES: loop thread only.
#pragma once

#include <sys/types.h>
#include <uv.h>

#include <functional>
#include <string>

#include "base/status.h"
#include "base/unique_fd.h"
#include "cell/notify_message.h"
#include "ipc/listen_socket.h"
#include "loop/handle_group.h"

namespace bulkhead::lifecycle {

class NotifySocket {
 public:
  // `on_message(sender_pid, message)` for every well-formed datagram.
  using Handler = std::function<void(pid_t, const cell::NotifyMessage&)>;

  NotifySocket(uv_loop_t* loop, Handler handler);
  NotifySocket(const NotifySocket&) = delete;
  NotifySocket& operator=(const NotifySocket&) = delete;

  // Claims and binds `path` (BindSocketFile: a live socket there is refused, a stale one replaced)
  // and starts reading. With `access`, the file gets that mode and owner before the first datagram
  // can arrive (ApplySocketAccess): the worker must be able to write to it when it runs as another
  // user, and no one else should.
  Status Bind(const std::string& path,
              const std::optional<ipc::SocketAccess>& access = std::nullopt);
  const std::string& path() const { return path_; }
  // A re-exec (docs/reexec.md): the bound socket's fd (owned here; -1 before Bind), and, in the
  // new image instead of Bind, the same socket taken back, bound at `path` (whose file Close
  // removes). Errors: uv_poll_init's.
  int fd() const { return fd_.get(); }
  Status Adopt(UniqueFd fd, const std::string& path);

  // Closes the poll handle; `on_closed` runs from its close callback (at once when never bound).
  // The file is unlinked if it is still the one Bind created (SocketFile::Remove).
  void Close(std::function<void()> on_closed);
  bool bound() const { return fd_.valid(); }

 private:
  static void OnReadable(uv_poll_t* handle, int status, int events);
  // Reads datagrams from `fd`, bound at `path` as `file` records.
  Status Serve(UniqueFd fd, const std::string& path, ipc::SocketFile file);

  uv_loop_t* loop_;
  Handler handler_;
  std::string path_;
  ipc::SocketFile file_;
  UniqueFd fd_;
  loop::HandleGroup handles_;
  uv_poll_t* poll_ = nullptr;  // once bound
};

}  // namespace bulkhead::lifecycle
