// Command-line parsing shared by the services: `--metrics-listen` and `--metrics_listen` both
// work, `--flagfile=FILE` reads flags from a file (the Kubernetes manifests mount one per role),
// and `--help` lists the service's own flags rather than only absl's.
#ifndef YOCO_LIB_RPC_SERVICE_FLAGS_H_
#define YOCO_LIB_RPC_SERVICE_FLAGS_H_

#include <vector>

namespace yoco {

// Parses argv into the ABSL_FLAGs; `usage` is the first line --help prints. Exits on --help,
// --version or an unknown flag, as absl does. Returns the positional arguments, argv[0] first.
std::vector<char*> ParseServiceFlags(int argc, char** argv, const char* usage);

}  // namespace yoco

#endif  // YOCO_LIB_RPC_SERVICE_FLAGS_H_
