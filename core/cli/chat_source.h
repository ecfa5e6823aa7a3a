/* chat_source.h — which template renders a chat, for `vt serve` and
 * `vt chat` alike: --chat-template NAME (a built-in family),
 * --chat-template-file PATH (Jinja), or the model's own
 * tokenizer.chat_template (Jinja), so both commands accept the same flags
 * and refuse the same bad templates with the same messages. */
#ifndef VT_CLI_CHAT_SOURCE_H
#define VT_CLI_CHAT_SOURCE_H

#include <stdbool.h>
#include <stddef.h>

#include "chat_template.h"
#include "jinja.h"
#include "error.h"
#include "options.h"

typedef struct vt_chat_source {
    bool have;                /* false: no template at all (the model has none, none was given) */
    vt_jinja_template *jinja; /* NULL: the built-in family */
    vt_chat_family family;    /* the built-in family, or the one the Jinja text resembles (its end of turn stops) */
    bool family_known;
    char *text;               /* the Jinja template's text (NULL for a built-in family): what vt serve reads
                               * the tool-call syntax from */
    char name[160];           /* what a log line says */
    char bos[128], eos[128];  /* the vocabulary's BOS and EOS as text, "" when it has none */
    /* Why a Jinja template fails on a chat of one user message ("" when it
     * renders one): it may want variables only a request's
     * chat_template_kwargs give (firefunction-v2's `functions`), so the
     * caller judges: vt chat, which has no way to give them, refuses;
     * vt serve warns. */
    char one_message_error[512];
} vt_chat_source;

/* opt's [server] chat_template (a built-in family's name, "" for none) and
 * chat_template_file (a Jinja file, "" for none), a refusal of either naming
 * where it was set when not on the command line; model_template: the
 * model's tokenizer.chat_template (NULL when it has none); model_path: the
 * GGUF, read for the BOS and EOS texts a Jinja template may write (NULL:
 * none, they render empty). With
 * neither setting nor model template, c->have is false and the call
 * succeeds: what that means is the caller's call. */
vt_status vt_chat_source_open(vt_chat_source *c, const vt_options *opt, const char *model_template,
                              const char *model_path, vt_error *err);
void vt_chat_source_free(vt_chat_source *c);

/* What vt_chat_source_open would refuse of opt's template settings without
 * a model: both given at one rank, a family name it does not know, a file
 * it cannot read or parse (vt config's check, with the same messages). */
vt_status vt_chat_template_check(const vt_options *opt, vt_error *err);

/* Of [server] chat_template and chat_template_file, one set at a higher
 * rank (command line > environment > ini file) than the other replaces it,
 * as any setting replaces a lower one's; both set at one rank stay, for
 * vt_chat_source_open to refuse. */
void vt_chat_template_settle(vt_options *opt);

#endif
