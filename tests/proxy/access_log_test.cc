// SPDX-License-Identifier: MIT
// AccessLog (proxy/access_log.h): the line's format, its escaping of what the client sent, the
// batching of its writes (a threshold, or a flush timer on the simulated clock armed only while
// lines wait), and the bounded buffer that drops and counts lines when its destination does not
// keep up.
#include "proxy/access_log.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>
#include <uv.h>

#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <thread>

#include "base/temp_dir.h"
#include "base/unique_fd.h"
#include "tests/helpers/captured_log.h"
#include "tests/helpers/file_wait.h"
#include "tests/helpers/simulated_time_source.h"
#include "tests/helpers/test_support.h"

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

TEST(AccessLogLine, TimeIsUtcWithMillisecondsOnAnyDay) {
  // Formatted without gmtime_r: the calendar's edges (the epoch, a leap day, a year's last
  // millisecond) checked against what gmtime gives.
  const struct {
    timespec time;
    const char* stamp;
  } cases[] = {
      {{0, 0}, "1970-01-01T00:00:00.000Z "},
      {{1835481599, 999999999}, "2028-02-29T23:59:59.999Z "},
      {{1798761599, 5000000}, "2026-12-31T23:59:59.005Z "},
  };
  for (const auto& c : cases) {
    AccessRecord record = Sample(" client=a id=1");
    record.time = c.time;
    std::string line;
    FormatAccessLine(record, &line);
    EXPECT_EQ(line.rfind(c.stamp, 0), 0u) << line;
  }
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

// Runs the loop's handles once without blocking (the log's poll); timers are the simulated
// clock's, run by Advance.
void RunOnce(uv_loop_t* loop) { uv_run(loop, UV_RUN_NOWAIT); }

// What the pipe holds now (its read end is non-blocking).
std::string ReadAvailable(int fd) {
  std::string all;
  char text[65536];
  for (ssize_t n; (n = ::read(fd, text, sizeof text)) > 0;)
    all.append(text, static_cast<size_t>(n));
  return all;
}

size_t CountLines(const std::string& text) {
  size_t newlines = 0;
  for (char c : text) newlines += c == '\n';
  return newlines;
}

std::string ReadFile(const std::string& file) {
  std::string text;
  const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return text;
  char buffer[65536];
  for (ssize_t n; (n = ::read(fd, buffer, sizeof buffer)) > 0;) {
    text.append(buffer, static_cast<size_t>(n));
  }
  ::close(fd);
  return text;
}

// A loop, a simulated clock and a pipe whose write end a log takes; the test reads the other.
class AccessLogPipe : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(uv_loop_init(&loop_), 0);
    ASSERT_EQ(::pipe2(fds_, O_CLOEXEC | O_NONBLOCK), 0);
  }
  void TearDown() override {
    ::close(fds_[0]);
    EXPECT_EQ(uv_loop_close(&loop_), 0);
  }
  void CloseLog(AccessLog* log) {
    bool closed = false;
    log->Close([&] { closed = true; });
    uv_run(&loop_, UV_RUN_DEFAULT);
    EXPECT_TRUE(closed);
  }

  uv_loop_t loop_{};
  bulkhead::testing::SimulatedTimeSource time_;
  int fds_[2] = {-1, -1};
};

