/* main.c — the vt command line (placeholder until the engine lands). */
#include <stdio.h>

int main(int argc, char **argv) {
    (void)argc, (void)argv;
    fprintf(stderr, "vt: not implemented yet\n");
    return 1;
}
