// FairOrder against orders worked out by hand (small cases) and counted shares (long runs).
#include "lib/scheduling/fair_order.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

namespace yoco {
namespace {

std::vector<uint64_t> PopAll(FairOrder& order) {
  std::vector<uint64_t> out;
  while (std::optional<uint64_t> next = order.Peek()) {
    out.push_back(*next);
    order.Pop();
  }
  return out;
}

// Callers give ids in arrival order, so one class is served lowest id first.
TEST(FairOrderTest, OneClassIsIdOrder) {
  FairOrder order;
  for (uint64_t id : {5, 3, 9, 1}) order.Add(id, {});
  EXPECT_EQ(PopAll(order), (std::vector<uint64_t>{1, 3, 5, 9}));
  EXPECT_TRUE(order.empty());
  EXPECT_FALSE(order.Peek().has_value());
}

// A tenant's ids are counted, and its newest found, across every priority it waits at.
TEST(FairOrderTest, CountsAndNewestSpanPriorities) {
  FairOrder order;
  order.Add(1, {.tenant = "a", .priority = 0});
  order.Add(2, {.tenant = "b", .priority = 0});
  order.Add(3, {.tenant = "a", .priority = -1});
  order.Add(4, {.tenant = "a", .priority = 0});
  order.Add(5, {.tenant = "a", .priority = 2});
  EXPECT_EQ(order.CountsByTenant(), (std::map<std::string, size_t>{{"a", 4}, {"b", 1}}));
  EXPECT_EQ(order.Newest("a"), 5u);
  EXPECT_EQ(order.Newest("b"), 2u);
  EXPECT_FALSE(order.Newest("c").has_value());
  order.Remove(5);
  order.Pop();  // 3, the only one at priority -1
  EXPECT_EQ(order.Newest("a"), 4u);
  EXPECT_EQ(order.CountsByTenant(), (std::map<std::string, size_t>{{"a", 2}, {"b", 1}}));
}

// A request that left and comes back with its old id is ahead of its tenant's later ones, and
// still takes turns with other tenants.
TEST(FairOrderTest, AnOldIdComingBackKeepsItsTurnWithinItsTenant) {
  FairOrder order;
  for (uint64_t id = 1; id <= 4; ++id) order.Add(id, {.tenant = "a"});
  order.Add(10, {.tenant = "b"});
  EXPECT_EQ(*order.Peek(), 1u);
  order.Pop();  // a's turn: 1 leaves, finds no room and comes back
  order.Add(1, {.tenant = "a"});
  EXPECT_EQ(PopAll(order), (std::vector<uint64_t>{10, 1, 2, 3, 4}));
}

TEST(FairOrderTest, LowerPriorityValuesGoFirst) {
  FairOrder order;
  order.Add(1, {.tenant = "a", .priority = 2});
  order.Add(2, {.tenant = "a", .priority = 0});
  order.Add(3, {.tenant = "b", .priority = 1});
  order.Add(4, {.tenant = "b", .priority = -1});
  EXPECT_EQ(PopAll(order), (std::vector<uint64_t>{4, 2, 3, 1}));
}

// Tenant a queued a backlog of six; b's two requests arrive later and alternate with a's from
// the next turn on, not after a's backlog.
TEST(FairOrderTest, ANewcomerIsNotQueuedBehindAnotherTenantsBacklog) {
  FairOrder order;
  for (uint64_t id = 1; id <= 6; ++id) order.Add(id, {.tenant = "a"});
  EXPECT_EQ(*order.Peek(), 1u);
  order.Pop();
  order.Pop();  // a has had two turns
  order.Add(100, {.tenant = "b"});
  order.Add(101, {.tenant = "b"});
  EXPECT_EQ(PopAll(order), (std::vector<uint64_t>{100, 3, 101, 4, 5, 6}));
}

// An idle tenant banks nothing: after a's hundred turns alone, b does not get a hundred in a
// row.
TEST(FairOrderTest, IdleTimeBanksNoCredit) {
  FairOrder order;
  for (uint64_t id = 1; id <= 100; ++id) {
    order.Add(id, {.tenant = "a"});
    order.Pop();
  }
  for (uint64_t id = 101; id <= 104; ++id) order.Add(id, {.tenant = "a"});
  for (uint64_t id = 201; id <= 204; ++id) order.Add(id, {.tenant = "b"});
  const std::vector<uint64_t> got = PopAll(order);
  const std::vector<uint64_t> want = {101, 201, 102, 202, 103, 203, 104, 204};
  EXPECT_EQ(got, want);
}

TEST(FairOrderTest, BackloggedTenantsShareByWeight) {
  FairOrder order;
  uint64_t id = 0;
  std::map<uint64_t, std::string> tenant_of;
  for (int i = 0; i < 200; ++i) {
    for (const auto& [name, weight] :
         {std::pair<std::string, uint32_t>{"heavy", 3}, {"light", 1}}) {
      order.Add(++id, {.tenant = name, .weight = weight});
      tenant_of[id] = name;
    }
  }
  std::map<std::string, int> turns;
  for (int i = 0; i < 120; ++i) {
    turns[tenant_of[*order.Peek()]]++;
    order.Pop();
  }
  EXPECT_EQ(turns["heavy"], 90);
  EXPECT_EQ(turns["light"], 30);
}

// Long work of class `holder` (ticket 1) that took its turn without queueing runs `blocks` blocks;
// between them it hands the turn to whoever goes before it (as TurnQueue does) and takes it
// back. Returns who ran each block or turn, in order.
std::vector<uint64_t> RunHolder(FairOrder& order, const SchedulingClass& holder, int blocks) {
  std::vector<uint64_t> ran = {1};
  for (int block = 1; block < blocks; ++block) {
    if (order.AnyBefore(holder)) {
      order.AddHolder(1, holder);
      while (*order.Peek() != 1) {
        ran.push_back(*order.Peek());
        order.Pop();
      }
      order.Pop();
    }
    ran.push_back(1);
  }
  return ran;
}

// At one priority, a's long work and b's requests take turns block by block, b's share by its
// weight (worked by hand from the passes: b joins at 0, a is charged a turn per block it holds).
TEST(FairOrderTest, AHolderTakesTurnsBlockByBlockWithAnotherTenant) {
  FairOrder order;
  for (uint64_t id = 10; id <= 12; ++id) order.Add(id, {.tenant = "b"});
  EXPECT_EQ(RunHolder(order, {.tenant = "a"}, 5),
            (std::vector<uint64_t>{1, 10, 1, 11, 1, 12, 1, 1}));
  for (uint64_t id = 10; id <= 12; ++id) order.Add(id, {.tenant = "b", .weight = 2});
  EXPECT_EQ(RunHolder(order, {.tenant = "a"}, 4), (std::vector<uint64_t>{1, 10, 11, 1, 12, 1, 1}));
}

// The holder does not hand over to its own tenant's later requests, nor to a lower priority;
// a higher priority goes before it whatever the passes, another tenant of its priority only when
// asked (`within_priority`).
TEST(FairOrderTest, AHolderHandsOverToAHigherPriorityOrAnotherTenantOnly) {
  FairOrder order;
  order.Add(2, {.tenant = "a"});
  order.Add(3, {.tenant = "b", .priority = 1});
  EXPECT_FALSE(order.AnyBefore({.tenant = "a"}));
  order.Add(4, {.tenant = "b", .priority = -1});
  EXPECT_TRUE(order.AnyBefore({.tenant = "a"}));
  EXPECT_TRUE(order.AnyBefore({.tenant = "a"}, /*within_priority=*/false));
  order.Remove(4);
  // a's later request queued first, both at pass 0: the holder's turn counts against a.
  order.Add(5, {.tenant = "b"});
  EXPECT_TRUE(order.AnyBefore({.tenant = "a"}));
  EXPECT_FALSE(order.AnyBefore({.tenant = "a"}, /*within_priority=*/false));
  order.AddHolder(1, {.tenant = "a"});
  EXPECT_EQ(PopAll(order), (std::vector<uint64_t>{5, 1, 2, 3}));
}

TEST(FairOrderTest, RemovedIdsAreSkipped) {
  FairOrder order;
  order.Add(1, {.tenant = "a"});
  order.Add(2, {.tenant = "b"});
  order.Add(3, {.tenant = "a"});
  EXPECT_TRUE(order.Remove(1));
  EXPECT_FALSE(order.Remove(1));
  EXPECT_TRUE(order.Remove(2));
  EXPECT_EQ(order.size(), 1u);
  EXPECT_EQ(PopAll(order), (std::vector<uint64_t>{3}));
}

}  // namespace
}  // namespace yoco
