// yoco: run a YOCO model from the command line (make a random model, score a sequence,
// generate tokens).
#include <iostream>
#include <string>
#include <vector>

#include "tools/yoco/commands.h"

namespace {

constexpr char kUsage[] =
    "usage: yoco <command> [flags]\n"
    "  init-model --params P.json --seed S --out DIR [--dtype f32|bf16]\n"
    "  logits     --model DIR --tokens 0,17,5 | --tokens-file F --out F.npy [--last N]\n"
    "             [--threads T] [--backend cpu|cuda] [--device N]\n"
    "             [--weights as-stored|f32|bf16|q8]\n"
    "             [--kv-dtype f32|bf16]\n"
    "  generate   --model DIR --tokens 0,17,5 | --tokens-file F --max-new-tokens N\n"
    "             [--temperature T] [--top-k K] [--top-p P] [--seed S] [--stop-tokens 2,..]\n"
    "             [--stop-at-eos]\n"
    "             [--threads T] [--backend cpu|cuda] [--device N]\n"
    "             [--weights as-stored|f32|bf16|q8] [--kv-dtype f32|bf16]\n"
    "  bench      [--params P.json] [--threads T] [--json OUT.json] [--long]\n"
    "             [--weights bf16|f32|q8] [--kv-dtype f32|bf16] [--decode-steps N]\n"
    "             [--decode-rounds R] [--prefill-lengths 512,2048]\n"
    "             [--decode-batches 1,8,32] [--decode-context 2048]\n"
    "  bench --backend cuda [--device N] [--params P.json] [--json OUT.json]\n"
    "             [--prefill-lengths 32768,131072,524288] [--decode-batches 1,16,64]\n"
    "             [--decode-contexts 4096,131072] [--decode-steps N]\n"
    "  bench-cache [--params P.json] [--threads T] [--json OUT.json] [--weights bf16|f32|q8]\n"
    "             [--kv-dtype f32|bf16] [--document-lengths 2048,8192]\n"
    "  bench-structured [--params P.json] [--threads T] [--json OUT.json] [--rounds R]\n"
    "             [--steps S] [--tiktoken-ranks cl100k_base.tiktoken] [--temperature T]\n"
    "  bench-attention [--params P.json] [--threads T] [--json OUT.json]\n"
    "             [--kv-dtype bf16|f32] [--shapes 1x32768,32x2048] [--shared 32x16384|none]\n"
    "             [--rounds R]\n";

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << kUsage;
    return 2;
  }
  const std::string command = argv[1];
  const std::vector<std::string> args(argv + 2, argv + argc);
  absl::Status status;
  if (command == "init-model") {
    status = yoco::RunInitModel(args);
  } else if (command == "logits") {
    status = yoco::RunLogits(args);
  } else if (command == "generate") {
    status = yoco::RunGenerate(args, std::cout);
  } else if (command == "bench") {
    status = yoco::RunBench(args, std::cout, std::cerr);
  } else if (command == "bench-cache") {
    status = yoco::RunBenchCache(args, std::cout, std::cerr);
  } else if (command == "bench-structured") {
    status = yoco::RunBenchStructured(args, std::cout, std::cerr);
  } else if (command == "bench-attention") {
    status = yoco::RunBenchAttention(args, std::cout, std::cerr);
  } else if (command == "help" || command == "--help" || command == "-h") {
    std::cout << kUsage;
    return 0;
  } else {
    std::cerr << "yoco: unknown command '" << command << "'\n" << kUsage;
    return 2;
  }
  if (!status.ok()) {
    std::cerr << "yoco " << command << ": " << status.message() << "\n";
    return 1;
  }
  return 0;
}
