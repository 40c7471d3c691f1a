// SPDX-License-Identifier: MIT
// AccessLog (proxy/access_log.h): the line's format, its escaping of what the client sent, and the
// bounded buffer that drops and counts lines when its destination does not keep up.
#include "proxy/access_log.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>
#include <uv.h>

#include <string>

#include "base/temp_dir.h"

namespace bulkhead::proxy {
namespace {

AccessRecord Sample(std::string_view request_fields) {
  AccessRecord record;
  record.time = timespec{1796344267, 123456789};  // 2026-12-04T00:31:07.123Z
  record.cell = "api";
  record.request_fields = request_fields;
  record.outcome = "ok";
  record.reason = "";
  record.http_status = 200;
  record.queue_wait_us = 12;
  record.worker_us = 3400;
  record.bytes_in = 78;
  record.bytes_out = 512;
  record.worker_pid = 4123;
  return record;
}

TEST(AccessLogLine, HttpRequestHasEveryFieldInOrder) {
  std::string fields;
  AppendRequestFields(&fields, "10.0.0.7:5123", "5f3a9c1e-000000000001", "GET", "/items?page=2");
  std::string line;
  FormatAccessLine(Sample(fields), &line);
  EXPECT_EQ(line,
            "2026-12-04T00:31:07.123Z cell=api client=10.0.0.7:5123 id=5f3a9c1e-000000000001 "
            "method=GET target=\"/items?page=2\" outcome=ok reason=\"\" status=200 wait_ms=0.012 "
            "worker_ms=3.400 bytes_in=78 bytes_out=512 worker_pid=4123\n");
}

TEST(AccessLogLine, FrameRequestHasNoMethodTargetOrStatusAndAdaptiveCellItsLimit) {
  std::string fields;
  AppendRequestFields(&fields, "pid:77,uid:1000", "42", "", "");
  AccessRecord record = Sample(fields);
  record.http_status = 0;
  record.outcome = "rejected";
  record.reason = "full";
  record.worker_pid = 0;
  record.worker_us = 0;
  record.limit = 6;
  std::string line;
  FormatAccessLine(record, &line);
  EXPECT_EQ(line,
            "2026-12-04T00:31:07.123Z cell=api client=pid:77,uid:1000 id=42 outcome=rejected "
            "reason=full wait_ms=0.012 worker_ms=0.000 bytes_in=78 bytes_out=512 worker_pid=0 "
            "limit=6\n");
}

TEST(AccessLogLine, ClientControlledTargetCannotForgeALineOrAField) {
  std::string fields;
  AppendRequestFields(&fields, "", "x\" outcome=ok", "GET",
                      "/a b\"c\\d\ne=1\r\x01\x7f outcome=ok\n2026-01-01T00:00:00.000Z cell=x");
  std::string line;
  FormatAccessLine(Sample(fields), &line);
  // One line: the only newline is the last byte; no raw control byte anywhere.
  EXPECT_EQ(line.find('\n'), line.size() - 1) << line;
  for (char c : line.substr(0, line.size() - 1)) {
    EXPECT_TRUE(static_cast<unsigned char>(c) >= 0x20 && c != 0x7f) << line;
  }
  EXPECT_NE(line.find(" id=\"x\\\" outcome=ok\" method=GET target=\"/a b\\\"c\\\\d\\ne=1\\r\\x01"
                      "\\x7f outcome=ok\\n2026-01-01T00:00:00.000Z cell=x\" outcome=ok "),
            std::string::npos)
      << line;
  // An empty client is an empty quoted value, not a missing one.
  EXPECT_NE(line.find(" client=\"\" "), std::string::npos) << line;
}

// Runs the loop until nothing is pending (the log's prepare and poll handles).
void RunOnce(uv_loop_t* loop) { uv_run(loop, UV_RUN_NOWAIT); }

TEST(AccessLog, LinesReachThePipeBeforeTheNextPoll) {
  uv_loop_t loop;
  ASSERT_EQ(uv_loop_init(&loop), 0);
  int fds[2];
  ASSERT_EQ(::pipe2(fds, O_CLOEXEC | O_NONBLOCK), 0);
  {
    AccessLog log(&loop, fds[1], 4096);
    log.Append(Sample(" client=a id=1"));
    log.Append(Sample(" client=a id=2"));
    EXPECT_EQ(log.lines(), 2u);
    EXPECT_GT(log.buffered(), 0u);
    RunOnce(&loop);
    EXPECT_EQ(log.buffered(), 0u);
    char text[1024];
    const ssize_t n = ::read(fds[0], text, sizeof text);
    ASSERT_GT(n, 0);
    const std::string got(text, static_cast<size_t>(n));
    EXPECT_NE(got.find("id=1 outcome=ok"), std::string::npos) << got;
    EXPECT_NE(got.find("id=2 outcome=ok"), std::string::npos) << got;
    EXPECT_EQ(log.dropped(), 0u);
    bool closed = false;
    log.Close([&] { closed = true; });
    uv_run(&loop, UV_RUN_DEFAULT);
    EXPECT_TRUE(closed);
  }
  ::close(fds[0]);
  EXPECT_EQ(uv_loop_close(&loop), 0);
}

TEST(AccessLog, FullBufferDropsWholeLinesAndCountsThemThenRecovers) {
  uv_loop_t loop;
  ASSERT_EQ(uv_loop_init(&loop), 0);
  int fds[2];
  ASSERT_EQ(::pipe2(fds, O_CLOEXEC | O_NONBLOCK), 0);
  {
    // A buffer of 4 KiB behind a pipe nobody reads: the pipe fills, then the buffer, then lines
    // are dropped, never the loop blocked.
    AccessLog log(&loop, fds[1], 4096);
    uint64_t appended = 0;
    while (log.dropped() == 0) {
      log.Append(Sample(" client=a id=1"));
      ++appended;
      RunOnce(&loop);
      ASSERT_LT(appended, 100000u) << "nothing was ever dropped";
    }
    for (int i = 0; i < 9; ++i) log.Append(Sample(" client=a id=1"));
    EXPECT_EQ(log.dropped(), 10u);
    EXPECT_EQ(log.lines() + log.dropped(), appended + 9);
    EXPECT_LE(log.buffered(), 4096u);

    // The reader catches up: what was queued is written, and lines are taken again.
    std::string all;
    char text[65536];
    for (int i = 0; i < 1000 && log.buffered() > 0; ++i) {
      const ssize_t n = ::read(fds[0], text, sizeof text);
      if (n > 0) all.append(text, static_cast<size_t>(n));
      RunOnce(&loop);
    }
    EXPECT_EQ(log.buffered(), 0u);
    for (ssize_t n; (n = ::read(fds[0], text, sizeof text)) > 0;) {
      all.append(text, static_cast<size_t>(n));
    }
    // Whole lines only: every line written is complete.
    size_t newlines = 0;
    for (char c : all) newlines += c == '\n';
    EXPECT_EQ(newlines, log.lines());
    EXPECT_EQ(all.back(), '\n');
    const uint64_t lines = log.lines();
    log.Append(Sample(" client=a id=1"));
    EXPECT_EQ(log.lines(), lines + 1);
    EXPECT_EQ(log.dropped(), 10u);
    log.Close(nullptr);
    uv_run(&loop, UV_RUN_DEFAULT);
  }
  ::close(fds[0]);
  EXPECT_EQ(uv_loop_close(&loop), 0);
}

TEST(AccessLog, WriterThreadAppendsToTheFileAndReopensItAfterRotation) {
  TempDir dir;
  ASSERT_TRUE(dir.Create("bulkhead-access-log").ok());
  const std::string path = dir.path() + "/access.log";
  auto read = [](const std::string& file) {
    std::string text;
    const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return text;
    char buffer[4096];
    for (ssize_t n; (n = ::read(fd, buffer, sizeof buffer)) > 0;) {
      text.append(buffer, static_cast<size_t>(n));
    }
    ::close(fd);
    return text;
  };
  uv_loop_t loop;
  ASSERT_EQ(uv_loop_init(&loop), 0);
  {
    Result<std::unique_ptr<AccessLog>> opened = AccessLog::Open(&loop, path);
    ASSERT_TRUE(opened.ok()) << opened.status().message();
    AccessLog& log = **opened;
    log.Append(Sample(" client=a id=before"));
    RunOnce(&loop);
    // The writer thread writes it soon: polled with a deadline.
    for (int i = 0; i < 2000 && read(path).find("id=before") == std::string::npos; ++i) {
      ::usleep(1000);
    }
    // logrotate: the file is renamed, then bulkheadd told to reopen.
    ASSERT_EQ(::rename(path.c_str(), (path + ".1").c_str()), 0);
    ASSERT_TRUE(log.Reopen().ok());
    log.Append(Sample(" client=a id=after"));
    RunOnce(&loop);
    log.Close(nullptr);
    uv_run(&loop, UV_RUN_DEFAULT);  // Close joins the writer: both files are complete
  }
  EXPECT_EQ(uv_loop_close(&loop), 0);
  const std::string rotated = read(path + ".1");
  const std::string current = read(path);
  EXPECT_EQ(current.find("id=before"), std::string::npos) << current;
  EXPECT_NE(current.find("id=after"), std::string::npos) << current;
  EXPECT_NE(rotated.find("id=before"), std::string::npos) << rotated;
}

TEST(AccessLog, OpenNamesTheFileItCannotOpen) {
  uv_loop_t loop;
  ASSERT_EQ(uv_loop_init(&loop), 0);
  Result<std::unique_ptr<AccessLog>> opened =
      AccessLog::Open(&loop, "/nonexistent-dir-of-bulkhead/access.log");
  ASSERT_FALSE(opened.ok());
  EXPECT_NE(opened.status().message().find("/nonexistent-dir-of-bulkhead/access.log"),
            std::string::npos)
      << opened.status().message();
  EXPECT_EQ(uv_loop_close(&loop), 0);
}

}  // namespace
}  // namespace bulkhead::proxy
