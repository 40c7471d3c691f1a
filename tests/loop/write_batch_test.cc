// SPDX-License-Identifier: MIT
// WriteBatch with StreamWriters on a real libuv loop over Unix socket pairs: answers wait for the
// batch and then reach every peer in order; what a peer does not take goes on by uv_write; a
// closed peer is an error; a writer that leaves (or is closed by another's callback) sends nothing
// more and hears nothing. Run on io_uring where the kernel has it; the checks that need it say so.
#include "loop/write_batch.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>
#include <uv.h>

#include <cerrno>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "loop/stream_writer.h"

namespace bulkhead::loop {
namespace {

// One socket pair: `writer` on a uv_pipe_t over one end, the test reads the other (`peer`).
struct Pair {
  uv_pipe_t pipe{};
  int peer = -1;
  std::unique_ptr<StreamWriter> writer;
  int errors = 0;
  int last_error = 0;
  int drained = 0;
  int backlogs = 0;
  bool closed = false;

  // Everything the peer can read now, without waiting.
  std::string ReadNow() const {
    std::string got;
    char buffer[65536];
    for (;;) {
      ssize_t n = ::recv(peer, buffer, sizeof buffer, MSG_DONTWAIT);
      if (n <= 0) return got;
      got.append(buffer, static_cast<size_t>(n));
    }
  }
};

class WriteBatchTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(uv_loop_init(&loop_), 0); }

  void TearDown() override {
    for (auto& pair : pairs_) {
      if (!pair->closed) Close(*pair);
      ::close(pair->peer);
    }
    if (batch_) batch_->Close([] {});
    uv_run(&loop_, UV_RUN_DEFAULT);
    pairs_.clear();
    batch_.reset();
    EXPECT_EQ(uv_loop_close(&loop_), 0) << "a handle was left open";
  }

  void MakeBatch() { batch_ = std::make_unique<WriteBatch>(&loop_); }

  Pair& AddPair() {
    auto pair = std::make_unique<Pair>();
    int sv[2];
    EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    EXPECT_EQ(uv_pipe_init(&loop_, &pair->pipe, 0), 0);
    EXPECT_EQ(uv_pipe_open(&pair->pipe, sv[0]), 0);
    pair->peer = sv[1];
    Pair* p = pair.get();
    pair->writer = std::make_unique<StreamWriter>(
        reinterpret_cast<uv_stream_t*>(&pair->pipe),
        [p](int status) {
          ++p->errors;
          p->last_error = status;
        },
        [p] { ++p->drained; });
    pair->writer->SetOnBacklog([p] { ++p->backlogs; });
    pair->writer->SetBatch(batch_.get());
    pairs_.push_back(std::move(pair));
    return *p;
  }

  void Close(Pair& pair) {
    pair.closed = true;
    pair.writer->Abandon();
    uv_close(reinterpret_cast<uv_handle_t*>(&pair.pipe), nullptr);
  }

  uv_loop_t loop_{};
  uv_timer_t alive_{};
  std::unique_ptr<WriteBatch> batch_;
  std::vector<std::unique_ptr<Pair>> pairs_;
};

TEST_F(WriteBatchTest, AnswersWaitForTheIterationsBatchThenReachEveryPeerInOrder) {
  MakeBatch();
  if (!batch_->enabled()) GTEST_SKIP() << "no io_uring here";
  Pair& a = AddPair();
  Pair& b = AddPair();
  a.writer->AppendBytes("one ");
  a.writer->Flush();
  b.writer->AppendBytes("other");
  b.writer->Flush();
  a.writer->AppendBytes("two");  // after the Flush, before the batch: the same send
  a.writer->Flush();
  EXPECT_TRUE(a.writer->in_batch());
  EXPECT_FALSE(a.writer->idle());
  EXPECT_EQ(a.ReadNow(), "") << "written before the batch";
  EXPECT_EQ(b.ReadNow(), "");
  EXPECT_EQ(a.drained, 0);

  // Its prepare (or check) phase sends the batch, in a loop kept alive as bulkheadd's is (by a
  // timer here: the batch's own handles do not keep a loop alive).
  uv_timer_init(&loop_, &alive_);
  uv_timer_start(
      &alive_, [](uv_timer_t*) {}, 60000, 0);
  uv_run(&loop_, UV_RUN_NOWAIT);
  uv_close(reinterpret_cast<uv_handle_t*>(&alive_), nullptr);

  EXPECT_EQ(a.ReadNow(), "one two");
  EXPECT_EQ(b.ReadNow(), "other");
  EXPECT_EQ(a.drained, 1);
  EXPECT_EQ(b.drained, 1);
  EXPECT_TRUE(a.writer->idle());
  EXPECT_EQ(a.writer->written_bytes(), 7u);
  EXPECT_EQ(a.backlogs + b.backlogs + a.errors + b.errors, 0);
}

