// CallerAllowList: parsing of --allowed-callers and who it admits (the check over a real mTLS
// call is in tests/integration/tenants_test.sh).
#include "lib/auth/caller_allow_list.h"

#include <gtest/gtest.h>

#include <string>

namespace yoco {
namespace {

TEST(CallerAllowListTest, DefaultAdmitsEveryone) {
  CallerAllowList everyone;
  EXPECT_TRUE(everyone.admits_everyone());
  EXPECT_TRUE(everyone.Admits({}));
  EXPECT_TRUE(everyone.Admits({"anyone"}));
}

TEST(CallerAllowListTest, AdmitsOnlyListedIdentities) {
  auto list = CallerAllowList::Parse("yoco-router,spiffe://cluster/ns/yoco/sa/router");
  ASSERT_TRUE(list.ok()) << list.status();
  EXPECT_FALSE(list->admits_everyone());
  EXPECT_TRUE(list->Admits({"localhost", "yoco-router"}));
  EXPECT_TRUE(list->Admits({"spiffe://cluster/ns/yoco/sa/router"}));
  EXPECT_FALSE(list->Admits({}));
  EXPECT_FALSE(list->Admits({"team-b.clients", "localhost"}));
  EXPECT_FALSE(list->Admits({"yoco-router2"}));  // whole names only
  EXPECT_FALSE(list->Admits({"YOCO-ROUTER"}));   // as the certificate spells it
}

TEST(CallerAllowListTest, RefusesMalformedLists) {
  for (const std::string& bad :
       {std::string(""), std::string(","), std::string("a,,b"), std::string("a,"),
        std::string("has space"), std::string("tab\tname"), std::string("nul\0x", 5),
        std::string("\xc3\xa9t\xc3\xa9"), std::string(1025, 'a')}) {
    auto list = CallerAllowList::Parse(bad);
    EXPECT_EQ(list.status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
  std::string many;
  for (int i = 0; i < 101; ++i) many += "id" + std::to_string(i) + ",";
  many.pop_back();
  EXPECT_EQ(CallerAllowList::Parse(many).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(CallerAllowList::Parse(std::string(1024, 'a')).ok());
}

}  // namespace
}  // namespace yoco
