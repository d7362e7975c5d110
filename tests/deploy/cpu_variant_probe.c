/* A program linked with the start-up CPU check as an x86-64-v3 build would be (see
 * cpu_variant_test.sh): it says that it ran, and with which arguments. */
#include <stdio.h>

int main(int argc, char** argv) {
  printf("probe ran:");
  for (int i = 1; i < argc; ++i) printf(" %s", argv[i]);
  printf("\n");
  return 0;
}
