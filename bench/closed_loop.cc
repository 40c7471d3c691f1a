// SPDX-License-Identifier: MIT
#include "bench/closed_loop.h"

#include <algorithm>
#include <latch>
#include <mutex>
#include <optional>
#include <thread>

#include "ipc/client.h"

namespace bulkhead::bench {

namespace {

using Clock = std::chrono::steady_clock;

// Samples reserved per client up front, so the hot loop rarely reallocates.
constexpr size_t kReservedSamples = 1 << 16;

struct ClientOutcome {
  uint64_t replies = 0;
  uint64_t unexpected = 0;
  uint64_t total_replies = 0;
  std::vector<uint32_t> latencies_ns;
  std::string error;
};

uint32_t SaturatingNs(Clock::duration d) {
  auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(d).count();
  return ns < 0 ? 0 : ns > UINT32_MAX ? UINT32_MAX : static_cast<uint32_t>(ns);
}

// One client's loop. Request ids are slot numbers 0..depth-1: a reply frees its slot, whose id
// the next request reuses, so replies may come back in any order (bulkheadd answers in completion
// order). `start` is the common time zero, written before `ready` opens.
void RunClient(const LoadOptions& options, ipc::Client& client, const Clock::time_point& start,
               std::latch& ready, ClientOutcome* out) {
  ready.arrive_and_wait();
  const Clock::time_point window_begin = start + options.warmup;
  const Clock::time_point window_end = window_begin + options.duration;
  std::vector<Clock::time_point> sent_at(static_cast<size_t>(options.depth));
  out->latencies_ns.reserve(kReservedSamples);

  int in_flight = 0;
  for (int slot = 0; slot < options.depth; ++slot) {
    sent_at[slot] = Clock::now();
    Status sent = client.Send(static_cast<uint64_t>(slot), options.payload);
    if (!sent.ok()) {
      out->error = sent.message();
      break;
    }
    ++in_flight;
  }
  bool sending = out->error.empty();
  while (in_flight > 0) {
    Result<ipc::Client::Reply> reply = client.Receive();
    const Clock::time_point now = Clock::now();
    if (!reply.ok()) {
      out->error = reply.status().message();
      return;
    }
    --in_flight;
    ++out->total_replies;
    const uint64_t slot = reply->header.request_id;
    if (slot >= sent_at.size()) {
      out->error = "reply to unknown request id " + std::to_string(slot);
      return;
    }
    if (now >= window_begin && now < window_end) {
      if (reply->header.status == options.expected) {
        ++out->replies;
        if (sent_at[slot] >= window_begin)
          out->latencies_ns.push_back(SaturatingNs(now - sent_at[slot]));
      } else {
        ++out->unexpected;
      }
    }
    if (now >= window_end || (options.interrupted && options.interrupted->load())) sending = false;
    if (!sending) continue;
    sent_at[slot] = now;
    Status sent = client.Send(slot, options.payload);
    if (!sent.ok()) {
      out->error = sent.message();
      return;
    }
    ++in_flight;
  }
}

}  // namespace

LoadResult RunClosedLoop(const LoadOptions& options) {
  LoadResult result;
  const int clients = std::max(options.clients, 1);
  // Connections are made before the clock starts.
  std::vector<std::optional<ipc::Client>> connections;
  for (int i = 0; i < clients; ++i) {
    Result<ipc::Client> client = ipc::Client::Connect(options.socket);
    if (!client.ok()) {
      result.error = client.status().message();
      return result;
    }
    Status timeout = client->SetTimeout(options.reply_timeout);
    if (!timeout.ok()) {
      result.error = timeout.message();
      return result;
    }
    connections.emplace_back(std::move(client).value());
  }

  std::vector<ClientOutcome> outcomes(static_cast<size_t>(clients));
  std::latch ready(clients + 1);
  Clock::time_point start;
  std::vector<std::thread> threads;
  threads.reserve(static_cast<size_t>(clients));
  for (int i = 0; i < clients; ++i) {
    threads.emplace_back(RunClient, std::cref(options), std::ref(*connections[i]), std::cref(start),
                         std::ref(ready), &outcomes[i]);
  }
  start = Clock::now();
  ready.arrive_and_wait();
  for (std::thread& thread : threads) thread.join();
  const Clock::time_point window_begin = start + options.warmup;
  const Clock::time_point end = std::min(Clock::now(), window_begin + options.duration);
  result.seconds = std::max(0.0, std::chrono::duration<double>(end - window_begin).count());

  for (ClientOutcome& outcome : outcomes) {
    result.replies += outcome.replies;
    result.unexpected += outcome.unexpected;
    result.total_replies += outcome.total_replies;
    result.latencies_ns.insert(result.latencies_ns.end(), outcome.latencies_ns.begin(),
                               outcome.latencies_ns.end());
    if (result.error.empty() && !outcome.error.empty()) result.error = outcome.error;
  }
  return result;
}

}  // namespace bulkhead::bench
