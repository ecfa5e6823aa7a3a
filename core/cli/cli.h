/* cli.h — what the vt subcommands share: flag parsing into vt_options (so
 * every lever goes through the same validation), and model/engine set-up.
 *
 * Each command (cmd_*.c) is three steps over its own options struct:
 * parse_X (argv -> struct, syntax only, through vt_cli_parse), validate_X
 * (rules across flags, and the values they settle, before anything loads)
 * and run_X; vt_cmd_X calls them in turn and maps the status to the exit
 * code (vt_cli_exit). */
#ifndef VT_CLI_H
#define VT_CLI_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "engine.h"
#include "error.h"
#include "options.h"

/* runtime.max_seqs of vt serve when nothing sets it (every other command's is
 * the options' default, 1); vt config says so. */
#define VT_CLI_SERVE_MAX_SEQS "4"

/* Flags every engine command takes. */
typedef struct vt_cli_common {
    vt_options opt;
    const char *model_path;
    bool explain;
    bool dry_run;
    bool special; /* --special: match control tokens' text in the prompt */
} vt_cli_common;

/* Result of trying one argv entry. */
typedef enum { VT_ARG_NOT_MINE = 0, VT_ARG_TAKEN = 1, VT_ARG_ERROR = 2 } vt_arg_result;

/* Defaults + config (--config found anywhere in argv, else VT_CONFIG) + env. */
vt_status vt_cli_init(vt_cli_common *c, int argc, char **argv, vt_error *err);
/* Try argv[*i] as a common flag (advancing *i past its value). */
vt_arg_result vt_cli_common_arg(vt_cli_common *c, int argc, char **argv, int *i, vt_error *err);
/* The value of flag argv[*i] (advancing *i), or NULL with err set. */
const char *vt_cli_value(int argc, char **argv, int *i, vt_error *err);
/* Strict integer/float parsing with the flag named in errors. */
vt_status vt_cli_int(const char *flag, const char *s, int64_t lo, int64_t hi, int64_t *out, vt_error *err);
vt_status vt_cli_float(const char *flag, const char *s, double lo, double hi, double *out, vt_error *err);
/* "1,2,3" -> ids (malloc'ed); errors name `what`, where the list came from
 * ("--tokens", "IDS"). */
vt_status vt_cli_parse_ids(const char *what, const char *s, int32_t **ids, size_t *n, vt_error *err);
/* All of f (NUL-terminated, malloc'ed; *len without the NUL), or NULL. */
char *vt_cli_read_all(FILE *f, size_t *len);

/* Take the value of flag argv[*i] (advancing *i past it) into *out: as
 * text, or as an integer in lo..hi (errors name the flag `flag`). */
vt_arg_result vt_cli_text_arg(int argc, char **argv, int *i, const char **out, vt_error *err);
/* The flag argv[*i] sets knob `key` of opt to its value, as the command
 * line's: a value the knob refuses is an error naming the flag. */
vt_arg_result vt_cli_setting_arg(vt_options *opt, const char *key, int argc, char **argv, int *i, vt_error *err);
/* As vt_cli_text_arg for a flag given at most once: a second (whose value
 * would silently win) is refused, "FLAGS given twice: give one WHAT". */
vt_arg_result vt_cli_text_arg_once(int argc, char **argv, int *i, const char **out, const char *flags,
                                   const char *what, vt_error *err);
vt_arg_result vt_cli_int_arg(int argc, char **argv, int *i, const char *flag, int64_t lo, int64_t hi, int64_t *out,
                             vt_error *err);

/* Where a prompt comes from (at most one set): -p TEXT ("-" reads stdin, as
 * `vt tokenize -` does), -f FILE, or --tokens IDS. */
typedef struct vt_cli_prompt {
    const char *text, *file, *ids;
} vt_cli_prompt;

/* Try argv[*i] as the prompt flags shared by run/eval/compare: -p/--prompt
 * TEXT, -f/--file FILE or --tokens IDS (advancing *i past the value). */
vt_arg_result vt_cli_prompt_arg(int argc, char **argv, int *i, vt_cli_prompt *p, vt_error *err);
/* More than one of them given is an error. */
vt_status vt_cli_prompt_check(const vt_cli_prompt *p, vt_error *err);
/* The prompt's text: -p TEXT, -p - (stdin) or -f FILE, read whole (into
 * *owned, malloc'ed, when it was read; *text points at it or at p->text);
 * "" when none is given. --tokens is not text: the caller takes it. */
vt_status vt_cli_prompt_text(const vt_cli_prompt *p, char **owned, const char **text, size_t *len, vt_error *err);

/* A command's own flags and operands: try argv[*i] (advancing *i past a
 * value) and store it in opts, the command's options struct. */
typedef vt_arg_result (*vt_cli_arg_fn)(void *opts, int argc, char **argv, int *i, vt_error *err);

/* How a command reads its argv. The error for an argument nobody takes is
 * "NAME: unknown option 'ARG'", or "NAME: unexpected argument 'ARG'" for a
 * command with operands, followed by " (see vt NAME --help)" when see_help;
 * an unknown --option close to one the command's help lists adds "; did you
 * mean --OPTION?" (vt_cli_nearest_option). */
