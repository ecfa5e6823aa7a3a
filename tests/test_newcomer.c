/* test_newcomer.c — what a new user meets first, through the built `vt`
 * (VT_CLI_PATH) on the committed models: a sampled run is random by default
 * and replayable with the seed it prints; options no backend takes are
 * refused before anything runs; the prompt can come from stdin or a file;
 * `vt --version`; messages that name where a value came from; the summary
 * of `vt info`; token pieces as text; the default backend marked.
 *
 * Every run uses the reference backend on one thread where it generates, so
 * what it prints depends on the arithmetic alone, never on the machine. */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "usable_cpus.h"
#include "util.h"
#include "vt/vt_backend.h"

#define MODEL "aidreams260k-f32.gguf" /* trained, 128-token context, a SentencePiece vocabulary */

static char model[1024];

static int find_model(void) {
    static const char *const levers[] = {"VT_CONFIG", "VT_BACKEND", "VT_THREADS", "VT_CTX_SIZE", "VT_KV_CACHE_DTYPE",
                                         "VT_KV_CACHE_F32", "VT_BACKEND_PATH"};
    for (size_t i = 0; i < sizeof levers / sizeof *levers; i++) unsetenv(levers[i]);
    const char *dir = vt_test_data_dir("the aidreams260k model");
    if (!dir) return 1;
    snprintf(model, sizeof model, "%s/models/%s", dir, MODEL);
    return 0;
}

typedef struct result {
    int rc;
    char *out, *err;
} result;