TEST_F(AccessLogPipe, ALineWaitsForTheFlushTimerNotForTheNextTurn) {
  AccessLog log(&loop_, &time_, fds_[1], 64 * 1024);
  const uint64_t start = time_.NowMs();
  log.Append(Sample(" client=a id=1"));
  EXPECT_EQ(log.lines(), 1u);
  RunOnce(&loop_);
  // Not written by the loop's turn: it waits in the buffer, the flush timer armed.
  EXPECT_EQ(ReadAvailable(fds_[0]), "");
  EXPECT_GT(log.buffered(), 0u);
  EXPECT_EQ(time_.NextDeadline(), start + AccessLog::kFlushDelayMs);
  // A later line does not move the deadline: the oldest line waits at most kFlushDelayMs.
  time_.Advance(AccessLog::kFlushDelayMs / 2);
  log.Append(Sample(" client=a id=2"));
  EXPECT_EQ(time_.NextDeadline(), start + AccessLog::kFlushDelayMs);
  time_.Advance(AccessLog::kFlushDelayMs - AccessLog::kFlushDelayMs / 2 - 1);
  RunOnce(&loop_);
  EXPECT_EQ(ReadAvailable(fds_[0]), "");
  time_.Advance(1);
  const std::string got = ReadAvailable(fds_[0]);
  EXPECT_NE(got.find("id=1 outcome=ok"), std::string::npos) << got;
  EXPECT_NE(got.find("id=2 outcome=ok"), std::string::npos) << got;
  EXPECT_EQ(CountLines(got), 2u);
  EXPECT_EQ(log.buffered(), 0u);
  EXPECT_EQ(time_.armed_timers(), 0u);
  EXPECT_EQ(log.dropped(), 0u);
  CloseLog(&log);
}

TEST_F(AccessLogPipe, ReachingTheFlushThresholdWritesAtOnceWithoutTheTimer) {
  AccessLog log(&loop_, &time_, fds_[1], AccessLog::kDefaultBufferBytes);
  ASSERT_EQ(log.flush_bytes(), AccessLog::kFlushBytes);
  std::string one;
  FormatAccessLine(Sample(" client=a id=1"), &one);
  uint64_t appended = 0;
  while (log.buffered() + one.size() < AccessLog::kFlushBytes) {
    log.Append(Sample(" client=a id=1"));
    ++appended;
  }
  RunOnce(&loop_);
  EXPECT_EQ(ReadAvailable(fds_[0]), "") << "written below the threshold";
  EXPECT_EQ(time_.armed_timers(), 1u);
  // The line that reaches the threshold writes the whole buffer; time has not moved.
  log.Append(Sample(" client=a id=1"));
  ++appended;
  EXPECT_EQ(log.buffered(), 0u);
  EXPECT_EQ(time_.armed_timers(), 0u);
  const std::string got = ReadAvailable(fds_[0]);
  EXPECT_GE(got.size(), AccessLog::kFlushBytes);
  EXPECT_EQ(CountLines(got), appended);
  EXPECT_EQ(log.lines(), appended);
  CloseLog(&log);
}

TEST_F(AccessLogPipe, AnIdleLogArmsNoTimer) {
  AccessLog log(&loop_, &time_, fds_[1], 64 * 1024);
  EXPECT_EQ(time_.armed_timers(), 0u) << "armed before any line";
  log.Append(Sample(" client=a id=1"));
  EXPECT_EQ(time_.armed_timers(), 1u);
  time_.Advance(AccessLog::kFlushDelayMs);
  EXPECT_EQ(CountLines(ReadAvailable(fds_[0])), 1u);
  // Written: nothing waits, so nothing may wake the loop, however long it stays quiet.
  EXPECT_EQ(time_.armed_timers(), 0u) << "a timer still ticks with nothing to write";
  time_.Advance(100 * AccessLog::kFlushDelayMs);
  EXPECT_EQ(time_.armed_timers(), 0u);
  EXPECT_EQ(ReadAvailable(fds_[0]), "");
  // The next line arms it again, from its own time.
  log.Append(Sample(" client=a id=2"));
  EXPECT_EQ(time_.NextDeadline(), time_.NowMs() + AccessLog::kFlushDelayMs);
  CloseLog(&log);
}

TEST_F(AccessLogPipe, ReopenAndCloseWriteWhatIsBuffered) {
  AccessLog log(&loop_, &time_, fds_[1], 64 * 1024);
  log.Append(Sample(" client=a id=1"));
  ASSERT_TRUE(log.Reopen().ok());
  EXPECT_EQ(log.buffered(), 0u);
  EXPECT_EQ(time_.armed_timers(), 0u);
  EXPECT_NE(ReadAvailable(fds_[0]).find("id=1 outcome=ok"), std::string::npos);
  log.Append(Sample(" client=a id=2"));
  CloseLog(&log);
  EXPECT_EQ(time_.armed_timers(), 0u);
  EXPECT_NE(ReadAvailable(fds_[0]).find("id=2 outcome=ok"), std::string::npos);
}

