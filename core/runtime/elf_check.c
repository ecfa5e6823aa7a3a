/* elf_check.c — see elf_check.h. */
#include "elf_check.h"

#include <elf.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Read exactly n bytes at offset: false on a short read or an error. */
static bool read_at(int fd, void *buf, size_t n, uint64_t offset) {
    size_t done = 0;
    while (done < n) {
        const ssize_t got = pread(fd, (char *)buf + done, n - done, (off_t)(offset + done));
        if (got <= 0) return false;
        done += (size_t)got;
    }
    return true;
}

/* Whether [offset, offset + n) lies in a file of size bytes (no overflow). */
static bool inside(uint64_t offset, uint64_t n, uint64_t size) { return offset <= size && n <= size - offset; }

static bool check(int fd, uint64_t size, char *why, size_t why_size) {
    Elf64_Ehdr eh;
    if (size < sizeof eh || !read_at(fd, &eh, sizeof eh, 0)) return true; /* not ELF enough: dlopen says */
    if (memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != ELFCLASS64) return true;
    const uint64_t ph_bytes = (uint64_t)eh.e_phnum * eh.e_phentsize, sh_bytes = (uint64_t)eh.e_shnum * eh.e_shentsize;
    if (!inside(eh.e_phoff, ph_bytes, size) || !inside(eh.e_shoff, sh_bytes, size)) {
        snprintf(why, why_size, "the file is cut short: its header tables end past its %llu bytes",
                 (unsigned long long)size);
        return false;
    }
    if (eh.e_phentsize < sizeof(Elf64_Phdr)) return true; /* malformed: dlopen refuses it */
    for (unsigned i = 0; i < eh.e_phnum; i++) {
        Elf64_Phdr ph;
        if (!read_at(fd, &ph, sizeof ph, eh.e_phoff + (uint64_t)i * eh.e_phentsize)) return true;
        if (ph.p_type != PT_NULL && !inside(ph.p_offset, ph.p_filesz, size)) {
            snprintf(why, why_size,
                     "the file is cut short: segment %u needs its bytes up to %llu, the file has %llu (a copy that did "
                     "not finish?)",
                     i, (unsigned long long)ph.p_offset + (unsigned long long)ph.p_filesz, (unsigned long long)size);
            return false;
        }
    }
    return true;
}

bool vt_elf_fits_file(const char *path, char *why, size_t why_size) {
    const int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return true; /* dlopen says why it cannot open it */
    struct stat st;
    const bool ok = fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || check(fd, (uint64_t)st.st_size, why, why_size);
    close(fd);
    return ok;
}
