/* tokenizer_special.c — which tokens are special, as llama.cpp decides it:
 * text-based fix-ups of token types (EOT/EOM/FIM markers become CONTROL), the
 * end-of-generation set, the list special tokens are matched in text by, and
 * per-model whitespace stripping. */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer_internal.h"

static bool text_is(const vt_tokenizer *t, int32_t id, const char *s) {
    return t->tokens[id].len == strlen(s) && memcmp(t->tokens[id].text, s, t->tokens[id].len) == 0;
}

/* First token (in list order) whose text is in `names`, or -1. */
static int32_t find_any(const vt_tokenizer *t, const char *const *names) {
    for (; *names; names++) {
        int32_t id = vt_vocab_find(t, *names, strlen(*names));
        if (id >= 0) return id;
    }
    return -1;
}

static void make_control(vt_tokenizer *t, int32_t id) {
    if (id >= 0) t->tokens[id].attr |= VT_TOKEN_ATTR_CONTROL;
}

static bool eog_add(vt_tokenizer *t, int32_t id) {
    if (id < 0) return true;
    for (size_t i = 0; i < t->n_eog; i++)
        if (t->eog[i] == id) return true;
    int32_t *e = realloc(t->eog, (t->n_eog + 1) * sizeof *e);
    if (!e) return false;
    t->eog = e;
    t->eog[t->n_eog++] = id;
    return true;
}

static void eog_remove(vt_tokenizer *t, int32_t id) {
    for (size_t i = 0; i < t->n_eog; i++)
        if (t->eog[i] == id) {
            t->eog[i] = t->eog[--t->n_eog];
            return;
        }
}