TEST_F(AccessLogPipe, FullPipeThenFullBufferDropsWholeLinesAndCountsThemThenRecovers) {
  // A buffer of 64 KiB behind a pipe nobody reads: the threshold's writes fill the pipe, then the
  // buffer fills, then lines are dropped, never the loop blocked.
  constexpr size_t kBuffer = size_t{64} * 1024;
  bulkhead::testing::CapturedLog captured(LogLevel::kWarning);
  AccessLog log(&loop_, &time_, fds_[1], kBuffer);
  uint64_t appended = 0;
  while (log.dropped() == 0) {
    log.Append(Sample(" client=a id=1"));
    ++appended;
    if (appended % 10 == 0) time_.Advance(AccessLog::kFlushDelayMs);
    RunOnce(&loop_);
    ASSERT_LT(appended, 100000u) << "nothing was ever dropped";
  }
  // The pipe is full: the poll waits for it, no timer.
  EXPECT_EQ(time_.armed_timers(), 0u);
  for (int i = 0; i < 9; ++i) log.Append(Sample(" client=a id=1"));
  time_.Advance(AccessLog::kFlushDelayMs);
  EXPECT_EQ(log.dropped(), 10u);
  // Every line made is counted in lines(), the dropped among them too: dropped <= lines.
  EXPECT_EQ(log.lines(), appended + 9);
  // The drops are logged, not only counted: one warning for the first, the rest within
  // kDropWarningMs told with the next one.
  EXPECT_EQ(captured.Count("access log: 1 lines dropped (1 of "), 1u) << captured.Text();
  EXPECT_EQ(captured.Count("lines dropped"), 1u) << captured.Text();
  EXPECT_LE(log.buffered(), kBuffer);

  // The reader catches up: what was queued is written, and lines are taken again.
  std::string all;
  for (int i = 0; i < 1000 && log.buffered() > 0; ++i) {
    all += ReadAvailable(fds_[0]);
    RunOnce(&loop_);
  }
  EXPECT_EQ(log.buffered(), 0u);
  all += ReadAvailable(fds_[0]);
  // Whole lines only: every line taken is written, complete.
  EXPECT_EQ(CountLines(all), log.lines() - log.dropped());
  EXPECT_EQ(all.back(), '\n');
  const uint64_t lines = log.lines();
  log.Append(Sample(" client=a id=1"));
  EXPECT_EQ(log.lines(), lines + 1);
  EXPECT_EQ(log.dropped(), 10u);
  time_.Advance(AccessLog::kFlushDelayMs);
  EXPECT_EQ(CountLines(ReadAvailable(fds_[0])), 1u);
  CloseLog(&log);
  // The close tells the drops not told yet.
  EXPECT_EQ(captured.Count("access log: 9 lines dropped (10 of "), 1u) << captured.Text();
}

// A loop, a simulated clock and a file in a fresh directory for a log with its writer thread.
class AccessLogFile : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(dir_.Create("bulkhead-access-log").ok());
    path_ = dir_.path() + "/access.log";
    ASSERT_EQ(uv_loop_init(&loop_), 0);
  }
  void TearDown() override { EXPECT_EQ(uv_loop_close(&loop_), 0); }
  // Close joins the writer thread: the file is complete afterwards.
  void CloseLog(AccessLog* log) {
    log->Close(nullptr);
    uv_run(&loop_, UV_RUN_DEFAULT);
  }

  TempDir dir_;
  std::string path_;
  uv_loop_t loop_{};
  bulkhead::testing::SimulatedTimeSource time_;
};

