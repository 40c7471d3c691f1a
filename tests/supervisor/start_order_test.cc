// SPDX-License-Identifier: MIT
// Start and stop order (supervisor/start_order.h) as tables: a graph of cells with their needs,
// lifecycle states and ordering steps in, the cells that may start or stop now (or what one waits
// for) out.
#include "supervisor/start_order.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace bulkhead::supervisor {
namespace {

using State = lifecycle::Lifecycle::State;
using ::testing::ElementsAre;
using ::testing::IsEmpty;

struct Cell {
  std::string name;
  std::vector<std::string> needs;
  State state = State::kStopped;
  OrderStep step = OrderStep::kFree;
  uint64_t next_start_at_ms = 0;
};

std::vector<OrderNode> Nodes(const std::vector<Cell>& cells) {
  std::vector<OrderNode> nodes;
  for (const Cell& c : cells) {
    nodes.push_back({c.name, c.needs, c.state, c.step, c.next_start_at_ms});
  }
  return nodes;
}

// The names at `indices`.
std::vector<std::string> Names(const std::vector<Cell>& cells, const std::vector<size_t>& indices) {
  std::vector<std::string> names;
  for (size_t i : indices) names.push_back(cells[i].name);
  return names;
}

struct Case {
  const char* label;
  std::vector<Cell> cells;
  std::vector<std::string> expected;
};

constexpr OrderStep kWait = OrderStep::kWaitingToStart;
constexpr OrderStep kHeld = OrderStep::kStopHeld;
constexpr OrderStep kAsked = OrderStep::kStopAsked;
constexpr OrderStep kDone = OrderStep::kStopped;
constexpr OrderStep kFree = OrderStep::kFree;

TEST(StartOrder, CellsToStart) {
  const std::vector<Case> cases = {
      {"nothing waits", {{"a", {}, State::kRunning, kFree}}, {}},
      {"no needs starts at once", {{"a", {}, State::kStopped, kWait}}, {"a"}},
      {"need starting holds it",
       {{"db", {}, State::kStarting, kFree}, {"app", {"db"}, State::kStopped, kWait}},
       {}},
      {"need running lets it go",
       {{"db", {}, State::kRunning, kFree}, {"app", {"db"}, State::kStopped, kWait}},
       {"app"}},
      {"every need must run",
       {{"db", {}, State::kRunning, kFree},
        {"auth", {}, State::kBackoff, kFree},
        {"app", {"db", "auth"}, State::kStopped, kWait}},
       {}},
      {"a failed need holds it",
       {{"db", {}, State::kFailed, kFree}, {"app", {"db"}, State::kStopped, kWait}},
       {}},
      {"a need that is itself waiting holds it",
       {{"db", {}, State::kStarting, kFree},
        {"cache", {"db"}, State::kStopped, kWait},
        {"app", {"cache"}, State::kStopped, kWait}},
       {}},
      {"chain moves one step",
       {{"db", {}, State::kRunning, kFree},
        {"cache", {"db"}, State::kStopped, kWait},
        {"app", {"cache"}, State::kStopped, kWait}},
       {"cache"}},
      {"unrelated cells go together",
       {{"a", {}, State::kStopped, kWait}, {"b", {}, State::kStopped, kWait}},
       {"a", "b"}},
      {"a stopping need holds it",
       {{"db", {}, State::kStopping, kFree}, {"app", {"db"}, State::kStopped, kWait}},
       {}},
  };
  for (const Case& c : cases) {
    const std::vector<OrderNode> nodes = Nodes(c.cells);
    EXPECT_EQ(Names(c.cells, CellsToStart(nodes)), c.expected) << c.label;
  }
}

TEST(StartOrder, CellsToStop) {
  const std::vector<Case> cases = {
      {"unrelated cells stop together",
       {{"a", {}, State::kRunning, kHeld}, {"b", {}, State::kRunning, kHeld}},
       {"a", "b"}},
      {"the dependent first",
       {{"db", {}, State::kRunning, kHeld}, {"app", {"db"}, State::kRunning, kHeld}},
       {"app"}},
      {"the need waits while the dependent stops",
       {{"db", {}, State::kRunning, kHeld}, {"app", {"db"}, State::kStopping, kAsked}},
       {}},
      {"the need goes once the dependent stopped",
       {{"db", {}, State::kRunning, kHeld}, {"app", {"db"}, State::kStopped, kDone}},
       {"db"}},
      {"a diamond: the top, then the middle, then the bottom",
       {{"d", {}, State::kRunning, kHeld},
        {"b", {"d"}, State::kRunning, kHeld},
        {"c", {"d"}, State::kRunning, kHeld},
        {"a", {"b", "c"}, State::kRunning, kHeld}},
       {"a"}},
      {"a diamond's middle together",
       {{"d", {}, State::kRunning, kHeld},
        {"b", {"d"}, State::kRunning, kHeld},
        {"c", {"d"}, State::kRunning, kHeld},
        {"a", {"b", "c"}, State::kStopped, kDone}},
       {"b", "c"}},
      {"asked ones are not asked again",
       {{"a", {}, State::kStopping, kAsked}, {"b", {}, State::kRunning, kHeld}},
       {"b"}},
      {"a free dependent holds nothing",
       {{"db", {}, State::kRunning, kHeld}, {"app", {"db"}, State::kStopped, kFree}},
       {"db"}},
  };
  for (const Case& c : cases) {
    const std::vector<OrderNode> nodes = Nodes(c.cells);
    EXPECT_EQ(Names(c.cells, CellsToStop(nodes)), c.expected) << c.label;
  }
}

// Boot and a reload ask for starts in this order: a cell after the cells it needs, so that its
// held start's log line names them "waiting" or "starting", not "stopped" (edge was logged as
// waiting for "front (stopped)" at boot when it came first in the file).
TEST(StartOrder, NeedsFirst) {
  using Needs = std::vector<std::string>;
  const std::vector<Case> cases = {
      {"no needs: as given", {{"a", Needs{}}, {"b", Needs{}}, {"c", Needs{}}}, {"a", "b", "c"}},
      {"a chain written backwards",
       {{"edge", Needs{"front"}}, {"front", Needs{"db"}}, {"db", Needs{}}},
       {"db", "front", "edge"}},
      {"two needing one, the others as given",
       {{"x", Needs{"db"}}, {"y", Needs{}}, {"z", Needs{"db"}}, {"db", Needs{}}},
       {"y", "db", "x", "z"}},
      {"a need outside the config (refused by it) orders nothing",
       {{"a", Needs{"gone"}}, {"b", Needs{}}},
       {"a", "b"}},
      {"a cycle (refused by the config) comes last as given",
       {{"p", Needs{"q"}}, {"q", Needs{"p"}}, {"r", Needs{}}},
       {"r", "p", "q"}},
  };
  for (const Case& c : cases) {
    const std::vector<OrderNode> nodes = Nodes(c.cells);
    std::vector<size_t> all(nodes.size());
    for (size_t i = 0; i < all.size(); ++i) all[i] = i;
    EXPECT_EQ(Names(c.cells, NeedsFirst(nodes, all)), c.expected) << c.label;
  }
  // Among a subset (a reload's added cells): needs outside it do not hold anything back.
  const std::vector<Cell> cells = {
      {"old", Needs{}}, {"new_edge", Needs{"new_db", "old"}}, {"new_db", Needs{}}};
  const std::vector<size_t> added = {1, 2};
  EXPECT_THAT(Names(cells, NeedsFirst(Nodes(cells), added)), ElementsAre("new_db", "new_edge"));
}

// The stopped or failed cell down a held need's chain that holds the whole chain.
TEST(StartOrder, IdleCellBehindAHeldNeed) {
  using Needs = std::vector<std::string>;
  const std::vector<Cell> chain = {{"edge", Needs{"front"}, State::kStopped, kWait},
                                   {"front", Needs{"db"}, State::kStopped, kWait},
                                   {"db", Needs{}, State::kStopped, kFree}};
  EXPECT_EQ(IdleCellBehind(Nodes(chain), "front"), "db");
  EXPECT_EQ(IdleCellBehind(Nodes(chain), "edge"), "db");
  std::vector<Cell> moving = chain;
  moving[2].state = State::kStarting;
  EXPECT_EQ(IdleCellBehind(Nodes(moving), "front"), "") << "db is on its way";
  moving[2].state = State::kFailed;
  EXPECT_EQ(IdleCellBehind(Nodes(moving), "edge"), "db");
  // A cycle (the config refuses one) ends the search without an answer rather than looping.
  const std::vector<Cell> cycle = {{"p", Needs{"q"}, State::kStopped, kWait},
                                   {"q", Needs{"p"}, State::kStopped, kWait}};
  EXPECT_EQ(IdleCellBehind(Nodes(cycle), "p"), "");
}

// A start held behind a need in backoff is due when that need starts again, the last of them
// when several are (down the chain of held needs too); it was "a time not known" (Retry-After: 1
// however long the backoff).
TEST(StartOrder, AHeldStartIsDueWhenItsNeedsInBackoffStartAgain) {
  using Needs = std::vector<std::string>;
  std::vector<Cell> cells = {{"edge", Needs{"front"}, State::kStopped, kWait},
                             {"front", Needs{"db", "cache"}, State::kStopped, kWait},
                             {"db", Needs{}, State::kBackoff, kFree, 30'000},
                             {"cache", Needs{}, State::kBackoff, kFree, 12'000},
                             {"auth", Needs{}, State::kStarting, kFree}};
  EXPECT_EQ(HeldStartOf(Nodes(cells), "front"), (HeldStart{.due_at_ms = 30'000}));
  EXPECT_EQ(HeldStartOf(Nodes(cells), "edge"), (HeldStart{.due_at_ms = 30'000}));
  cells[2].state = State::kStarting;
  EXPECT_EQ(HeldStartOf(Nodes(cells), "front"), (HeldStart{.due_at_ms = 12'000}));
  cells[3].state = State::kRunning;
  EXPECT_EQ(HeldStartOf(Nodes(cells), "front"), HeldStart{}) << "db is on its way, time unknown";
  cells[2].state = State::kStopped;
  EXPECT_EQ(HeldStartOf(Nodes(cells), "edge"), HeldStart{.stuck = true});
}

// What a held cell's callers are told: the lifecycle's own availability when it is not held;
// held, a start due at its needs' next start, at a time not known, or none when stuck.
TEST(StartOrder, ShownAvailabilityOfAHeldStart) {
  using NextStart = admission::Availability::NextStart;
  const admission::Availability stopped = admission::Availability::NoneDue();
  const admission::Availability at =
      ShownAvailability(stopped, kWait, HeldStart{.due_at_ms = 30'000});
  EXPECT_EQ(at.next_start, NextStart::kAt);
  EXPECT_EQ(at.next_start_at_ms, 30'000u);
  EXPECT_TRUE(at.Refuses(29'000));
  EXPECT_EQ(at.RetryAfterMs(20'500), 9'500u) << "Retry-After: 10 (seconds, rounded up)";
  EXPECT_EQ(ShownAvailability(stopped, kWait, HeldStart{}).next_start, NextStart::kUnknown);
  EXPECT_EQ(ShownAvailability(stopped, kWait, HeldStart{.stuck = true}), stopped);
  EXPECT_EQ(ShownAvailability(stopped, kFree, HeldStart{.due_at_ms = 30'000}), stopped);
}

TEST(StartOrder, UnreadyNeedsInNeedsOrder) {
  const std::vector<Cell> cells = {{"db", {}, State::kStarting, kFree},
                                   {"auth", {}, State::kRunning, kFree},
                                   {"cache", {}, State::kBackoff, kFree},
                                   {"app", {"cache", "auth", "db"}, State::kStopped, kWait}};
  const std::vector<OrderNode> nodes = Nodes(cells);
  const std::vector<UnreadyNeed> unready = UnreadyNeeds(nodes, 3);
  EXPECT_THAT(unready, ElementsAre(UnreadyNeed{"cache", State::kBackoff},
                                   UnreadyNeed{"db", State::kStarting}));
  EXPECT_EQ(DescribeUnready(unready), "cache (backoff), db (starting)");
  EXPECT_THAT(UnreadyNeeds(nodes, 1), IsEmpty());
}

// A need whose own start is held for its needs has no worker (its lifecycle is stopped or
// failed) but starts by itself: it reads "waiting", as status names it, not "stopped".
TEST(StartOrder, ANeedWhoseStartIsHeldReadsWaiting) {
  const std::vector<Cell> cells = {{"db", {}, State::kStarting, kFree},
                                   {"front", {"db"}, State::kStopped, kWait},
                                   {"edge", {"front"}, State::kStopped, kWait},
                                   {"admin", {"front"}, State::kFailed, kFree},
                                   {"ops", {"admin"}, State::kStopped, kWait}};
  const std::vector<OrderNode> nodes = Nodes(cells);
  const std::vector<UnreadyNeed> unready = UnreadyNeeds(nodes, 2);
  EXPECT_THAT(unready, ElementsAre(UnreadyNeed{"front", State::kStopped, /*held=*/true}));
  EXPECT_STREQ(UnreadyStateName(unready[0]), "waiting");
  EXPECT_EQ(DescribeUnready(unready), "front (waiting)");
  // A failed need that nobody asked to start again is not waiting.
  EXPECT_EQ(DescribeUnready(UnreadyNeeds(nodes, 4)), "admin (failed)");
}

}  // namespace
}  // namespace bulkhead::supervisor
