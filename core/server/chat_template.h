/* chat_template.h — turn a chat (system/user/assistant messages) into the
 * prompt text a model was trained on, for `vt serve`'s chat endpoint.
 *
 * GGUF files carry their chat template as Jinja (tokenizer.chat_template).
 * Running Jinja is far more than the few families in use need, so the
 * template is only inspected for the markers that identify its family, and
 * each family is rendered by hand here. This is the server's concern, not an
 * embedder's: it is not part of libvt.
 *
 * BOS: the rendered text never starts with the BOS token. Tokenize it with
 * add_bos = true (the vocabulary then adds its BOS if it wants one, exactly
 * once, at the start) and parse_special = true (the control tokens written as
 * text, "<|im_start|>", "<|eot_id|>", "</s>", become their ids). Llama 2's
 * later turns carry "<s>" as text, as Meta's template has it. */
#ifndef VT_SERVER_CHAT_TEMPLATE_H
#define VT_SERVER_CHAT_TEMPLATE_H

#include <stdbool.h>
#include <stddef.h>

typedef enum vt_chat_family {
    VT_CHAT_CHATML,  /* <|im_start|>role\n...<|im_end|>\n (Qwen, many others) */
    VT_CHAT_LLAMA2,  /* [INST] <<SYS>>\n...\n<</SYS>>\n\n... [/INST] ... </s> */
    VT_CHAT_LLAMA3,  /* <|start_header_id|>role<|end_header_id|>\n\n...<|eot_id|> */
    VT_CHAT_MISTRAL, /* [INST] ... [/INST]...</s>, no system role of its own */
    VT_CHAT_N_FAMILIES
} vt_chat_family;

typedef enum vt_chat_role { VT_CHAT_SYSTEM, VT_CHAT_USER, VT_CHAT_ASSISTANT } vt_chat_role;

typedef struct vt_chat_message {
    vt_chat_role role;
    const char *content; /* UTF-8, NUL-terminated */
} vt_chat_message;

/* The family of a Jinja template text by its characteristic markers:
 * "<|im_start|>" ChatML, "<|start_header_id|>" Llama 3, "[INST]" with
 * "<<SYS>>" Llama 2, "[INST]" without it Mistral. Returns false (and a
 * one-line message in err) for NULL or a template none of these matches. */
bool vt_chat_detect(const char *jinja, vt_chat_family *out, char *err, size_t err_size);

/* The family of a --chat-template name: chatml, llama2, llama3, mistral.
 * Returns false (err lists the names) for any other. */
bool vt_chat_family_by_name(const char *name, vt_chat_family *out, char *err, size_t err_size);
const char *vt_chat_family_name(vt_chat_family f);

/* Strings that end an assistant turn in this family, as text ("<|im_end|>",
 * "<|eot_id|>", "</s>"); NULL-terminated. They are control tokens of the
 * family's vocabularies: usually already among the model's end-of-generation
 * ids, and a server can add them to its stop ids (tokenize with
 * parse_special) when not. */
const char *const *vt_chat_end_of_turn(vt_chat_family f);

/* Render messages into the prompt text (malloc'ed, NUL-terminated; *len
 * excludes the NUL). add_generation_prompt: end with the opening of an
 * assistant turn, so the model writes the reply (Llama 2 and Mistral need
 * nothing more: a user turn already ends in "[/INST]"). ChatML and Llama 3
 * render any order of roles. Llama 2 and Mistral take an optional system
 * message first, then turns alternating user, assistant, user, ... (their
 * templates refuse anything else); Mistral has no system role, so there it is
 * folded into the first user message (its content, a blank line, the user's
 * text), as Mistral's later templates do. Returns false with a one-line
 * message naming the message index for what cannot be rendered (order,
 * NULL content, an unknown role). */
bool vt_chat_render(vt_chat_family f, const vt_chat_message *msgs, size_t n, bool add_generation_prompt,
                    char **text, size_t *len, char *err, size_t err_size);

#endif
