// SPDX-License-Identifier: MIT
#include "supervisor/cgroup_poll.h"

#include <algorithm>
#include <utility>

namespace bulkhead::supervisor {

CgroupPoll::CgroupPoll(loop::TimeSource* time)
    : time_(time), timer_(time->CreateTimer([this] { Tick(); })) {}

void CgroupPoll::Follow(std::span<Polled* const> cells, bool cgroups_enforced, bool shutting_down) {
  std::vector<Entry> entries;
  entries.reserve(cells.size());
  for (Polled* cell : cells) {
    auto kept = std::find_if(entries_.begin(), entries_.end(),
                             [cell](const Entry& e) { return e.cell == cell; });
    entries.push_back(kept != entries_.end() ? *kept : Entry{.cell = cell, .stall = {}});
  }
  entries_ = std::move(entries);
  const bool any_adaptive =
      std::any_of(cells.begin(), cells.end(), [](const Polled* c) { return c->adaptive(); });
  if (!cgroups_enforced || shutting_down || !any_adaptive) {
    timer_->Stop();
  } else if (!timer_->armed()) {
    timer_->Start(0);
  }
}

void CgroupPoll::Tick() {
  timer_->Start(kPollMs);
  const uint64_t now = time_->NowMs();
  for (Entry& entry : entries_) {
    const std::optional<uint64_t> total = entry.cell->PollCgroup();
    if (total) {
      entry.stall.Record(now, *total);
    } else {
      entry.stall.Clear();
    }
  }
}

admission::CpuNeighbours CgroupPoll::Judge(const Polled& fired) const {
  const uint64_t now = time_->NowMs();
  std::vector<std::optional<double>> others;
  for (const Entry& entry : entries_) {
    if (entry.cell == &fired || !entry.cell->RunsInCgroup()) continue;
    others.push_back(entry.stall.Share(now, kWindowMs));
  }
  return admission::JudgeCpuNeighbours(others, kWaitingShare);
}

}  // namespace bulkhead::supervisor
