/* unicode_utf8.h — UTF-8 decoding and encoding with llama.cpp's rules.
 *
 * Decoding accepts what llama.cpp's unicode_cpt_from_utf8 accepts (lead byte
 * and continuation bytes checked, overlong forms not rejected) and turns every
 * other byte into U+FFFD, consuming that one byte. */
#ifndef VT_CORE_UNICODE_UTF8_H
#define VT_CORE_UNICODE_UTF8_H

#include <stddef.h>
#include <stdint.h>

/* Length of the sequence a lead byte announces, from its high nibble alone
 * (1 for ASCII and for stray continuation bytes, 2, 3 or 4). */
static inline size_t vt_utf8_seq_len(uint8_t lead) {
    static const uint8_t by_high_nibble[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
    return by_high_nibble[lead >> 4];
}

/* Decode the codepoint at s[0..len) (len >= 1); *used gets the bytes consumed. */
uint32_t vt_utf8_decode(const char *s, size_t len, size_t *used);

/* Encode cpt (<= 0x10FFFF) into out; returns the byte count (1..4). */
size_t vt_utf8_encode(uint32_t cpt, char out[4]);

#endif
