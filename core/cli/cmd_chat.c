/* cmd_chat.c — `vt chat`: an interactive chat with the model in the terminal.
 *
 * Each line read is a user message; the whole conversation is rendered with
 * the model's own Jinja chat template, or the one --chat-template or
 * --chat-template-file names (chat_source.h, as vt serve), and answered through one
 * request of the scheduler, as `vt run` generates, the answer printed as it
 * comes. The scheduler lives for the whole chat, so the KV blocks of earlier
 * turns stay in its prefix cache and a new turn computes only what is new.
 * For that to hit, the tokens of a turn must begin with exactly the tokens
 * the model saw and produced before: the conversation keeps those tokens and
 * the text they stand for, and a turn whose rendering begins with that text
 * tokenizes only the rest. (Tokenizing the whole rendering again would
 * re-tokenize the model's answers, which need not give back the tokens it
 * sampled.)
 *
 * Ctrl-C: SIGINT stays blocked in every thread; generation polls for it
 * between steps (ending the answer, not the program), and the prompt waits
 * with it unblocked (line_reader.h), where it ends the chat as Ctrl-D does. */
#include <inttypes.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "chat_jinja.h"
#include "chat_source.h"
#include "cli.h"
#include "gguf.h"
#include "gen_options.h"
#include "line_reader.h"
#include "serve_options.h"

static void help(FILE *f) {
    fprintf(f, "usage: vt chat -m MODEL [--chat-template NAME | --chat-template-file PATH] [--system TEXT] [options]\n\n"
               "Chat with the model: each line of input is a message, the answer is printed as it is generated.\n"
               "Ctrl-C stops an answer; Ctrl-C at the prompt, Ctrl-D or /exit ends the chat. Input may be piped:\n"
               "each line is answered in turn and the chat ends at the end of the input. Commands:\n"
               "  /system TEXT  set the system message (alone: show it)   /reset  forget the conversation\n"
               "  /exit         end the chat                               /help   list the commands\n\n"
               "      --chat-template NAME chatml, llama2, llama3 or mistral (built in) instead of the model's own template\n"
               "      --chat-template-file PATH  a Jinja chat template instead of the model's own\n"
               "                           (a model without a template needs one of the two)\n"
               "      --system TEXT        the system message to start with (\"\": none)\n"
               "      --stats              after each answer, a line on stderr: prompt tokens, those taken from\n"
               "                           the cache (earlier turns), tokens generated and their rate\n"
               "      --show-prompt        before each answer, the rendered conversation on stderr between\n"
               "                           lines [prompt] and [/prompt], as the model sees it (with the BOS\n"
               "                           the tokenizer adds to a built-in template's rendering)\n");
    vt_cli_gen_help(f, "tokens per answer at most (default, or -1: until the end of the turn or of the\n"
                       "                           context)");
    static const char *const not_here[] = {"--special", NULL};
    vt_cli_common_help_except(f, not_here);
}

typedef struct chat_opts {
    vt_cli_common c;
    vt_cli_gen gen;
    const char *system;
    bool stats, show_prompt;
    bool help;
} chat_opts;

/* The template flags are vt serve's [server] knobs, so an ini file that
 * names a template serves both commands. */
static const struct {
    const char *flag, *key;
} template_flags[] = {
    {"--chat-template", "server.chat_template"},
    {"--chat-template-file", "server.chat_template_file"},
};

static vt_arg_result chat_arg(void *opts, int argc, char **argv, int *i, vt_error *err) {
    chat_opts *o = opts;
    const char *a = argv[*i];
    for (size_t k = 0; k < sizeof template_flags / sizeof *template_flags; k++) {
        if (strcmp(a, template_flags[k].flag) != 0) continue;
        const char *v = vt_cli_value(argc, argv, i, err);
        if (!v) return VT_ARG_ERROR;
        if (vt_options_set(&o->c.opt, template_flags[k].key, v, "cli", err) != VT_OK) {
            vt_error_prefix(err, "%s: ", a);
            return VT_ARG_ERROR;
        }
        return VT_ARG_TAKEN;
    }
    if (strcmp(a, "--show-prompt") == 0) {
        o->show_prompt = true;
        return VT_ARG_TAKEN;
    }
    if (strcmp(a, "--system") == 0) return vt_cli_text_arg(argc, argv, i, &o->system, err);
    if (strcmp(a, "--stats") == 0) {
        o->stats = true;
        return VT_ARG_TAKEN;
    }
    return vt_cli_gen_arg(&o->gen, argc, argv, i, err);
}

