// LeakSanitizer suppressions for the transport tests (used when built with YOCO_SANITIZE):
// allocations UCX's own libraries never free, e.g. after a failed shared-memory connect. Our
// code has none.
extern "C" const char* __lsan_default_suppressions() {
  return "leak:libuct.so\n"
         "leak:libucs.so\n"
         "leak:libucp.so\n"
         "leak:libucm.so\n";
}
