/* embed_batch.c — a program that embeds vt through libvt: two text prompts
 * answered together by one vt_batch (continuous batching over the paged KV
 * cache, the engine path vt serve uses), each with its own sampling and
 * seed, their text printed as it becomes final.
 *
 *   cc -std=c11 embed_batch.c $(pkg-config --cflags --libs vt) -o embed_batch
 *   ./embed_batch MODEL.gguf
 *
 * (tests/test_libvt_surface.c builds and runs this file as it is.) */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "vt/vt.h"

#define N_PROMPTS 2

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s MODEL.gguf\n", argv[0]);
        return 2;
    }
    /* Settings take the ini's keys; here two sequences per forward. */
    const char *settings[] = {"runtime.max_seqs=2", "runtime.threads=2", NULL};
    vt_session_options options;
    vt_session_options_init(&options);
    options.settings = settings;
    char err[512];
    vt_batch *batch = NULL;
    if (vt_batch_open(argv[1], &options, &batch, err, sizeof err) != VT_OK) {
        fprintf(stderr, "open: %s\n", err);
        return 1;
    }

    static const char *const prompts[N_PROMPTS] = {"Once upon a time", "The little dog"};
    uint64_t ids[N_PROMPTS];
    for (int i = 0; i < N_PROMPTS; i++) {
        vt_batch_request r;
        vt_batch_request_init(&r); /* greedy, filters off, the model's stop ids */
        r.text = prompts[i];
        r.max_new_tokens = 24;
        if (i == 1) { /* the second one samples, with a seed that replays it */
            r.temperature = 0.8f;
            r.top_k = 40;
            r.seed = 42;
        }
        if (vt_batch_add(batch, &r, &ids[i], err, sizeof err) != VT_OK) {
            fprintf(stderr, "add: %s\n", err);
            vt_batch_close(batch);
            return 1;
        }
    }

    /* One forward per step, for every request at once; read each after it. */
    int finished = 0;
    bool failed = false;
    while (finished < N_PROMPTS && !failed) {
        int32_t n_seqs = 0;
        if (vt_batch_step(batch, &n_seqs, err, sizeof err) != VT_OK) {
            fprintf(stderr, "step: %s\n", err);
            failed = true;
            break;
        }
        finished = 0;
        for (int i = 0; i < N_PROMPTS && !failed; i++) {
            vt_batch_output out;
            if (vt_batch_read(batch, ids[i], &out, err, sizeof err) != VT_OK) {
                fprintf(stderr, "read: %s\n", err);
                failed = true;
                break;
            }
            if (out.n_text > 0) printf("[%d] %.*s\n", i, (int)out.n_text, out.text);
            finished += out.finish != VT_FINISH_NONE;
        }
    }

    vt_batch_stats stats;
    vt_batch_get_stats(batch, &stats);
    printf("%lld steps; %d of %d KV blocks free\n", (long long)stats.n_steps, stats.free_kv_blocks,
           stats.total_kv_blocks);
    vt_batch_close(batch);
    return failed ? 1 : 0;
}
