// A hung decode worker loses no stream: the worker carrying a long stream is frozen (SIGSTOP, its
// connections stay open) and the stream goes on from the other decode worker, ending long before
// the client's deadline, with exactly the in-process engine's tokens (none lost, none twice); the
// frozen worker, let go again, serves new requests. Also yoco-cli --prompt-file against the
// cluster.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>
#include <future>

#include "absl/strings/match.h"
#include "tests/cluster/serving_cluster.h"

namespace yoco::testing {
namespace {

TEST(ClusterStallTest, AStreamMovesOffAFrozenDecodeWorker) {
  ClusterOptions options;
  options.decode_workers = 2;
  auto cluster = ServingCluster::Start(options);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  ServingCluster& c = **cluster;
  // Both decode workers probed healthy, so the stream has somewhere to go.
  absl::SleepFor(absl::Milliseconds(500));

  const std::vector<int32_t> prompt = {0, 17, 5, 99, 254, 31, 8, 44, 3, 120};
  SamplingParams sampling;
  sampling.temperature = 0.9f;
  sampling.top_k = 50;
  sampling.seed = 7;
  std::future<Generated> stream = std::async(std::launch::async, [&] {
    return c.Generate(Request(prompt, 1500, sampling), absl::Seconds(120));
  });
  Service* victim = nullptr;
  ASSERT_TRUE(WaitFor(
      [&] {
        for (int i = 0; i < 2; ++i) {
          if (c.decode(i).Metric("yoco_decode_active_sequences") == 1) victim = &c.decode(i);
        }
        return victim != nullptr;
      },
      absl::Seconds(30)))
      << c.Logs();
  victim->process().Pause();
  const absl::Time stopped = absl::Now();
  const Generated got = stream.get();
  const absl::Duration took = absl::Now() - stopped;
  EXPECT_TRUE(got.status.ok()) << got.status.error_message();
  EXPECT_EQ(got.tokens, InProcessTokens(prompt, 1500, sampling));
  EXPECT_GE(c.router().Metric("yoco_router_stalled_streams_total"), 1);
  EXPECT_LT(took, absl::Seconds(60));

  victim->process().Resume();
  absl::SleepFor(absl::Seconds(1));  // probed healthy again
  for (int i = 0; i < 4; ++i) {      // both workers serve again (the router alternates by load)
    const Generated again = c.Generate(Request({0, 5, 9}, 8), absl::Seconds(30));
    EXPECT_TRUE(again.status.ok()) << i << ": " << again.status.error_message();
  }
}

// yoco-cli --prompt-file gives the tokens of the same text given inline; a FIFO is refused at
// once instead of blocking the client.
TEST(ClusterStallTest, PromptFileFromTheCommandLine) {
  auto cluster = ServingCluster::Start(ClusterOptions());
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  ServingCluster& c = **cluster;
  const std::string text = "Once upon a time, in a cluster far away, ";
  const std::string file = c.dir() + "/prompt.txt", fifo = c.dir() + "/prompt.fifo";
  std::ofstream(file) << text;
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  auto run = [&](const std::string& name, std::vector<std::string> args) {
    std::vector<std::string> all = c.CliFlags();
    all.insert(all.end(), {"generate", "--max-new-tokens", "12"});
    all.insert(all.end(), args.begin(), args.end());
    const ToolRun cli =
        RunToCompletion(BinaryPath("yoco-cli"), all, c.dir() + "/" + name, absl::Seconds(30));
    return absl::StrCat("exit ", cli.status, ": ", cli.output);
  };
  const std::string inline_text = run("inline", {"--prompt", text});
  EXPECT_TRUE(absl::StartsWith(inline_text, "exit 0: ")) << inline_text;
  EXPECT_EQ(run("file", {"--prompt-file", file}), inline_text);
  const std::string from_fifo = run("fifo", {"--prompt-file", fifo});
  EXPECT_TRUE(absl::StrContains(from_fifo, "not a regular file")) << from_fifo;
}

}  // namespace
}  // namespace yoco::testing
