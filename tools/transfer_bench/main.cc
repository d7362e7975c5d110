// yoco-transfer-bench: bandwidth and latency of UcxTransport between two processes.
//   yoco-transfer-bench --tls tcp|sm --size BYTES [--count N] [--json OUT.json] [--checksum]
//                       [--perftest] [--receive-segments BYTES]
#include <fstream>
#include <iostream>

#include "absl/strings/numbers.h"
#include "tools/transfer_bench/transfer_bench.h"

int main(int argc, char** argv) {
  yoco::TransferBenchOptions options;
  options.self_path = "/proc/self/exe";
  std::string json_path;
  bool serve = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    bool ok = true;
    if (arg == "--tls") {
      options.tls = value();
      ok = options.tls == "tcp" || options.tls == "sm";
    } else if (arg == "--size") {
      ok = absl::SimpleAtoi(value(), &options.size) && options.size > 0 &&
           options.size <= (uint64_t{4} << 30);
    } else if (arg == "--count") {
      ok =
          absl::SimpleAtoi(value(), &options.count) && options.count > 0 && options.count <= 100000;
    } else if (arg == "--json") {
      json_path = value();
    } else if (arg == "--checksum") {
      options.checksum = true;
    } else if (arg == "--receive-segments") {
      ok = absl::SimpleAtoi(value(), &options.receive_segment_bytes) &&
           options.receive_segment_bytes <= (uint64_t{4} << 30);
    } else if (arg == "--perftest") {
      options.perftest = true;
    } else if (arg == "--serve") {
      serve = true;
    } else {
      ok = false;
    }
    if (!ok) {
      std::cerr
          << "yoco-transfer-bench: bad argument '" << arg << "'\n"
          << "usage: yoco-transfer-bench --tls tcp|sm --size BYTES [--count N] [--json OUT.json]"
             " [--checksum] [--perftest] [--receive-segments BYTES]\n";
      return 2;
    }
  }
  if (serve) return yoco::ServeTransfers(options.tls, options.receive_segment_bytes);
  auto result = yoco::RunTransferBench(options);
  if (!result.ok()) {
    std::cerr << "yoco-transfer-bench: " << result.status().message() << "\n";
    return 1;
  }
  std::cout << "tls " << result->tls << ", size " << result->size << " bytes: " << result->gbps
            << " GB/s, p50 " << result->p50_ms << " ms, p99 " << result->p99_ms << " ms";
  if (result->perftest_gbps > 0) {
    std::cout << "; ucx_perftest " << result->perftest_gbps << " GB/s ("
              << 100.0 * result->gbps / result->perftest_gbps << "%)";
  }
  std::cout << "\n";
  if (!json_path.empty()) {
    std::ofstream out(json_path, std::ios::trunc);
    out << yoco::ToJson(*result);
    if (!out) {
      std::cerr << "yoco-transfer-bench: cannot write " << json_path << "\n";
      return 1;
    }
  }
  return 0;
}