TEST_F(WriteBatchTest, WhatAPeerDoesNotTakeGoesOnByUvWriteAndIsWatched) {
  MakeBatch();
  if (!batch_->enabled()) GTEST_SKIP() << "no io_uring here";
  Pair& a = AddPair();
  // More than a Unix socket pair holds (its send buffer, about 200 KiB by default).
  std::string big(4 << 20, 'x');
  for (size_t i = 0; i < big.size(); i += 4096) big[i] = static_cast<char>('a' + (i / 4096) % 26);
  a.writer->AppendBytes(big);
  a.writer->Flush();
  batch_->Submit();
  EXPECT_EQ(a.backlogs, 1) << "the owner was not told that bytes wait";
  EXPECT_GT(a.writer->written_bytes(), 0u);
  EXPECT_LT(a.writer->written_bytes(), big.size());
  EXPECT_EQ(a.drained, 0);
  std::string got;
  while (got.size() < big.size()) {
    uv_run(&loop_, UV_RUN_NOWAIT);
    got += a.ReadNow();
  }
  EXPECT_EQ(got, big);
  EXPECT_EQ(a.drained, 1);
  EXPECT_EQ(a.errors, 0);
}

TEST_F(WriteBatchTest, APeerThatClosedIsAnError) {
  MakeBatch();
  if (!batch_->enabled()) GTEST_SKIP() << "no io_uring here";
  Pair& a = AddPair();
  ::close(a.peer);
  a.peer = ::dup(STDIN_FILENO);  // TearDown closes something
  a.writer->AppendBytes("lost");
  a.writer->Flush();
  batch_->Submit();
  EXPECT_EQ(a.errors, 1);
  EXPECT_EQ(a.last_error, UV_EPIPE);
  EXPECT_EQ(a.drained, 0);
}

TEST_F(WriteBatchTest, AWriterThatLeavesBeforeTheBatchSendsNothing) {
  MakeBatch();
  if (!batch_->enabled()) GTEST_SKIP() << "no io_uring here";
  Pair& a = AddPair();
  Pair& b = AddPair();
  a.writer->AppendBytes("never");
  a.writer->Flush();
  b.writer->AppendBytes("sent");
  b.writer->Flush();
  Close(a);  // Abandon: it leaves the batch
  uv_run(&loop_, UV_RUN_NOWAIT);
  EXPECT_EQ(a.ReadNow(), "");
  EXPECT_EQ(b.ReadNow(), "sent");
  EXPECT_EQ(a.drained + a.errors + a.backlogs, 0);
}

// An owner about to close (a client disconnected at shutdown, with its last answer just queued)
// offers the waiting bytes at once, as a writer without a batch had written them at Flush().
TEST_F(WriteBatchTest, WriteNowOffersTheWaitingBytesWithoutCallbacks) {
  MakeBatch();
  if (!batch_->enabled()) GTEST_SKIP() << "no io_uring here";
  Pair& a = AddPair();
  a.writer->AppendBytes("last answer");
  a.writer->Flush();
  ASSERT_TRUE(a.writer->in_batch());
  a.writer->WriteNow();
  EXPECT_FALSE(a.writer->in_batch());
  EXPECT_EQ(a.writer->written_bytes(), 11u);
  Close(a);
  batch_->Submit();
  EXPECT_EQ(a.ReadNow(), "last answer");
  EXPECT_EQ(a.drained + a.errors + a.backlogs, 0);
}

