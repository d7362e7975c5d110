// Lets services take `--metrics-listen` as well as absl's `--metrics_listen`: rewrites dashes
// inside flag names (before any '=') to underscores, in place, before absl parses argv.
#ifndef YOCO_LIB_RPC_FLAG_NAMES_H_
#define YOCO_LIB_RPC_FLAG_NAMES_H_

#include <cstring>

namespace yoco {

inline void UnderscoreFlagNames(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    char* arg = argv[i];
    if (std::strncmp(arg, "--", 2) != 0) continue;
    for (char* c = arg + 2; *c != '\0' && *c != '='; ++c) {
      if (*c == '-') *c = '_';
    }
  }
}

}  // namespace yoco

#endif  // YOCO_LIB_RPC_FLAG_NAMES_H_
