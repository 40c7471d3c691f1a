// SPDX-License-Identifier: MIT
// Built into the helper workers only: their `crash` command raises SIGSEGV on purpose, and the
// tests expect the kernel's "signal 11". ASan's own SEGV handler would turn that into "exit 1", so
// it is off in these binaries (handle_segv=0); ASAN_OPTIONS still adds to this.
// Linked only in -fsanitize=address builds (tests/helpers/CMakeLists.txt).
extern "C" const char* __asan_default_options() { return "handle_segv=0"; }