// A callback of one member closes another member of the same batch (as a client over the cell's
// max_unsent_bytes closes the slowest): that one's bytes were already sent, its callbacks never
// run, and nothing touches it after.
TEST_F(WriteBatchTest, AMemberClosedByAnotherMembersCallbackHearsNothing) {
  MakeBatch();
  if (!batch_->enabled()) GTEST_SKIP() << "no io_uring here";
  Pair& a = AddPair();
  Pair& b = AddPair();
  Pair* victim = &b;
  a.writer = std::make_unique<StreamWriter>(
      reinterpret_cast<uv_stream_t*>(&a.pipe), [](int) {},
      [this, victim, &a] {
        ++a.drained;
        Close(*victim);
      });
  a.writer->SetBatch(batch_.get());
  a.writer->AppendBytes("first");
  a.writer->Flush();
  b.writer->AppendBytes("second");
  b.writer->Flush();
  batch_->Submit();
  EXPECT_EQ(a.drained, 1);
  EXPECT_EQ(b.drained, 0) << "a closed writer was called back";
  EXPECT_EQ(b.ReadNow(), "second") << "its bytes had gone out with the batch";
}

TEST(IoUringWanted, TakesSystemdStyleBooleansInAnyCaseAndNothingElse) {
  EXPECT_EQ(IoUringWanted(nullptr), true);
  for (const char* on : {"on", "1", "true", "yes", "ON", "True"})
    EXPECT_EQ(IoUringWanted(on), true);
  for (const char* off : {"off", "0", "false", "no", "OFF", "No"}) {
    EXPECT_EQ(IoUringWanted(off), false) << off;
  }
  for (const char* unknown : {"", "disable", "2", "of"}) {
    EXPECT_EQ(IoUringWanted(unknown), std::nullopt) << unknown;
  }
}

TEST_F(WriteBatchTest, TheStartupLineSaysWhetherAndWhyNot) {
  ASSERT_EQ(::setenv("BULKHEAD_IO_URING", "No", 1), 0);
  MakeBatch();
  EXPECT_FALSE(batch_->enabled());
  EXPECT_FALSE(batch_->setting_unknown());
  EXPECT_EQ(batch_->how(),
            "socket writes (client answers, HTTP requests to workers) go one by one: "
            "BULKHEAD_IO_URING=No");
  batch_->Close([] {});
  uv_run(&loop_, UV_RUN_DEFAULT);

  ASSERT_EQ(::setenv("BULKHEAD_IO_URING", "disable", 1), 0);
  MakeBatch();
  ::unsetenv("BULKHEAD_IO_URING");
  EXPECT_TRUE(batch_->setting_unknown());
  EXPECT_EQ(batch_->how().rfind("BULKHEAD_IO_URING=disable is not on/off", 0), 0u) << batch_->how();
  if (batch_->enabled()) {
    EXPECT_NE(batch_->how().find("sent together (io_uring)"), std::string::npos) << batch_->how();
  } else {
    EXPECT_NE(batch_->how().find("io_uring unavailable (io_uring_setup: "), std::string::npos)
        << batch_->how();
  }
}

TEST_F(WriteBatchTest, WithoutABatchOrWithIoUringOffWritersWriteAtOnce) {
  Pair& unbatched = AddPair();  // no batch yet: SetBatch(nullptr)
  unbatched.writer->AppendBytes("now");
  unbatched.writer->Flush();
  EXPECT_EQ(unbatched.ReadNow(), "now");
  EXPECT_EQ(unbatched.drained, 1);

  ASSERT_EQ(::setenv("BULKHEAD_IO_URING", "off", 1), 0);
  MakeBatch();
  ::unsetenv("BULKHEAD_IO_URING");
  EXPECT_FALSE(batch_->enabled());
  Pair& a = AddPair();
  a.writer->AppendBytes("also now");
  a.writer->Flush();
  EXPECT_FALSE(a.writer->in_batch());
  EXPECT_EQ(a.ReadNow(), "also now");
  EXPECT_EQ(a.drained, 1);
}

}  // namespace
}  // namespace bulkhead::loop
