/* kv_abi_1_0.c — test backend built as ABI 1.0 (abi_minor 0, the 1.0 table
 * size), before the Q8_0 KV cache existed, whose supports() checks no cache
 * dtype: it says yes to whatever the reference runs, as a 1.0 plugin that
 * only checked shapes would. Its attention and store fail, logging why, if
 * they are ever handed a Q8_0 cache (what such a plugin would misread).
 *
 * The runtime must never offer it a node with a Q8_0 cache: with
 * --kv-cache-dtype q8_0 its attention and store nodes go to the fallback and
 * the forward completes; at any float cache it runs everything itself. */
#define PLUGIN_NAME "kv_abi_1_0"
#define FWD_SUPPORTS_AS_REFERENCE
#define FWD_ABI_MINOR 0
#define FWD_STRUCT_SIZE VT_BACKEND_SIZE_1_0
#define FWD_ATTENTION guard_attention
#define FWD_RESHAPE_AND_CACHE guard_store
#include "forward_to_reference.h"

#include "q8_0_cache_guard.h"

FWD_BACKEND("test plugin: built as ABI 1.0, accepts any cache dtype the reference does")
