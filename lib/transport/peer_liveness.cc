// Host identity and pid probes for the transport's liveness checks.
#include "lib/transport/peer_liveness.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "lib/checksum/crc32c.h"

namespace yoco {

uint64_t HostId() {
  static const uint64_t id = [] {
    std::string boot;
    if (FILE* f = std::fopen("/proc/sys/kernel/random/boot_id", "r")) {
      char buf[64] = {};
      if (std::fgets(buf, sizeof buf, f)) boot = buf;
      std::fclose(f);
    }
    char ns[128] = {};  // "pid:[4026531836]"
    const ssize_t n = readlink("/proc/self/ns/pid", ns, sizeof ns - 1);
    const std::string pid_namespace = n > 0 ? std::string(ns, static_cast<size_t>(n)) : "";
    const std::string both = boot + pid_namespace;
    return static_cast<uint64_t>(Crc32c(both.data(), both.size())) << 32 |
           Crc32c(pid_namespace.data(), pid_namespace.size());
  }();
  return id;
}

bool ProcessGone(uint32_t pid) {
  return pid != 0 && kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH;
}

bool UcxDetectsPeerFailure(const std::string& tls) {
  for (const char* shm : {"sm", "shm", "posix", "sysv", "cma", "xpmem", "knem"}) {
    for (size_t pos = tls.find(shm); pos != std::string::npos; pos = tls.find(shm, pos + 1)) {
      const bool start = pos == 0 || tls[pos - 1] == ',';
      const size_t end = pos + std::strlen(shm);
      if (start && (end == tls.size() || tls[end] == ',')) return false;
    }
  }
  return true;
}

}  // namespace yoco
