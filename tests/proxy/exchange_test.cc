// SPDX-License-Identifier: MIT
// Exchange::ServiceNs: the worker's own time on an exchange, which the adaptive limit samples
// (admission/adaptive_limit.h, signal 1): neither a slow reader's time (client_paused_ns) nor a
// slow uploader's (body_whole_at_ns) is the worker's.
#include "proxy/exchange.h"

#include <gtest/gtest.h>

namespace bulkhead::proxy {
namespace {

TEST(ExchangeServiceTime, IsTheTimeSinceDispatchLessTheTimeAClientHeldTheWorkerUp) {
  Exchange exchange;
  EXPECT_EQ(exchange.ServiceNs(5'000), 0u) << "not dispatched";
  exchange.dispatched_at_ns = 1'000;
  EXPECT_EQ(exchange.ServiceNs(9'000), 8'000u);
  exchange.client_paused_ns = 3'000;  // a slow reader of the response
  EXPECT_EQ(exchange.ServiceNs(9'000), 5'000u);
  // A streamed body whole at 6'000: the worker waited for the upload until then.
  exchange.body_whole_at_ns = 6'000;
  exchange.client_paused_ns = 0;
  EXPECT_EQ(exchange.ServiceNs(9'000), 3'000u);
  exchange.client_paused_ns = 1'000;
  EXPECT_EQ(exchange.ServiceNs(9'000), 2'000u);
  exchange.client_paused_ns = 4'000;
  EXPECT_EQ(exchange.ServiceNs(9'000), 0u) << "never below 0";
  // A body whole before the dispatch (a queued request's streamed body cannot be, but a clock
  // reading may tie): the dispatch counts.
  exchange.body_whole_at_ns = 500;
  exchange.client_paused_ns = 0;
  EXPECT_EQ(exchange.ServiceNs(9'000), 8'000u);
}

}  // namespace
}  // namespace bulkhead::proxy