static vt_status parse_chat(int argc, char **argv, chat_opts *o, vt_error *err) {
    static const vt_cli_parser parser = {
        .name = "chat", .see_help = true, .samples = true, .own = chat_arg, .help = help};
    *o = (chat_opts){0};
    const vt_status st = vt_cli_parse(&parser, &o->c, o, &o->help, argc, argv, err);
    if (st == VT_OK) vt_chat_template_settle(&o->c.opt);
    return st;
}

static vt_status validate_chat(const chat_opts *o, vt_error *err) {
    if (o->gen.n_predict_given && o->gen.n_predict < 1 && o->gen.n_predict != VT_N_PREDICT_UNTIL_END)
        return vt_fail(err, VT_ERR_INVALID, "-n %lld: an answer needs at least 1 token", (long long)o->gen.n_predict);
    /* The template's control tokens are always matched in the rendered
     * conversation; there is nothing for --special to change. */
    if (o->c.special)
        return vt_fail(err, VT_ERR_INVALID, "--special: vt chat always matches control-token text in its template");
    return vt_cli_require_model(o->c.model_path, err);
}

/* ---- the conversation ---------------------------------------------------- */

/* What the chat knows: the messages, and the tokens of the conversation so
 * far with the text they stand for (see the top of the file). */
typedef struct chat {
    const chat_opts *o;
    vt_engine *e;
    const vt_model *model;
    const vt_tokenizer *tok;
    vt_sched *sched;
    vt_chat_source src;
    bool add_bos; /* a rendering is tokenized with the vocabulary's BOS added (built-in families) */
    char *system;           /* NULL: none */
    vt_chat_message *msgs;  /* user and assistant turns, contents owned */
    size_t n_msgs, cap_msgs;
    int32_t *seen;          /* the tokens the model saw and produced so far */
    size_t n_seen;
    char *seen_text;        /* the rendering those tokens stand for; NULL: unknown, tokenize all */
    size_t n_seen_text;
    int32_t stop_ids[64];
    int32_t n_stop_ids;
    uint64_t seed;
    int turn;
    bool terminal_out; /* stdout is a terminal: answers are shown without control characters */
} chat;

static void forget_tokens(chat *ch) {
    free(ch->seen);
    free(ch->seen_text);
    ch->seen = NULL;
    ch->seen_text = NULL;
    ch->n_seen = ch->n_seen_text = 0;
}

static void forget(chat *ch) {
    for (size_t i = 0; i < ch->n_msgs; i++) free((char *)ch->msgs[i].content);
    ch->n_msgs = 0;
    forget_tokens(ch);
}

static bool push_message(chat *ch, vt_chat_role role, const char *text, size_t len) {
    if (ch->n_msgs == ch->cap_msgs) {
        size_t cap = ch->cap_msgs ? ch->cap_msgs * 2 : 16;
        vt_chat_message *m = realloc(ch->msgs, cap * sizeof *m);
        if (!m) return false;
        ch->msgs = m;
        ch->cap_msgs = cap;
    }
    char *c = malloc(len + 1);
    if (!c) return false;
    memcpy(c, text, len);
    c[len] = '\0';
    ch->msgs[ch->n_msgs++] = (vt_chat_message){role, c};
    return true;
}

static void pop_message(chat *ch) {
    if (ch->n_msgs) free((char *)ch->msgs[--ch->n_msgs].content);
}

/* The messages through the Jinja template, as vt serve renders a chat:
 * transformers' variables, no BOS added by the tokenizer (the template
 * writes bos_token when the model wants one). The contents are passed as the
 * bytes they are: an answer cut mid-character is still the model's text. */
