// LeakSanitizer suppressions, compiled into the executables of sanitizer builds (YOCO_SANITIZE)
// only: memory that libraries we link keep until exit. Our code has none.
// - UCX's own libraries never free some allocations, e.g. after a failed shared-memory connect.
// - OpenSSL keeps a per-thread error queue (allocated by ERR_clear_error, freed when the thread
//   ends); gRPC's threads still run at exit, so LeakSanitizer reports each one's. Stacks through
//   libcrypto (no frame pointers) end at its allocator, so that is the only frame to name.
extern "C" const char* __lsan_default_suppressions() {
  return "leak:libuct.so\n"
         "leak:libucs.so\n"
         "leak:libucp.so\n"
         "leak:libucm.so\n"
         "leak:CRYPTO_zalloc\n";
}

// The list of suppressions used would land on stderr, which callers parse (yoco-cli --stats).
extern "C" const char* __lsan_default_options() { return "print_suppressions=0"; }
