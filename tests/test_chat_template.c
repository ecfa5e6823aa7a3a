/* test_chat_template.c — the chat templates `vt serve` renders
 * (core/server/chat_template.h): each family's exact prompt for a
 * system + user + assistant + user chat with the generation prompt, family
 * detection on the template of a real GGUF (the qwen2 vocabulary file) and on
 * the public Llama 2 / Llama 3 / Mistral Jinja texts, names, the refusals,
 * and that the control tokens rendered as text become the vocabulary's
 * single ids (end-of-generation ones for the end of a turn) when tokenized
 * with parse_special. */
#include <stdlib.h>
#include <string.h>

#include "chat_template.h"
#include "gguf.h"
#include "tokenizer.h"
#include "util.h"

static const vt_chat_message chat4[] = {
    {VT_CHAT_SYSTEM, "You are terse."},
    {VT_CHAT_USER, "Hi"},
    {VT_CHAT_ASSISTANT, "Hello."},
    {VT_CHAT_USER, "Name a colour."},
};

static void expect_render(vt_chat_family f, const vt_chat_message *m, size_t n, bool gen, const char *want) {
    char *text = NULL, err[256] = "";
    size_t len = 0;
    bool ok = vt_chat_render(f, m, n, gen, &text, &len, err, sizeof err);
    CU_ASSERT_TRUE_FATAL(ok);
    CU_ASSERT_EQUAL(len, strlen(want));
    CU_ASSERT_STRING_EQUAL(text, want);
    if (strcmp(text, want) != 0) printf("\n  %s rendered\n%s\n  want\n%s\n", vt_chat_family_name(f), text, want);
    free(text);
}

static void test_chatml_renders_exactly(void) {
    expect_render(VT_CHAT_CHATML, chat4, 4, true,
                  "<|im_start|>system\nYou are terse.<|im_end|>\n"
                  "<|im_start|>user\nHi<|im_end|>\n"
                  "<|im_start|>assistant\nHello.<|im_end|>\n"
                  "<|im_start|>user\nName a colour.<|im_end|>\n"
                  "<|im_start|>assistant\n");
    expect_render(VT_CHAT_CHATML, chat4 + 1, 1, false, "<|im_start|>user\nHi<|im_end|>\n");
}

