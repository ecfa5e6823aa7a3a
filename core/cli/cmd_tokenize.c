/* cmd_tokenize.c — `vt tokenize` and `vt detokenize`: the model's tokenizer
 * on its own, for debugging prompts. Works on vocab-only GGUF files. */
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "gguf.h"
#include "tokenizer.h"

/* Open just the tokenizer of a GGUF (no weights needed). */
static vt_status open_tokenizer(const char *path, vt_gguf **g, vt_tokenizer **t, vt_error *err) {
    *g = NULL;
    *t = NULL;
    vt_status st = vt_gguf_open(path, g, err); /* its errors name the file */
    if (st == VT_OK) {
        st = vt_tokenizer_load(*g, t, err);
        if (st != VT_OK) vt_error_prefix(err, "%s: ", path);
    }
    if (st != VT_OK) {
        vt_gguf_close(*g);
        *g = NULL;
    }
    return st;
}

static void json_string(const char *s, size_t len) {
    putchar('"');
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') printf("\\%c", c);
        else if (c == '\n') printf("\\n");
        else if (c == '\t') printf("\\t");
        else if (c < 0x20) printf("\\u%04x", c);
        else putchar(c);
    }
    putchar('"');
}

/* Length of the valid UTF-8 sequence at s[0..n), or 0 if it is not one. */
static size_t utf8_char(const unsigned char *s, size_t n) {
    size_t len = s[0] < 0x80 ? 1 : (s[0] & 0xe0) == 0xc0 ? 2 : (s[0] & 0xf0) == 0xe0 ? 3 : (s[0] & 0xf8) == 0xf0 ? 4 : 0;
    if (len == 0 || len > n || (len == 2 && s[0] < 0xc2)) return 0;
    for (size_t k = 1; k < len; k++)
        if ((s[k] & 0xc0) != 0x80) return 0;
    return len;
}

/* A token's text as a quoted string a person can read: whole UTF-8
 * characters as themselves, quotes, backslashes and control bytes escaped,
 * and a byte that is only part of a character (byte-fallback tokens) as \xNN. */
static void print_token_text(const vt_tokenizer *t, int32_t id) {
    char buf[512];
    int32_t len = vt_token_to_bytes(t, id, true, buf, sizeof buf);
    if (len > (int32_t)sizeof buf) len = (int32_t)sizeof buf;
    putchar('"');
    const unsigned char *b = (const unsigned char *)buf;
    for (int32_t i = 0; i < len;) {
        size_t n = utf8_char(b + i, (size_t)(len - i));
        if (n == 1 && (b[i] == '"' || b[i] == '\\')) printf("\\%c", b[i]);
        else if (n == 1 && b[i] == '\n') printf("\\n");
        else if (n == 1 && b[i] == '\t') printf("\\t");
        else if (n == 0 || b[i] < 0x20 || b[i] == 0x7f) printf("\\x%02x", b[i]);
        else fwrite(b + i, 1, n, stdout);
        i += n ? (int32_t)n : 1;
    }
    putchar('"');
}

/* The flags tokenize and detokenize share: the model and --special. */
typedef struct tokenizer_flags {
    const char *model;
    bool special;
} tokenizer_flags;

static vt_arg_result tokenizer_flag(tokenizer_flags *f, int argc, char **argv, int *i, vt_error *err) {
    const char *a = argv[*i];
    if (strcmp(a, "-m") == 0 || strcmp(a, "--model") == 0)
        return vt_cli_text_arg_once(argc, argv, i, &f->model, "-m/--model", "model", err);
    if (strcmp(a, "--special") != 0) return VT_ARG_NOT_MINE;
    f->special = true;
    return VT_ARG_TAKEN;
}

static void tokenize_help(FILE *f) {
    fprintf(f, "usage: vt tokenize -m/--model MODEL [--special] [--no-bos] [--ids | --json | --raw]\n"
               "                   ([--] TEXT | -p TEXT | -f FILE)\n\n"
               "Tokenize TEXT (\"-\" reads stdin) with the model's vocabulary; -p/--prompt TEXT is the same as\n"
               "TEXT (as vt run takes it) and -f/--file FILE tokenizes the file's text: give one of the three.\n"
               "BOS is added as the vocab's metadata says unless --no-bos. --special matches control tokens'\n"
               "text (off by default).\n"
               "Output: a table of each id and the text it stands for, quoted (\" world\"; a byte that is part\n"
               "of a character as \\xNN); --raw: the vocabulary's pieces instead (\"Ġworld\", \"▁world\");\n"
               "--ids: ids comma-separated; --json: {\"ids\", \"pieces\" (the vocabulary's)}.\n");
}