static char *render_jinja(const chat *ch, const vt_chat_message *msgs, size_t n, bool generation_prompt, size_t *len,
                          char *msg, size_t msg_size) {
    static const char *const role_names[] = {[VT_CHAT_SYSTEM] = "system", [VT_CHAT_USER] = "user",
                                             [VT_CHAT_ASSISTANT] = "assistant"};
    json_t *messages = json_array();
    for (size_t i = 0; messages && i < n; i++) {
        json_t *m = json_pack("{s:s, s:o}", "role", role_names[msgs[i].role], "content",
                              json_stringn_nocheck(msgs[i].content, strlen(msgs[i].content)));
        if (!m || json_array_append_new(messages, m) != 0) {
            json_decref(messages);
            messages = NULL;
        }
    }
    if (!messages) {
        snprintf(msg, msg_size, "out of memory");
        return NULL;
    }
    const vt_chat_jinja_input in = {.messages = messages,
                                    .add_generation_prompt = generation_prompt,
                                    .bos_token = ch->src.bos,
                                    .eos_token = ch->src.eos};
    char *text = NULL;
    if (!vt_chat_jinja_render(ch->src.jinja, &in, &text, len, msg, msg_size)) text = NULL;
    json_decref(messages);
    return text;
}

/* The conversation (with the system message first) rendered; NULL with err. */
static char *render(const chat *ch, bool generation_prompt, size_t *len, vt_error *err) {
    size_t n = ch->n_msgs + (ch->system ? 1 : 0);
    vt_chat_message *all = malloc((n ? n : 1) * sizeof *all);
    if (!all) {
        vt_fail(err, VT_ERR_NOMEM, "out of memory");
        return NULL;
    }
    size_t k = 0;
    if (ch->system) all[k++] = (vt_chat_message){VT_CHAT_SYSTEM, ch->system};
    if (ch->n_msgs) memcpy(all + k, ch->msgs, ch->n_msgs * sizeof *all);
    char *text = NULL, msg[400];
    if (ch->src.jinja) {
        text = render_jinja(ch, all, n, generation_prompt, len, msg, sizeof msg);
    } else if (!vt_chat_render(ch->src.family, all, n, generation_prompt, &text, len, msg, sizeof msg)) {
        text = NULL;
    }
    if (!text) vt_fail(err, VT_ERR_INVALID, "the chat template %s failed: %s", ch->src.name, msg);
    free(all);
    return text;
}

/* The tokens of the rendered conversation `text`: what the model has seen
 * and the rest tokenized, when text begins with what it has seen; else all of
 * it tokenized (then the cache reuses only the tokens that happen to agree). */
static vt_status turn_tokens(const chat *ch, const char *text, size_t len, int32_t **tokens, size_t *n,
                             vt_error *err) {
    bool extend = ch->seen_text && len >= ch->n_seen_text && memcmp(text, ch->seen_text, ch->n_seen_text) == 0;
    int32_t *rest = NULL;
    size_t n_rest = 0;
    vt_status st = extend ? vt_tokenize(ch->tok, text + ch->n_seen_text, len - ch->n_seen_text, false, true, &rest,
                                        &n_rest, err)
                          : vt_tokenize(ch->tok, text, len, ch->add_bos && vt_tokenizer_add_bos(ch->tok), true, &rest,
                                        &n_rest, err);
    if (st != VT_OK) return st;
    if (!extend) {
        *tokens = rest;
        *n = n_rest;
        return VT_OK;
    }
    *tokens = malloc((ch->n_seen + n_rest + 1) * sizeof **tokens);
    if (!*tokens) {
        free(rest);
        return vt_fail(err, VT_ERR_NOMEM, "out of memory");
    }
    if (ch->n_seen) memcpy(*tokens, ch->seen, ch->n_seen * sizeof **tokens);
    if (n_rest) memcpy(*tokens + ch->n_seen, rest, n_rest * sizeof **tokens);
    *n = ch->n_seen + n_rest;
    free(rest);
    return VT_OK;
}

/* A growable byte buffer for an answer's text. */
typedef struct bytes {
    char *data;
    size_t len, cap;
} bytes;

static bool append(bytes *b, const void *p, size_t n) {
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1) cap *= 2;
        char *d = realloc(b->data, cap);
        if (!d) return false;
        b->data = d;
        b->cap = cap;
    }
    if (n) memcpy(b->data + b->len, p, n);
    b->len += n;
    b->data[b->len] = '\0';
    return true;
}

/* An answer's text on stdout. On a terminal, control characters (C0 but
 * newline and tab, DEL, C1) are shown as U+FFFD: a model's output must not
 * drive the terminal (move the cursor, clear the screen, change its state).
 * Piped, the text is written as it is. The chunks the scheduler returns end
 * on character boundaries, so a C1 character is never split between two. */
