// A second process for transport tests: `transfer_peer receive TLS` prints its worker address
// (hex) and then one line per finished transfer ("ok SIZE" when the payload pattern checked,
// "failed CODE" otherwise), until stdin closes; `transfer_peer send TLS ADDRESS SIZE SEED`
// [TIMEOUT_MS]` sends one patterned buffer and prints "ok" or "failed CODE MESSAGE".
#include <unistd.h>

#include <cstdio>
#include <future>
#include <iostream>
#include <memory>
#include <string>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "lib/transport/ucx_transport.h"
#include "tests/transport/payload_pattern.h"

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  const std::string role = argv[1];
  yoco::UcxTransportOptions options;
  options.tls = argv[2];
  options.net_devices = options.tls == "tcp" ? "lo" : "";
  yoco::ReceiveCallbacks callbacks;
  callbacks.verify = [](const yoco::IncomingTransfer& t, const yoco::ByteBuffer& buffer) {
    const absl::string_view data = buffer.view();
    // The seed of a transfer is its size, so the receiver needs no side channel.
    if (!yoco::testing::CheckPattern(reinterpret_cast<const uint8_t*>(data.data()), data.size(),
                                     data.size())) {
      return absl::DataLossError("payload pattern mismatch");
    }
    return absl::OkStatus();
  };
  callbacks.on_received = [](const yoco::IncomingTransfer& t, yoco::ByteBuffer data) {
    std::printf("ok %llu\n", static_cast<unsigned long long>(data.size()));
    std::fflush(stdout);
  };
  callbacks.on_failed = [](const yoco::IncomingTransfer& t, const absl::Status& status) {
    std::printf("failed %d\n", static_cast<int>(status.code()));
    std::fflush(stdout);
  };
  callbacks.on_start = [](const yoco::IncomingTransfer& t) {
    std::printf("start %llu\n", static_cast<unsigned long long>(t.size));
    std::fflush(stdout);
    return absl::OkStatus();
  };
  auto transport = yoco::UcxTransport::Create(options, callbacks);
  if (!transport.ok()) {
    std::fprintf(stderr, "transport: %s\n", std::string(transport.status().message()).c_str());
    return 1;
  }
  if (role == "receive") {
    std::printf("%s\n", absl::BytesToHexString((*transport)->address()).c_str());
    std::fflush(stdout);
    std::string line;
    while (std::getline(std::cin, line)) {
    }
    return 0;
  }
  if (role == "send" && argc >= 6) {
    const std::string address = absl::HexStringToBytes(argv[3]);
    uint64_t size = 0, seed = 0;
    if (!absl::SimpleAtoi(argv[4], &size) || !absl::SimpleAtoi(argv[5], &seed)) return 2;
    auto data = std::make_shared<yoco::ByteBuffer>(size);
    yoco::testing::FillPattern(data->data(), size, seed);
    std::printf("filled\n");
    std::fflush(stdout);
    int64_t timeout_ms = 60000;
    if (argc >= 7 && !absl::SimpleAtoi(argv[6], &timeout_ms)) return 2;
    std::promise<absl::Status> done;
    (*transport)
        ->Send(address, {data->data(), size, data}, absl::Milliseconds(timeout_ms),
               [&done](absl::Status st) { done.set_value(st); });
    const absl::Status st = done.get_future().get();
    if (st.ok()) {
      std::printf("ok\n");
    } else {
      std::printf("failed %d %s\n", static_cast<int>(st.code()), std::string(st.message()).c_str());
    }
    std::fflush(stdout);
    return 0;
  }
  return 2;
}
