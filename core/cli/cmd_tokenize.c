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
    if (!path) return vt_fail(err, VT_ERR_INVALID, "no model: pass -m FILE");
    vt_status st = vt_gguf_open(path, g, err);
    if (st == VT_OK) st = vt_tokenizer_load(*g, t, err);
    if (st != VT_OK) {
        vt_error_prefix(err, "%s: ", path);
        vt_gguf_close(*g);
        *g = NULL;
    }
    return st;
}

static char *read_stdin(size_t *len) {
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        size_t got = fread(buf + n, 1, cap - n, stdin);
        n += got;
        if (got == 0) break;
        if (n == cap) {
            char *grown = realloc(buf, cap *= 2);
            if (!grown) {
                free(buf);
                return NULL;
            }
            buf = grown;
        }
    }
    if (len) *len = n;
    return buf;
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

int vt_cmd_tokenize(int argc, char **argv) {
    const char *model = NULL, *text = NULL;
    bool special = false, no_bos = false, ids_only = false, json = false, text_given = false;
    vt_error err = {0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            printf("usage: vt tokenize -m MODEL [--special] [--no-bos] [--ids | --json] [--] TEXT\n\n"
                   "Tokenize TEXT (\"-\" reads stdin) with the model's vocabulary. BOS is added as the vocab's\n"
                   "metadata says unless --no-bos. --special matches control tokens' text (off by default).\n"
                   "Output: a table of id and piece; --ids: ids comma-separated; --json: {\"ids\", \"pieces\"}.\n");
            return 0;
        } else if (strcmp(a, "-m") == 0 || strcmp(a, "--model") == 0) {
            if (!(model = vt_cli_value(argc, argv, &i, &err))) return vt_cli_error(&err);
        } else if (strcmp(a, "--special") == 0) {
            special = true;
        } else if (strcmp(a, "--no-bos") == 0) {
            no_bos = true;
        } else if (strcmp(a, "--ids") == 0) {
            ids_only = true;
        } else if (strcmp(a, "--json") == 0) {
            json = true;
        } else if (strcmp(a, "--") == 0 && i + 1 < argc && !text_given) {
            text = argv[++i];
            text_given = true;
        } else if ((a[0] != '-' || strcmp(a, "-") == 0) && !text_given) {
            text = a;
            text_given = true;
        } else {
            vt_fail(&err, VT_ERR_INVALID, "tokenize: unexpected argument '%s' (see vt tokenize --help)", a);
            return vt_cli_error(&err);
        }
    }
    if (!text_given) {
        vt_fail(&err, VT_ERR_INVALID, "tokenize: give TEXT (or - for stdin)");
        return vt_cli_error(&err);
    }
    vt_gguf *g;
    vt_tokenizer *t;
    if (open_tokenizer(model, &g, &t, &err) != VT_OK) return vt_cli_error(&err);
    char *owned = NULL;
    size_t len = 0;
    if (strcmp(text, "-") == 0) {
        owned = read_stdin(&len);
        text = owned ? owned : "";
    } else {
        len = strlen(text);
    }
    int32_t *ids = NULL;
    size_t n = 0;
    vt_status st = vt_tokenize(t, text, len, !no_bos && vt_tokenizer_add_bos(t), special, &ids, &n, &err);
    if (st == VT_OK) {
        if (ids_only) {
            for (size_t i = 0; i < n; i++) printf("%s%d", i ? "," : "", ids[i]);
            printf("\n");
        } else if (json) {
            printf("{\"ids\": [");
            for (size_t i = 0; i < n; i++) printf("%s%d", i ? ", " : "", ids[i]);
            printf("], \"pieces\": [");
            for (size_t i = 0; i < n; i++) {
                const char *p = vt_tokenizer_piece(t, ids[i]);
                if (i) printf(", ");
                json_string(p, strlen(p));
            }
            printf("]}\n");
        } else {
            for (size_t i = 0; i < n; i++) printf("%8d  %s\n", ids[i], vt_tokenizer_piece(t, ids[i]));
        }
    }
    free(ids);
    free(owned);
    vt_tokenizer_free(t);
    vt_gguf_close(g);
    return st == VT_OK ? 0 : vt_cli_error(&err);
}

int vt_cmd_detokenize(int argc, char **argv) {
    const char *model = NULL, *list = NULL;
    bool special = false;
    vt_error err = {0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            printf("usage: vt detokenize -m MODEL [--special] IDS\n\n"
                   "Write the exact bytes the comma-separated token IDS decode to (control tokens render as\n"
                   "nothing unless --special), as llama.cpp's detokenizer does. No newline is added.\n");
            return 0;
        } else if (strcmp(a, "-m") == 0 || strcmp(a, "--model") == 0) {
            if (!(model = vt_cli_value(argc, argv, &i, &err))) return vt_cli_error(&err);
        } else if (strcmp(a, "--special") == 0) {
            special = true;
        } else if (!list && (a[0] != '-' || (a[1] >= '0' && a[1] <= '9'))) {
            list = a;
        } else {
            vt_fail(&err, VT_ERR_INVALID, "detokenize: unexpected argument '%s' (see vt detokenize --help)", a);
            return vt_cli_error(&err);
        }
    }
    if (!list) {
        vt_fail(&err, VT_ERR_INVALID, "detokenize: give IDS, comma-separated");
        return vt_cli_error(&err);
    }
    int32_t *ids = NULL;
    size_t n = 0;
    if (vt_cli_parse_ids(list, &ids, &n, &err) != VT_OK) return vt_cli_error(&err);
    vt_gguf *g;
    vt_tokenizer *t;
    if (open_tokenizer(model, &g, &t, &err) != VT_OK) {
        free(ids);
        return vt_cli_error(&err);
    }
    vt_status st = VT_OK;
    for (size_t i = 0; i < n && st == VT_OK; i++)
        if (ids[i] >= vt_tokenizer_n_vocab(t))
            st = vt_fail(&err, VT_ERR_INVALID, "token id %d is outside the vocabulary (0..%d)", ids[i],
                         vt_tokenizer_n_vocab(t) - 1);
    char *text = NULL;
    size_t len = 0;
    if (st == VT_OK) st = vt_detokenize(t, ids, n, special, &text, &len, &err);
    if (st == VT_OK) fwrite(text, 1, len, stdout);
    free(text);
    free(ids);
    vt_tokenizer_free(t);
    vt_gguf_close(g);
    return st == VT_OK ? 0 : vt_cli_error(&err);
}