/* `SHELL_PREFIX vt ARGS`: prefix is put before the program (a pipe, env). */
static result run(const char *prefix, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static result run(const char *prefix, const char *fmt, ...) {
    char args[2048], cmd[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    snprintf(cmd, sizeof cmd, "%s timeout 120 '%s' %s", prefix, VT_CLI_PATH, args);
    result r = {0};
    r.rc = vt_test_run_cmd(cmd, &r.out, &r.err);
    if (!r.out) r.out = strdup("");
    if (!r.err) r.err = strdup("");
    return r;
}

static void result_free(result *r) {
    free(r->out);
    free(r->err);
}

static bool has(const char *haystack, const char *needle) {
    bool ok = haystack && strstr(haystack, needle) != NULL;
    if (!ok) printf("\n  expected \"%s\" in: %s", needle, haystack ? haystack : "(null)");
    return ok;
}

/* The seed a sampled `vt run` printed on its timing line, or -1. */
static int64_t printed_seed(const char *err) {
    const char *at = strstr(err, "; seed ");
    uint64_t seed;
    if (!at || sscanf(at, "; seed %" SCNu64, &seed) != 1) return -1;
    return (int64_t)seed;
}

/* The default temperature samples; without --seed each run draws its own
 * seed and prints it, and --seed with that number prints the same text. */
static void test_default_seed_is_random_and_replayable(void) {
    static const char *const args = "run -m '%s' -p 'Once upon a time' -n 24 --backend reference -t 1 %s";
    result a = run("", args, model, "");
    result b = run("", args, model, "--seed -1");
    CU_ASSERT_EQUAL(a.rc, 0);
    CU_ASSERT_EQUAL(b.rc, 0);
    const int64_t seed_a = printed_seed(a.err), seed_b = printed_seed(b.err);
    CU_ASSERT(seed_a >= 0 && seed_b >= 0);
    CU_ASSERT(has(a.err, "(random: --seed with it replays this run)"));
    /* Two draws from 2^32 seeds: equal once in four billion runs. */
    CU_ASSERT_NOT_EQUAL(seed_a, seed_b);
    char given[64];
    snprintf(given, sizeof given, "--seed %" PRId64, seed_a);
    result replay = run("", args, model, given);
    CU_ASSERT_EQUAL(replay.rc, 0);
    CU_ASSERT_STRING_EQUAL(replay.out, a.out);
    CU_ASSERT_EQUAL(printed_seed(replay.err), seed_a);
    CU_ASSERT(!strstr(replay.err, "random")); /* a given seed is not called random */
    CU_ASSERT(strlen(a.out) > 1);
    /* --explain names the seed and where it came from */
    result explained = run("", args, model, "--seed 7 --explain");
    CU_ASSERT(has(explained.err, "seed 7 (cli)"));
    result_free(&a);
    result_free(&b);
    result_free(&replay);
    result_free(&explained);
}

/* Options for a backend that does not exist, or that a backend refuses, stop
 * the run before it loads anything, naming the backend and the option. */
static void test_unknown_backend_options_are_refused(void) {
    struct {
        const char *option, *says;
        int rc;
        bool needs_simd, needs_onednn;
    } cases[] = {
        {"nobackend.foo=1", "no backend named 'nobackend'", 2, false, false},
        {"reference.foo=1", "backend reference refused its options", 5, false, false},
        {"simd.foo=1", "backend simd refused its options", 5, true, false},
        {"onednn.foo=1", "backend onednn refused its options", 5, false, true},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        if (cases[i].needs_simd && !vt_test_simd_expected()) continue;
        if (cases[i].needs_onednn && !vt_test_onednn_expected()) continue;
        result r = run("", "run -m '%s' -p hi -n 4 --backend-option %s", model, cases[i].option);
        CU_ASSERT_EQUAL(r.rc, cases[i].rc);
        CU_ASSERT(has(r.err, cases[i].says));
        char named[96];
        snprintf(named, sizeof named, "vt: --backend-option %s: ", cases[i].option);
        CU_ASSERT(has(r.err, named));
        CU_ASSERT_STRING_EQUAL(r.out, ""); /* nothing was generated */
        result_free(&r);
    }
    /* from an ini file: the message names the file and line */
    char ini[512];
    vt_test_tmpfile(ini, sizeof ini, "options.ini");
    FILE *f = fopen(ini, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fputs("[backend.nobackend]\nfoo = 1\n", f);
    fclose(f);
    result r = run("", "run -m '%s' -p hi -n 4 --config '%s'", model, ini);
    CU_ASSERT_EQUAL(r.rc, 2);
    char want[700];
    snprintf(want, sizeof want, "vt: %s:2: [backend.nobackend] foo = 1: no backend named 'nobackend'", ini);
    CU_ASSERT(has(r.err, want));
    CU_ASSERT_STRING_EQUAL(r.out, "");
    result_free(&r);
}

/* -p - reads the prompt from stdin and -f FILE from a file: both generate
 * exactly what -p TEXT does. */
static void test_prompt_from_stdin_and_file(void) {
    static const char *const text = "Once upon a time";
    result direct = run("", "run -m '%s' -p '%s' -n 12 --temp 0 --ids --backend reference -t 1", model, text);
    char pipe[256], file[512];
    snprintf(pipe, sizeof pipe, "printf '%%s' '%s' |", text);
    result piped = run(pipe, "run -m '%s' -p - -n 12 --temp 0 --ids --backend reference -t 1", model);
    vt_test_tmpfile(file, sizeof file, "prompt.txt");
    FILE *f = fopen(file, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fputs(text, f);
    fclose(f);
    result filed = run("", "run -m '%s' -f '%s' -n 12 --temp 0 --ids --backend reference -t 1", model, file);
    CU_ASSERT_EQUAL(direct.rc, 0);
    CU_ASSERT_EQUAL(piped.rc, 0);
    CU_ASSERT_EQUAL(filed.rc, 0);
    CU_ASSERT(strchr(direct.out, ',') != NULL); /* ids were generated */
    CU_ASSERT_STRING_EQUAL(piped.out, direct.out);
    CU_ASSERT_STRING_EQUAL(filed.out, direct.out);
    /* -f a pipe (what -f <(command) names), read to its end; a directory is refused */
    char fifo[512], writer[700];
    vt_test_tmpfile(fifo, sizeof fifo, "prompt.fifo");
    unlink(fifo);
    CU_ASSERT_FATAL(mkfifo(fifo, 0600) == 0);
    /* the writer holds none of the test's pipes, and gives up after a
     * minute should vt never open the pipe */
    snprintf(writer, sizeof writer, "timeout 60 sh -c \"printf '%%s' '%s' > '%s'\" >/dev/null 2>&1 &", text, fifo);
    result fifoed = run(writer, "run -m '%s' -f '%s' -n 12 --temp 0 --ids --backend reference -t 1", model, fifo);
    CU_ASSERT_EQUAL(fifoed.rc, 0);
    CU_ASSERT_STRING_EQUAL(fifoed.out, direct.out);
    result_free(&fifoed);
    unlink(fifo);
    result dir = run("", "run -m '%s' -f /tmp -n 2", model);
    CU_ASSERT_EQUAL(dir.rc, 2);
    CU_ASSERT(has(dir.err, "-f /tmp: not a regular file or a pipe"));
    result_free(&dir);
    result missing = run("", "run -m '%s' -f /nonexistent/prompt.txt -n 2", model);
    CU_ASSERT_EQUAL(missing.rc, 2);
    CU_ASSERT(has(missing.err, "-f /nonexistent/prompt.txt: cannot open"));
    result both = run("", "run -m '%s' -p hi -f '%s' -n 2", model, file);
    CU_ASSERT_EQUAL(both.rc, 2);
    CU_ASSERT(has(both.err, "give one prompt"));
    /* -m $MODEL with MODEL unset: said so, not ": cannot open" */
    result empty = run("", "run -m '' -p hi -n 2");
    CU_ASSERT_EQUAL(empty.rc, 2);
    CU_ASSERT(has(empty.err, "-m: the model's file name is empty"));
    result_free(&empty);
    result_free(&direct);
    result_free(&piped);
    result_free(&filed);
    result_free(&missing);
    result_free(&both);
}

/* vt --version and vt version: the version, the backend ABI, the CPU line
 * and the backends found, the default one marked. */
static void test_version(void) {
    result a = run("", "--version");
    result b = run("", "version");
    CU_ASSERT_EQUAL(a.rc, 0);
    CU_ASSERT_EQUAL(b.rc, 0);
    CU_ASSERT_STRING_EQUAL(a.out, b.out);
    CU_ASSERT(has(a.out, "vt " VT_TEST_PROJECT_VERSION "\n"));
    CU_ASSERT(has(a.out, "backend ABI: 1."));
    CU_ASSERT(has(a.out, "cpu:"));
    CU_ASSERT(has(a.out, "  reference  ABI 1."));
    CU_ASSERT(has(a.out, "(default)"));
    char simd_line[64];
    snprintf(simd_line, sizeof simd_line, "simd       ABI %d.%d, score 100 (default), runs at ", VT_ABI_MAJOR,
             VT_ABI_MINOR);
    if (vt_test_simd_expected()) CU_ASSERT(has(a.out, simd_line));
    CU_ASSERT(has(a.out, "reference  ABI ") && has(a.out, "runs at scalar"));
    result_free(&a);
    result_free(&b);
}

/* The timing line counts one token as "1 token" and gives no rate for it. */
static void test_one_token_timing_line(void) {
    result r = run("", "run -m '%s' -p hi -n 1 --temp 0 --backend reference -t 1", model);
    CU_ASSERT_EQUAL(r.rc, 0);
    CU_ASSERT(has(r.err, "generated 1 token in "));
    CU_ASSERT(!strstr(r.err, "generated 1 tokens"));
    const char *gen = strstr(r.err, "generated 1 token");
    CU_ASSERT(gen && !strstr(gen, "tok/s"));
    CU_ASSERT(!strstr(r.err, "seed")); /* greedy: no seed to replay */
    result_free(&r);
}

/* Errors name the value's real origin: the environment variable, the
 * detokenize argument. */
static void test_messages_name_the_source(void) {
    result env = run("VT_BACKEND=nope", "run -m '%s' -p hi -n 1", model);
    CU_ASSERT_EQUAL(env.rc, 2); /* a name no backend has: a bad argument */
    CU_ASSERT(has(env.err, "vt: VT_BACKEND=nope: no backend named 'nope'"));
    result cli = run("", "run -m '%s' -p hi -n 1 --backend nope", model);
    CU_ASSERT(has(cli.err, "vt: --backend nope: no backend named 'nope'"));
    result detok = run("", "detokenize -m '%s' '1 2 3'", model);
    CU_ASSERT_EQUAL(detok.rc, 2);
    CU_ASSERT(has(detok.err, "vt: IDS '1 2 3': expected comma-separated"));
    CU_ASSERT(!strstr(detok.err, "--tokens"));
    result_free(&env);
    result_free(&cli);
    result_free(&detok);
}

/* -c past the trained context (128 tokens here) warns once, even when a
 * command makes several engines. */
static void test_ctx_past_training_warns_once(void) {
    result r = run("", "run -m '%s' -p hi -n 1 --temp 0 -c 512 --backend reference -t 1", model);
    CU_ASSERT_EQUAL(r.rc, 0);
    CU_ASSERT(has(r.err, "context size 512 (from cli) is larger than the model's trained context of 128 tokens"));
    result within = run("", "run -m '%s' -p hi -n 1 --temp 0 -c 128 --backend reference -t 1", model);
    CU_ASSERT(!strstr(within.err, "trained context"));
    /* two engines: reference at two KV-cache dtypes */
    result several = run("", "compare -m '%s' --backends reference --kv-cache-dtype f32,f16 -n 2 -c 512 -t 1", model);
    CU_ASSERT_EQUAL(several.rc, 0);
    const char *first = strstr(several.err, "trained context");
    CU_ASSERT(first && !strstr(first + 1, "trained context"));
    result_free(&r);
    result_free(&within);
    result_free(&several);
}

/* vt info opens with a summary naming the file type; vt tokenize shows each
 * token's text unless --raw, and takes its text as vt run does too (-p, -f);
 * vt backends marks the default backend. A
 * mixture of experts' summary names its experts and active parameters. */
static void test_info_tokenize_backends(void) {
    const char *dir = vt_test_data_dir("test models");
    char q4[1024], bpe[1024];
    snprintf(q4, sizeof q4, "%s/models/qwen3-tiny-q4_k_m.gguf", dir);
    snprintf(bpe, sizeof bpe, "%s/models/vocab/ggml-vocab-qwen2.gguf", dir);
    result info = run("", "info '%s'", q4);
    CU_ASSERT_EQUAL(info.rc, 0);
    CU_ASSERT(has(info.out, "summary: qwen3 model \"qwen3-tiny\", 2 layers, 256 wide"));
    CU_ASSERT(has(info.out, "weights Q4_K_M (file type 15); trained context 4096 tokens; vocabulary 512 tokens"));
    CU_ASSERT(has(info.out, "no chat template"));
    CU_ASSERT(has(info.out, "general.file_type = 15 (Q4_K_M)"));
    /* the summary comes before the tables */
    CU_ASSERT(strstr(info.out, "summary:") < strstr(info.out, "metadata:"));
    CU_ASSERT(!strstr(info.out, "mixture") && !strstr(info.out, "active per token"));
    CU_ASSERT(has(info.out, "\nvt runs it: yes\n"));
    /* a file vt would refuse says so, with loading's reason */
    result vocab_info = run("", "info '%s'", bpe);
    CU_ASSERT_EQUAL(vocab_info.rc, 0);
    CU_ASSERT(has(vocab_info.out, "\nvt cannot run it: ") && has(vocab_info.out, "vocabulary-only GGUF cannot run"));
    result_free(&vocab_info);
    /* a download cut short, its header and tensor table whole: shown as it
     * is, the data it lacks named and each tensor past the end marked, and
     * still a file that does not parse (exit 2, one line on stderr) */
    char cut[1024];
    CU_ASSERT_PTR_NOT_NULL_FATAL(vt_test_write_cut_file(cut, sizeof cut, "cut-short-q4.gguf", q4, 65536));
    result cut_info = run("", "info '%s'", cut);
    CU_ASSERT_EQUAL(cut_info.rc, 2);
    CU_ASSERT(has(cut_info.err, "vt: ") && has(cut_info.err, "truncated?"));
    CU_ASSERT(has(cut_info.out, "summary: qwen3 model \"qwen3-tiny\", 2 layers, 256 wide"));
    CU_ASSERT(has(cut_info.out, "\nvt cannot run it: ") && has(cut_info.out, "lies outside the file") &&
              has(cut_info.out, "truncated?"));
    CU_ASSERT(has(cut_info.out, "general.file_type = 15 (Q4_K_M)") && has(cut_info.out, "(past the file's end)"));
    /* the table's offsets count from the data section, whose start it names
     * as the message does, so the two can be put side by side */
    const char *section = strstr(cut_info.out, "data section at ");
    const char *table = strstr(cut_info.out, "\ntensors (offsets from the data section, which starts at byte ");
    CU_ASSERT_FATAL(section && table);
    CU_ASSERT_EQUAL(strtoull(section + strlen("data section at "), NULL, 10),
                    strtoull(table + strlen("\ntensors (offsets from the data section, which starts at byte "), NULL, 10));
    result_free(&cut_info);
    /* a mixture of experts: its experts, and the parameters a token reads (the
     * fixture's 3 expert stacks x 2 layers hold 3145728 parameters, of which a
     * token uses 2 of 8 experts: 3.68 M - 3145728 * 6/8 = 1.32 M) */
    char moe[1024];
    snprintf(moe, sizeof moe, "%s/models/qwen3moe-tiny-q4_k_m.gguf", dir);
    result moe_info = run("", "info '%s'", moe);
    CU_ASSERT_EQUAL(moe_info.rc, 0);
    CU_ASSERT(has(moe_info.out, "summary: qwen3moe model \"qwen3moe-tiny\", 2 layers, 256 wide, mixture of 8 experts, "
                                "2 used per token, expert FFN 256, 3.68 M parameters (1.32 M active per token); "
                                "weights Q4_K_M"));
    result_free(&moe_info);
    result text = run("", "tokenize -m '%s' --no-bos 'Hello world'", bpe);
    result raw = run("", "tokenize -m '%s' --no-bos --raw 'Hello world'", bpe);
    CU_ASSERT_EQUAL(text.rc, 0);
    CU_ASSERT_EQUAL(raw.rc, 0);
    CU_ASSERT(has(text.out, "  \" world\"\n"));
    CU_ASSERT(!strstr(text.out, "\xc4\xa0")); /* no 'Ġ' */
    CU_ASSERT(has(raw.out, "  \xc4\xa0world\n"));
    static const char *const two_outputs[] = {"--ids --json", "--json --raw", "--raw --ids"};
    for (int i = 0; i < 3; i++) { /* two outputs at once: refused, not one silently dropped */
        result both = run("", "tokenize -m '%s' %s 'Hello world'", bpe, two_outputs[i]);
        CU_ASSERT_EQUAL(both.rc, 2);
        CU_ASSERT(has(both.err, "--ids, --json and --raw are different outputs; give one"));
        result_free(&both);
    }
    /* -p TEXT and -f FILE, as vt run takes them, give what TEXT gives; two
     * texts (or -p twice) are refused as vt run refuses them */
    char text_file[1024];
    CU_ASSERT_PTR_NOT_NULL_FATAL(vt_test_write_tmpfile(text_file, sizeof text_file, "tokenize.txt", "Hello world"));
    result as_p = run("", "tokenize -m '%s' --no-bos -p 'Hello world'", bpe);
    result as_f = run("", "tokenize -m '%s' --no-bos -f '%s'", bpe, text_file);
    CU_ASSERT_EQUAL(as_p.rc, 0);
    CU_ASSERT_EQUAL(as_f.rc, 0);
    CU_ASSERT_STRING_EQUAL(as_p.out, text.out);
    CU_ASSERT_STRING_EQUAL(as_f.out, text.out);
    result_free(&as_p);
    result_free(&as_f);
    static const struct {
        const char *args, *says;
    } two_texts[] = {
        {"-p Hello -p world", "-p/--prompt given twice: give one prompt (the first was 'Hello')"},
        {"Hello -p world", "give one text: TEXT, -p TEXT or -f FILE, not TEXT and -p"},
        {"-p Hello world", "give one text: TEXT, -p TEXT or -f FILE, not TEXT and -p"},
        {"-p Hello -f /dev/null", "give one text: TEXT, -p TEXT or -f FILE, not -p and -f"},
        {"--ids", "tokenize: give TEXT, -p TEXT or -f FILE"},
    };
    for (size_t i = 0; i < sizeof two_texts / sizeof *two_texts; i++) {
        result r = run("", "tokenize -m '%s' %s", bpe, two_texts[i].args);
        CU_ASSERT_EQUAL(r.rc, 2);
        CU_ASSERT(has(r.err, two_texts[i].says));
        result_free(&r);
    }
    result backends = run("", "backends --brief");
    CU_ASSERT_EQUAL(backends.rc, 0);
    CU_ASSERT(has(backends.out, "<- default backend (highest score)"));
    result named = run("VT_BACKEND=reference", "backends --brief");
    CU_ASSERT(has(named.out, "score 10  <- preferred backend (from env VT_BACKEND)"));
    result_free(&info);
    result_free(&text);
    result_free(&raw);
    result_free(&backends);
    result_free(&named);
}

/* vt compare ends its table with a verdict per backend and a legend: on the
 * random-weight qwen3-tiny-q4_k_m simd and onednn agree with reference
 * within their stated tolerance, and a greedy difference is explained by the
 * reference's top-2 gap there; a plugin states no tolerance and is not judged. */
static void test_compare_ends_with_verdicts(void) {
    const char *dir = vt_test_data_dir("test models");
    char q4[1024];
    snprintf(q4, sizeof q4, "%s/models/qwen3-tiny-q4_k_m.gguf", dir);
    result r = run("", "compare -m '%s' -t 1", q4);
    CU_ASSERT_EQUAL(r.rc, 0);
    CU_ASSERT(has(r.out, "\nverdict: each backend against reference within its stated tolerance"));
    CU_ASSERT(has(r.out, "  reference  baseline"));
    if (vt_test_simd_expected()) CU_ASSERT(has(r.out, "  simd       agrees     max|dlog| "));
    if (vt_test_onednn_expected()) CU_ASSERT(has(r.out, "  onednn     agrees     max|dlog| "));
    CU_ASSERT(!strstr(r.out, "disagrees"));
    /* a greedy difference, where there is one, comes with reference's gap there */
    for (const char *d = strstr(r.out, " differs at token"); d; d = strstr(d + 1, " differs at token"))
        CU_ASSERT(strstr(d, "where reference's top two are") != NULL);
    CU_ASSERT(has(r.out, "\ncolumns: max|dlog|, mean|dlog| = "));
    result plugin = run("", "compare -m '%s' -t 1 -n 4 --backend-path '%s' --backends kv_wrong_store", q4,
                        VT_TEST_PLUGIN_DIR);
    CU_ASSERT_EQUAL(plugin.rc, 0);
    CU_ASSERT(has(plugin.out, "kv_wrong_store not judged no stated tolerance for kv_wrong_store"));
    /* an entry listed twice runs once (its rows would be the first's), and says so */
    result twice = run("", "compare -m '%s' -t 1 -n 2 --backends reference,reference", q4);
    CU_ASSERT_EQUAL(twice.rc, 0);
    CU_ASSERT(has(twice.err, "--backends lists reference again; it runs once"));
    result_free(&twice);
    result json = run("", "compare -m '%s' -t 1 -n 4 --backends reference --json", q4);
    CU_ASSERT(has(json.out, "\"verdict\": \"baseline\""));
    /* a mixture of experts whose logits move past the rounding bound is not
     * judged on them, and says why and what judges it */
    char moe[1024];
    snprintf(moe, sizeof moe, "%s/models/qwen3moe-tiny-q4_k_m.gguf", dir);
    result m = run("", "compare -m '%s' -t 1 --backends simd", moe);
    CU_ASSERT_EQUAL(m.rc, 0);
    if (vt_test_simd_expected()) {
        CU_ASSERT(!strstr(m.out, "disagrees"));
        const char *row = strstr(m.out, "  simd       ");
        CU_ASSERT_PTR_NOT_NULL(row);
        if (row && strncmp(row, "  simd       not judged", 23) == 0)
            CU_ASSERT(strstr(row, "this is a mixture of experts") && strstr(row, "vt compare --trace --backends simd"));
        /* judged on its f32-cache run, the greedy count it gives is that run's,
         * not the table's (the f16 run's) */
        const char *f32_run = row ? strstr(row, "with an f32 cache, against reference's") : NULL;
        const char *line_end = row ? strchr(row, '\n') : NULL;
        if (f32_run && (!line_end || f32_run < line_end))
            CU_ASSERT(strstr(f32_run, "; greedy with the f32 cache ") != NULL);
    }
    /* float weights with the default f16 cache: a k/v rounding flipped by
     * the last f32 bit moves the logits past the f32 bound alone, so those
     * rows are judged again with an f32 cache, where correct backends agree */
    char f32[1024];
    snprintf(f32, sizeof f32, "%s/models/aidreams260k-f32.gguf", dir);
    result fl = run("", "compare -m '%s' -t 1 -n 8", f32);
    CU_ASSERT_EQUAL(fl.rc, 0);
    CU_ASSERT(!strstr(fl.out, "disagrees"));
    if (vt_test_simd_expected())
        CU_ASSERT(has(fl.out, "  simd       agrees     with the f16 cache max|dlog| ") &&
                  has(fl.out, "; with an f32 cache, against reference's: max|dlog| "));
    result_free(&r);
    result_free(&plugin);
    result_free(&json);
    result_free(&m);
    result_free(&fl);
}

/* vt run generates through the server's loop (the scheduler): --stop ends
 * the text before the stop text exactly as the server's `stop` does, the
 * penalties change what is drawn, and values out of range are refused with
 * what the rule accepts. */
static void test_run_stop_and_penalties(void) {
    const char *dir = vt_test_data_dir("test models");
    char m[1024];
    snprintf(m, sizeof m, "%s/models/aidreams260k-f32.gguf", dir);
    result plain = run("", "run -m '%s' -p 'Once upon a time' -n 40 --temp 0 --backend reference", m);
    CU_ASSERT_EQUAL(plain.rc, 0);
    const char *at = plain.out ? strstr(plain.out, "petals") : NULL;
    CU_ASSERT_PTR_NOT_NULL_FATAL(at); /* the trained model's greedy text names it (tests/data/PROVENANCE.md) */
    result stopped = run("", "run -m '%s' -p 'Once upon a time' -n 40 --temp 0 --backend reference --stop petals", m);
    CU_ASSERT_EQUAL(stopped.rc, 0);
    const size_t before = (size_t)(at - plain.out);
    CU_ASSERT(stopped.out && strlen(stopped.out) == before + 1 && strncmp(stopped.out, plain.out, before) == 0 &&
              stopped.out[before] == '\n');
    result penalized = run("", "run -m '%s' -p 'Once upon a time' -n 40 --temp 0 --backend reference "
                               "--frequency-penalty 2 --presence-penalty 2", m);
    CU_ASSERT_EQUAL(penalized.rc, 0);
    CU_ASSERT(penalized.out && plain.out && strcmp(penalized.out, plain.out) != 0);
    result bad = run("", "run -m '%s' -p hi --presence-penalty 3", m);
    CU_ASSERT_NOT_EQUAL(bad.rc, 0);
    CU_ASSERT(has(bad.err, "--presence-penalty 3: accepted values are numbers in [-2, 2]"));
    result both = run("", "run -m '%s' -p hi --stop x --ids", m);
    CU_ASSERT_NOT_EQUAL(both.rc, 0);
    CU_ASSERT(has(both.err, "--stop matches text, and --ids prints no text"));
    result_free(&plain);
    result_free(&stopped);
    result_free(&penalized);
    result_free(&bad);
    result_free(&both);
}

/* vt config names the backend and fallback a run would take here, not only
 * the rule that picks them. */
static void test_config_names_the_fallback(void) {
    result plain = run("", "config");
    CU_ASSERT_EQUAL(plain.rc, 0);
    CU_ASSERT(has(plain.out, vt_test_simd_expected() ? "backend: simd here)" : "backend: "));
    result named = run("", "config --backend reference");
    CU_ASSERT(has(named.out, "runtime.backend              = reference    (cli)"));
    if (vt_test_simd_expected())
        CU_ASSERT(has(named.out, "other than runtime.backend: simd here)"));
    result_free(&plain);
    result_free(&named);
    /* and what only the environment sets: backend folders searched first, the log level */
    result env = run("env VT_LOG=error VT_BACKEND_PATH=/nonexistent-vt-backends", "config");
    CU_ASSERT_EQUAL(env.rc, 0);
    CU_ASSERT(has(env.out, "VT_BACKEND_PATH              = /nonexistent-vt-backends (env VT_BACKEND_PATH"));
    CU_ASSERT(has(env.out, "VT_LOG                       = error        (env VT_LOG)"));
    result_free(&env);
}

/* vt config names the ini file beside each line a file set, as an ini
 * error does (FILE:LINE), and says where vt serve's default differs. */
static void test_config_names_the_file_and_serve_default(void) {
    char ini[1024];
    const bool simd = vt_test_simd_expected();
    CU_ASSERT_PTR_NOT_NULL_FATAL(vt_test_write_tmpfile(ini, sizeof ini, "config-source.ini",
                                                       simd ? "[runtime]\n\nmax_seqs = 2\n[backend.simd]\nisa = avx2\n"
                                                            : "[runtime]\n\nmax_seqs = 2\n"));
    result r = run("", "config --config '%s'", ini);
    CU_ASSERT_EQUAL(r.rc, 0);
    char said[1200];
    snprintf(said, sizeof said, "runtime.max_seqs             = 2            (ini %s:3)\n", ini);
    CU_ASSERT(has(r.out, said));
    snprintf(said, sizeof said, "= avx2         (ini %s:5)\n", ini);
    if (simd) CU_ASSERT(has(r.out, said));
    result_free(&r);
    r = run("", "config");
    CU_ASSERT(has(r.out, "runtime.max_seqs             = 1            (default: vt serve's default is 4)\n"));
    result_free(&r);
    r = run("", "config --max-seqs 3");
    CU_ASSERT(has(r.out, "runtime.max_seqs             = 3            (cli)\n"));
    result_free(&r);
    /* vt serve's own flags resolve here as vt serve takes them, refused alike */
    r = run("", "config --port 8081 --model-alias=m --chat-template chatml");
    CU_ASSERT_EQUAL(r.rc, 0);
    CU_ASSERT(has(r.out, "server.port                  = 8081         (cli)\n"));
    CU_ASSERT(has(r.out, "server.model_alias           = m            (cli)\n"));
    CU_ASSERT(has(r.out, "server.chat_template         = chatml       (cli)\n"));
    result_free(&r);
    /* a template named on the command line replaces a template file the
     * ini sets (command line over ini), as vt serve takes it */
    char template_ini[1024];
    CU_ASSERT_PTR_NOT_NULL_FATAL(vt_test_write_tmpfile(template_ini, sizeof template_ini, "template-file.ini",
                                                       "[server]\nchat_template_file = /nonexistent.jinja\n"));
    r = run("", "serve -m '%s' --config '%s' --chat-template chatml --dry-run", model, template_ini);
    CU_ASSERT_EQUAL(r.rc, 0);
    CU_ASSERT(has(r.err, "chat template chatml (built in)"));
    result_free(&r);
    /* alone, its refusal names the ini line that set it */
    r = run("", "serve -m '%s' --config '%s' --dry-run", model, template_ini);
    CU_ASSERT_EQUAL(r.rc, 2);
    char set_in[1200];
    snprintf(set_in, sizeof set_in, "(server.chat_template_file set in %s:2): cannot read", template_ini);
    CU_ASSERT(has(r.err, set_in));
    result_free(&r);
    r = run("", "config --config '%s' --chat-template chatml", template_ini);
    CU_ASSERT(has(r.out, "server.chat_template_file    =              (cli)\n"));
    result_free(&r);
    r = run("", "config --port 70000");
    CU_ASSERT_EQUAL(r.rc, 2);
    CU_ASSERT(has(r.err, "--port: server.port = 70000"));
    result_free(&r);
    /* template settings vt serve refuses before it opens the model are
     * refused here with its messages: alone, the ini's unreadable file;
     * both given on one command line */
    r = run("", "config --config '%s'", template_ini);
    CU_ASSERT_EQUAL(r.rc, 2);
    CU_ASSERT(has(r.err, set_in));
    result_free(&r);
    r = run("", "config --chat-template chatml --chat-template-file /nonexistent.jinja");
    CU_ASSERT_EQUAL(r.rc, 2);
    CU_ASSERT(has(r.err, "--chat-template and --chat-template-file: give one of them"));
    result_free(&r);
}

/* vt config resolves "exactly as vt run would": what a run refuses it
 * refuses, with the run's message and exit status, and the backend options
 * it accepts are listed with their sources. */
static void test_config_refuses_what_run_refuses(void) {
    const char *dir = vt_test_data_dir("test models");
    char ini[1024];
    CU_ASSERT_PTR_NOT_NULL_FATAL(vt_test_write_tmpfile(ini, sizeof ini, "config-nope.ini", "[backend.nope]\nx = 1\n"));
    static const char *const cases[] = {"--backend nope", "--fallback nope", "--backend-option nope.x=1", "--config '%s'"};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char flags[1200];
        snprintf(flags, sizeof flags, cases[i], ini);
        result config = run("", "config %s", flags);
        result dry = run("", "run -m '%s/models/qwen3-tiny-q8_0.gguf' --dry-run %s", dir, flags);
        if (config.rc == 0 || config.rc != dry.rc || !has(config.err, "nope"))
            printf("\nvt config %s: rc %d, vt run rc %d\n%s%s", flags, config.rc, dry.rc, config.err, dry.err);
        CU_ASSERT_NOT_EQUAL(config.rc, 0);
        CU_ASSERT_EQUAL(config.rc, dry.rc);
        CU_ASSERT(has(config.err, "no backend named 'nope'"));
        result_free(&config);
        result_free(&dry);
    }
    /* an option a backend refuses (the reference has none) is refused as a run refuses it */
    result refused = run("", "config --backend-option reference.unused_by_test=1");
    CU_ASSERT_NOT_EQUAL(refused.rc, 0);
    CU_ASSERT(has(refused.err, "--backend-option reference.unused_by_test=1: backend reference refused its options"));
    result_free(&refused);
    if (vt_test_simd_expected()) { /* one it takes is listed with its source */
        result listed = run("", "config --backend-option simd.isa=avx2");
        CU_ASSERT_EQUAL(listed.rc, 0);
        CU_ASSERT(has(listed.out, "backend.simd.isa             = avx2         (cli)"));
        result_free(&listed);
    }
}

/* Every mistake in a config file is a bad argument (exit 2): a bad value,
 * an unknown key or section, a line that does not parse. */
static void test_config_file_mistakes_exit_2(void) {
    static const char *const texts[] = {"[runtime]\nthreads = abc\n", "[runtime]\nbogus = 1\n", "[bogus]\nx = 1\n",
                                        "[runtime]\nthis line has no equals sign\n"};
    for (size_t i = 0; i < sizeof texts / sizeof *texts; i++) {
        char ini[1024];
        CU_ASSERT_PTR_NOT_NULL_FATAL(vt_test_write_tmpfile(ini, sizeof ini, "mistake.ini", texts[i]));
        result r = run("", "config --config '%s'", ini);
        if (r.rc != 2) printf("\n%s: rc %d: %s", texts[i], r.rc, r.err);
        CU_ASSERT_EQUAL(r.rc, 2);
        CU_ASSERT(has(r.err, ini));
        result_free(&r);
    }
}

/* A file given that is no regular file (a directory) is a bad argument,
 * exit 2, for -f and --ppl as for -m; synth refuses --vocab beside
 * --vocab-from (its size follows the file) and a --vocab-from it cannot
 * open. */
/* vt synth -o PATH on a file it must not replace: exit 2 saying `why`, and
 * the file byte for byte as it was. */
static void synth_refuses_to_replace(const char *path, const char *why) {
    size_t before_size = 0, after_size = 0;
    char *before = vt_test_read_file(path, &before_size);
    CU_ASSERT_PTR_NOT_NULL_FATAL(before);
    result r = run("", "synth --shape tiny --type q8_0 -o '%s'", path);
    CU_ASSERT_EQUAL(r.rc, 2);
    CU_ASSERT(has(r.err, why));
    result_free(&r);
    char *after = vt_test_read_file(path, &after_size);
    CU_ASSERT(after && after_size == before_size && memcmp(after, before, before_size) == 0);
    free(after);
    free(before);
}

static void test_given_files_exit_2(void) {
    const char *dir = vt_test_tmpdir();
    result r = run("", "run -m '%s' -f '%s' -n 1", model, dir);
    CU_ASSERT_EQUAL(r.rc, 2);
    CU_ASSERT(has(r.err, "-f ") && has(r.err, "not a regular file"));
    result_free(&r);
    r = run("", "compare -m '%s' --ppl '%s' --backends reference", model, dir);
    CU_ASSERT_EQUAL(r.rc, 2);
    CU_ASSERT(has(r.err, "--ppl ") && has(r.err, "not a regular file"));
    result_free(&r);
    char vocab[1024], out[1024];
    snprintf(vocab, sizeof vocab, "%s/models/vocab/ggml-vocab-llama-spm.gguf", vt_test_data_dir("models"));
    vt_test_tmpfile(out, sizeof out, "newcomer-synth.gguf");
    r = run("", "synth --shape tiny --type q8_0 --vocab 1000 --vocab-from '%s' -o '%s'", vocab, out);
    CU_ASSERT_EQUAL(r.rc, 2);
    CU_ASSERT(has(r.err, "--vocab and --vocab-from"));
    result_free(&r);
    r = run("", "synth --shape tiny --type q8_0 --vocab-from '%s/nonexistent.gguf' -o '%s'", dir, out);
    CU_ASSERT_EQUAL(r.rc, 2);
    CU_ASSERT(has(r.err, "--vocab-from"));
    result_free(&r);
    /* a folder as the output is the argument's fault too, said before generating */
    r = run("", "synth --shape tiny --type q8_0 -o '%s'", dir);
    CU_ASSERT_EQUAL(r.rc, 2);
    CU_ASSERT(has(r.err, "is a folder"));
    result_free(&r);
    r = run("", "synth --shape tiny --type q8_0 -o /dev/null");
    CU_ASSERT_EQUAL(r.rc, 2);
    CU_ASSERT(has(r.err, "is not a regular file"));
    result_free(&r);
    /* a file that is not a model is not synth's to overwrite; a model is */
    char text[1024];
    vt_test_write_tmpfile(text, sizeof text, "newcomer-notes.txt", "keep me\n");
    synth_refuses_to_replace(text, "exists and is not a model vt synth wrote");
    r = run("", "synth --shape tiny --type q8_0 -o '%s'", out);
    CU_ASSERT_EQUAL(r.rc, 0);
    result_free(&r);
    r = run("", "synth --shape tiny --type q8_0 -o '%s'", out); /* its own model again: replaced */
    CU_ASSERT_EQUAL(r.rc, 0);
    result_free(&r);
    /* a model synth did not write (a copy of the test model) is kept */
    char copy[1024];
    vt_test_tmpfile(copy, sizeof copy, "newcomer-real-model.gguf");
    size_t model_size = 0;
    char *bytes = vt_test_read_file(model, &model_size);
    CU_ASSERT_PTR_NOT_NULL_FATAL(bytes);
    FILE *f = fopen(copy, "wb"); /* a binary copy: vt_test_write_tmpfile writes text */
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    CU_ASSERT_EQUAL(fwrite(bytes, 1, model_size, f), model_size);
    fclose(f);
    free(bytes);
    synth_refuses_to_replace(copy, "is not a model vt synth wrote");
}

/* A flag the last of which would silently win is refused when given twice;
 * a word that is no flag is called an argument; threads beyond the CPUs the
 * process may use are warned of; vt config says what 0 and -1 stand for. */
static void test_twice_stray_and_too_many_threads(void) {
    result r = run("", "run -m /nonexistent.gguf -m '%s' -p hi -n 1", model);
    CU_ASSERT_EQUAL(r.rc, 2);
    CU_ASSERT(has(r.err, "-m/--model given twice"));
    result_free(&r);
    r = run("", "run -m '%s' -p hi -p there -n 1", model);
    CU_ASSERT_EQUAL(r.rc, 2);
    CU_ASSERT(has(r.err, "-p/--prompt given twice: give one prompt"));
    result_free(&r);
    r = run("", "run -m '%s' -p hi extra -n 1", model);
    CU_ASSERT_EQUAL(r.rc, 2);
    CU_ASSERT(has(r.err, "unexpected argument 'extra'"));
    result_free(&r);
    const int32_t usable = vt_usable_cpus();
    char said[128];
    snprintf(said, sizeof said, "runtime.threads = %d (cli) on %d CPU%s this process may use", (int)usable + 1,
             (int)usable, usable == 1 ? "" : "s");
    r = run("", "run -m '%s' -p hi -n 1 --temp 0 -t %d", model, (int)usable + 1);
    CU_ASSERT_EQUAL(r.rc, 0);
    CU_ASSERT(has(r.err, said) && has(r.err, "slower, not faster"));
    result_free(&r);
    r = run("", "run -m '%s' -p hi -n 1 --temp 0 -t 1", model);
    CU_ASSERT_EQUAL(r.rc, 0);
    CU_ASSERT(!has(r.err, "threads on "));
    result_free(&r);
    r = run("", "config");
    CU_ASSERT(has(r.out, "(default: the model's context, at most 4096)"));
    CU_ASSERT(has(r.out, "(default: a random seed per run"));
    result_free(&r);
}

/* An unknown --option a couple of edits from one the command's help lists,
 * or the beginning of just one, or one run on past an option's name, is
 * named as what was likely meant; one close to none gets no guess. */
static void test_mistyped_option_is_named(void) {
    static const struct {
        const char *args, *says;
    } cases[] = {
        {"run --tmep 0.5", "run: unknown option '--tmep'; did you mean --temp? (see vt run --help)"},
        {"run --ignore-eso", "did you mean --ignore-eos?"},
        {"run --max-seq=4", "did you mean --max-seqs?"}, /* a common flag, with its value */
        {"serve --prot 8080", "did you mean --port?"},
        {"tokenize --jsno hi", "did you mean --json?"},
        /* vt config takes every engine flag, which its help does not list */
        {"config --kv-cache-dtyp f32", "did you mean --kv-cache-dtype?"},
        /* the option itself, with "=value" it does not take; a short
         * option's value joined by '=' */
        {"bench --json=1", "--json takes no value"},
        {"run -p=hi", "run: unknown option '-p=hi'; give -p its value as the next argument (-p hi)"},
        {"serve -np=4", "serve: unknown option '-np=4'; give -np its value as the next argument (-np 4)"},
        {"run -x=2", "run: unknown option '-x=2' (see vt run --help)"}, /* no such short option */
        /* a word cut short (the one option it begins), or run on past one */
        {"run --ctx 512", "run: unknown option '--ctx'; did you mean --ctx-size? (see vt run --help)"},
        /* two edits from --api-key, but the beginning of --api-key-file only */
        {"serve --api-key-f /tmp/k", "did you mean --api-key-file?"},
        {"run --temprature 0.5", "did you mean --temp?"},
        {"run --temperature 0.5", "did you mean --temp?"},
        {"tokenize --jsonify hi", "did you mean --json?"},
        /* the beginning of several options: no guess */
        {"run --max 4", "run: unknown option '--max' (see vt run --help)"},
        {"serve --api k", "serve: unknown option '--api' (see vt serve --help)"},
        /* one edit from --ids, but of two letters: too short to guess from */
        {"tokenize --ds hi", "tokenize: unknown option '--ds' (see vt tokenize --help)"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        result r = run("", "%s", cases[i].args);
        CU_ASSERT_EQUAL(r.rc, 2);
        CU_ASSERT(has(r.err, cases[i].says));
        if (!strstr(cases[i].says, "did you mean")) CU_ASSERT(!strstr(r.err, "did you mean"));
        result_free(&r);
    }
}

/* --option=value is --option value for every option that takes a value,
 * the command's own ones as the engine's and sampling's (GNU getopt's
 * rule); after a bare "--" an argument is an operand, "=" and all. */
static void test_option_equals_value(void) {
    result spaced = run("", "run -m '%s' -p 'Once upon' --n-predict 4 --temp 0 -c 64", model);
    result joined = run("", "run --model='%s' --prompt='Once upon' --n-predict=4 --temp=0 --ctx-size=64", model);
    CU_ASSERT_EQUAL(spaced.rc, 0);
    CU_ASSERT_EQUAL(joined.rc, 0);
    CU_ASSERT(spaced.out[0] && strcmp(spaced.out, joined.out) == 0);
    result_free(&spaced);
    result_free(&joined);
    /* only an option's place is taken apart: a value that looks like
     * "--name=value" is the value (-p's text here; -n stays 3) */
    result text = run("", "run -m '%s' -p --n-predict=4 -n 3 --temp 0 --ids -c 64", model);
    result same = run("", "run -m '%s' --prompt=--n-predict=4 -n 3 --temp 0 --ids -c 64", model);
    CU_ASSERT_EQUAL(text.rc, 0);
    CU_ASSERT(text.out[0] && strcmp(text.out, same.out) == 0);
    int commas = 0;
    for (const char *c = text.out; *c; c++) commas += *c == ',';
    CU_ASSERT_EQUAL(commas, 2); /* 3 ids */
    result_free(&text);
    result_free(&same);
    /* serve's own flags, which once matched other options' hints */
    result r = run("", "serve -m '%s' --api-key=abc --port=28447 --dry-run", model);
    CU_ASSERT_EQUAL(r.rc, 0);
    CU_ASSERT(has(r.err, "dry run"));
    result_free(&r);
    r = run("", "tokenize -m '%s' --ids -- --json=1", model);
    CU_ASSERT_EQUAL(r.rc, 0);
    result plain = run("", "tokenize -m '%s' --ids -p --json=1", model); /* the same text as -p's value */
    CU_ASSERT(r.out[0] && strcmp(r.out, plain.out) == 0);
    result_free(&plain);
    result_free(&r);
}

/* Every option a command's --help shows with a value ("--port N") takes it
 * joined by '=' too: given as --opt=1 before --help (which stops the
 * parse there, so nothing runs), none is an unknown option: each such
 * option has a handler, and the joined form reaches it. */
static void test_every_value_option_takes_it_joined(void) {
    static const char *const commands[] = {"run",  "chat",      "serve",      "bench", "compare", "eval", "backends",
                                            "tokenize", "detokenize", "synth", "info", "config"};
    int checked = 0;
    for (size_t c = 0; c < sizeof commands / sizeof *commands; c++) {
        result help = run("", "%s --help", commands[c]);
        CU_ASSERT_EQUAL(help.rc, 0);
        /* "--name X..." with X a capital: the option takes a value */
        for (const char *at = strstr(help.out, "--"); at; at = strstr(at + 2, "--")) {
            const char *name = at + 2;
            size_t n = strspn(name, "abcdefghijklmnopqrstuvwxyz0123456789-");
            const bool starts = at == help.out || strchr(" \t\n([|,/`", at[-1]);
            if (!starts || n == 0 || name[0] < 'a' || name[0] > 'z' || name[n] != ' ' || name[n + 1] < 'A' ||
                name[n + 1] > 'Z')
                continue;
            result r = run("", "%s --%.*s=1 --help", commands[c], (int)n, name);
            CU_ASSERT(!strstr(r.err, "unknown option"));
            if (strstr(r.err, "unknown option")) printf("\n  vt %s --%.*s=1: %s", commands[c], (int)n, name, r.err);
            checked++;
            result_free(&r);
        }
        result_free(&help);
    }
    CU_ASSERT(checked >= 60); /* the helps show that many options with values; fewer means the scan broke */
    if (checked < 60) printf("\n  only %d options with values found in the helps", checked);
}

/* A mistyped command is named as what was likely meant; `vt help` and
 * `vt help COMMAND` print the usage and the command's help (exit 0). */
static void test_mistyped_command_and_help(void) {
    static const struct {
        const char *args;
        int rc;
        const char *out, *err; /* what stdout and stderr hold (NULL: not checked) */
    } cases[] = {
        {"serv --port 8080", 2, NULL, "vt: unknown command 'serv'; did you mean serve?"},
        {"xyzzy", 2, NULL, "vt: unknown command 'xyzzy'\n"},
        {"help", 0, "usage: vt COMMAND", NULL},
        {"help tokenize", 0, "usage: vt tokenize", NULL},
        {"help --help", 0, "usage: vt COMMAND", NULL},
        {"help run extra", 2, NULL, "help takes one command's name"},
        {"help tokenze", 2, NULL, "did you mean tokenize?"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        result r = run("", "%s", cases[i].args);
        CU_ASSERT_EQUAL(r.rc, cases[i].rc);
        if (cases[i].out) CU_ASSERT(has(r.out, cases[i].out));
        if (cases[i].err) CU_ASSERT(has(r.err, cases[i].err));
        result_free(&r);
    }
}

/* vt backends judges backend options as a run does, listing or testing:
 * one for no backend found exits 2, one its backend refuses 5 (they were
 * taken silently, and ignored for a backend other than the one tested). */
static void test_backends_judges_backend_options(void) {
    static const char *const commands[] = {"backends", "backends --test reference --ops rms_norm"};
    for (int i = 0; i < 2; i++) {
        result r = run("", "%s --backend-option nosuch.x=1", commands[i]);
        CU_ASSERT_EQUAL(r.rc, 2);
        CU_ASSERT(has(r.err, "no backend named 'nosuch'"));
        result_free(&r);
        r = run("", "%s --backend-option reference.foo=1", commands[i]);
        CU_ASSERT_EQUAL(r.rc, 5);
        CU_ASSERT(has(r.err, "reference.foo=1") && has(r.err, "refused"));
        result_free(&r);
    }
}

/* vt eval names the configuration it ran: under --backend auto "auto" (it
 * places node by node), not its preferred backend's name. */
static void test_eval_names_auto(void) {
    char prefix[1200];
    snprintf(prefix, sizeof prefix, "XDG_CACHE_HOME='%s/eval-auto-cache'", vt_test_tmpdir());
    result r = run(prefix, "eval -m '%s' --tokens 1,2,3 --top-k 1 --backend auto", model);
    CU_ASSERT_EQUAL(r.rc, 0);
    CU_ASSERT(has(r.out, "\"backend\": \"auto\""));
    result_free(&r);
}

/* A command's --help lists only flags it takes, each once; one it takes and
 * cannot use is refused, not ignored. */
static void test_help_lists_what_applies(void) {
    result bench = run("", "bench --help"), compare = run("", "compare --help");
    CU_ASSERT(!strstr(bench.out, "--backend NAME|auto") && !strstr(bench.out, "--special"));
    CU_ASSERT(!strstr(bench.out, "auto: each node on the backend measured fastest")); /* nor its continuation */
    CU_ASSERT(!strstr(compare.out, "--backend NAME|auto"));
    const char *first = strstr(compare.out, "--kv-cache-dtype LIST");
    CU_ASSERT(first && !strstr(first + 1, "--kv-cache-dtype D"));
    static const char *const not_applicable[] = {"backends --seed 3", "backends --test reference --brief",
                                                 "backends --special", "backends -m x.gguf", "backends --explain",
                                                 "config --special", "config --dry-run", "config -m x.gguf"};
    for (size_t i = 0; i < sizeof not_applicable / sizeof *not_applicable; i++) {
        result r = run("", "%s", not_applicable[i]);
        if (r.rc != 2) printf("\nvt %s: rc %d: %s", not_applicable[i], r.rc, r.err);
        CU_ASSERT_EQUAL(r.rc, 2);
        result_free(&r);
    }
    /* a backend folder the user names that cannot be opened is warned of,
     * once however many engines scan it (compare builds one per backend) */
    const char *models = vt_test_data_dir("test models");
    result no_folder = run("VT_BACKEND_PATH=/nonexistent-vt-a",
                           "compare -m '%s/models/qwen3-tiny-q8_0.gguf' -n 1 --backends reference,reference "
                           "--backend-path /nonexistent-vt-b",
                           models);
    CU_ASSERT_EQUAL(no_folder.rc, 0);
    for (int k = 0; k < 2; k++) {
        const char *name = k ? "/nonexistent-vt-b" : "/nonexistent-vt-a";
        const char *at = strstr(no_folder.err, name);
        CU_ASSERT(at && strstr(no_folder.err, "cannot be opened") && !strstr(at + 1, name));
    }
    result_free(&no_folder);
    /* a VT_LOG the library does not know is refused by the command, naming
     * it (the library alone warns and keeps its default: test_host) */
    result bad_log = run("VT_LOG=loud", "version");
    CU_ASSERT_EQUAL(bad_log.rc, 2);
    CU_ASSERT(strstr(bad_log.err, "VT_LOG=loud") != NULL);
    result_free(&bad_log);
    result fine_log = run("VT_LOG=Info", "version");
    CU_ASSERT_EQUAL(fine_log.rc, 0);
    result_free(&fine_log);
    /* the commands that never sample refuse the sampling flags, saying so
     * (before the model is looked at: x.gguf does not exist) */
    static const char *const no_sampling[] = {"eval -m x.gguf --tokens 1 --temp 5", "compare -m x.gguf --seed 7",
                                              "bench -m x.gguf --top-p 0.5", "bench -m x.gguf --min-p=0.1",
                                              "compare -m x.gguf --top-k 3"};
    for (size_t i = 0; i < sizeof no_sampling / sizeof *no_sampling; i++) {
        result r = run("", "%s", no_sampling[i]);
        CU_ASSERT_EQUAL(r.rc, 2);
        CU_ASSERT(strstr(r.err, "does not sample") != NULL);
        if (!strstr(r.err, "does not sample")) printf("\nvt %s: rc %d: %s", no_sampling[i], r.rc, r.err);
        result_free(&r);
    }
    /* vt compare takes --special for its prompt: "</s>" is one token with it, several without */
    const char *dir = vt_test_data_dir("test models");
    result with = run("", "compare -m '%s/models/aidreams260k-f32.gguf' -p '</s>' --special -n 1 --backends reference --json", dir);
    result without = run("", "compare -m '%s/models/aidreams260k-f32.gguf' -p '</s>' -n 1 --backends reference --json", dir);
    CU_ASSERT(has(with.out, "\"n_tokens\": 2,"));
    CU_ASSERT(strstr(without.out, "\"n_tokens\": 2,") == NULL);
    result_free(&with);
    result_free(&without);
    result special = run("", "bench -m '%s' --special -p 1 -n 1", model);
    CU_ASSERT_EQUAL(special.rc, 2);
    CU_ASSERT(has(special.err, "--special: vt bench has no prompt text"));
    result_free(&bench);
    result_free(&compare);
    result_free(&special);
}

/* vt bench without --backends runs the default backend first, so its
 * "x first" column compares every other backend with the default. */
static void test_bench_runs_the_default_first(void) {
    if (!vt_test_simd_expected()) return;
    const char *dir = vt_test_data_dir("test models");
    result r = run("", "bench -m '%s/models/qwen3-tiny-q4_k_m.gguf' -p 8 -n 2 -r 1 -t 1 --json", dir);
    CU_ASSERT_EQUAL(r.rc, 0);
    const char *first = strstr(r.out, "\"backend\": ");
    CU_ASSERT(first && strncmp(first, "\"backend\": \"simd\"", 17) == 0);
    result_free(&r);
}

/* vt run and vt chat generate through the scheduler as vt serve does, and
 * take its settings as it does: a token budget over what one forward takes
 * is refused (exit 2, naming the setting), one within it sets how many
 * prompt tokens a step computes. */
static void test_run_and_chat_take_the_scheduler_settings(void) {
    result r = run("", "run -m '%s' -p hi -n 2 -c 128 --token-budget 1024 --backend reference -t 1", model);
    CU_ASSERT_EQUAL(r.rc, 2);
    CU_ASSERT(has(r.err, "runtime.token_budget = 1024: one forward takes at most 128 tokens"));
    CU_ASSERT_STRING_EQUAL(r.out, "");
    result_free(&r);
    r = run("echo hi |", "chat -m '%s' --chat-template chatml -c 128 --token-budget 1024 --backend reference -t 1", model);
    CU_ASSERT_EQUAL(r.rc, 2);
    CU_ASSERT(has(r.err, "runtime.token_budget = 1024"));
    result_free(&r);
    r = run("", "config -c 128 --token-budget 1024");
    CU_ASSERT_EQUAL(r.rc, 2); /* vt config refuses what vt run refuses */
    CU_ASSERT(has(r.err, "runtime.token_budget = 1024: one forward takes at most 128 tokens"));
    result_free(&r);
    /* 16 prompt tokens at 4 a step: four steps of prompt tokens */
    r = run("VT_LOG=debug", "run -m '%s' -p 'Once upon a time there' -n 2 --token-budget 4 --backend reference -t 1",
            model);
    CU_ASSERT_EQUAL(r.rc, 0);
    int steps = 0;
    for (const char *p = r.err; (p = strstr(p, "4 prompt tokens, no decodes")) != NULL; p++) steps++;
    CU_ASSERT_EQUAL(steps, 4);
    CU_ASSERT(!has(r.err, "5 prompt tokens"));
    result_free(&r);
}

/* --backend auto's cost tables hold the first 32 backend files found: with
 * 33 stale files ahead of the real backends, auto says so and stops (it
 * read and wrote past its tables, placing nothing by cost), while a named
 * backend still runs. */
static void test_auto_past_its_tables_says_so(void) {
    char dir[400], cmd[2048];
    vt_test_tmpfile(dir, sizeof dir, "many-backend-files");
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s' && for i in $(seq -w 0 32); do : > '%s'/libvt-backend-a$i.so; "
             "done", dir, dir, dir);
    CU_ASSERT_EQUAL_FATAL(vt_test_run_cmd(cmd, NULL, NULL), 0);
    char prefix[900];
    snprintf(prefix, sizeof prefix, "VT_BACKEND_PATH='%s' XDG_CACHE_HOME='%s'", dir, dir);
    result r = run(prefix, "run -m '%s' --backend auto -p hi -n 2 --temp 0 -t 1", model);
    CU_ASSERT_EQUAL(r.rc, 5);
    CU_ASSERT(has(r.err, "runtime.backend = auto places among the first 32 backend files found"));
    result named = run(prefix, "run -m '%s' --backend reference -p hi -n 2 --temp 0 -t 1", model);
    CU_ASSERT_EQUAL(named.rc, 0);
    result_free(&r);
    result_free(&named);
}

int main(void) {
    CU_TestInfo tests[] = {
        {"the default seed is random, printed, and replays", test_default_seed_is_random_and_replayable},
        {"options no backend takes are refused before running", test_unknown_backend_options_are_refused},
        {"-p - reads stdin, -f FILE a file", test_prompt_from_stdin_and_file},
        {"vt --version and vt version", test_version},
        {"one token: '1 token', no rate", test_one_token_timing_line},
        {"messages name the value's source", test_messages_name_the_source},
        {"-c past the trained context warns once", test_ctx_past_training_warns_once},
        {"info summary, token text, default backend marked", test_info_tokenize_backends},
        {"vt compare ends with a verdict per backend and a legend", test_compare_ends_with_verdicts},
        {"vt config refuses what vt run refuses, and lists backend options", test_config_refuses_what_run_refuses},
        {"every mistake in a config file exits 2", test_config_file_mistakes_exit_2},
        {"a given file that is a directory, and synth's vocabulary flags, exit 2", test_given_files_exit_2},
        {"a flag given twice, a stray word, threads past the CPUs", test_twice_stray_and_too_many_threads},
        {"vt eval --backend auto says auto", test_eval_names_auto},
        {"vt backends judges backend options as a run does", test_backends_judges_backend_options},
        {"a mistyped --option is named as what was meant, when one is close", test_mistyped_option_is_named},
        {"--option=value is --option value for every option that takes one", test_option_equals_value},
        {"every option a help shows with a value takes it joined by '='", test_every_value_option_takes_it_joined},
        {"a mistyped command is named; vt help [COMMAND]", test_mistyped_command_and_help},
        {"--help lists what applies; --special in bench is refused", test_help_lists_what_applies},
        {"vt run: --stop as the server's stop, the penalties, their ranges", test_run_stop_and_penalties},
        {"vt config names the backend and fallback a run takes", test_config_names_the_fallback},
        {"vt config names the ini file, and vt serve's own default", test_config_names_the_file_and_serve_default},
        {"vt bench runs the default backend first", test_bench_runs_the_default_first},
        {"vt run and vt chat take the scheduler's settings", test_run_and_chat_take_the_scheduler_settings},
        {"--backend auto past its tables says so", test_auto_past_its_tables_says_so},
        CU_TEST_INFO_NULL,
    };
    vt_test_add_suite("newcomer", find_model, NULL, tests);
    return vt_test_run();
}
