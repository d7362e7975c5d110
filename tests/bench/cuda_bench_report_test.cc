// The GPU benchmark's report: its table and JSON from a report filled by hand (no GPU needed).
#include <gtest/gtest.h>

#include "nlohmann/json.hpp"
#include "tools/bench/cuda_engine_bench.h"

namespace yoco {
namespace {

CudaEngineBenchReport ReportWithOneProduct() {
  CudaEngineBenchReport r;
  r.device = "test device";
  r.gemm_tflops = 700;
  r.copy_gbs = 4000;
  r.products.push_back({"q alone (3072x3072)", 18874368, 6.0, 3145.7});
  return r;
}

TEST(CudaBenchReportTest, TableGivesEachProductItsShareOfTheCopyRate) {
  const std::string table = ReportWithOneProduct().ToTable();
  EXPECT_NE(table.find("products alone"), std::string::npos) << table;
  // 3145.7 / 4000 GB/s: 79% of the copy rate; 18.9 MB in 6.0 us.
  EXPECT_NE(table.find("q alone (3072x3072)"), std::string::npos) << table;
  EXPECT_NE(table.find("(79%)"), std::string::npos) << table;
  EXPECT_NE(table.find("18.9"), std::string::npos) << table;
}

TEST(CudaBenchReportTest, TableLeavesOutProductsNotMeasured) {
  CudaEngineBenchReport r = ReportWithOneProduct();
  r.products.clear();
  EXPECT_EQ(r.ToTable().find("products alone"), std::string::npos);
}

TEST(CudaBenchReportTest, JsonCarriesTheProducts) {
  const nlohmann::json j = nlohmann::json::parse(ReportWithOneProduct().ToJson());
  ASSERT_EQ(j["products"].size(), 1u);
  EXPECT_EQ(j["products"][0]["what"], "q alone (3072x3072)");
  EXPECT_EQ(j["products"][0]["bytes"], 18874368);
  EXPECT_DOUBLE_EQ(j["products"][0]["gbs"].get<double>(), 3145.7);
  EXPECT_DOUBLE_EQ(j["copy_gbs"].get<double>(), 4000);
}

}  // namespace
}  // namespace yoco