typedef struct vt_cli_parser {
    const char *name;
    bool operands;
    bool see_help;
    bool several_backends; /* compare, bench: --backend is refused, pointing to --backends */
    bool samples;          /* run, chat, serve (and config, which shows them): takes the sampling flags */
    vt_cli_arg_fn own;     /* NULL: the command has no flags of its own */
    void (*help)(FILE *f); /* its --help text, whose --options are the ones a mistyped one is matched to */
} vt_cli_parser;

/* The --option named in `text` (a command's help) that `typed`, an option no
 * one took, most likely misspells, copied into out: the one fewest edits
 * away (a character added, dropped, changed, or two neighbours swapped:
 * Damerau-Levenshtein, "=value" left aside), when those are at most 2 and
 * fewer than half of typed's letters (so a short word is not matched to
 * anything); the first of equally close ones. Before it, the only option
 * typed (3 letters or more) begins (--ctx: --ctx-size); after it, the
 * longest option of 4 letters or more that typed begins with
 * (--temperature: --temp).
 * NULL when none is found, or typed is no --option. */
const char *vt_cli_nearest_option(const char *typed, const char *text, char *out, size_t size);
/* The one of words[n_words] typed most likely misspells, by the same rule
 * (at most 2 edits, fewer than half of typed's letters), or NULL. */
const char *vt_cli_nearest_word(const char *typed, const char *const *words, size_t n_words);

/* The parse step every command shares: argv -> opts, syntax only. With c,
 * vt_cli_init runs first and every entry the command does not take is tried
 * as an engine flag. -h/--help sets *help and stops there (what follows it
 * is not read). */
vt_status vt_cli_parse(const vt_cli_parser *p, vt_cli_common *c, void *opts, bool *help, int argc, char **argv,
                       vt_error *err);

/* A model given (-m), and one that can be opened: a path that does not
 * name a readable file is a bad argument (exit 2), said before the library
 * opens it, whose I/O errors past that point are the machine's (exit 1). */
vt_status vt_cli_require_model(const char *path, vt_error *err);
/* path names a readable regular file, else VT_ERR_INVALID naming it. */
vt_status vt_cli_given_file(const char *path, vt_error *err);
/* The same for a file read once to its end as a stream, which a pipe may
 * be too (-f <(command)). */
vt_status vt_cli_given_stream(const char *path, vt_error *err);

/* compare, bench: every backend has been tried and a failed one reported in
 * its row; the first such failure becomes the command's error (when st, the
 * run's own status, is VT_OK). */
vt_status vt_cli_first_failure(vt_status st, const vt_error *first, vt_error *err);

/* An engine for `model` on backend `name` with c's options (compare, bench)
 * and, when options is neither NULL nor "", these of the backend's own
 * ("key=value:key=value", a --backends entry's): errors prefixed with the
 * backend's name; the plans printed when --explain. */
vt_status vt_cli_engine_for_backend(const vt_cli_common *c, vt_model *model, const char *name, const char *options,
                                    const vt_engine_shape *shape, vt_engine **out, vt_error *err);

/* Monotonic clock in seconds, for the timings commands print. */
double vt_cli_now(void);

/* Help text of the common flags. */
void vt_cli_common_help(FILE *f);
/* The same without the lines of the flags in skip (NULL-terminated), which
 * a command has described in its own terms. */
void vt_cli_common_help_except(FILE *f, const char *const *skip);

/* Print "vt: <msg>" to stderr, return the exit code for this status. */
int vt_cli_error(const vt_error *err);
/* A command's exit code: 0 when st is VT_OK, else vt_cli_error(err). */
int vt_cli_exit(vt_status st, const vt_error *err);

/* Subcommands. */
int vt_cmd_run(int argc, char **argv);
int vt_cmd_eval(int argc, char **argv);
int vt_cmd_info(int argc, char **argv);
int vt_cmd_backends(int argc, char **argv);
int vt_cmd_tokenize(int argc, char **argv);
int vt_cmd_detokenize(int argc, char **argv);
int vt_cmd_config(int argc, char **argv);
int vt_cmd_compare(int argc, char **argv);
int vt_cmd_bench(int argc, char **argv);
int vt_cmd_synth(int argc, char **argv);
int vt_cmd_serve(int argc, char **argv); /* cmd_serve.c, or a stub in main.c when not built */
int vt_cmd_chat(int argc, char **argv);
int vt_cmd_version(int argc, char **argv);



/* Load c->model_path and build the engine (plans negotiated); print the
 * plans to stderr when c->explain. */
vt_status vt_cli_open_engine(const vt_cli_common *c, bool all_logits, vt_model **model, vt_engine **engine,
                             vt_error *err);

/* Prompt -> tokens: --tokens ids as given, else the text (or the file's, or
 * stdin's) through the model's tokenizer (BOS as its metadata says, control
 * tokens' text matched as c->special says). */
vt_status vt_cli_prompt_tokens_for(const vt_cli_common *c, const vt_model *m, const vt_cli_prompt *p,
                                   int32_t **tokens, size_t *n, vt_error *err);
#endif
