// The tenant file: what it accepts, what it refuses (with the reason), lookups by token and by
// certificate identity, and reloading: a changed file is taken, a broken one leaves the last
// good set in place.
#include "lib/auth/tenant_directory.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "lib/auth/caller_tenant.h"

namespace yoco {
namespace {

constexpr char kTokenA[] = "token-of-team-a-0123456789";
constexpr char kTokenA2[] = "second-token-of-team-a-xyz";
constexpr char kTokenB[] = "token-of-team-b-0123456789";

std::string TwoTenants() {
  return absl::StrCat(R"({"tenants": {"team-b": {"tokens": [")", kTokenB, R"("]},
      "team-a": {"tokens": [")",
                      kTokenA, R"(", ")", kTokenA2, R"("],
                 "client_identities": ["client-a.example", "spiffe://c/ns/rag/sa/a"]}}})");
}

TEST(TenantFileTest, MapsTokensAndIdentitiesToTenants) {
  absl::StatusOr<TenantTable> table = ParseTenantFile(TwoTenants());
  ASSERT_TRUE(table.ok()) << table.status();
  EXPECT_EQ(table->names, (std::vector<std::string>{"team-a", "team-b"}));
  EXPECT_EQ(table->token_digests.size(), 3u);
  EXPECT_EQ(table->identities.at("client-a.example"), "team-a");
}

TEST(TenantFileTest, RefusesWhatCouldConfuseTenantsOrMetrics) {
  const std::string ok_token = R"(["abcdefghijklmnop"])";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"not json", "{"},
      {"no tenants object", R"({"tenant": {}})"},
      {"extra top-level field", R"({"tenants": {}, "x": 1})"},
      {"upper-case name", absl::StrCat(R"({"tenants": {"Team": {"tokens": )", ok_token, "}}}")},
      {"name that would break a label",
       absl::StrCat(R"({"tenants": {"a\"}": {"tokens": )", ok_token, "}}}")},
      {"name starting with -", absl::StrCat(R"({"tenants": {"-a": {"tokens": )", ok_token, "}}}")},
      {"empty name", absl::StrCat(R"({"tenants": {"": {"tokens": )", ok_token, "}}}")},
      {"64-character name", absl::StrCat(R"({"tenants": {")", std::string(64, 'a'),
                                         R"(": {"tokens": )", ok_token, "}}}")},
      {"no credentials", R"({"tenants": {"a": {}}})"},
      {"short token", R"({"tenants": {"a": {"tokens": ["short"]}}})"},
      {"token with a space", R"({"tenants": {"a": {"tokens": ["abcdefgh ijklmnopq"]}}})"},
      {"token not a string", R"({"tenants": {"a": {"tokens": [12345678901234567890]}}})"},
      {"tokens not an array", R"({"tenants": {"a": {"tokens": "abcdefghijklmnopq"}}})"},
      {"unknown field", R"({"tenants": {"a": {"tokens": ["abcdefghijklmnopq"], "admin": true}}})"},
      {"token of two tenants", R"({"tenants": {"a": {"tokens": ["abcdefghijklmnopq"]},
                                               "b": {"tokens": ["abcdefghijklmnopq"]}}})"},
      {"identity of two tenants", R"({"tenants": {"a": {"client_identities": ["x"]},
                                                  "b": {"client_identities": ["x"]}}})"},
      {"duplicate tenant", R"({"tenants": {"a": {"client_identities": ["x"]},
                                           "a": {"client_identities": ["y"]}}})"},
      {"deep nesting", R"({"tenants": {"a": {"tokens": [[[["abcdefghijklmnopq"]]]]}}})"},
  };
  for (const auto& [what, text] : cases) {
    absl::StatusOr<TenantTable> table = ParseTenantFile(text);
    EXPECT_EQ(table.status().code(), absl::StatusCode::kInvalidArgument) << what;
  }
  std::string many = R"({"tenants": {)";
  for (size_t i = 0; i <= kMaxTenants; ++i) {
    absl::StrAppend(&many, i ? "," : "", "\"t", i, R"(": {"client_identities": ["id)", i, "\"]}");
  }
  many += "}}";
  EXPECT_EQ(ParseTenantFile(many).status().code(), absl::StatusCode::kInvalidArgument);
  // The message never repeats a token (files and logs get shared).
  absl::StatusOr<TenantTable> dup = ParseTenantFile(cases[14].second);
  EXPECT_EQ(dup.status().message().find("abcdefghijklmnopq"), std::string::npos);
}

TEST(TenantFileTest, LimitsAreReadAndBadOnesRefusedByName) {
  absl::StatusOr<TenantTable> table = ParseTenantFile(R"({"tenants": {
      "a": {"tokens": ["abcdefghijklmnop"],
            "limits": {"max_concurrent_requests": 4, "prompt_tokens_per_minute": 100000,
                       "generated_tokens_per_minute": 2000,
                       "max_pinned_snapshot_bytes": 1073741824}},
      "b": {"tokens": ["qrstuvwxyz012345"], "limits": {}},
      "c": {"tokens": ["6789abcdefghijkl"]}}})");
  ASSERT_TRUE(table.ok()) << table.status();
  EXPECT_EQ(table->limits.at("a"), (TenantLimits{4, 100000, 2000, uint64_t{1} << 30}));
  EXPECT_EQ(table->limits.count("b"), 0u);  // no limits: as if none were given
  EXPECT_EQ(table->limits.count("c"), 0u);
  for (const std::string& bad : {R"("limits": {"max_concurrent_requests": -1})",
                                 R"("limits": {"max_concurrent_requests": 1.5})",
                                 R"("limits": {"prompt_tokens_per_minute": "1000"})",
                                 R"("limits": {"prompt_tokens_per_minute": 2000000000000})",
                                 R"("limits": [4])", R"("limits": {"requests_per_second": 5})"}) {
    absl::StatusOr<TenantTable> refused = ParseTenantFile(
        absl::StrCat(R"({"tenants": {"a": {"tokens": ["abcdefghijklmnop"], )", bad, "}}}"));
    EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(refused.status().message().find("a: "), std::string::npos) << refused.status();
  }
}

