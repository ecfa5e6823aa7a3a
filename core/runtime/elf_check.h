/* elf_check.h — whether a shared object's file holds every byte its
 * program headers map, checked before dlopen: glibc maps a cut-short file
 * (a half-copied plugin) without complaint, and the first touch of a page
 * past its end kills the process with SIGBUS, so a backend folder holding
 * one would take down every command that loads backends. */
#ifndef VT_RUNTIME_ELF_CHECK_H
#define VT_RUNTIME_ELF_CHECK_H

#include <stdbool.h>
#include <stddef.h>

/* False, with the reason in why, when path is a 64-bit ELF file whose
 * program or section header tables, or any segment's file bytes, lie past
 * its end. True otherwise, other files included (dlopen judges those, and
 * says why it refuses them). */
bool vt_elf_fits_file(const char *path, char *why, size_t why_size);

#endif
