// Flag parsing for the yoco tool.
#include "tools/yoco/command_line.h"

#include <cmath>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace yoco {

absl::StatusOr<CommandLine> CommandLine::Parse(const std::vector<std::string>& args,
                                               const std::set<std::string>& known,
                                               const std::set<std::string>& switches) {
  CommandLine cl;
  for (size_t i = 0; i < args.size(); ++i) {
    absl::string_view arg = args[i];
    if (!absl::ConsumePrefix(&arg, "--")) {
      return absl::InvalidArgumentError(absl::StrCat("unexpected argument '", args[i], "'"));
    }
    std::string name(arg);
    std::optional<std::string> value;
    if (const size_t eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name.resize(eq);
    }
    if (!known.count(name) && !switches.count(name)) {
      return absl::InvalidArgumentError(absl::StrCat("unknown flag --", name));
    }
    if (switches.count(name)) {
      if (value) return absl::InvalidArgumentError(absl::StrCat("--", name, " takes no value"));
      value = "true";
    } else if (!value) {
      if (i + 1 >= args.size())
        return absl::InvalidArgumentError(absl::StrCat("--", name, " needs a value"));
      value = args[++i];
    }
    if (cl.values_.count(name))
      return absl::InvalidArgumentError(absl::StrCat("--", name, " given twice"));
    cl.values_[name] = *value;
  }
  return cl;
}

absl::StatusOr<std::string> CommandLine::String(const std::string& name) const {
  auto it = values_.find(name);
  if (it == values_.end())
    return absl::InvalidArgumentError(absl::StrCat("missing required flag --", name));
  return it->second;
}

absl::StatusOr<int64_t> CommandLine::Int(const std::string& name,
                                         std::optional<int64_t> fallback) const {
  auto it = values_.find(name);
  if (it == values_.end()) {
    if (fallback) return *fallback;
    return absl::InvalidArgumentError(absl::StrCat("missing required flag --", name));
  }
  int64_t v;
  if (!absl::SimpleAtoi(it->second, &v)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", name, ": '", it->second, "' is not an integer"));
  }
  return v;
}

absl::StatusOr<uint64_t> CommandLine::Uint64(const std::string& name,
                                             std::optional<uint64_t> fallback) const {
  auto it = values_.find(name);
  if (it == values_.end()) {
    if (fallback) return *fallback;
    return absl::InvalidArgumentError(absl::StrCat("missing required flag --", name));
  }
  uint64_t v;
  if (it->second.empty() || it->second[0] == '-' || !absl::SimpleAtoi(it->second, &v)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--", name, ": '", it->second, "' is not an integer from 0 to 18446744073709551615"));
  }
  return v;
}

absl::StatusOr<double> CommandLine::Double(const std::string& name,
                                           std::optional<double> fallback) const {
  auto it = values_.find(name);
  if (it == values_.end()) {
    if (fallback) return *fallback;
    return absl::InvalidArgumentError(absl::StrCat("missing required flag --", name));
  }
  double v;
  if (!absl::SimpleAtod(it->second, &v) || !std::isfinite(v)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", name, ": '", it->second, "' is not a finite number"));
  }
  return v;
}

absl::StatusOr<std::vector<int32_t>> CommandLine::IntList(const std::string& name) const {
  auto text = String(name);
  if (!text.ok()) return text.status();
  std::vector<int32_t> out;
  for (absl::string_view part : absl::StrSplit(*text, ',')) {
    int32_t v;
    if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(part), &v)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", name, ": '", part, "' is not an integer"));
    }
    out.push_back(v);
  }
  return out;
}

}  // namespace yoco