TEST_F(AccessLogFile, WriterThreadAppendsToTheFileAndReopensItAfterRotation) {
  Result<std::unique_ptr<AccessLog>> opened = AccessLog::Open(&loop_, &time_, path_);
  ASSERT_TRUE(opened.ok()) << opened.status().message();
  AccessLog& log = **opened;
  log.Append(Sample(" client=a id=before"));
  time_.Advance(AccessLog::kFlushDelayMs);
  // The writer thread writes it soon: waited for (inotify) with a deadline that fails the test.
  ASSERT_TRUE(bulkhead::testing::WaitForFile(
      path_, [this] { return ReadFile(path_).find("id=before") != std::string::npos; },
      bulkhead::testing::kDefaultTimeout))
      << "the writer thread wrote no line in " << bulkhead::testing::kDefaultTimeout.count()
      << " ms: '" << ReadFile(path_) << "'";
  // logrotate: the file is renamed, then bulkheadd told to reopen.
  ASSERT_EQ(::rename(path_.c_str(), (path_ + ".1").c_str()), 0);
  ASSERT_TRUE(log.Reopen().ok());
  log.Append(Sample(" client=a id=after"));
  CloseLog(&log);
  const std::string rotated = ReadFile(path_ + ".1");
  const std::string current = ReadFile(path_);
  EXPECT_EQ(current.find("id=before"), std::string::npos) << current;
  EXPECT_NE(current.find("id=after"), std::string::npos) << current;
  EXPECT_NE(rotated.find("id=before"), std::string::npos) << rotated;
}

TEST_F(AccessLogFile, WriterThreadCopiesEveryLineWholeAndInOrder) {
  // More than the writer's 64 KiB reads, so lines cut by a read are carried to the next write.
  Result<std::unique_ptr<AccessLog>> opened = AccessLog::Open(&loop_, &time_, path_);
  ASSERT_TRUE(opened.ok()) << opened.status().message();
  AccessLog& log = **opened;
  for (int i = 0; i < 3000; ++i) {
    log.Append(Sample(" client=a id=" + std::to_string(i)));
    RunOnce(&loop_);
  }
  const uint64_t lines = log.lines();
  CloseLog(&log);
  const std::string all = ReadFile(path_);
  ASSERT_EQ(CountLines(all), lines);
  // Each line whole (ends as Sample's do) and the ids rising (a dropped line leaves a gap only).
  std::string expected;
  FormatAccessLine(Sample(" client=a id=0"), &expected);
  const std::string head = expected.substr(0, expected.find(" id="));
  const std::string tail = expected.substr(expected.find(" outcome="));
  long previous = -1;
  size_t begin = 0;
  for (size_t end; (end = all.find('\n', begin)) != std::string::npos; begin = end + 1) {
    const std::string line = all.substr(begin, end + 1 - begin);
    ASSERT_EQ(line.rfind(head, 0), 0u) << line;
    ASSERT_EQ(line.substr(line.find(" outcome=")), tail) << line;
    const long id = std::stol(line.substr(line.find(" id=") + 4));
    ASSERT_GT(id, previous) << line;
    previous = id;
  }
}

TEST(AccessLog, OpenNamesTheFileItCannotOpen) {
  uv_loop_t loop;
  ASSERT_EQ(uv_loop_init(&loop), 0);
  bulkhead::testing::SimulatedTimeSource time;
  Result<std::unique_ptr<AccessLog>> opened =
      AccessLog::Open(&loop, &time, "/nonexistent-dir-of-bulkhead/access.log");
  ASSERT_FALSE(opened.ok());
  EXPECT_NE(opened.status().message().find("/nonexistent-dir-of-bulkhead/access.log"),
            std::string::npos)
      << opened.status().message();
  EXPECT_EQ(uv_loop_close(&loop), 0);
}