TEST(TenantFileTest, SchedulingIsReadAndBadValuesRefusedByName) {
  absl::StatusOr<TenantTable> table = ParseTenantFile(R"({"tenants": {
      "batch": {"tokens": ["abcdefghijklmnop"], "scheduling": {"priority": 5, "weight": 1}},
      "chat": {"tokens": ["qrstuvwxyz012345"], "scheduling": {"priority": -1, "weight": 3}},
      "plain": {"tokens": ["6789abcdefghijkl"], "scheduling": {}}}})");
  ASSERT_TRUE(table.ok()) << table.status();
  EXPECT_EQ(table->scheduling.at("batch"), (TenantScheduling{5, 1}));
  EXPECT_EQ(table->scheduling.at("chat"), (TenantScheduling{-1, 3}));
  EXPECT_EQ(table->scheduling.count("plain"), 0u);  // the default
  for (const std::string& bad :
       {R"("scheduling": {"priority": 101})", R"("scheduling": {"priority": 1.5})",
        R"("scheduling": {"weight": 0})", R"("scheduling": {"weight": 1001})",
        R"("scheduling": {"weight": -2})", R"("scheduling": {"nice": 1})", R"("scheduling": 3)"}) {
    absl::StatusOr<TenantTable> refused = ParseTenantFile(
        absl::StrCat(R"({"tenants": {"a": {"tokens": ["abcdefghijklmnop"], )", bad, "}}}"));
    EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(refused.status().message().find("a: "), std::string::npos) << refused.status();
  }
}

TEST(TenantFileTest, SaltsDifferPerTenant) {
  EXPECT_NE(TenantCacheSalt("a"), TenantCacheSalt("b"));
  EXPECT_NE(TenantCacheSalt("a"), "a");  // a tenant's salt is not a salt a client would send
}

TEST(BearerTokenTest, OnlyTheBearerScheme) {
  EXPECT_EQ(*BearerToken("Bearer abc"), "abc");
  EXPECT_EQ(*BearerToken("bearer   abc"), "abc");
  EXPECT_FALSE(BearerToken("Basic YWJj").ok());
  EXPECT_FALSE(BearerToken("Bearer ").ok());
  EXPECT_FALSE(BearerToken("Bearer").ok());
  EXPECT_FALSE(BearerToken("").ok());
}