static void show_answer(const chat *ch, const char *text, size_t n) {
    if (!ch->terminal_out) {
        fwrite(text, 1, n, stdout);
        return;
    }
    static const char replacement[] = "\xEF\xBF\xBD";
    size_t from = 0;
    for (size_t i = 0; i < n; i++) {
        const unsigned char c = (unsigned char)text[i];
        const bool c0 = (c < 0x20 && c != '\n' && c != '\t') || c == 0x7f;
        const bool c1 = c == 0xc2 && i + 1 < n && (unsigned char)text[i + 1] >= 0x80 && (unsigned char)text[i + 1] <= 0x9f;
        if (!c0 && !c1) continue;
        fwrite(text + from, 1, i - from, stdout);
        fwrite(replacement, 1, sizeof replacement - 1, stdout);
        i += c1 ? 1 : 0;
        from = i + 1;
    }
    fwrite(text + from, 1, n - from, stdout);
}

/* Ctrl-C while generating: SIGINT is blocked, so it waits here to be taken. */
static bool interrupt_pending(void) {
    sigset_t pending;
    if (sigpending(&pending) != 0 || !sigismember(&pending, SIGINT)) return false;
    sigset_t only;
    sigemptyset(&only);
    sigaddset(&only, SIGINT);
    const struct timespec now = {0, 0};
    (void)sigtimedwait(&only, NULL, &now);
    return true;
}

/* The bytes tokens spell (control tokens as nothing), appended to out. */
static bool spell(const vt_tokenizer *tok, const int32_t *ids, size_t n, bytes *out) {
    char piece[256];
    for (size_t i = 0; i < n; i++) {
        int32_t k = vt_token_to_bytes(tok, ids[i], false, piece, sizeof piece);
        if (k < 0 || (size_t)k > sizeof piece || !append(out, piece, (size_t)k)) return false;
    }
    return true;
}

/* After an answer whose text is exactly what its tokens spell: the
 * conversation's tokens are the turn's prompt and what the model generated
 * (tokens, taken); the text they stand for is the rendering, the answer and,
 * when it ended on a stop token, that token's own text (the end-of-turn
 * marker the template writes after an answer). */
static void remember(chat *ch, int32_t *tokens, size_t n_tokens, const int32_t *gen, size_t n_gen, bool stop_token,
                     const char *text, size_t len, const bytes *spelled) {
    forget_tokens(ch);
    char marker[256];
    int32_t n_marker = 0;
    if (stop_token && n_gen) {
        n_marker = vt_token_to_bytes(ch->tok, gen[n_gen - 1], true, marker, sizeof marker);
        if (n_marker < 0 || (size_t)n_marker > sizeof marker) {
            free(tokens);
            return;
        }
    }
    int32_t *all = realloc(tokens, (n_tokens + n_gen + 1) * sizeof *all);
    char *seen_text = malloc(len + spelled->len + (size_t)n_marker + 1);
    if (!all || !seen_text) {
        free(all ? all : tokens);
        free(seen_text);
        return;
    }
    if (n_gen) memcpy(all + n_tokens, gen, n_gen * sizeof *all);
    memcpy(seen_text, text, len);
    if (spelled->len) memcpy(seen_text + len, spelled->data, spelled->len);
    memcpy(seen_text + len + spelled->len, marker, (size_t)n_marker);
    ch->seen = all;
    ch->n_seen = n_tokens + n_gen;
    ch->seen_text = seen_text;
    ch->n_seen_text = len + spelled->len + (size_t)n_marker;
}