/* What `vt tokenize` was asked. */
typedef struct tokenize_opts {
    tokenizer_flags f;
    const char *operand; /* TEXT ("-": stdin) */
    vt_cli_prompt prompt; /* -p TEXT or -f FILE; after parsing, whichever of the three was given */
    bool no_bos, ids_only, json, raw;
    bool help;
} tokenize_opts;

static vt_arg_result tokenize_arg(void *opts, int argc, char **argv, int *i, vt_error *err) {
    tokenize_opts *o = opts;
    const char *a = argv[*i];
    vt_arg_result r = tokenizer_flag(&o->f, argc, argv, i, err);
    if (r != VT_ARG_NOT_MINE) return r;
    if (strcmp(a, "--no-bos") == 0) o->no_bos = true;
    else if (strcmp(a, "--ids") == 0) o->ids_only = true;
    else if (strcmp(a, "--json") == 0) o->json = true;
    else if (strcmp(a, "--raw") == 0) o->raw = true;
    else if (strcmp(a, "--") == 0 && *i + 1 < argc && !o->operand) o->operand = argv[++*i];
    else if ((a[0] != '-' || strcmp(a, "-") == 0) && !o->operand) o->operand = a;
    /* -p and -f as vt run takes them (not --tokens: those are already ids) */
    else if (strcmp(a, "--tokens") != 0) return vt_cli_prompt_arg(argc, argv, i, &o->prompt, err);
    else return VT_ARG_NOT_MINE;
    return VT_ARG_TAKEN;
}

/* The text given once: TEXT, -p TEXT or -f FILE (each of which, given
 * twice, the parse has refused already). */
static vt_status settle_text(tokenize_opts *o, vt_error *err) {
    const vt_cli_prompt *p = &o->prompt;
    const int given = (o->operand != NULL) + (p->text != NULL) + (p->file != NULL);
    if (given == 0) return vt_fail(err, VT_ERR_INVALID, "tokenize: give TEXT, -p TEXT or -f FILE (- for stdin)");
    if (given > 1)
        return vt_fail(err, VT_ERR_INVALID, "tokenize: give one text: TEXT, -p TEXT or -f FILE, not %s%s%s%s%s",
                       o->operand ? "TEXT" : "", o->operand && p->text ? " and " : "", p->text ? "-p" : "",
                       p->file && (o->operand || p->text) ? " and " : "", p->file ? "-f" : "");
    if (o->operand) o->prompt.text = o->operand;
    return VT_OK;
}

static vt_status parse_tokenize(int argc, char **argv, tokenize_opts *o, vt_error *err) {
    static const vt_cli_parser parser = {
        .name = "tokenize", .operands = true, .see_help = true, .own = tokenize_arg, .help = tokenize_help};
    *o = (tokenize_opts){0};
    vt_status st = vt_cli_parse(&parser, NULL, o, &o->help, argc, argv, err);
    if (st == VT_OK && !o->help) st = settle_text(o, err);
    if (st == VT_OK && (int)o->ids_only + (int)o->json + (int)o->raw > 1)
        st = vt_fail(err, VT_ERR_INVALID, "%s: --ids, --json and --raw are different outputs; give one",
                     o->ids_only && o->json ? "--ids with --json" : o->raw && o->json ? "--raw with --json" : "--ids with --raw");
    return st;
}

static vt_status validate_tokenizer_flags(const tokenizer_flags *f, vt_error *err) {
    return vt_cli_require_model(f->model, err);
}

/* Tokenize and print the ids in the asked format. */
static vt_status run_tokenize(const tokenize_opts *o, vt_error *err) {
    vt_gguf *g;
    vt_tokenizer *t;
    vt_status st = open_tokenizer(o->f.model, &g, &t, err);
    if (st != VT_OK) return st;
    const char *text = "";
    char *owned = NULL;
    size_t len = 0;
    int32_t *ids = NULL;
    size_t n = 0;
    st = vt_cli_prompt_text(&o->prompt, &owned, &text, &len, err);
    if (st == VT_OK)
        st = vt_tokenize(t, text, len, !o->no_bos && vt_tokenizer_add_bos(t), o->f.special, &ids, &n, err);
    if (st == VT_OK) {
        if (o->ids_only) {
            for (size_t i = 0; i < n; i++) printf("%s%d", i ? "," : "", ids[i]);
            printf("\n");
        } else if (o->json) {
            printf("{\"ids\": [");
            for (size_t i = 0; i < n; i++) printf("%s%d", i ? ", " : "", ids[i]);
            printf("], \"pieces\": [");
            for (size_t i = 0; i < n; i++) {
                const char *p = vt_tokenizer_piece(t, ids[i]);
                if (i) printf(", ");
                json_string(p, strlen(p));
            }
            printf("]}\n");
        } else if (o->raw) {
            for (size_t i = 0; i < n; i++) printf("%8d  %s\n", ids[i], vt_tokenizer_piece(t, ids[i]));
        } else {
            for (size_t i = 0; i < n; i++) {
                printf("%8d  ", ids[i]);
                print_token_text(t, ids[i]);
                printf("\n");
            }
        }
    }
    free(ids);
    free(owned);
    vt_tokenizer_free(t);
    vt_gguf_close(g);
    return st;
}

