/* gen_options.h — the generation flags `vt run` and `vt chat` share (-n,
 * --stop, the penalties, --grammar-file, --ignore-eos), parsed once and
 * turned into the scheduler request both commands submit, so a flag means the
 * same in each. --temp, --top-k, --top-p, --min-p and --seed are engine
 * options (ini [sampling]) that the common parser takes (cli.c); their help
 * lines are printed here, next to the rest of sampling. */
#ifndef VT_CLI_GEN_OPTIONS_H
#define VT_CLI_GEN_OPTIONS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "cli.h"
#include "grammar.h"
#include "scheduler.h"
#include "text_stream.h"

/* --stop: as many texts as the scheduler matches, each as long (text_stream.h). */
#define VT_CLI_MAX_STOP VT_TEXT_STREAM_MAX_STOPS
#define VT_CLI_MAX_STOP_BYTES VT_TEXT_STREAM_MAX_STOP_LEN

/* -n -1: generate until the end of the text or of the KV cache. */
#define VT_N_PREDICT_UNTIL_END (-1)

typedef struct vt_cli_gen {
    int64_t n_predict; /* -n; the command sets its default before parsing; VT_N_PREDICT_UNTIL_END: -1 */
    bool n_predict_given;
    bool ignore_eos;
    const char *stop[VT_CLI_MAX_STOP]; /* --stop TEXT, in the order given */
    int32_t n_stop;
    double presence_penalty, frequency_penalty;
    const char *grammar_file; /* --grammar-file FILE */
    char *grammar;            /* its text, read by vt_cli_gen_load */
} vt_cli_gen;

/* Try argv[*i] as one of the generation flags (advancing *i past its value). */
vt_arg_result vt_cli_gen_arg(vt_cli_gen *g, int argc, char **argv, int *i, vt_error *err);

/* What the flags name, read and checked before the model loads (the
 * grammar file parsed, so a bad one fails at once). */
vt_status vt_cli_gen_load(vt_cli_gen *g, vt_error *err);
void vt_cli_gen_free(vt_cli_gen *g);

/* Help lines of the generation flags; n_help describes -n's default. */
void vt_cli_gen_help(FILE *f, const char *n_help);

/* The request for tokens: the sampling of c, the penalties and stop texts of
 * g, and stop_ids (the model's end-of-generation ids, or NULL) unless
 * --ignore-eos. The pointers are borrowed; vt_sched_add copies them. */
vt_sched_request vt_cli_gen_request(const vt_cli_common *c, const vt_cli_gen *g, const int32_t *tokens,
                                    int64_t n_tokens, int64_t max_new_tokens, uint64_t seed, const int32_t *stop_ids,
                                    int32_t n_stop_ids);

#endif