/* One user message answered (or refused with a message, the chat going on). */
static vt_status answer(chat *ch, const char *line, size_t n_line, vt_error *err) {
    if (!push_message(ch, VT_CHAT_USER, line, n_line)) return vt_fail(err, VT_ERR_NOMEM, "out of memory");
    size_t len = 0;
    char *text = render(ch, true, &len, err);
    if (!text) {
        pop_message(ch);
        fprintf(stderr, "[%s]\n", err->msg);
        return VT_OK;
    }
    if (ch->o->show_prompt) { /* as the model sees it: with the BOS the tokenizer adds */
        fprintf(stderr, "[prompt]\n%s", ch->add_bos && vt_tokenizer_add_bos(ch->tok) ? ch->src.bos : "");
        fwrite(text, 1, len, stderr);
        fprintf(stderr, "\n[/prompt]\n");
    }
    int32_t *tokens = NULL;
    size_t n_tokens = 0;
    vt_status st = turn_tokens(ch, text, len, &tokens, &n_tokens, err);
    if (st != VT_OK) {
        free(text);
        pop_message(ch);
        return st;
    }
    const int64_t ctx = vt_engine_ctx_size(ch->e);
    if ((int64_t)n_tokens >= ctx) {
        fprintf(stderr,
                "[the conversation is %zu tokens with this message and the context holds %lld: the message is "
                "dropped; /reset starts a new conversation (or restart with a larger -c)]\n",
                n_tokens, (long long)ctx);
        free(tokens);
        free(text);
        pop_message(ch);
        return VT_OK;
    }
    int64_t room = ctx - (int64_t)n_tokens;
    /* -n -1: what the context leaves, as without -n */
    const bool capped = ch->o->gen.n_predict_given && ch->o->gen.n_predict != VT_N_PREDICT_UNTIL_END;
    int64_t max_new = capped && ch->o->gen.n_predict < room ? ch->o->gen.n_predict : room;
    const vt_sched_request req = vt_cli_gen_request(&ch->o->c, &ch->o->gen, tokens, (int64_t)n_tokens, max_new,
                                                    vt_seed_after(ch->seed, (uint64_t)ch->turn), ch->stop_ids, ch->n_stop_ids);
    uint64_t id = 0;
    st = vt_sched_add(ch->sched, &req, &id, err);
    bytes reply = {0};
    int32_t *gen = NULL;
    size_t n_gen = 0;
    bool interrupted = false, oom = false;
    vt_sched_output out = {0};
    const double t0 = vt_cli_now();
    double t_first = -1;
    (void)interrupt_pending(); /* a Ctrl-C from before this answer is not for it */
    while (st == VT_OK && out.state != VT_SCHED_FINISHED) {
        if (!interrupted && interrupt_pending()) {
            interrupted = true;
            st = vt_sched_cancel(ch->sched, id, err);
            if (st != VT_OK) break;
        } else {
            st = vt_sched_step(ch->sched, NULL, err);
            if (st != VT_OK) break;
        }
        st = vt_sched_read(ch->sched, id, &out, err);
        if (st != VT_OK) break;
        if (t_first < 0 && out.n_generated > 0) t_first = vt_cli_now();
        if (out.n_tokens) {
            int32_t *g = realloc(gen, (n_gen + (size_t)out.n_tokens) * sizeof *g);
            if (!g) {
                oom = true;
                break;
            }
            gen = g;
            memcpy(gen + n_gen, out.tokens, (size_t)out.n_tokens * sizeof *gen);
            n_gen += (size_t)out.n_tokens;
        }
        if (out.n_text) {
            show_answer(ch, out.text, out.n_text);
            fflush(stdout);
            if (!append(&reply, out.text, out.n_text)) {
                oom = true;
                break;
            }
        }
    }
    const double t_end = vt_cli_now();
    const int64_t n_cached = out.n_cached;
    vt_sched_remove(ch->sched, id, NULL);
    if (st == VT_OK && oom) st = vt_fail(err, VT_ERR_NOMEM, "out of memory");
    printf("\n");
    fflush(stdout);
    if (st != VT_OK) {
        free(reply.data);
        free(gen);
        free(tokens);
        free(text);
        pop_message(ch);
        return st;
    }
    if (interrupted) fprintf(stderr, "[interrupted]\n");
    ch->turn++;
    if (n_gen == 0) { /* stopped before its first token: as if never asked */
        pop_message(ch);
        free(tokens);
    } else {
        /* The answer kept in the conversation is what its tokens spell (the
         * printed text has bytes that are not UTF-8 replaced), so that the
         * next rendering begins with the text of the tokens the model saw;
         * only a stop string, which cuts the text but not the tokens, keeps
         * the printed text and lets the next turn tokenize everything. */
        /* ended by a stop id (whose token is not part of the answer), not
         * by a grammar that is complete (whose last token is) */
        bool stop_token = false;
        for (int32_t i = 0; out.finish == VT_SCHED_FINISH_STOP && i < ch->n_stop_ids; i++)
            stop_token |= gen[n_gen - 1] == ch->stop_ids[i];
        const bool cut = out.finish == VT_SCHED_FINISH_STOP_STRING;
        bytes spelled = {0};
        bool ok = cut || (spell(ch->tok, gen, stop_token ? n_gen - 1 : n_gen, &spelled) && append(&spelled, "", 0));
        const bytes *content = cut ? &reply : &spelled;
        ok = ok && push_message(ch, VT_CHAT_ASSISTANT, content->data ? content->data : "", content->len);
        if (!ok) {
            st = vt_fail(err, VT_ERR_NOMEM, "out of memory");
            free(tokens);
        } else if (cut) {
            forget_tokens(ch);
            free(tokens);
        } else {
            remember(ch, tokens, n_tokens, gen, n_gen, stop_token, text, len, &spelled);
        }
        free(spelled.data);
        if (out.finish == VT_SCHED_FINISH_LENGTH && (int64_t)(n_tokens + n_gen) >= ctx)
            fprintf(stderr, "[the context is full (%lld tokens): /reset starts a new conversation (or restart with a "
                    "larger -c)]\n", (long long)ctx);
    }
    if (ch->o->stats && st == VT_OK) {
        const double t_gen = t_first >= 0 ? t_end - t_first : 0;
        char rate[48] = "";
        if (n_gen > 1) snprintf(rate, sizeof rate, " (%.1f tok/s)", (double)(n_gen - 1) / (t_gen > 0 ? t_gen : 1e-9));
        char seed_note[48] = "";
        if (ch->o->c.opt.temp > 0)
            snprintf(seed_note, sizeof seed_note, ", seed %" PRIu64, vt_seed_after(ch->seed, (uint64_t)(ch->turn - 1)));
        /* as vt run's timing line: the prompt up to the first token, then
         * the decode steps after it, whose rate the tokens after the first give */
        const double t_prompt = (t_first >= 0 ? t_first : t_end) - t0;
        fprintf(stderr, "[turn %d: prompt %zu tokens, %lld from the cache, in %.3f s; generated %zu tokens in %.3f s%s%s]\n",
                ch->turn, n_tokens, (long long)n_cached, t_prompt, n_gen, t_gen, rate, seed_note);
    }
    free(reply.data);
    free(gen);
    free(text);
    return st;
}

