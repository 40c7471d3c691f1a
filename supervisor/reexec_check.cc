// SPDX-License-Identifier: MIT
#include "supervisor/reexec_check.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <utility>

#include "base/check.h"
#include "supervisor/reexec.h"

namespace bulkhead::supervisor {

ReexecCheck::ReexecCheck(uv_loop_t* loop, loop::TimeSource* time, loop::HandleGroup* handles)
    : loop_(loop), handles_(handles), timer_(time->CreateTimer([this] {
        if (pid_ != 0) ::kill(pid_, SIGKILL);  // reaped by the reaper, as an orphan
        Finish(Status::Error(binary_ + " --reexec-state-versions: no answer within " +
                             std::to_string(timeout_ms_) + " ms"));
      })) {}

ReexecCheck::~ReexecCheck() { BH_CHECK(state_ == State::kIdle); }

Status ReexecCheck::Start(const std::string& binary, int version, uint64_t timeout_ms,
                          std::function<void(Status)> on_done) {
  BH_CHECK(state_ == State::kIdle);
  Result<VersionsChild> child = SpawnVersionsChild(binary);
  if (!child.ok()) return child.status();
  Result<uv_poll_t*> poll = handles_->TryOpen(uv_poll_init, loop_, child->stdout_read.get());
  if (!poll.ok()) {
    ::kill(child->pid, SIGKILL);
    return Status::Error(binary +
                         " --reexec-state-versions: uv_poll_init: " + poll.status().message());
  }
  binary_ = binary;
  version_ = version;
  timeout_ms_ = timeout_ms;
  pid_ = child->pid;
  wait_status_ = 0;
  read_end_ = std::move(child->stdout_read);
  output_.clear();
  on_done_ = std::move(on_done);
  poll_ = *poll;
  poll_->data = this;
  uv_poll_start(poll_, UV_READABLE | UV_DISCONNECT, &ReexecCheck::OnReadable);
  timer_->Start(timeout_ms);
  state_ = State::kRunning;
  return Status::Ok();
}

void ReexecCheck::OnReadable(uv_poll_t* poll, int status, int /*events*/) {
  auto* self = static_cast<ReexecCheck*>(poll->data);
  char buffer[256];
  ssize_t n = status < 0 ? -1 : ::read(self->read_end_.get(), buffer, sizeof buffer);
  if (n < 0 && (errno == EAGAIN || errno == EINTR) && status >= 0) return;
  if (n > 0) {
    if (self->output_.size() < 4096) self->output_.append(buffer, static_cast<size_t>(n));
    return;
  }
  // EOF (or a failed read: judged on what came).
  self->ClosePoll();
  if (self->state_ == State::kExited) {
    self->Finish(
        JudgeStateVersions(self->binary_, self->version_, self->output_, self->wait_status_));
  } else {
    self->state_ = State::kOutputEnded;
  }
}

bool ReexecCheck::OnChildExit(pid_t pid, int wait_status) {
  if (state_ == State::kIdle || pid != pid_) return false;
  pid_ = 0;
  wait_status_ = wait_status;
  if (state_ == State::kOutputEnded) {
    Finish(JudgeStateVersions(binary_, version_, output_, wait_status_));
  } else {
    state_ = State::kExited;
  }
  return true;
}

void ReexecCheck::Cancel() {
  if (state_ == State::kIdle) return;
  if (pid_ != 0) ::kill(pid_, SIGKILL);
  ClosePoll();
  timer_->Stop();
  pid_ = 0;
  on_done_ = nullptr;
  state_ = State::kIdle;
}

void ReexecCheck::ClosePoll() {
  if (poll_ == nullptr) return;
  handles_->Close(poll_);
  poll_ = nullptr;
  read_end_.Reset();
}

void ReexecCheck::Finish(Status result) {
  ClosePoll();
  timer_->Stop();
  pid_ = 0;
  state_ = State::kIdle;
  std::exchange(on_done_, nullptr)(std::move(result));
}

}  // namespace bulkhead::supervisor
