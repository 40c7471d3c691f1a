// SPDX-License-Identifier: MIT
// HandleGroup: the libuv handles of one owner, and the rule libuv sets for them
// (docs/src/handle.rst, uv_close): a handle's memory must stay valid until its close callback has
// run. The group owns that memory: Open allocates and initialises a member, Close(member) or
// Close(on_closed) closes it, and its close callback frees it. The owner's on_closed runs once
// every member's close callback has run, and every part's (Part: an object of the owner's with a
// Close of its own), so an owner that waits for on_closed before it goes leaves no handle behind;
// the destructor checks that it did (BH_CHECK), as uv_loop_close refuses a loop with handles left.
//
// Each member is open (initialised, usable) or closing (uv_close called, its close callback not yet
// run); once the callback ran it is freed. The group itself is open, closing (Close(on_closed)
// called, members or parts pending) or closed (on_closed ran). These are libuv's
// UV_HANDLE_CLOSING and UV_HANDLE_CLOSED (src/uv-common.h), kept and asserted in one place rather
// than in a counter per class. A member's `data` is the owner's. REQUIRES: loop thread only.
#pragma once

#include <uv.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <utility>

#include "base/check.h"
#include "base/status.h"

namespace bulkhead::loop {

class HandleGroup {
 public:
  HandleGroup() = default;
  // REQUIRES: no member and no part pending: never opened, or closed (checked).
  ~HandleGroup();
  HandleGroup(const HandleGroup&) = delete;
  HandleGroup& operator=(const HandleGroup&) = delete;

  // A new member: memory the group owns (zeroed), initialised by `init(loop, handle, args...)`, as
  // TryOpen(uv_poll_init, loop, fd). When `init` fails, nothing was registered with the loop and
  // nothing is left to close: the error is libuv's message ("bad file descriptor"). REQUIRES: the
  // group open.
  template <typename T, typename... Params, typename... Args>
  Result<T*> TryOpen(int (*init)(uv_loop_t*, T*, Params...), uv_loop_t* loop, Args&&... args) {
    Member* member = Allocate();
    T* handle = reinterpret_cast<T*>(&member->handle);
    if (int rc = init(loop, handle, std::forward<Args>(args)...); rc != 0) {
      Free(member);
      return Status::Error(uv_strerror(rc));
    }
    Link(member);
    return handle;
  }
  // TryOpen for the inits that cannot fail (uv_timer_init, uv_check_init, uv_idle_init,
  // uv_prepare_init, uv_fs_event_init, uv_tcp_init, uv_pipe_init without IPC): a failure is a
  // broken invariant (checked). Open(uv_timer_init, loop), Open(uv_pipe_init, loop, 0).
  template <typename T, typename... Params, typename... Args>
  T* Open(int (*init)(uv_loop_t*, T*, Params...), uv_loop_t* loop, Args&&... args) {
    Result<T*> opened = TryOpen(init, loop, std::forward<Args>(args)...);
    BH_CHECK(opened.ok());
    return *opened;
  }

  // Closes one open member now (uv_close); its memory is freed by its close callback. Callbacks of
  // its requests still pending run before that, with UV_ECANCELED (libuv). REQUIRES: `handle` is
  // an open member of this group (checked).
  template <typename T>
  void Close(T* handle) {
    CloseMember(reinterpret_cast<uv_handle_t*>(handle));
  }

  // An object of the owner's that closes by its own Close(on_closed) (another owner of handles):
  // give it the returned callback, and the group's on_closed waits for it to run, once (checked).
  // Taken before Close(on_closed) (the part's own Close may call it at once), or while the group
  // is open or closing. REQUIRES: not closed.
  std::function<void()> Part();

  // Closes every member still open; `on_closed` (may be null) runs from the last close callback
  // of a member or call of a part, or at once when none is pending. REQUIRES: called once.
  void Close(std::function<void()> on_closed);

  // Close(on_closed) was called (the group is closing or closed).
  bool closing() const { return state_ != State::kOpen; }
  // on_closed ran: no member and no part is left.
  bool closed() const { return state_ == State::kClosed; }
  // Members open or closing, and parts not done yet.
  size_t pending() const { return members_ + parts_; }

 private:
  enum class State : uint8_t {
    kOpen,     // members may be opened and closed, parts taken
    kClosing,  // every member was closed; on_closed_ waits for pending() to reach 0
    kClosed,   // on_closed_ ran; pending() is 0 for good
  };
  enum class MemberState : uint8_t {
    kOpen,     // initialised by Open; may be used and closed
    kClosing,  // uv_close was called; its close callback frees it
  };
  struct Member {
    // First: the uv_handle_t* of a member is the address of its Member (close callback).
    union uv_any_handle handle;
    HandleGroup* group = nullptr;
    MemberState state = MemberState::kOpen;
    Member* prev = nullptr;  // the group's members, open or closing
    Member* next = nullptr;
  };

  static Member* Allocate();
  static void Free(Member* member);
  void Link(Member* member);
  void CloseMember(uv_handle_t* handle);
  static void OnMemberClosed(uv_handle_t* handle);
  // A member's close callback ran, or a part called back: runs on_closed_ after the last.
  void Done();

  State state_ = State::kOpen;
  Member* first_ = nullptr;
  size_t members_ = 0;
  size_t parts_ = 0;
  std::function<void()> on_closed_;
};

}  // namespace bulkhead::loop