/* ---- set-up -------------------------------------------------------------- */

/* The template: --chat-template, --chat-template-file, else the model's
 * tokenizer.chat_template; a model without one needs one of the flags. */
static vt_status open_template(const chat_opts *o, vt_chat_source *src, vt_error *err) {
    vt_gguf *g = NULL;
    vt_status st = vt_gguf_open(o->c.model_path, &g, err);
    if (st != VT_OK) return st;
    const vt_gguf_kv *kv = vt_gguf_find(g, "tokenizer.chat_template");
    char *jinja = NULL;
    const bool has_template = kv && kv->value.type == VT_GGUF_STRING;
    if (has_template) {
        jinja = malloc(kv->value.v.str.len + 1);
        if (jinja) {
            memcpy(jinja, kv->value.v.str.data, kv->value.v.str.len);
            jinja[kv->value.v.str.len] = '\0';
        }
    }
    vt_gguf_close(g);
    if (has_template && !jinja) return vt_fail(err, VT_ERR_NOMEM, "out of memory");
    const vt_serve_options *so = vt_serve_options_of(&o->c.opt);
    st = vt_chat_source_open(src, &o->c.opt, jinja, o->c.model_path, err);
    free(jinja);
    /* a chat here has no chat_template_kwargs to give what it is missing */
    if (st == VT_OK && src->one_message_error[0])
        st = vt_fail(err, so->chat_template_file[0] ? VT_ERR_INVALID : VT_ERR_UNSUPPORTED,
                     "the chat template %s fails on a chat of one user message: %s", src->name,
                     src->one_message_error);
    if (st == VT_OK && !src->have)
        st = vt_fail(err, VT_ERR_UNSUPPORTED,
                     "%s has no chat template (tokenizer.chat_template): give --chat-template "
                     "chatml|llama2|llama3|mistral or --chat-template-file PATH (vt run generates from plain text)",
                     o->c.model_path);
    return st;
}

/* The ids an answer stops on: the model's end-of-generation ids, and the
 * family's end-of-turn marker when it is one control token of this
 * vocabulary (as vt serve's chat requests stop). */
