/* json_out.h — writing the few JSON value kinds the reports need. */
#ifndef VT_CLI_JSON_OUT_H
#define VT_CLI_JSON_OUT_H

#include <stdio.h>

/* A number with enough digits to round-trip a double; null when not finite
 * (JSON has no NaN or infinity). */
void vt_json_number(FILE *f, double x);
/* A quoted, escaped string (UTF-8 passed through; control bytes as \u00XX). */
void vt_json_string(FILE *f, const char *s);

#endif
