/* reference.c — good_minimal under the name "reference", built into a
 * folder of its own (build/tests/plugins/shadow): put first on the search
 * path it shadows vt's own reference, which `vt backends --test` must then
 * refuse to judge against rather than report its cases as passed. */
#define MINIMAL_NAME "reference"
#include "../good_minimal.c"
