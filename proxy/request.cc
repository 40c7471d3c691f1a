// SPDX-License-Identifier: MIT
#include "proxy/request.h"

#include "base/check.h"

namespace bulkhead::proxy {

Request* RequestPool::Acquire() {
  ++live_;
  if (free_.empty()) return new Request();
  Request* request = free_.back().release();
  free_.pop_back();
  return request;
}

void RequestPool::Release(Request* request) {
  BH_CHECK(request->admission_state() == admission::AdmissionEntry::State::kIdle);
  BH_CHECK(request->client == nullptr && request->link == nullptr);
  BH_CHECK(live_ > 0);
  --live_;
  request->client_request_id = 0;
  request->client_prev = request->client_next = nullptr;
  BH_CHECK(!request->started());
  request->answered = false;
  request->resent = false;
  if (request->payload.capacity() > kMaxRetainedPayload) {
    std::string().swap(request->payload);
  } else {
    request->payload.clear();
  }
  free_.emplace_back(request);
}

}  // namespace bulkhead::proxy