static void stop_ids(chat *ch) {
    size_t n_eog = 0;
    const int32_t *eog = vt_tokenizer_eog_ids(ch->tok, &n_eog);
    const int32_t max = (int32_t)(sizeof ch->stop_ids / sizeof *ch->stop_ids);
    for (size_t i = 0; i < n_eog && ch->n_stop_ids < max - 4; i++) ch->stop_ids[ch->n_stop_ids++] = eog[i];
    for (const char *const *eot = vt_chat_end_of_turn(ch->src.family); ch->src.family_known && *eot; eot++) {
        int32_t *special = NULL, *plain = NULL;
        size_t n_special = 0, n_plain = 0;
        bool control = vt_tokenize(ch->tok, *eot, strlen(*eot), false, true, &special, &n_special, NULL) == VT_OK &&
                       vt_tokenize(ch->tok, *eot, strlen(*eot), false, false, &plain, &n_plain, NULL) == VT_OK &&
                       n_special == 1 && !(n_plain == 1 && plain[0] == special[0]);
        bool known = false;
        for (int32_t i = 0; control && i < ch->n_stop_ids; i++) known |= ch->stop_ids[i] == special[0];
        if (control && !known && ch->n_stop_ids < max) ch->stop_ids[ch->n_stop_ids++] = special[0];
        free(special);
        free(plain);
    }
}

/* ---- the loop ------------------------------------------------------------ */

static void command_help(void) {
    fprintf(stderr, "  /system TEXT  set the system message (alone: show it)\n"
                    "  /reset        forget the conversation (the system message stays)\n"
                    "  /exit         end the chat (also /quit, /bye, Ctrl-D, or Ctrl-C at the prompt)\n"
                    "  /help         this list\n"
                    "Ctrl-C while the model answers stops the answer.\n");
}

/* Is line the command name, alone or followed by a space? *arg gets what follows. */
static bool is_command(const char *line, const char *name, const char **arg) {
    size_t n = strlen(name);
    if (strncmp(line, name, n) != 0 || (line[n] != '\0' && line[n] != ' ')) return false;
    const char *a = line + n;
    while (*a == ' ') a++;
    *arg = a;
    return true;
}

typedef enum { GO_ON, END_CHAT } next_step;

/* A line starting with '/' is a command. */
static next_step command(chat *ch, const char *line, vt_error *err, vt_status *st) {
    const char *arg = NULL;
    if (is_command(line, "/exit", &arg) || is_command(line, "/quit", &arg) || is_command(line, "/bye", &arg))
        return END_CHAT;
    if (is_command(line, "/help", &arg) || is_command(line, "/?", &arg)) {
        command_help();
    } else if (is_command(line, "/reset", &arg) || is_command(line, "/clear", &arg)) {
        forget(ch);
        fprintf(stderr, "[conversation cleared]\n");
    } else if (is_command(line, "/system", &arg)) {
        if (!*arg) {
            if (ch->system) fprintf(stderr, "[system message: %s]\n", ch->system);
            else /* some templates write a default one of their own (Qwen2's) */
                fprintf(stderr, "[no system message given; the template may write its own: --show-prompt shows "
                                "what the model sees]\n");
            return GO_ON;
        }
        char *s = strdup(arg);
        if (!s) {
            *st = vt_fail(err, VT_ERR_NOMEM, "out of memory");
            return END_CHAT;
        }
        free(ch->system);
        ch->system = s;
        fprintf(stderr, "[system message set]\n");
    } else {
        fprintf(stderr, "[unknown command %s: /help lists them]\n", line);
    }
    return GO_ON;
}

static vt_status converse(chat *ch, bool interactive, const sigset_t *wait_mask, vt_error *err) {
    vt_line_reader in;
    vt_line_reader_init(&in, STDIN_FILENO);
    vt_status st = VT_OK;
    for (;;) {
        if (interactive) {
            printf("> ");
            fflush(stdout);
        }
        const char *line = NULL;
        size_t len = 0;
        vt_line_status ls = vt_line_read(&in, wait_mask, &line, &len);
        if (ls != VT_LINE_OK) {
            if (interactive) printf("\n");
            if (ls == VT_LINE_ERROR) st = vt_fail(err, VT_ERR_IO, "reading the input failed");
            break;
        }
        if (len && line[len - 1] == '\r') len--; /* a line typed or saved on Windows */
        if (len == 0) continue;
        if (memchr(line, '\0', len)) {
            fprintf(stderr, "[a line with a NUL byte is not a message: skipped]\n");
            continue;
        }
        if (line[0] == '/') {
            if (command(ch, line, err, &st) == END_CHAT) break;
            continue;
        }
        st = answer(ch, line, len, err);
        if (st != VT_OK) break;
    }
    vt_line_reader_free(&in);
    return st;
}