int vt_cmd_tokenize(int argc, char **argv) {
    vt_error err = {0};
    tokenize_opts o;
    vt_status st = parse_tokenize(argc, argv, &o, &err);
    if (st == VT_OK && o.help) {
        tokenize_help(stdout);
        return 0;
    }
    if (st == VT_OK) st = validate_tokenizer_flags(&o.f, &err);
    if (st == VT_OK) st = run_tokenize(&o, &err);
    return vt_cli_exit(st, &err);
}

static void detokenize_help(FILE *f) {
    fprintf(f, "usage: vt detokenize -m/--model MODEL [--special] IDS\n\n"
               "Write the exact bytes the comma-separated token IDS decode to (control tokens render as\n"
               "nothing unless --special), as llama.cpp's detokenizer does. No newline is added.\n");
}

/* What `vt detokenize` was asked. */
typedef struct detokenize_opts {
    tokenizer_flags f;
    const char *list;
    int32_t *ids; /* the list parsed (malloc'ed) */
    size_t n;
    bool help;
} detokenize_opts;

static vt_arg_result detokenize_arg(void *opts, int argc, char **argv, int *i, vt_error *err) {
    detokenize_opts *o = opts;
    const char *a = argv[*i];
    vt_arg_result r = tokenizer_flag(&o->f, argc, argv, i, err);
    if (r != VT_ARG_NOT_MINE) return r;
    /* a leading '-' followed by a digit is a (negative, refused) id, not a flag */
    if (o->list || (a[0] == '-' && !(a[1] >= '0' && a[1] <= '9'))) return VT_ARG_NOT_MINE;
    o->list = a;
    return VT_ARG_TAKEN;
}

static vt_status parse_detokenize(int argc, char **argv, detokenize_opts *o, vt_error *err) {
    static const vt_cli_parser parser = {
        .name = "detokenize", .operands = true, .see_help = true, .own = detokenize_arg, .help = detokenize_help};
    *o = (detokenize_opts){0};
    vt_status st = vt_cli_parse(&parser, NULL, o, &o->help, argc, argv, err);
    if (st != VT_OK || o->help) return st;
    if (!o->list) return vt_fail(err, VT_ERR_INVALID, "detokenize: give IDS, comma-separated");
    return vt_cli_parse_ids("IDS", o->list, &o->ids, &o->n, err);
}

/* Decode the ids and write the bytes. */
static vt_status run_detokenize(const detokenize_opts *o, vt_error *err) {
    vt_gguf *g;
    vt_tokenizer *t;
    vt_status st = open_tokenizer(o->f.model, &g, &t, err);
    if (st != VT_OK) return st;
    for (size_t i = 0; i < o->n && st == VT_OK; i++)
        if (o->ids[i] >= vt_tokenizer_n_vocab(t))
            st = vt_fail(err, VT_ERR_INVALID, "token id %d is outside the vocabulary (0..%d)", o->ids[i],
                         vt_tokenizer_n_vocab(t) - 1);
    char *text = NULL;
    size_t len = 0;
    if (st == VT_OK) st = vt_detokenize(t, o->ids, o->n, o->f.special, &text, &len, err);
    if (st == VT_OK) fwrite(text, 1, len, stdout);
    free(text);
    vt_tokenizer_free(t);
    vt_gguf_close(g);
    return st;
}

int vt_cmd_detokenize(int argc, char **argv) {
    vt_error err = {0};
    detokenize_opts o;
    vt_status st = parse_detokenize(argc, argv, &o, &err);
    if (st == VT_OK && o.help) {
        detokenize_help(stdout);
        return 0;
    }
    if (st == VT_OK) st = validate_tokenizer_flags(&o.f, &err);
    if (st == VT_OK) st = run_detokenize(&o, &err);
    free(o.ids);
    return vt_cli_exit(st, &err);
}
