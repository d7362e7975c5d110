// The router's checks of public requests on raw request bytes, as a hostile client sends them:
// the bytes parsed as a GenerateRequest and as a PrecacheRequest (what does not parse is gRPC's
// to refuse), then checked. What the checks accept is something the engine can run: a non-empty
// prompt of in-vocabulary ids that, with max_new_tokens, fits max_seq_len; sampling settings the
// engine accepts; bounded stop strings.
#include <google/protobuf/stubs/logging.h>

#include <cstddef>
#include <cstdint>

#include "fuzz/fuzz_config.h"
#include "lib/engine/generation.h"
#include "lib/text/byte_tokenizer.h"
#include "services/router/request_checks.h"

namespace {

const yoco::ModelConfig& Config() {
  static const yoco::ModelConfig config = [] {
    yoco::ModelConfig c = yoco::fuzz::Config();
    c.vocab_size = 300;  // room for the byte tokenizer's ids
    return c;
  }();
  return config;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Protobuf logs every string field that is not UTF-8; the services rate-limit that (see
  // QuietProtobufLogs), here it would only slow the fuzzer down.
  static const bool quiet = [] {
    google::protobuf::SetLogHandler(nullptr);
    return true;
  }();
  (void)quiet;
  static const yoco::ByteTokenizer tokenizer;
  const yoco::ModelConfig& config = Config();
  yoco::v1::GenerateRequest generate;
  if (generate.ParseFromArray(data, static_cast<int>(size))) {
    auto call = yoco::CheckGenerateRequest(generate, config, tokenizer, 16);
    if (call.ok()) {
      if (!yoco::CheckPrompt(config, call->prompt).ok()) __builtin_trap();
      if (!call->sampling.Validate(config.vocab_size).ok()) __builtin_trap();
      if (call->prompt.size() + call->max_new_tokens > static_cast<size_t>(config.max_seq_len)) {
        __builtin_trap();
      }
      if (call->stop_strings.size() > yoco::kMaxStopStrings) __builtin_trap();
      for (const auto& stop : call->stop_strings) {
        if (stop.empty() || stop.size() > yoco::kMaxStopStringBytes) __builtin_trap();
      }
    } else if (call.status().code() != absl::StatusCode::kInvalidArgument) {
      __builtin_trap();
    }
  }
  yoco::v1::PrecacheRequest precache;
  if (precache.ParseFromArray(data, static_cast<int>(size))) {
    auto document = yoco::CheckPrecacheRequest(precache, config, tokenizer);
    if (document.ok() && !yoco::CheckPrompt(config, *document).ok()) __builtin_trap();
    if (!document.ok() && document.status().code() != absl::StatusCode::kInvalidArgument) {
      __builtin_trap();
    }
  }
  return 0;
}