// A named pipe's open(2) for writing waits for a reader (fifo(7)); on the loop thread that froze
// bulkheadd, startup and reload alike, until one came. The open is refused at once instead, naming
// why. Without the refusal the open in the thread below waits: the test then opens a reader
// itself, which lets that open return, and fails.
TEST_F(AccessLogFile, ANamedPipeWithNoReaderIsRefusedAtOnceNotWaitedFor) {
  const std::string fifo = dir_.path() + "/access.fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  std::promise<Result<std::unique_ptr<AccessLog>>> done;
  std::future<Result<std::unique_ptr<AccessLog>>> opened = done.get_future();
  std::thread opener(
      [&] { done.set_value(AccessLog::Open(&loop_, &time_, fifo, size_t{64} * 1024)); });
  const bool waited = opened.wait_for(std::chrono::seconds(10)) == std::future_status::timeout;
  UniqueFd rescue;
  if (waited) rescue = UniqueFd(::open(fifo.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC));
  opener.join();
  Result<std::unique_ptr<AccessLog>> result = opened.get();
  EXPECT_FALSE(waited) << "Open waited for a reader of the named pipe";
  ASSERT_FALSE(result.ok());
  EXPECT_NE(result.status().message().find(fifo + ": a named pipe with no reader"),
            std::string::npos)
      << result.status().message();

  // With a reader, the pipe is a destination like a file: the line reaches the reader.
  UniqueFd reader(::open(fifo.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC));
  ASSERT_TRUE(reader.valid());
  Result<std::unique_ptr<AccessLog>> piped = AccessLog::Open(&loop_, &time_, fifo);
  ASSERT_TRUE(piped.ok()) << piped.status().message();
  (*piped)->Append(Sample(" client=a id=piped"));
  CloseLog(piped->get());
  EXPECT_NE(ReadAvailable(reader.get()).find("id=piped"), std::string::npos);
}

// A named pipe whose reader stopped reading: the writer thread fills it and then waits on it.
class AccessLogStalledReader : public AccessLogFile {
 protected:
  void SetUp() override {
    AccessLogFile::SetUp();
    fifo_ = dir_.path() + "/access.fifo";
    ASSERT_EQ(::mkfifo(fifo_.c_str(), 0600), 0);
    reader_ = UniqueFd(::open(fifo_.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC));
    ASSERT_TRUE(reader_.valid());
  }

  // The log on the named pipe, stalled: lines appended until well over the named pipe's capacity
  // went out, and the named pipe full, so the writer thread holds lines it cannot write.
  std::unique_ptr<AccessLog> OpenStalled() {
    Result<std::unique_ptr<AccessLog>> opened = AccessLog::Open(&loop_, &time_, fifo_);
    EXPECT_TRUE(opened.ok()) << opened.status().message();
    if (!opened.ok()) return nullptr;
    const int capacity = ::fcntl(reader_.get(), F_GETPIPE_SZ);
    EXPECT_GT(capacity, 0);
    // Three times the named pipe's capacity, and the writer's 64 KiB read besides.
    const size_t enough = 3 * static_cast<size_t>(capacity) + size_t{64} * 1024;
    std::string line;
    for (size_t sent = 0, i = 0; sent < enough; ++i) {
      const std::string fields = " client=a id=" + std::to_string(i);
      line.clear();
      FormatAccessLine(Sample(fields), &line);
      (*opened)->Append(Sample(fields));
      sent += line.size();
      RunOnce(&loop_);
    }
    time_.Advance(AccessLog::kFlushDelayMs);
    RunOnce(&loop_);
    // Full: a writer of the named pipe's own is not told it may write (pipe(7) counts its slots).
    const UniqueFd probe(::open(fifo_.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC));
    EXPECT_TRUE(probe.valid());
    const bool full = bulkhead::testing::WaitFor([&] {
      pollfd fd{probe.get(), POLLOUT, 0};
      return ::poll(&fd, 1, 0) == 0;
    });
    EXPECT_TRUE(full) << "the named pipe never filled";
    return std::move(opened).value();
  }

  // Reads the named pipe into read_ until `done` is ready (a call that waited for the writer
  // thread, which the reads let go on).
  template <typename T>
  void DrainUntil(std::future<T>& done) {
    while (done.wait_for(std::chrono::milliseconds(0)) != std::future_status::ready) {
      pollfd fd{reader_.get(), POLLIN, 0};
      if (::poll(&fd, 1, 10) > 0) read_ += ReadAvailable(reader_.get());
    }
    read_ += ReadAvailable(reader_.get());
  }

  std::string fifo_;
  UniqueFd reader_;
  std::string read_;
};

