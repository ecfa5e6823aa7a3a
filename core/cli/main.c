/* main.c — `vt COMMAND ...`: a thin layer over the engine. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "crash_report.h"
#include "host.h"
#include "serve_options.h"

/* Under AddressSanitizer (the test builds): gcc 12's LeakSanitizer can crash
 * at exit ("Tracer caught signal 11") scanning the dynamic TLS of a libgomp
 * worker thread, which oneDNN's OpenMP runtime may leave alive; not
 * intercepting __tls_get_addr avoids it and leak checking still runs
 * (backends/onednn/README.md). ASAN_OPTIONS given at run time still apply. */
#if defined(__SANITIZE_ADDRESS__)
#define VT_CLI_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define VT_CLI_ASAN 1
#endif
#endif
#ifdef VT_CLI_ASAN
const char *__asan_default_options(void);
const char *__asan_default_options(void) { return "intercept_tls_get_addr=0"; }
#endif

#ifndef VT_HAVE_SERVE
/* Configured without libmicrohttpd or jansson (CMake said so). */
int vt_cmd_serve(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "vt: serve was not built: configure with libmicrohttpd-dev and libjansson-dev installed\n");
    return 4;
}

/* vt chat renders through the server's JSON bridge to the template interpreter. */
int vt_cmd_chat(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "vt: chat was not built: configure with libmicrohttpd-dev and libjansson-dev installed\n");
    return 4;
}
#endif

static const struct {
    const char *name;
    int (*fn)(int, char **);
    const char *help;
} commands[] = {
    {"run", vt_cmd_run, "generate text from a prompt"},
    {"chat", vt_cmd_chat, "chat with the model in the terminal (its chat template, history kept)"},
    {"eval", vt_cmd_eval, "evaluate tokens and print logits as JSON"},
    {"info", vt_cmd_info, "show a GGUF file's metadata and tensors"},
    {"backends", vt_cmd_backends, "list backends, where they came from, and what they support"},
    {"tokenize", vt_cmd_tokenize, "text -> token ids and pieces (works on vocab-only GGUF files)"},
    {"detokenize", vt_cmd_detokenize, "token ids -> the exact bytes they decode to"},
    {"config", vt_cmd_config, "every knob's resolved value and where it came from"},
    {"compare", vt_cmd_compare, "run every backend on the same tokens and compare them with reference"},
    {"bench", vt_cmd_bench, "prefill and decode tokens/s per backend against the memory bandwidth limit"},
    {"synth", vt_cmd_synth, "write a random-weight model of a named or given shape"},
    {"serve", vt_cmd_serve, "serve the model over HTTP with OpenAI's API (chat, completions, streaming)"},
    {"version", vt_cmd_version, "vt's version, backend ABI, CPU features and backends (also: vt --version)"},
};

static void usage(FILE *f) {
    fprintf(f, "usage: vt COMMAND [options]   (vt COMMAND --help, or vt help COMMAND, for each)\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof *commands; i++)
        fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].help);
}

int main(int argc, char **argv) {
    vt_cli_install_crash_report();
    vt_progress_lines_enable(true); /* a terminal's user sees the long steps of opening a model */
    /* vt serve's [server] knobs: every command reads the same ini file, and
     * `vt config` lists them with the library's. */
    vt_error err = {0};
    if (vt_serve_options_declare(&err) != VT_OK) return vt_cli_error(&err);
    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "-V") == 0) return vt_cmd_version(argc - 1, argv + 1);
    /* as every other setting, a bad VT_LOG is an error naming it (the
     * library alone can only warn and keep its default) */
    const char *log_env = getenv("VT_LOG");
    if (log_env && *log_env && !vt_log_level_name_ok(log_env)) {
        fprintf(stderr, "vt: VT_LOG=%s: expected debug, info, warn or error (or 0..3)\n", log_env);
        return 2;
    }
    enum { N_COMMANDS = sizeof commands / sizeof *commands };
    /* `vt help` and `vt help COMMAND`, as git and cargo take them */
    if (strcmp(argv[1], "help") == 0) {
        if (argc > 3) {
            fprintf(stderr, "vt: help takes one command's name (vt help COMMAND)\n");
            return 2;
        }
        if (argc == 2 || !strcmp(argv[2], "--help") || !strcmp(argv[2], "-h") || !strcmp(argv[2], "help")) {
            usage(stdout);
            return 0;
        }
        for (size_t i = 0; i < N_COMMANDS; i++)
            if (strcmp(argv[2], commands[i].name) == 0)
                return commands[i].fn(2, (char *[]){argv[2], "--help", NULL});
    }
    for (size_t i = 0; i < N_COMMANDS; i++)
        if (strcmp(argv[1], commands[i].name) == 0) return commands[i].fn(argc - 1, argv + 1);
    const char *typed = strcmp(argv[1], "help") == 0 ? argv[2] : argv[1];
    const char *names[N_COMMANDS];
    for (size_t i = 0; i < N_COMMANDS; i++) names[i] = commands[i].name;
    const char *nearest = vt_cli_nearest_word(typed, names, N_COMMANDS);
    fprintf(stderr, "vt: unknown command '%s'%s%s%s\n", typed, nearest ? "; did you mean " : "", nearest ? nearest : "",
            nearest ? "?" : "");
    usage(stderr);
    return 2;
}
