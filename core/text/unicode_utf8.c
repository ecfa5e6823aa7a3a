/* unicode_utf8.c — UTF-8 <-> codepoints (see unicode_utf8.h). */
#include "unicode_utf8.h"

#define REPLACEMENT 0xFFFDu

static int is_cont(uint8_t b) { return (b & 0xC0) == 0x80; }

uint32_t vt_utf8_decode(const char *s, size_t len, size_t *used) {
    const uint8_t *u = (const uint8_t *)s;
    *used = 1;
    if (!(u[0] & 0x80)) return u[0];
    if (!(u[0] & 0x40)) return REPLACEMENT; /* stray continuation byte */
    if (!(u[0] & 0x20)) {
        if (len < 2 || !is_cont(u[1])) return REPLACEMENT;
        *used = 2;
        return ((uint32_t)(u[0] & 0x1F) << 6) | (u[1] & 0x3F);
    }
    if (!(u[0] & 0x10)) {
        if (len < 3 || !is_cont(u[1]) || !is_cont(u[2])) return REPLACEMENT;
        *used = 3;
        return ((uint32_t)(u[0] & 0x0F) << 12) | ((uint32_t)(u[1] & 0x3F) << 6) | (u[2] & 0x3F);
    }
    if (!(u[0] & 0x08)) {
        if (len < 4 || !is_cont(u[1]) || !is_cont(u[2]) || !is_cont(u[3])) return REPLACEMENT;
        uint32_t cpt = ((uint32_t)(u[0] & 0x07) << 18) | ((uint32_t)(u[1] & 0x3F) << 12) |
                       ((uint32_t)(u[2] & 0x3F) << 6) | (u[3] & 0x3F);
        /* llama.cpp throws when re-encoding these; we keep going with U+FFFD. */
        if (cpt > 0x10FFFF) return REPLACEMENT;
        *used = 4;
        return cpt;
    }
    return REPLACEMENT;
}

size_t vt_utf8_encode(uint32_t cpt, char out[4]) {
    if (cpt <= 0x7F) {
        out[0] = (char)cpt;
        return 1;
    }
    if (cpt <= 0x7FF) {
        out[0] = (char)(0xC0 | (cpt >> 6));
        out[1] = (char)(0x80 | (cpt & 0x3F));
        return 2;
    }
    if (cpt <= 0xFFFF) {
        out[0] = (char)(0xE0 | (cpt >> 12));
        out[1] = (char)(0x80 | ((cpt >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cpt & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | ((cpt >> 18) & 0x07));
    out[1] = (char)(0x80 | ((cpt >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((cpt >> 6) & 0x3F));
    out[3] = (char)(0x80 | (cpt & 0x3F));
    return 4;
}
