// --backend/--device: the names parse, the CPU choice builds a CPU backend, and the CUDA choice
// either builds on a GPU or says clearly why it cannot (no GPU, or a build without CUDA).
#include "lib/engine/backend_choice.h"

#include <gtest/gtest.h>

#include "lib/engine/cpu_backend.h"
#include "tests/engine/test_models.h"

namespace yoco {
namespace {

TEST(BackendChoiceTest, ParsesTheTwoNamesOnly) {
  EXPECT_EQ(*ParseBackendKind("cpu"), BackendKind::kCpu);
  EXPECT_EQ(*ParseBackendKind("cuda"), BackendKind::kCuda);
  for (const char* bad : {"", "gpu", "CUDA", "cpu "}) {
    const auto kind = ParseBackendKind(bad);
    EXPECT_TRUE(absl::IsInvalidArgument(kind.status())) << bad;
    EXPECT_NE(kind.status().message().find("--backend"), std::string::npos);
  }
}

TEST(BackendChoiceTest, BuildsTheChosenBackend) {
  auto model = testing::MakeModel(testing::SmallConfig(), 3, "backend_choice");
  ASSERT_NE(model, nullptr);
  BackendChoice cpu;
  auto made = MakeBackend(model, cpu);
  ASSERT_TRUE(made.ok()) << made.status();
  EXPECT_NE(dynamic_cast<CpuBackend*>(made->get()), nullptr);
  EXPECT_EQ(DescribeBackend(**made).rfind("cpu (", 0), 0u);

  BackendChoice cuda;
  cuda.kind = BackendKind::kCuda;
  cuda.device = 9999;
  auto gpu = MakeBackend(model, cuda);
  ASSERT_FALSE(gpu.ok());  // no machine has device 9999
  if (CudaBuilt()) {
    EXPECT_TRUE(absl::IsUnavailable(gpu.status()) || absl::IsInvalidArgument(gpu.status()))
        << gpu.status();
  } else {
    EXPECT_TRUE(absl::IsUnavailable(gpu.status())) << gpu.status();
    EXPECT_NE(gpu.status().message().find("no CUDA backend"), std::string::npos);
  }
}

}  // namespace
}  // namespace yoco
