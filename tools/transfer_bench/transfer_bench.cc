// Transfer benchmark. The receiver is a second process so the numbers include everything a
// prefill-to-decode hand-off pays.
#include "tools/transfer_bench/transfer_bench.h"

#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <future>
#include <iostream>
#include <mutex>
#include <regex>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "lib/transport/ucx_transport.h"

extern char** environ;

namespace yoco {
namespace {

UcxTransportOptions TransportOptions(const std::string& tls, bool checksum) {
  UcxTransportOptions o;
  o.tls = tls;
  o.net_devices = tls == "tcp" ? "lo" : "";
  o.checksum = checksum;
  return o;
}

// A child process with its stdout on a pipe; killed and reaped on destruction.
class Child {
 public:
  Child(const std::vector<std::string>& argv, const std::vector<std::string>& env_extra) {
    int out[2];
    if (pipe(out) != 0) return;
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, out[1], 1);
    posix_spawn_file_actions_addclose(&actions, out[0]);
    std::vector<char*> args, env;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    for (char** e = environ; *e; ++e) env.push_back(*e);
    for (const auto& e : env_extra) env.push_back(const_cast<char*>(e.c_str()));
    env.push_back(nullptr);
    if (posix_spawnp(&pid_, args[0], &actions, nullptr, args.data(), env.data()) != 0) pid_ = -1;
    posix_spawn_file_actions_destroy(&actions);
    close(out[1]);
    fd_ = out[0];
  }
  ~Child() {
    if (pid_ > 0) {
      kill(pid_, SIGTERM);
      waitpid(pid_, nullptr, 0);
    }
    if (fd_ >= 0) close(fd_);
  }
  bool ok() const { return pid_ > 0; }
  // Everything the child printed until it exits or `timeout_ms` passes.
  std::string ReadAll(int timeout_ms) {
    std::string out;
    char buf[4096];
    pollfd p{fd_, POLLIN, 0};
    while (poll(&p, 1, timeout_ms) > 0) {
      const ssize_t n = read(fd_, buf, sizeof buf);
      if (n <= 0) break;
      out.append(buf, static_cast<size_t>(n));
    }
    return out;
  }
  std::string ReadLine(int timeout_ms) {
    std::string line;
    char c;
    pollfd p{fd_, POLLIN, 0};
    while (poll(&p, 1, timeout_ms) > 0 && read(fd_, &c, 1) == 1 && c != '\n') line.push_back(c);
    return line;
  }
  int Wait() {
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    return status;
  }

 private:
  pid_t pid_ = -1;
  int fd_ = -1;
};

// ucx_perftest's "Final:" line: iterations, overheads, then average and overall MB/s.
absl::StatusOr<double> RunPerftest(const TransferBenchOptions& o) {
  const std::vector<std::string> env = {absl::StrCat("UCX_TLS=", o.tls, ",self"),
                                        "UCX_NET_DEVICES=lo"};
  const std::string port = "13371";
  const std::vector<std::string> common = {
      "-t", "ucp_am_bw", "-s", std::to_string(o.size), "-n", std::to_string(o.count), "-p", port};
  std::vector<std::string> server_args = {"ucx_perftest"};
  server_args.insert(server_args.end(), common.begin(), common.end());
  Child server(server_args, env);
  if (!server.ok()) return absl::NotFoundError("ucx_perftest not found (package ucx-utils)");
  usleep(500000);
  std::vector<std::string> client_args = {"ucx_perftest", "127.0.0.1"};
  client_args.insert(client_args.end(), common.begin(), common.end());
  Child client(client_args, env);
  const std::string out = client.ReadAll(120000);
  std::smatch m;
  if (!std::regex_search(
          out, m, std::regex(R"(Final:\s+\d+\s+[\d.]+\s+[\d.]+\s+[\d.]+\s+[\d.]+\s+([\d.]+))"))) {
    return absl::InternalError("could not parse ucx_perftest output:\n" + out);
  }
  return std::stod(m[1].str()) * 1048576.0 / 1e9;  // perftest's MB/s are MiB/s
}

}  // namespace

