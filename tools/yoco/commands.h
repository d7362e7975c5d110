// The `yoco` tool's sub-commands. Each returns the error to print (one line) or OK.
#ifndef YOCO_TOOLS_YOCO_COMMANDS_H_
#define YOCO_TOOLS_YOCO_COMMANDS_H_

#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace yoco {

// yoco init-model --params P.json --seed S --out DIR [--dtype f32|bf16]
absl::Status RunInitModel(const std::vector<std::string>& args);
// yoco logits --model DIR --tokens 0,17,5 --out F.npy [--threads T]
absl::Status RunLogits(const std::vector<std::string>& args);
// yoco generate --model DIR --tokens ... --max-new-tokens N [--temperature --top-k --top-p
//   --seed --stop-tokens --stop-at-eos --threads]; prints the new ids on one line of `out`.
absl::Status RunGenerate(const std::vector<std::string>& args, std::ostream& out);

// yoco bench [--params P.json] [--threads T] [--json OUT.json] [--long] [--weights bf16|f32]
//   [--decode-steps N]; prints the table to `out`, progress to `log`.
absl::Status RunBench(const std::vector<std::string>& args, std::ostream& out, std::ostream& log);

// yoco bench-cache [--params P.json] [--threads T] [--json OUT.json] [--weights bf16|f32]
//   [--document-lengths 2048,8192]; prints the table to `out`, progress to `log`.
absl::Status RunBenchCache(const std::vector<std::string>& args, std::ostream& out,
                           std::ostream& log);

// yoco bench-attention [--params P.json] [--threads T] [--json OUT.json] [--kv-dtype f32|bf16]
//   [--shapes 1x32768,32x2048] [--rounds R]; prints the table to `out`, progress to `log`.
// yoco bench-structured [--params P.json] [--threads T] [--json OUT.json] [--rounds R]
// [--steps S]: constrained (JSON Schema) decode steps against plain ones (StructuredBenchReport).
absl::Status RunBenchStructured(const std::vector<std::string>& args, std::ostream& out,
                                std::ostream& log);
absl::Status RunBenchAttention(const std::vector<std::string>& args, std::ostream& out,
                               std::ostream& log);

}  // namespace yoco

#endif  // YOCO_TOOLS_YOCO_COMMANDS_H_
