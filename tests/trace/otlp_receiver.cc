// The receiver process and its output file, in a folder of its own.
#include "tests/trace/otlp_receiver.h"

#include <stdlib.h>

#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"

namespace yoco::testing {

absl::StatusOr<std::unique_ptr<OtlpReceiver>> OtlpReceiver::Start() {
  auto receiver = std::unique_ptr<OtlpReceiver>(new OtlpReceiver);
  std::string dir = (std::filesystem::temp_directory_path() / "yoco-otlp-XXXXXX").string();
  if (mkdtemp(dir.data()) == nullptr) return absl::InternalError("mkdtemp failed");
  receiver->dir_ = dir;
  absl::StatusOr<std::unique_ptr<ServiceProcess>> process = ServiceProcess::Start(
      "/usr/bin/env", {"node", YOCO_OTLP_RECEIVER, dir + "/spans.jsonl"}, dir + "/receiver.log");
  if (!process.ok()) return process.status();
  receiver->process_ = *std::move(process);
  absl::StatusOr<int> port =
      receiver->process_->WaitForNumberAfter("receiving on port", absl::Seconds(30));
  if (!port.ok()) return port.status();
  receiver->port_ = *port;
  return receiver;
}

OtlpReceiver::~OtlpReceiver() {
  process_.reset();
  std::error_code ignored;
  std::filesystem::remove_all(dir_, ignored);
}

std::string OtlpReceiver::endpoint() const {
  return absl::StrCat("http://127.0.0.1:", port_, "/v1/traces");
}

std::vector<nlohmann::json> OtlpReceiver::Spans() const {
  std::ifstream in(dir_ + "/spans.jsonl");
  std::vector<nlohmann::json> spans;
  for (std::string line; std::getline(in, line);) {
    // A line being written is incomplete: read again later.
    nlohmann::json span = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!span.is_discarded()) spans.push_back(std::move(span));
  }
  return spans;
}

}  // namespace yoco::testing
