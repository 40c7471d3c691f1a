// SPDX-License-Identifier: MIT
// The client connection budget (supervisor/connection_budget.h): what RLIMIT_NOFILE leaves for
// clients, and how it is shared among cells so that none can take another's part.
#include "supervisor/connection_budget.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace bulkhead::supervisor {
namespace {

using ::testing::ElementsAre;

TEST(ClientConnectionBudget, KeepsWorkerLinksAndHeadroom) {
  EXPECT_EQ(ClientConnectionBudget(1024, 20, 100), 1024u - 20 - 100 - kDescriptorHeadroom);
  EXPECT_EQ(ClientConnectionBudget(100, 20, 16), 0u);
  EXPECT_EQ(ClientConnectionBudget(20 + 16 + kDescriptorHeadroom, 20, 16), 0u);
  EXPECT_EQ(ClientConnectionBudget(UINT64_MAX, 20, 16), UINT64_MAX - 20 - 16 - kDescriptorHeadroom);
}

TEST(WorkerLinksOf, OnePerSlotOrOneWhenMultiplexed) {
  config::CellConfig cell;
  cell.max_concurrent = 8;
  EXPECT_EQ(WorkerLinksOf(cell), 8u);
  cell.worker_connections = config::WorkerConnections::kMultiplex;
  EXPECT_EQ(WorkerLinksOf(cell), 1u);
}

TEST(ShareConnectionBudget, EveryCellGetsItsMaxWhenAllFit) {
  EXPECT_THAT(ShareConnectionBudget(3000, {1024, 1024}), ElementsAre(1024u, 1024u));
  EXPECT_THAT(ShareConnectionBudget(2048, {1024, 1024}), ElementsAre(1024u, 1024u));
}

TEST(ShareConnectionBudget, SplitsInProportionWhenTheyDoNot) {
  EXPECT_THAT(ShareConnectionBudget(100, {1024, 1024}), ElementsAre(50u, 50u));
  EXPECT_THAT(ShareConnectionBudget(100, {300, 100}), ElementsAre(75u, 25u));
  // Rounded down; a cell whose share rounds to 0 still gets 1.
  EXPECT_THAT(ShareConnectionBudget(10, {1, 1, 1, 1000}), ElementsAre(1u, 1u, 1u, 9u));
}

TEST(ShareConnectionBudget, EveryCellKeepsAtLeastOneConnection) {
  EXPECT_THAT(ShareConnectionBudget(0, {1024, 1024}), ElementsAre(1u, 1u));
  EXPECT_THAT(ShareConnectionBudget(1, {1, 1000}), ElementsAre(1u, 1u));
}

}  // namespace
}  // namespace bulkhead::supervisor
