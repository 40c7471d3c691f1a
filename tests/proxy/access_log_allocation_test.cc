// SPDX-License-Identifier: MIT
// A warm access log allocates nothing per request: the request's fields formatted into a string
// whose capacity is kept (as an Exchange keeps its own), the line formatted and queued in the
// log's buffer, once a request like it went through. This binary links tests/helpers' counting
// operator new (AllocationCount); nothing else runs in it.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>
#include <uv.h>

#include <cstddef>
#include <string>

#include "loop/time_source.h"
#include "proxy/access_log.h"
#include "tests/helpers/allocation_counter.h"

namespace bulkhead::proxy {
namespace {

void OneRequest(AccessLog* log, std::string* fields, uv_loop_t* loop) {
  fields->clear();
  AppendRequestFields(fields, "203.0.113.200:41234", "5f3a9c1e-000000000001", "GET",
                      "/catalog/items?page=2&sort=price \"quoted\"");
  AccessRecord record;
  ::clock_gettime(CLOCK_REALTIME, &record.time);
  record.cell = "catalog";
  record.request_fields = *fields;
  record.outcome = "ok";
  record.http_status = 200;
  record.worker_us = 1234;
  record.bytes_in = 300;
  record.bytes_out = 17;
  record.worker_pid = 4123;
  record.limit = 8;
  log->Append(record);
  uv_run(loop, UV_RUN_NOWAIT);
}

TEST(WarmAccessLog, FormattingAndQueueingALineAllocateNothing) {
  uv_loop_t loop;
  ASSERT_EQ(uv_loop_init(&loop), 0);
  int fds[2];
  ASSERT_EQ(::pipe2(fds, O_CLOEXEC | O_NONBLOCK), 0);
  {
    // The real clock: arming and stopping the flush timer are part of a request's cost.
    loop::LoopTimeSource time(&loop);
    AccessLog log(&loop, &time, fds[1], 64 * 1024);
    std::string fields;
    OneRequest(&log, &fields, &loop);  // the first: it allocates
    OneRequest(&log, &fields, &loop);
    char drain[65536];
    const size_t before = bulkhead::testing::AllocationCount();
    // Enough lines to reach the flush threshold more than once: the writes into the pipe (drained
    // here as the writer thread would) are measured too.
    constexpr int kWarm = 400;
    size_t written = 0;
    for (int i = 0; i < kWarm; ++i) {
      OneRequest(&log, &fields, &loop);
      for (ssize_t n; (n = ::read(fds[0], drain, sizeof drain)) > 0;) {
        written += static_cast<size_t>(n);
      }
    }
    EXPECT_EQ(bulkhead::testing::AllocationCount() - before, 0u)
        << "allocations in " << kWarm << " warm lines";
    EXPECT_GE(written, 2 * log.flush_bytes()) << "the threshold was not reached twice";
    EXPECT_EQ(log.lines(), 2u + kWarm);
    EXPECT_EQ(log.dropped(), 0u);
    log.Close(nullptr);
    uv_run(&loop, UV_RUN_DEFAULT);
  }
  ::close(fds[0]);
  EXPECT_EQ(uv_loop_close(&loop), 0);
}

}  // namespace
}  // namespace bulkhead::proxy