class TenantDirectoryTest : public ::testing::Test {
 protected:
  TenantDirectoryTest()
      : path_(absl::StrCat(::testing::TempDir(), "/tenants_", getpid(), "_",
                           ::testing::UnitTest::GetInstance()->current_test_info()->name())) {}
  ~TenantDirectoryTest() override { std::filesystem::remove(path_); }

  void Write(const std::string& text) {
    // Renamed into place, as a Secret volume swaps its files.
    const std::string tmp = path_ + ".tmp";
    std::ofstream(tmp, std::ios::binary) << text;
    std::filesystem::rename(tmp, path_);
  }

  std::unique_ptr<TenantDirectory> Open() {
    auto directory = TenantDirectory::Open(path_, absl::Seconds(10), [this] { return now_; });
    EXPECT_TRUE(directory.ok()) << directory.status();
    return directory.ok() ? *std::move(directory) : nullptr;
  }

  std::string path_;
  absl::Time now_ = absl::FromUnixSeconds(1000);
};

TEST_F(TenantDirectoryTest, LooksUpTokensAndIdentities) {
  Write(TwoTenants());
  auto directory = Open();
  ASSERT_NE(directory, nullptr);
  EXPECT_EQ(*directory->ByToken(kTokenA), "team-a");
  EXPECT_EQ(*directory->ByToken(kTokenA2), "team-a");
  EXPECT_EQ(*directory->ByToken(kTokenB), "team-b");
  EXPECT_EQ(directory->ByToken("token-of-team-c-0123456789").status().code(),
            absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(directory->ByToken(std::string(kTokenA) + "x").status().code(),
            absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(*directory->ByIdentity({"unknown", "spiffe://c/ns/rag/sa/a"}), "team-a");
  EXPECT_EQ(directory->ByIdentity({"client-b.example"}).status().code(),
            absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(directory->ByIdentity({}).status().code(), absl::StatusCode::kUnauthenticated);
}

TEST_F(TenantDirectoryTest, RefusesMissingSpecialAndHugeFiles) {
  EXPECT_EQ(TenantDirectory::Open(path_, absl::Seconds(1)).status().code(),
            absl::StatusCode::kNotFound);
  ASSERT_EQ(mkfifo(path_.c_str(), 0600), 0);  // would block a plain open() forever
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(TenantDirectory::Open(path_, absl::Seconds(1)).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  std::filesystem::remove(path_);
  Write(std::string(kMaxTenantFileBytes + 1, ' '));
  EXPECT_EQ(TenantDirectory::Open(path_, absl::Seconds(1)).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(TenantDirectoryTest, TakesAChangedFileAndKeepsTheLastGoodOne) {
  Write(TwoTenants());
  auto directory = Open();
  ASSERT_NE(directory, nullptr);
  EXPECT_EQ(directory->loads(), 1u);
  // Team B's token is revoked, team C added.
  Write(absl::StrCat(R"({"tenants": {"team-a": {"tokens": [")", kTokenA,
                     R"("]}, "team-c": {"tokens": ["token-of-team-c-0123456789"]}}})"));
  EXPECT_TRUE(directory->ByToken(kTokenB).ok());  // not checked again before the interval
  now_ += absl::Seconds(10);
  EXPECT_FALSE(directory->ByToken(kTokenB).ok());
  EXPECT_EQ(*directory->ByToken("token-of-team-c-0123456789"), "team-c");
  EXPECT_EQ(directory->Names(), (std::vector<std::string>{"team-a", "team-c"}));
  EXPECT_EQ(directory->loads(), 2u);

  Write(R"({"tenants": {"team-a": )");  // a half-written file
  now_ += absl::Seconds(10);
  EXPECT_EQ(*directory->ByToken("token-of-team-c-0123456789"), "team-c");
  EXPECT_EQ(directory->ReloadIfChanged().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(directory->loads(), 2u);
  std::filesystem::remove(path_);  // gone altogether: still the last good set
  now_ += absl::Seconds(10);
  EXPECT_EQ(*directory->ByToken(kTokenA), "team-a");
}

}  // namespace
}  // namespace yoco
