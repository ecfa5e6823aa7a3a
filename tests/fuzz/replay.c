/* replay.c — run the fuzz target over files and directories of inputs.
 *
 * Builds with any compiler (no libFuzzer), so gcc builds and CI replay the
 * committed corpus and any crash file under ASan. Each input is copied into a
 * buffer of exactly its size so an over-read is caught. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int replay_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "replay: cannot open %s\n", path);
        return 1;
    }
    uint8_t *buf = NULL;
    size_t size = 0, cap = 0;
    for (;;) {
        if (size == cap) {
            cap = cap ? 2 * cap : 65536;
            uint8_t *p = realloc(buf, cap);
            if (!p) {
                fclose(f);
                free(buf);
                return 1;
            }
            buf = p;
        }
        size_t n = fread(buf + size, 1, cap - size, f);
        if (n == 0) break;
        size += n;
    }
    fclose(f);
    uint8_t *exact = malloc(size ? size : 1);
    if (!exact) {
        free(buf);
        return 1;
    }
    if (size) memcpy(exact, buf, size);
    free(buf);
    LLVMFuzzerTestOneInput(exact, size);
    free(exact);
    return 0;
}

static int replay_path(const char *path, int *count) {
    struct stat sb;
    if (stat(path, &sb) != 0) {
        fprintf(stderr, "replay: %s: no such file or directory\n", path);
        return 1;
    }
    if (!S_ISDIR(sb.st_mode)) {
        (*count)++;
        return replay_file(path);
    }
    DIR *d = opendir(path);
    if (!d) return 1;
    int failed = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char child[4096];
        snprintf(child, sizeof child, "%s/%s", path, e->d_name);
        failed |= replay_path(child, count);
    }
    closedir(d);
    return failed;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s FILE|DIR...\n", argv[0]);
        return 2;
    }
    int failed = 0, count = 0;
    for (int i = 1; i < argc; i++) failed |= replay_path(argv[i], &count);
    printf("replayed %d inputs\n", count);
    return failed || count == 0;
}
