// CommandLine: `--name value` / `--name=value` flags of one `yoco` sub-command, with typed
// accessors that turn bad values into errors naming the flag.
#ifndef YOCO_TOOLS_YOCO_COMMAND_LINE_H_
#define YOCO_TOOLS_YOCO_COMMAND_LINE_H_

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace yoco {

class CommandLine {
 public:
  // Parses args (after the sub-command). Only flags in `known` are accepted; `switches` take no
  // value.
  static absl::StatusOr<CommandLine> Parse(const std::vector<std::string>& args,
                                           const std::set<std::string>& known,
                                           const std::set<std::string>& switches = {});

  bool Has(const std::string& name) const { return values_.count(name) > 0; }
  absl::StatusOr<std::string> String(const std::string& name) const;  // required
  absl::StatusOr<int64_t> Int(const std::string& name, std::optional<int64_t> fallback) const;
  // 0 to 2^64-1 (seeds: the API's are uint64).
  absl::StatusOr<uint64_t> Uint64(const std::string& name, std::optional<uint64_t> fallback) const;
  absl::StatusOr<double> Double(const std::string& name, std::optional<double> fallback) const;
  // Comma-separated integers, e.g. "0,17,5".
  absl::StatusOr<std::vector<int32_t>> IntList(const std::string& name) const;

 private:
  std::map<std::string, std::string> values_;
};

}  // namespace yoco

#endif  // YOCO_TOOLS_YOCO_COMMAND_LINE_H_
