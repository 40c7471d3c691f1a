// SPDX-License-Identifier: MIT
#include "proxy/exchange.h"

#include <algorithm>

#include "base/check.h"
#include "proxy/client.h"
#include "proxy/link.h"

namespace bulkhead::proxy {

bool Exchange::SendBody(std::string_view bytes, bool last) {
  if (body_pipe != BodyPipe::kFlowing) return false;  // its worker end left: dropped
  BH_CHECK(link != nullptr);
  bytes_in += bytes.size();
  // Closed first: a link that breaks under the write finds nothing more to drop.
  if (last) body_pipe = BodyPipe::kClosed;
  const size_t held = link->OnBodyBytes(this, bytes, last);
  if (body_pipe == BodyPipe::kFlowing && held > kHighWatermark) body_pipe = BodyPipe::kFull;
  return body_pipe == BodyPipe::kFlowing;
}

uint64_t Exchange::ServiceNs(uint64_t now_ns) const {
  if (dispatched_at_ns == 0) return 0;
  const uint64_t began_ns = std::max(dispatched_at_ns, body_whole_at_ns);
  const uint64_t elapsed_ns = now_ns > began_ns ? now_ns - began_ns : 0;
  return elapsed_ns > client_paused_ns ? elapsed_ns - client_paused_ns : 0;
}

void Exchange::AbortBody(const std::string& why) {
  const bool on_link = body_open() && link != nullptr;
  body_pipe = BodyPipe::kClosed;
  if (on_link) link->OnBodyAborted(this, why);
}

void Exchange::ResponseDrained() {
  if (link != nullptr) link->ResumeReading();
}

void Exchange::WantBody() {
  if (body_pipe != BodyPipe::kWaiting && body_pipe != BodyPipe::kFull) return;
  body_pipe = BodyPipe::kFlowing;
  if (client != nullptr) client->OnBodyFlow(this);
}

void Exchange::DropBody() {
  if (!body_open()) return;
  body_pipe = BodyPipe::kClosed;
  if (client != nullptr) client->OnBodyFlow(this);
}

bool Exchange::SendResponse(std::string_view bytes, bool must_close) {
  if (client == nullptr) return true;  // its client left: the bytes reach no one
  bytes_out += bytes.size();
  return client->OnResponseBytes(this, bytes, must_close) <= kHighWatermark;
}

Exchange* ExchangePool::Acquire() {
  ++live_;
  if (free_.empty()) return new Exchange();
  Exchange* exchange = free_.back().release();
  free_.pop_back();
  return exchange;
}

void ExchangePool::Release(Exchange* exchange) {
  BH_CHECK(exchange->admission_state() == admission::AdmissionEntry::State::kIdle);
  BH_CHECK(exchange->client == nullptr && exchange->link == nullptr);
  BH_CHECK(!exchange->started());
  BH_CHECK(live_ > 0);
  --live_;
  exchange->info = RequestInfo{};
  exchange->body_pipe = Exchange::BodyPipe::kClosed;
  exchange->client_prev = exchange->client_next = nullptr;
  exchange->answered = false;
  exchange->resent = false;
  exchange->access_fields.clear();
  if (exchange->payload.capacity() > kMaxRetainedPayload) {
    std::string().swap(exchange->payload);
  } else {
    exchange->payload.clear();
  }
  free_.emplace_back(exchange);
}

}  // namespace bulkhead::proxy
