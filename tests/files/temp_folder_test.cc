// TempFolder: a fresh folder each time, removed with its contents (nested folders included) when
// its owner goes away, kept while moved, kept when a forked child exits.
#include "lib/files/temp_folder.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

namespace yoco {
namespace {

namespace fs = std::filesystem;

void WriteFile(const std::string& path) { std::ofstream(path) << "bytes"; }

TEST(TempFolderTest, MakesAFreshFolderAndRemovesEverythingInIt) {
  std::string path;
  {
    auto a = TempFolder::Create("yoco-temp-folder-test");
    auto b = TempFolder::Create("yoco-temp-folder-test");
    ASSERT_TRUE(a.ok()) << a.status();
    ASSERT_TRUE(b.ok()) << b.status();
    EXPECT_NE(a->path(), b->path());
    path = a->path();
    ASSERT_TRUE(fs::is_directory(path));
    EXPECT_TRUE(fs::is_empty(path));
    fs::create_directories(path + "/model/shard");
    WriteFile(path + "/model/shard/model.safetensors");
    WriteFile(path + "/params.json");
  }
  EXPECT_FALSE(fs::exists(path));
}

TEST(TempFolderTest, AMovedFolderBelongsToItsNewOwner) {
  auto made = TempFolder::Create("yoco-temp-folder-test");
  ASSERT_TRUE(made.ok()) << made.status();
  const std::string path = made->path();
  {
    TempFolder owner = std::move(*made);
    EXPECT_EQ(owner.path(), path);
    EXPECT_TRUE(made->path().empty());
  }
  EXPECT_FALSE(fs::exists(path));
  // Assigning over a folder removes the one it held.
  auto first = TempFolder::Create("yoco-temp-folder-test");
  auto second = TempFolder::Create("yoco-temp-folder-test");
  ASSERT_TRUE(first.ok() && second.ok());
  const std::string first_path = first->path(), second_path = second->path();
  *first = std::move(*second);
  EXPECT_FALSE(fs::exists(first_path));
  EXPECT_TRUE(fs::is_directory(second_path));
}

TEST(TempFolderTest, AForkedChildLeavesItsParentsFolder) {
  auto folder = TempFolder::Create("yoco-temp-folder-test");
  ASSERT_TRUE(folder.ok()) << folder.status();
  const std::string kept = folder->path() + "/kept";
  WriteFile(kept);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    folder->~TempFolder();  // what the child's exit would run
    std::_Exit(fs::exists(kept) ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "the child removed the folder";
  EXPECT_TRUE(fs::exists(kept));
}

TEST(TempFolderTest, FailsClearlyWhereNoFolderCanBeMade) {
  const char* old = std::getenv("TMPDIR");
  const std::string saved = old != nullptr ? old : "";
  setenv("TMPDIR", "/proc/self/no-such-folder", 1);
  auto folder = TempFolder::Create("yoco-temp-folder-test");
  if (old != nullptr) {
    setenv("TMPDIR", saved.c_str(), 1);
  } else {
    unsetenv("TMPDIR");
  }
  ASSERT_FALSE(folder.ok());
  EXPECT_EQ(folder.status().code(), absl::StatusCode::kInternal);
  EXPECT_NE(folder.status().message().find("cannot create a temporary folder"), std::string::npos);
}

}  // namespace
}  // namespace yoco
