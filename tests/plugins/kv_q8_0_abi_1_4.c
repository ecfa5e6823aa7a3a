/* kv_q8_0_abi_1_4.c — test backend built as ABI 1.4 (the 1.4 table size, no
 * conventions field) that runs Q8_0 caches through the reference: a table
 * of 1.1 to 1.4 reads the conventions of its minor without saying so, so
 * the runtime keeps offering it Q8_0 caches (what it was offered when it
 * was built). */
#define PLUGIN_NAME "kv_q8_0_abi_1_4"
#define FWD_SUPPORTS_AS_REFERENCE
#define FWD_ABI_MINOR 4
#define FWD_STRUCT_SIZE VT_BACKEND_SIZE_1_4
#define FWD_CONVENTIONS 0 /* past its struct_size: never read */
#include "forward_to_reference.h"

FWD_BACKEND("test plugin: built as ABI 1.4, runs Q8_0 caches through the reference")
