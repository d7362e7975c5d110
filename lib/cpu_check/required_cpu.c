/* Refuses to start on a CPU without the instruction-set extensions the build
 * was compiled for (YOCO_ARCH, e.g. x86-64-v3 = AVX2 + FMA in the image): one
 * clear line and exit status 1 instead of SIGILL somewhere later. Runs as a
 * constructor of the highest priority, before the C++ static initialisers,
 * which may already use those instructions. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "required_cpu_features.h"

#if defined(__x86_64__) || defined(__i386__)
__attribute__((constructor(101))) static void YocoCheckRequiredCpu(void) {
  char missing[256] = "";
  __builtin_cpu_init();
#define YOCO_CHECK_FEATURE(name)                                       \
  if (!__builtin_cpu_supports(name)) {                                 \
    strncat(missing, " " name, sizeof(missing) - strlen(missing) - 1); \
  }
  YOCO_FOR_EACH_REQUIRED_CPU_FEATURE(YOCO_CHECK_FEATURE)
#undef YOCO_CHECK_FEATURE
  if (missing[0] != '\0') {
    fprintf(stderr,
            "yoco: this CPU lacks%s, which this build needs (compiled for %s); "
            "run it on a CPU "
            "with those features or rebuild with -DYOCO_ARCH=native on this "
            "machine\n",
            missing, YOCO_BUILD_ARCH);
    _exit(1);
  }
}
#endif
