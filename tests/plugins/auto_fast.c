/* auto_fast.c — a third-party backend for the --backend auto tests: it
 * accepts and runs everything the reference does (through forward_to_reference.h), so
 * calibration times it like any backend, and a test that records it as the
 * fastest on one shape class can check it gets exactly those nodes. */
#define PLUGIN_NAME "auto_fast"
#define FWD_SUPPORTS_AS_REFERENCE
#include "forward_to_reference.h"

FWD_BACKEND("test plugin: the reference's ops under another name (--backend auto tests)")
