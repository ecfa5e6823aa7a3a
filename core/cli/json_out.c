/* json_out.c — see json_out.h. */
#include "json_out.h"

#include <math.h>

void vt_json_number(FILE *f, double x) {
    if (!isfinite(x)) fputs("null", f);
    else fprintf(f, "%.10g", x);
}

void vt_json_string(FILE *f, const char *s) {
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') fprintf(f, "\\%c", *p);
        else if (*p == '\n') fputs("\\n", f);
        else if (*p == '\t') fputs("\\t", f);
        else if (*p < 0x20) fprintf(f, "\\u%04x", *p);
        else fputc(*p, f);
    }
    fputc('"', f);
}