static void on_sigint(int sig) { (void)sig; }

static vt_status run_chat(chat_opts *o, vt_error *err) {
    /* SIGINT is blocked before any thread starts (the engine's workers
     * inherit the mask), so it stays pending until the chat takes it. */
    sigset_t sigint, wait_mask;
    sigemptyset(&sigint);
    sigaddset(&sigint, SIGINT);
    pthread_sigmask(SIG_BLOCK, &sigint, &wait_mask);
    sigdelset(&wait_mask, SIGINT);
    /* Delivered only inside the prompt's wait, where its arrival ends the
     * wait (EINTR); the handler itself has nothing to do. */
    struct sigaction sa = {0};
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    chat ch = {.o = o};
    vt_model *model = NULL;
    vt_engine *e = NULL;
    /* The template and the grammar first: a bad one is refused before the
     * model loads. */
    vt_status st = open_template(o, &ch.src, err);
    if (st == VT_OK) st = vt_cli_gen_load(&o->gen, err);
    ch.add_bos = !ch.src.jinja;
    if (st == VT_OK) st = vt_cli_open_engine(&o->c, false, &model, &e, err);
    if (st == VT_OK && !model->tokenizer)
        st = vt_fail(err, VT_ERR_UNSUPPORTED, "this model's tokenizer cannot be used (%s)", model->tokenizer_error);
    if (st == VT_OK && o->c.dry_run) {
        fprintf(stderr, "vt chat: dry run: chat template %s, context %lld tokens\n", ch.src.name,
                (long long)vt_engine_ctx_size(e));
        goto done;
    }
    /* the scheduler's settings as vt serve takes them (refused alike when out of range) */
    const vt_sched_options so = vt_sched_options_of(&o->c.opt);
    if (st == VT_OK) st = vt_sched_create(e, &so, &ch.sched, err);
    /* --system "" (a variable that came out empty, say) is no system message
     * rather than an empty one the template writes out */
    if (st == VT_OK && o->system && o->system[0] && !(ch.system = strdup(o->system)))
        st = vt_fail(err, VT_ERR_NOMEM, "out of memory");
    if (st == VT_OK) {
        ch.e = e;
        ch.model = model;
        ch.tok = model->tokenizer;
        ch.seed = vt_options_run_seed(&o->c.opt);
        if (o->c.opt.seed_random && o->c.opt.temp > 0) /* what replays this chat; turn k samples with seed + k - 1 */
            fprintf(stderr, "vt chat: seed %" PRIu64 " (--seed %" PRIu64 " replays this chat)\n", ch.seed, ch.seed);
        stop_ids(&ch);
        const bool interactive = isatty(STDIN_FILENO);
        ch.terminal_out = isatty(STDOUT_FILENO);
        if (interactive)
            fprintf(stderr, "vt chat: %s, chat template %s, context %lld tokens. /help lists the commands; Ctrl-C "
                    "stops an answer, Ctrl-D ends the chat.\n", o->c.model_path, ch.src.name,
                    (long long)vt_engine_ctx_size(e));
        st = converse(&ch, interactive, &wait_mask, err);
    }
done:
    forget(&ch);
    free(ch.msgs);
    free(ch.system);
    vt_sched_free(ch.sched);
    vt_chat_source_free(&ch.src);
    vt_cli_gen_free(&o->gen);
    vt_engine_free(e);
    vt_model_free(model);
    return st;
}

int vt_cmd_chat(int argc, char **argv) {
    vt_error err = {0};
    chat_opts o;
    vt_status st = parse_chat(argc, argv, &o, &err);
    if (st == VT_OK && o.help) {
        help(stdout);
        return 0;
    }
    if (st == VT_OK) st = validate_chat(&o, &err);
    if (st == VT_OK) st = run_chat(&o, &err);
    return vt_cli_exit(st, &err);
}
