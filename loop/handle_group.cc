// SPDX-License-Identifier: MIT
#include "loop/handle_group.h"

#include <cstddef>
#include <memory>
#include <type_traits>

#include "base/check.h"

namespace bulkhead::loop {

static_assert(std::is_standard_layout_v<union uv_any_handle>);

HandleGroup::~HandleGroup() { BH_CHECK(first_ == nullptr && members_ == 0 && parts_ == 0); }

HandleGroup::Member* HandleGroup::Allocate() {
  // CloseMember and OnMemberClosed take a member's handle address for its Member's.
  static_assert(std::is_standard_layout_v<Member> && offsetof(Member, handle) == 0);
  return new Member();
}

void HandleGroup::Free(Member* member) { delete member; }

void HandleGroup::Link(Member* member) {
  BH_CHECK(state_ == State::kOpen);
  member->group = this;
  member->next = first_;
  if (first_ != nullptr) first_->prev = member;
  first_ = member;
  ++members_;
}

void HandleGroup::CloseMember(uv_handle_t* handle) {
  // The handle is the first member of its Member (standard layout): the same address.
  auto* member = reinterpret_cast<Member*>(handle);
  BH_CHECK(member->group == this && member->state == MemberState::kOpen);
  member->state = MemberState::kClosing;
  uv_close(handle, &HandleGroup::OnMemberClosed);
}

void HandleGroup::OnMemberClosed(uv_handle_t* handle) {
  auto* member = reinterpret_cast<Member*>(handle);
  HandleGroup* group = member->group;
  BH_CHECK(member->state == MemberState::kClosing && group->members_ > 0);
  if (member->prev != nullptr) member->prev->next = member->next;
  if (member->next != nullptr) member->next->prev = member->prev;
  if (group->first_ == member) group->first_ = member->next;
  --group->members_;
  Free(member);
  group->Done();
}

std::function<void()> HandleGroup::Part() {
  BH_CHECK(state_ != State::kClosed);
  ++parts_;
  auto called = std::make_shared<bool>(false);
  return [this, called] {
    BH_CHECK(!*called && parts_ > 0);
    *called = true;
    --parts_;
    Done();
  };
}

void HandleGroup::Close(std::function<void()> on_closed) {
  BH_CHECK(state_ == State::kOpen);
  state_ = State::kClosing;
  on_closed_ = std::move(on_closed);
  for (Member* member = first_; member != nullptr; member = member->next) {
    if (member->state == MemberState::kOpen) {
      CloseMember(reinterpret_cast<uv_handle_t*>(&member->handle));
    }
  }
  Done();
}

void HandleGroup::Done() {
  if (state_ != State::kClosing || pending() > 0) return;
  state_ = State::kClosed;
  if (on_closed_) std::exchange(on_closed_, nullptr)();
}

}  // namespace bulkhead::loop
