/* version.c — the library's version, from the project version CMake sets. */
#include "vt/vt.h"

const char *vt_version(void) { return VT_VERSION_STRING; }

uint32_t vt_version_number(void) {
    return (uint32_t)VT_VERSION_MAJOR * 10000u + (uint32_t)VT_VERSION_MINOR * 100u + (uint32_t)VT_VERSION_PATCH;
}