static void test_llama3_renders_exactly(void) {
    expect_render(VT_CHAT_LLAMA3, chat4, 4, true,
                  "<|start_header_id|>system<|end_header_id|>\n\nYou are terse.<|eot_id|>"
                  "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
                  "<|start_header_id|>assistant<|end_header_id|>\n\nHello.<|eot_id|>"
                  "<|start_header_id|>user<|end_header_id|>\n\nName a colour.<|eot_id|>"
                  "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

static void test_llama2_renders_exactly(void) {
    expect_render(VT_CHAT_LLAMA2, chat4, 4, true,
                  "[INST] <<SYS>>\nYou are terse.\n<</SYS>>\n\nHi [/INST] Hello. </s>"
                  "<s>[INST] Name a colour. [/INST]");
    expect_render(VT_CHAT_LLAMA2, chat4 + 1, 1, true, "[INST] Hi [/INST]");
}

static void test_mistral_renders_exactly(void) {
    expect_render(VT_CHAT_MISTRAL, chat4, 4, true,
                  "[INST] You are terse.\n\nHi [/INST]Hello.</s>[INST] Name a colour. [/INST]");
}

static void expect_refused(vt_chat_family f, const vt_chat_message *m, size_t n, const char *needle) {
    char *text = (char *)"untouched", err[256] = "";
    size_t len = 7;
    CU_ASSERT_FALSE(vt_chat_render(f, m, n, true, &text, &len, err, sizeof err));
    CU_ASSERT_PTR_NULL(text);
    CU_ASSERT_EQUAL(len, 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, needle));
    if (!strstr(err, needle)) printf("\n  message \"%s\" lacks \"%s\"\n", err, needle);
}

static void test_unrenderable_chats_are_refused_naming_the_message(void) {
    const vt_chat_message two_users[] = {{VT_CHAT_USER, "a"}, {VT_CHAT_USER, "b"}};
    const vt_chat_message late_system[] = {{VT_CHAT_USER, "a"}, {VT_CHAT_ASSISTANT, "b"}, {VT_CHAT_SYSTEM, "c"}};
    const vt_chat_message assistant_first[] = {{VT_CHAT_ASSISTANT, "a"}};
    const vt_chat_message system_only[] = {{VT_CHAT_SYSTEM, "a"}};
    const vt_chat_message no_content[] = {{VT_CHAT_USER, "a"}, {VT_CHAT_USER, NULL}};
    const vt_chat_message bad_role[] = {{(vt_chat_role)7, "a"}};
    expect_refused(VT_CHAT_LLAMA2, two_users, 2, "messages[1].role");
    expect_refused(VT_CHAT_MISTRAL, late_system, 3, "messages[2].role");
    expect_refused(VT_CHAT_MISTRAL, assistant_first, 1, "messages[0].role");
    expect_refused(VT_CHAT_LLAMA2, system_only, 1, "system message only with a user message");
    expect_refused(VT_CHAT_CHATML, no_content, 2, "messages[1].content");
    expect_refused(VT_CHAT_LLAMA3, bad_role, 1, "messages[0].role");
    /* ChatML and Llama 3 take any order. */
    expect_render(VT_CHAT_CHATML, late_system + 2, 1, false, "<|im_start|>system\nc<|im_end|>\n");
}

/* Meta's Llama 2 chat template (meta-llama/Llama-2-7b-chat-hf). */
static const char llama2_jinja[] =
    "{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}"
    "{% set system_message = messages[0]['content'] %}{% else %}{% set loop_messages = messages %}"
    "{% set system_message = false %}{% endif %}{% for message in loop_messages %}"
    "{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}"
    "{% if loop.index0 == 0 and system_message != false %}"
    "{% set content = '<<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n' + message['content'] %}"
    "{% else %}{% set content = message['content'] %}{% endif %}{% if message['role'] == 'user' %}"
    "{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}{% elif message['role'] == 'assistant' %}"
    "{{ ' '  + content.strip() + ' ' + eos_token }}{% endif %}{% endfor %}";
/* Meta's Llama 3 instruct template. */
static const char llama3_jinja[] =
    "{% set loop_messages = messages %}{% for message in loop_messages %}"
    "{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ "
    "message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}"
    "{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}";
/* Mistral-7B-Instruct-v0.1's template. */
static const char mistral_jinja[] =
    "{{ bos_token }}{% for message in messages %}"
    "{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}"
    "{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}"
    "{% elif message['role'] == 'assistant' %}{{ message['content'] + eos_token + ' ' }}"
    "{% else %}{{ raise_exception('Only user and assistant roles are supported!') }}{% endif %}{% endfor %}";

static void expect_detect(const char *jinja, vt_chat_family want) {
    vt_chat_family f = VT_CHAT_N_FAMILIES;
    char err[256] = "";
    CU_ASSERT_TRUE(vt_chat_detect(jinja, &f, err, sizeof err));
    CU_ASSERT_EQUAL(f, want);
}

static vt_gguf *open_qwen2_vocab(void) {
    const char *dir = vt_test_data_dir("qwen2 vocabulary");
    if (!dir) return NULL;
    char path[1024];
    snprintf(path, sizeof path, "%s/models/vocab/ggml-vocab-qwen2.gguf", dir);
    vt_gguf *g = NULL;
    vt_error e = {0};
    if (vt_gguf_open(path, &g, &e) != VT_OK) printf("\n  %s\n", e.msg);
    return g;
}

static void test_detects_the_family_of_real_templates(void) {
    vt_gguf *g = open_qwen2_vocab();
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    const vt_gguf_kv *kv = vt_gguf_find(g, "tokenizer.chat_template");
    CU_ASSERT_PTR_NOT_NULL_FATAL(kv);
    CU_ASSERT_EQUAL_FATAL(kv->value.type, VT_GGUF_STRING);
    char *jinja = strndup(kv->value.v.str.data, kv->value.v.str.len);
    expect_detect(jinja, VT_CHAT_CHATML);
    free(jinja);
    vt_gguf_close(g);
    expect_detect(llama2_jinja, VT_CHAT_LLAMA2);
    expect_detect(llama3_jinja, VT_CHAT_LLAMA3);
    expect_detect(mistral_jinja, VT_CHAT_MISTRAL);
}

static void test_unknown_template_and_name_are_refused(void) {
    vt_chat_family f = VT_CHAT_N_FAMILIES;
    char err[256] = "";
    CU_ASSERT_FALSE(vt_chat_detect("{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}", &f,
                                   err, sizeof err));
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "tokenizer.chat_template"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "--chat-template"));
    CU_ASSERT_FALSE(vt_chat_detect(NULL, &f, err, sizeof err));
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "no chat template"));
    CU_ASSERT_EQUAL(f, VT_CHAT_N_FAMILIES);

    static const char *const names[] = {"chatml", "llama2", "llama3", "mistral"};
    for (int i = 0; i < 4; i++) {
        CU_ASSERT_TRUE(vt_chat_family_by_name(names[i], &f, err, sizeof err));
        CU_ASSERT_STRING_EQUAL(vt_chat_family_name(f), names[i]);
    }
    CU_ASSERT_FALSE(vt_chat_family_by_name("zephyr", &f, err, sizeof err));
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "--chat-template: unknown name \"zephyr\""));
}

/* Tokenize s with parse_special; the count, ids into out (up to cap). */
static size_t tokenize_special(const vt_tokenizer *t, const char *s, bool add_bos, int32_t *out, size_t cap) {
    int32_t *ids = NULL;
    size_t n = 0;
    vt_error e = {0};
    if (vt_tokenize(t, s, strlen(s), add_bos, true, &ids, &n, &e) != VT_OK) printf("\n  %s\n", e.msg);
    for (size_t i = 0; i < n && i < cap; i++) out[i] = ids[i];
    free(ids);
    return n;
}