// A reload reopens the log; with its reader stalled the writer thread sits in a write to the named
// pipe. The reopen used to hand the new file over under a lock the writer held for its whole
// write, so the loop waited as long as the reader did: bulkheadd froze, control socket and all.
// Now the reopen never waits for the writer thread. Without that, Reopen (in a thread here) does
// not return until the test drains the pipe, and the test fails.
TEST_F(AccessLogStalledReader, AReopenNeverWaitsForAWriterStalledOnItsReader) {
  std::unique_ptr<AccessLog> log = OpenStalled();
  ASSERT_NE(log, nullptr);
  const uint64_t dropped_before = log->dropped();
  std::future<Status> reopened = std::async(std::launch::async, [&] { return log->Reopen(); });
  const bool waited =
      reopened.wait_for(bulkhead::testing::kDefaultTimeout) == std::future_status::timeout;
  if (waited) DrainUntil(reopened);
  EXPECT_FALSE(waited) << "Reopen waited for the writer thread stalled on the named pipe's reader";
  EXPECT_TRUE(reopened.get().ok());
  // The reader reads again: the lines the writer held go to the reopened pipe, none lost.
  std::future<void> closed = std::async(std::launch::async, [&] { CloseLog(log.get()); });
  DrainUntil(closed);
  closed.get();
  EXPECT_EQ(log->dropped(), dropped_before);
  EXPECT_EQ(CountLines(read_) + log->dropped(), log->lines());
}

// Shutdown used to wait for the writer thread to write everything it held, without bound: with
// the reader stalled, SIGTERM never ended bulkheadd. Now Close gives the named pipe a grace (none
// here) and counts what it did not take as dropped: every line is read or counted, none twice.
// Without the bound, Close (in a thread here) does not end until the test drains the pipe.
TEST_F(AccessLogStalledReader, ShutdownGivesAStalledReaderItsGraceThenCountsTheRestDropped) {
  std::unique_ptr<AccessLog> log = OpenStalled();
  ASSERT_NE(log, nullptr);
  bulkhead::testing::CapturedLog captured(LogLevel::kWarning);
  const uint64_t dropped_before = log->dropped();  // by the loop, before the close
  std::future<void> closed = std::async(std::launch::async, [&] {
    log->Close(nullptr, /*grace_ms=*/0);
    uv_run(&loop_, UV_RUN_DEFAULT);
  });
  const bool waited =
      closed.wait_for(bulkhead::testing::kDefaultTimeout) == std::future_status::timeout;
  if (waited) DrainUntil(closed);
  closed.get();
  EXPECT_FALSE(waited) << "Close waited for a named pipe whose reader does not read";
  read_ += ReadAvailable(reader_.get());
  EXPECT_GT(log->dropped(), dropped_before);
  // Every line made is read or counted dropped, none twice; and the loss is logged before the
  // exit, not only counted in a process about to end.
  EXPECT_EQ(CountLines(read_) + log->dropped(), log->lines());
  EXPECT_EQ(captured.Count("lines dropped"), 1u) << captured.Text();
}

// A reader that leaves: the writer's writes fail (EPIPE), and those lines used to vanish without a
// count. They are counted in dropped(), exactly.
TEST_F(AccessLogStalledReader, LinesAReaderThatLeftNeverGotAreCountedDropped) {
  Result<std::unique_ptr<AccessLog>> opened = AccessLog::Open(&loop_, &time_, fifo_);
  ASSERT_TRUE(opened.ok()) << opened.status().message();
  AccessLog& log = **opened;
  log.Append(Sample(" client=a id=read"));
  time_.Advance(AccessLog::kFlushDelayMs);
  ASSERT_TRUE(bulkhead::testing::WaitFor([&] {
    read_ += ReadAvailable(reader_.get());
    return CountLines(read_) == 1;
  }));
  reader_.Reset();
  for (int i = 0; i < 5; ++i) log.Append(Sample(" client=a id=" + std::to_string(i)));
  CloseLog(&log);
  EXPECT_EQ(log.lines(), 6u);
  EXPECT_EQ(log.dropped(), 5u);
}

}  // namespace
}  // namespace bulkhead::proxy
