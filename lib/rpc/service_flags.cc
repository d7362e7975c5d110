// absl's --help shows only flags defined in a file named after the program; ours live in
// services/ and the tools' main.cc, plus the TLS, allowed-callers and log flags of lib/. Parsing
// them also configures the log (and tracing), so every program logs as its flags say from its
// first line.
#include "lib/rpc/service_flags.h"

#include <cstdio>
#include <cstdlib>

#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "lib/log/log_flags.h"
#include "lib/rpc/flag_names.h"
#include "lib/trace/trace_flags.h"

namespace yoco {

std::vector<char*> ParseServiceFlags(int argc, char** argv, const char* usage) {
  absl::FlagsUsageConfig config;
  config.contains_help_flags = [](absl::string_view file) {
    return absl::StrContains(file, "services/") || absl::StrContains(file, "loadtest/") ||
           absl::StrContains(file, "tools/") || absl::StrContains(file, "lib/rpc/tls_flags") ||
           absl::StrContains(file, "lib/auth/allowed_callers_flag") ||
           absl::StrContains(file, "lib/log/log_flags") ||
           absl::StrContains(file, "lib/trace/trace_flags");
  };
  config.contains_helpshort_flags = config.contains_help_flags;
  const absl::string_view path = argc > 0 ? argv[0] : "yoco";
  const std::string name(path.substr(path.rfind('/') + 1));  // npos + 1 == 0: no folder
  // The -march the code runs with: which of the image's two builds a CPU got.
  config.version_string = [name] {
    return absl::StrCat(name, " ", YOCO_VERSION, " (", YOCO_BUILD_ARCH, ")\n");
  };
  absl::SetFlagsUsageConfig(config);
  absl::SetProgramUsageMessage(usage);
  UnderscoreFlagNames(argc, argv);
  std::vector<char*> args = absl::ParseCommandLine(argc, argv);
  if (absl::Status log = ConfigureLogFromFlags(name); !log.ok()) {
    std::fprintf(stderr, "%s: %s\n", name.c_str(), std::string(log.message()).c_str());
    std::exit(2);
  }
  if (absl::Status trace = ConfigureTracingFromFlags(name, YOCO_VERSION); !trace.ok()) {
    std::fprintf(stderr, "%s: %s\n", name.c_str(), std::string(trace.message()).c_str());
    std::exit(2);
  }
  return args;
}

}  // namespace yoco