static void test_control_tokens_as_text_become_their_ids(void) {
    vt_gguf *g = open_qwen2_vocab();
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    vt_tokenizer *t = NULL;
    vt_error e = {0};
    CU_ASSERT_EQUAL_FATAL(vt_tokenizer_load(g, &t, &e), VT_OK);
    int32_t ids[64];
    /* The end of a ChatML turn is one token, and it ends generation. */
    const char *const *eot = vt_chat_end_of_turn(VT_CHAT_CHATML);
    CU_ASSERT_STRING_EQUAL(eot[0], "<|im_end|>");
    CU_ASSERT_PTR_NULL(eot[1]);
    CU_ASSERT_EQUAL_FATAL(tokenize_special(t, eot[0], false, ids, 64), 1);
    CU_ASSERT_TRUE(vt_tokenizer_is_eog(t, ids[0]));
    /* The rendered prompt: no BOS from the vocabulary (qwen2 adds none),
     * every marker a single control token. */
    char *text = NULL, err[256] = "";
    size_t len = 0;
    CU_ASSERT_TRUE_FATAL(vt_chat_render(VT_CHAT_CHATML, chat4 + 1, 1, true, &text, &len, err, sizeof err));
    size_t n = tokenize_special(t, text, vt_tokenizer_add_bos(t), ids, 64);
    free(text);
    CU_ASSERT_FATAL(n >= 6 && n <= 64);
    CU_ASSERT_STRING_EQUAL(vt_tokenizer_piece(t, ids[0]), "<|im_start|>");
    int im_starts = 0, im_ends = 0;
    for (size_t i = 0; i < n; i++) {
        im_starts += strcmp(vt_tokenizer_piece(t, ids[i]), "<|im_start|>") == 0;
        im_ends += strcmp(vt_tokenizer_piece(t, ids[i]), "<|im_end|>") == 0;
    }
    CU_ASSERT_EQUAL(im_starts, 2);
    CU_ASSERT_EQUAL(im_ends, 1);
    vt_tokenizer_free(t);
    vt_gguf_close(g);

    /* SentencePiece (Llama 2 / Mistral vocabularies): one BOS from add_bos,
     * "<s>" / "</s>" as text are BOS / EOS, and EOS ends generation. */
    const char *dir = vt_test_data_dir("llama spm vocabulary");
    CU_ASSERT_PTR_NOT_NULL_FATAL(dir);
    char path[1024];
    snprintf(path, sizeof path, "%s/models/vocab/ggml-vocab-llama-spm.gguf", dir);
    CU_ASSERT_EQUAL_FATAL(vt_gguf_open(path, &g, &e), VT_OK);
    CU_ASSERT_EQUAL_FATAL(vt_tokenizer_load(g, &t, &e), VT_OK);
    CU_ASSERT_TRUE_FATAL(vt_chat_render(VT_CHAT_LLAMA2, chat4, 4, true, &text, &len, err, sizeof err));
    n = tokenize_special(t, text, vt_tokenizer_add_bos(t), ids, 64);
    free(text);
    CU_ASSERT_FATAL(n > 4 && n <= 64);
    int bos = 0, eos = 0;
    for (size_t i = 0; i < n; i++) {
        bos += ids[i] == vt_tokenizer_bos(t);
        eos += ids[i] == vt_tokenizer_eos(t);
    }
    CU_ASSERT_EQUAL(ids[0], vt_tokenizer_bos(t));
    CU_ASSERT_EQUAL(bos, 2); /* the start, and the second turn's "<s>" */
    CU_ASSERT_EQUAL(eos, 1); /* the end of the assistant's turn */
    CU_ASSERT_TRUE(vt_tokenizer_is_eog(t, vt_tokenizer_eos(t)));
    CU_ASSERT_STRING_EQUAL(vt_chat_end_of_turn(VT_CHAT_LLAMA2)[0], "</s>");
    vt_tokenizer_free(t);
    vt_gguf_close(g);
}

int main(void) {
    static CU_TestInfo tests[] = {
        {"chatml renders exactly", test_chatml_renders_exactly},
        {"llama3 renders exactly", test_llama3_renders_exactly},
        {"llama2 renders exactly", test_llama2_renders_exactly},
        {"mistral renders exactly", test_mistral_renders_exactly},
        {"unrenderable chats are refused naming the message", test_unrenderable_chats_are_refused_naming_the_message},
        {"detects the family of real templates", test_detects_the_family_of_real_templates},
        {"unknown template and name are refused", test_unknown_template_and_name_are_refused},
        {"control tokens as text become their ids", test_control_tokens_as_text_become_their_ids},
        CU_TEST_INFO_NULL,
    };
    vt_test_add_suite("chat template", NULL, NULL, tests);
    return vt_test_run();
}