int ServeTransfers(const std::string& tls, uint64_t segment_bytes) {
  // Received data lands in reused, already-faulted memory, as a decode worker's cache would
  // provide (and as ucx_perftest does); fresh heap pages would add the kernel's page faults.
  std::mutex mu;
  std::vector<std::pair<uint8_t*, size_t>> free_buffers;
  ReceiveCallbacks callbacks;
  callbacks.allocate = [&](uint64_t size) -> absl::StatusOr<ByteBuffer> {
    std::lock_guard<std::mutex> lock(mu);
    for (size_t i = 0; i < free_buffers.size(); ++i) {
      if (free_buffers[i].second == size) {
        uint8_t* p = free_buffers[i].first;
        free_buffers.erase(free_buffers.begin() + i);
        return ByteBuffer(p, size, [&mu, &free_buffers, size](uint8_t* q) {
          std::lock_guard<std::mutex> lock(mu);
          free_buffers.push_back({q, size});
        });
      }
    }
    uint8_t* p = new uint8_t[size];
    std::memset(p, 0, size);
    return ByteBuffer(p, size, [&mu, &free_buffers, size](uint8_t* q) {
      std::lock_guard<std::mutex> lock(mu);
      free_buffers.push_back({q, size});
    });
  };
  if (segment_bytes > 0) {
    // The same reused memory cut into segments a cache line apart, so that nothing can take
    // them for one buffer.
    auto contiguous = callbacks.allocate;
    callbacks.allocate = [contiguous, segment_bytes](uint64_t size) -> absl::StatusOr<ByteBuffer> {
      const uint64_t segments = (size + segment_bytes - 1) / segment_bytes;
      absl::StatusOr<ByteBuffer> memory = contiguous(size + 64 * segments);
      if (!memory.ok()) return memory.status();
      std::vector<ByteBuffer::Segment> parts;
      for (uint64_t at = 0, i = 0; at < size; at += segment_bytes, ++i) {
        parts.push_back({memory->data() + at + 64 * i, std::min(segment_bytes, size - at)});
      }
      return ByteBuffer(std::move(parts), std::make_shared<ByteBuffer>(std::move(*memory)));
    };
  }
  callbacks.on_received = [](const IncomingTransfer&, ByteBuffer) {};
  auto transport = UcxTransport::Create(TransportOptions(tls, /*checksum=*/false), callbacks);
  if (!transport.ok()) {
    std::cerr << transport.status() << "\n";
    return 1;
  }
  // Lives until the benchmark process ends it (or dies itself).
  prctl(PR_SET_PDEATHSIG, SIGTERM);
  std::cout << absl::BytesToHexString((*transport)->address()) << std::endl;
  while (true) pause();
}

absl::StatusOr<TransferBenchResult> RunTransferBench(const TransferBenchOptions& o) {
  Child receiver({o.self_path, "--serve", "--tls", o.tls, "--receive-segments",
                  std::to_string(o.receive_segment_bytes)},
                 {});
  if (!receiver.ok()) return absl::InternalError("cannot start the receiver process");
  const std::string address = absl::HexStringToBytes(receiver.ReadLine(30000));
  if (address.empty()) return absl::UnavailableError("the receiver process did not start");
  auto transport = UcxTransport::Create(TransportOptions(o.tls, o.checksum), {});
  if (!transport.ok()) return transport.status();

  auto data = std::make_shared<ByteBuffer>(o.size);
  std::memset(data->data(), 0x5A, o.size);
  auto send_one = [&]() -> absl::StatusOr<double> {
    std::promise<absl::Status> done;
    const absl::Time start = absl::Now();
    (*transport)
        ->Send(address, {data->data(), o.size, data}, absl::Seconds(120),
               [&done](absl::Status st) { done.set_value(st); });
    const absl::Status st = done.get_future().get();
    if (!st.ok()) return st;
    return absl::ToDoubleMilliseconds(absl::Now() - start);
  };
  for (int i = 0; i < 3; ++i) {  // warm-up: endpoint creation, registration caches
    if (auto st = send_one(); !st.ok()) return st.status();
  }
  std::vector<double> ms;
  for (int i = 0; i < o.count; ++i) {
    auto t = send_one();
    if (!t.ok()) return t.status();
    ms.push_back(*t);
  }
  TransferBenchResult r;
  r.tls = o.tls;
  r.size = o.size;
  double total_ms = 0;
  for (double t : ms) total_ms += t;
  r.gbps = static_cast<double>(o.size) * o.count / (total_ms / 1e3) / 1e9;
  std::sort(ms.begin(), ms.end());
  r.p50_ms = ms[ms.size() / 2];
  r.p99_ms = ms[std::min(ms.size() - 1, static_cast<size_t>(0.99 * ms.size()))];
  if (o.perftest) {
    auto perf = RunPerftest(o);
    if (!perf.ok()) return perf.status();
    r.perftest_gbps = *perf;
  }
  return r;
}

std::string ToJson(const TransferBenchResult& r) {
  std::string json =
      absl::StrFormat(R"({"tls": "%s", "size": %d, "gbps": %.4f, "p50_ms": %.4f, "p99_ms": %.4f)",
                      r.tls, r.size, r.gbps, r.p50_ms, r.p99_ms);
  if (r.perftest_gbps > 0) {
    absl::StrAppend(&json, absl::StrFormat(R"(, "perftest_gbps": %.4f, "ratio_to_perftest": %.3f)",
                                           r.perftest_gbps, r.gbps / r.perftest_gbps));
  }
  return json + "}\n";
}

}  // namespace yoco
