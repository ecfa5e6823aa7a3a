/* unicode_props.c — codepoint -> category flags by binary search over the
 * generated range table. */
#include "unicode_props.h"

uint8_t vt_unicode_flags(uint32_t cpt) {
    if (cpt > 0x10FFFF) return 0;
    /* Find the last range whose start is <= cpt (range 0 starts at 0). */
    uint32_t lo = 0, hi = vt_unicode_range_count;
    while (hi - lo > 1) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (vt_unicode_range_start[mid] <= cpt)
            lo = mid;
        else
            hi = mid;
    }
    return vt_unicode_range_flags[lo];
}