static int compare_ids(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* The text-based fix-ups llama.cpp applies after reading the ids: tokens that
 * look like EOT/EOM/FIM markers become CONTROL, and the end-of-generation set
 * is built from well-known texts (this is how qwen2's "</s>" becomes CONTROL). */
vt_status vt_special_apply_heuristics(vt_tokenizer *t, const int32_t fim_ids_from_gguf[6], vt_error *err) {
    static const char *const eot_names[] = {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>",
                                            "<|end_of_text|>", "<EOT>", "_<EOT>", "[EOT]",
                                            "<\xef\xbd\x9c" "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>",
                                            "<end_of_utterance>", NULL};
    static const char *const eom_names[] = {"<|eom_id|>", NULL};
    static const char *const fim_names[6][9] = {
        {"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<\xef\xbd\x9c" "fim\xe2\x96\x81" "begin\xef\xbd\x9c>",
         "<PRE>", "\xe2\x96\x81<PRE>", "<|code_prefix|>", "<|prefix|>", NULL},
        {"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<\xef\xbd\x9c" "fim\xe2\x96\x81hole\xef\xbd\x9c>", "<SUF>",
         "\xe2\x96\x81<SUF>", "<|code_suffix|>", "<|suffix|>", NULL},
        {"<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<\xef\xbd\x9c" "fim\xe2\x96\x81" "end\xef\xbd\x9c>",
         "<MID>", "\xe2\x96\x81<MID>", "<|code_middle|>", "<|middle|>", NULL},
        {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]", NULL},
        {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>", NULL},
        {"<|file_sep|>", NULL},
    };
    static const char *const eog_names[] = {
        "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>", "<end_of_turn>",
        "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]", "<|end_of_text|>",
        "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>",
        "<\xef\xbd\x9c" "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>", "[e~[", NULL};
    static const char *const always_user_defined[] = {"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>",
                                                      NULL};

    if (t->eot < 0) {
        t->eot = find_any(t, eot_names);
        make_control(t, t->eot);
    }
    if (t->eom < 0) {
        t->eom = find_any(t, eom_names);
        make_control(t, t->eom);
    }
    int32_t fim[6];
    for (int k = 0; k < 6; k++) {
        fim[k] = fim_ids_from_gguf[k];
        if (fim[k] < 0) {
            fim[k] = find_any(t, fim_names[k]);
            make_control(t, fim[k]);
        }
    }

    /* end of generation: FIM pad/repo/sep, every well-known end text, EOS, EOT, EOM */
    bool ok = eog_add(t, fim[3]) && eog_add(t, fim[4]) && eog_add(t, fim[5]);
    for (const char *const *n = eog_names; ok && *n; n++) {
        int32_t id = vt_vocab_find(t, *n, strlen(*n));
        if (id < 0) continue;
        ok = eog_add(t, id);
        make_control(t, id);
    }
    for (const char *const *n = always_user_defined; *n; n++) {
        int32_t id = vt_vocab_find(t, *n, strlen(*n));
        if (id >= 0) t->tokens[id].attr = VT_TOKEN_ATTR_USER_DEFINED;
    }
    ok = ok && eog_add(t, t->eos) && eog_add(t, t->eot) && eog_add(t, t->eom);
    if (!ok) return vt_fail(err, VT_ERR_NOMEM, "tokenizer: out of memory");

    /* gpt-oss / solar-open: "<|end|>" is not an end when "<|return|>"+"<|call|>" (or
     * "<|calls|>"+"<|flush|>") exist; gemma4 / paddleocr: "</s>" is not when
     * "<|tool_response>" is. */
    bool has_return = false, has_call = false, has_flush = false, has_tool_response = false;
    int32_t end_id = -1, s_id = -1;
    for (size_t i = 0; i < t->n_eog; i++) {
        int32_t id = t->eog[i];
        if (text_is(t, id, "<|return|>")) has_return = true;
        else if (text_is(t, id, "<|call|>") || text_is(t, id, "<|calls|>")) has_call = true;
        else if (text_is(t, id, "<|flush|>")) has_flush = true;
        else if (text_is(t, id, "<|end|>")) end_id = id;
        else if (text_is(t, id, "<|tool_response>")) has_tool_response = true;
        else if (text_is(t, id, "</s>")) s_id = id;
    }
    if (end_id >= 0 && has_call && (has_return || has_flush)) {
        eog_remove(t, end_id);
        t->tokens[end_id].attr = VT_TOKEN_ATTR_USER_DEFINED;
    }
    if (has_tool_response && s_id >= 0) {
        eog_remove(t, s_id);
        t->tokens[s_id].attr = VT_TOKEN_ATTR_NORMAL;
    }
    qsort(t->eog, t->n_eog, sizeof *t->eog, compare_ids);
    return VT_OK;
}

typedef struct special_key {
    uint32_t len;
    int32_t id;
} special_key;

static int compare_special(const void *a, const void *b) {
    const special_key *x = a, *y = b;
    if (x->len != y->len) return x->len > y->len ? -1 : 1; /* longest first */
    return (x->id > y->id) - (x->id < y->id);
}

vt_status vt_special_build_list(vt_tokenizer *t, vt_error *err) {
    const uint32_t special_attrs = VT_TOKEN_ATTR_CONTROL | VT_TOKEN_ATTR_USER_DEFINED | VT_TOKEN_ATTR_UNKNOWN;
    size_t n = 0;
    for (int32_t id = 0; id < t->n_vocab; id++)
        if (t->tokens[id].attr & special_attrs) n++;
    special_key *keys = malloc((n ? n : 1) * sizeof *keys);
    t->special = malloc((n ? n : 1) * sizeof *t->special);
    if (!keys || !t->special) {
        free(keys);
        return vt_fail(err, VT_ERR_NOMEM, "tokenizer: out of memory");
    }
    for (int32_t id = 0; id < t->n_vocab; id++)
        if (t->tokens[id].attr & special_attrs) keys[t->n_special++] = (special_key){t->tokens[id].len, id};
    /* llama.cpp sorts by length only (std::sort, unstable); ties by id make ours deterministic. */
    qsort(keys, t->n_special, sizeof *keys, compare_special);
    for (size_t i = 0; i < t->n_special; i++) t->special[i] = keys[i].id;
    free(keys);
    return VT_OK;
}

/* Phi-3 GGUFs: special tokens swallow the whitespace after them (llama.cpp sets
 * RSTRIP by model name, there being no per-token attributes in GGUF). */
void vt_special_apply_name_attrs(vt_tokenizer *t, const vt_gguf *g) {
    vt_gguf_str name = {0, NULL};
    if (vt_gguf_get_str(g, "general.name", &name, NULL) != VT_OK) return;
    char lower[256];
    size_t n = name.len < sizeof lower - 1 ? (size_t)name.len : sizeof lower - 1;
    for (size_t i = 0; i < n; i++) lower[i] = (char)tolower((unsigned char)name.data[i]);
    lower[n] = '\0';
    if (!strstr(lower, "phi-3") && !strstr(lower, "phi3")) return;
    for (size_t i = 0; i < t->n_special; i++) t->tokens[t->special[i]].attr |= VT_TOKEN_ATTR_RSTRIP;
    static const char *const keep[] = {"<unk>", "<s>", "<|endoftext|>"};
    int32_t s_end = vt_vocab_find(t, "</s>", 4);
    if (s_end >= 0) t->tokens[s_end].attr |= VT_TOKEN_ATTR_RSTRIP;
    for (int i = 0; i < 3; i++) {
        int32_t id = vt_vocab_find(t, keep[i], strlen(keep[i]));
        if (id >= 0) t->tokens[id].attr &= ~(uint32_t)VT_TOKEN_ATTR_RSTRIP;
    }
}

const int32_t *vt_tokenizer_eog_ids(const vt_tokenizer *t, size_t *n) {
    *n = t->n_eog;
    return t->eog;
}

bool vt_tokenizer_is_eog(const vt_tokenizer *t, int32_t id) {
    for (size_t i = 0; i < t->n_eog; i++)
        if (t->eog[i] == id) return true;
    return false;
}
