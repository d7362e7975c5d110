/* Runs first in every executable, as a constructor of the highest priority (before the C++
 * static initialisers, which may already use the instructions the build was compiled for):
 *  - refuses to start on a CPU without the instruction-set extensions the build was compiled for
 *    (YOCO_ARCH, e.g. x86-64-v3 = AVX2 + FMA in the image): one clear line and exit status 1
 *    instead of SIGILL somewhere later;
 *  - on a CPU with AVX-512, a build without it hands over to the same program compiled for
 *    x86-64-v4 where the build names a directory of those (YOCO_AVX512_VARIANT_DIR): the image
 *    ships both, since its AVX2 build decodes batches at about half the AVX-512 build's speed.
 * glibc passes argc, argv and envp to constructors, which is what the hand-over executes with. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "required_cpu_features.h"

#if defined(__x86_64__) || defined(__i386__)

/* What -march=x86-64-v4 assumes. libgcc's answer includes the OS's consent (XCR0). */
static int CpuHasX86_64_V4(void) {
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512cd") && __builtin_cpu_supports("avx512dq") &&
         __builtin_cpu_supports("avx512vl");
}

/* Executes DIR/<this program's file name> when it exists; returns when it does not, when it is
 * this very file, or when it cannot be executed (saying why: this build still works). */
static void ExecAvx512Variant(char** argv) {
  const char* dir = getenv("YOCO_AVX512_VARIANT_DIR");
  if (dir == NULL) dir = YOCO_AVX512_VARIANT_DIR;
  if (YOCO_BUILD_HAS_AVX512 || dir[0] == '\0' || argv == NULL || !CpuHasX86_64_V4()) return;
  char self[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n <= 0) return;
  self[n] = '\0';
  const char* slash = strrchr(self, '/');
  const char* name = slash != NULL ? slash + 1 : self;
  char variant[PATH_MAX];
  if (snprintf(variant, sizeof(variant), "%s/%s", dir, name) >= (int)sizeof(variant)) return;
  struct stat self_stat, variant_stat;
  if (stat(variant, &variant_stat) != 0 || !S_ISREG(variant_stat.st_mode)) return;
  if (stat("/proc/self/exe", &self_stat) == 0 && self_stat.st_dev == variant_stat.st_dev &&
      self_stat.st_ino == variant_stat.st_ino) {
    return; /* the directory is this build's own: executing it again would loop */
  }
  if (access(variant, X_OK) != 0) return;
  execv(variant, argv);
  fprintf(stderr, "yoco: cannot execute the AVX-512 build %s (%s); running the %s build\n", variant,
          strerror(errno), YOCO_BUILD_ARCH);
}

__attribute__((constructor(101))) static void YocoCheckRequiredCpu(int argc, char** argv,
                                                                   char** envp) {
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
  (void)argc;
  (void)envp;
  ExecAvx512Variant(argv);
}
#endif
