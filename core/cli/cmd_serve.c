/* cmd_serve.c — `vt serve`: the OpenAI-compatible HTTP server.
 *
 * The flags resolve through the same option machinery as every command (so
 * --backend, --kv-cache-dtype, --config and the environment levers apply),
 * and the batch is opened with those options as resolved, each knob with its
 * source, so --explain says "from cli", "from ini N", "from env X" as vt run
 * does (batch_open.h); past that the server is an embedder of libvt's public
 * API (core/server/). The listener comes up
 * first so /health can answer 503 while the model loads; SIGTERM or SIGINT
 * then stops accepting, lets running requests finish for the grace period,
 * ends the rest as length (or as an error, 503 when not streamed, for a
 * request without a token yet) and exits 0. */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "batch_open.h"
#include "chat_jinja.h"
#include "chat_source.h"
#include "cli.h"
#include "gguf.h"
#include "serve_engine.h"
#include "serve_http.h"
#include "serve_options.h"
#include "tool_calls.h"
#include "vt/vt.h"
#include "vt/vt_dtype.h"

static void help(FILE *f) {
    fprintf(f, "usage: vt serve -m MODEL [--host 127.0.0.1] [--port 8080] [--parallel N] [options]\n\n"
               "Serve the model over HTTP with OpenAI's API: POST /v1/chat/completions, /v1/completions,\n"
               "/tokenize, /detokenize, /apply-template; GET /v1/models, /v1/models/ID, /health, /metrics\n"
               "(docs/SERVING.md; installed: /usr/share/doc/vt-llm/docs/SERVING.md). One log line per request\n"
               "on stderr.\n\n"
               "      --host ADDR          address to listen on (default 127.0.0.1)\n"
               "      --port N             TCP port, 0 = any free one (default 8080)\n"
               "      --parallel N, -np N, --max-seqs N\n"
               "                           sequences decoded together ([runtime] max_seqs; default 4 for serve)\n"
               "      --max-waiting N      requests waiting for a sequence before 503 + Retry-After ([runtime] max_waiting;\n"
               "                           default 256)\n"
               "      --api-key KEY        require \"Authorization: Bearer KEY\" (default: env VT_API_KEY, else none)\n"
               "      --api-key-file PATH  the same, the key read from the file's first line (default: env\n"
               "                           VT_API_KEY_FILE); keeps the key off command lines and unit files\n"
               "      --chat-template NAME chatml, llama2, llama3 or mistral (built in) instead of the model's own template\n"
               "      --chat-template-file PATH  a Jinja chat template instead of the model's own\n"
               "      --model-alias NAME   the model's name in /v1/models and answers (default: the file name)\n"
               "      --body-limit BYTES   largest request body (default 4194304); larger ones get 413\n"
               "      --timeout SECONDS    a request running longer ends with finish_reason length (default 600; 0 = none)\n"
               "      --shutdown-grace SECONDS   on SIGTERM/SIGINT, time running requests get to finish (default 30)\n"
               "      --cors-origin ORIGIN|*     let web pages of ORIGIN (https://app.example.com) or of any origin (*)\n"
               "                           call the server from a browser: CORS headers and preflights (default: none)\n"
               "      --special            /v1/completions prompts: control-token text becomes its token (chat always)\n"
               "      --explain            print the negotiated plans to stderr once loaded, then serve\n"
               "      --dry-run            load, print the plans and the chat template, exit without serving\n"
               "Each of these but --api-key, --api-key-file, --special, --explain and --dry-run is also an ini key\n"
               "([server], [runtime];\n"
               "vt config lists them). Requests without temperature/top_p/top_k/min_p use --temp/--top-p/--top-k/--min-p;\n"
               "without a seed, each a fresh random one (the request's log line names it: seed=N replays it), or\n"
               "with --seed N, N, N + 1, ... in arrival order. The engine options:\n");
    static const char *const said_above[] = {"--max-seqs", "--max-waiting", "--special", "--explain", "--dry-run",
                                             NULL};
    vt_cli_common_help_except(f, said_above);
}

typedef struct serve_opts {
    vt_cli_common c;
    const char *api_key, *api_key_file;
    char key_read[512]; /* the key read from api_key_file */
    bool help;
} serve_opts;

/* The source recorded for serve's own defaults (runtime.max_seqs 4). */
#define SERVE_DEFAULT "vt serve's default"

static vt_arg_result serve_arg(void *opts, int argc, char **argv, int *i, vt_error *err) {
    serve_opts *o = opts;
    const char *a = argv[*i];
    if (strcmp(a, "--api-key") == 0) return vt_cli_text_arg(argc, argv, i, &o->api_key, err);
    if (strcmp(a, "--api-key-file") == 0) return vt_cli_text_arg(argc, argv, i, &o->api_key_file, err);
    const char *key = vt_serve_option_of_flag(a);
    return key ? vt_cli_setting_arg(&o->c.opt, key, argc, argv, i, err) : VT_ARG_NOT_MINE;
}

/* The API key in path: its first line, trailing whitespace off. A key
 * readable by other users is said (a warning: the file is the operator's).
 * from: what named the file (--api-key-file or VT_API_KEY_FILE), for the
 * messages. */
static vt_status read_key_file(const char *path, const char *from, char *key, size_t size, vt_error *err) {
    FILE *f = fopen(path, "r");
    if (!f) return vt_fail(err, VT_ERR_INVALID, "%s %s: cannot open: %s", from, path, strerror(errno));
    struct stat st;
    if (fstat(fileno(f), &st) == 0 && (st.st_mode & 0077))
        fprintf(stderr, "vt serve: warning: the API key file %s is readable by other users (chmod 600 it)\n", path);
    const bool got = fgets(key, (int)size, f) != NULL;
    size_t n = got ? strlen(key) : 0;
    /* a line that filled the buffer without its newline: too long if more of it follows */
    const int next = got && n == size - 1 && key[n - 1] != '\n' ? fgetc(f) : EOF;
    fclose(f);
    if (next != EOF && next != '\n' && next != '\r')
        return vt_fail(err, VT_ERR_INVALID, "%s %s: the key is longer than %zu bytes", from, path, size - 1);
    while (n > 0 && (key[n - 1] == '\n' || key[n - 1] == '\r' || key[n - 1] == ' ' || key[n - 1] == '\t')) key[--n] = 0;
    if (n == 0) return vt_fail(err, VT_ERR_INVALID, "%s %s: no key on its first line", from, path);
    return VT_OK;
}

static vt_status parse_serve(int argc, char **argv, serve_opts *o, vt_error *err) {
    static const vt_cli_parser parser = {
        .name = "serve", .see_help = true, .samples = true, .own = serve_arg, .help = help};
    *o = (serve_opts){0};
    vt_status st = vt_cli_parse(&parser, &o->c, o, &o->help, argc, argv, err);
    if (st != VT_OK || o->help) return st;
    vt_chat_template_settle(&o->c.opt);
    if (o->api_key && o->api_key_file)
        return vt_fail(err, VT_ERR_INVALID, "--api-key and --api-key-file: give one of them");
    /* An empty key, given or set, is refused rather than read as "no key":
     * `--api-key "$KEY"` with KEY unset would otherwise serve without one. */
    const char *key_from = o->api_key ? "--api-key" : o->api_key_file ? "--api-key-file" : NULL;
    if (!key_from && getenv("VT_API_KEY")) o->api_key = getenv("VT_API_KEY"), key_from = "VT_API_KEY";
    if (!key_from && getenv("VT_API_KEY_FILE")) o->api_key_file = getenv("VT_API_KEY_FILE"), key_from = "VT_API_KEY_FILE";
    if (key_from && !*(o->api_key ? o->api_key : o->api_key_file))
        return vt_fail(err, VT_ERR_INVALID,
                       "%s is empty: an empty key would leave the server open; give a key, or none to serve without one",
                       key_from);
    if (o->api_key_file) {
        st = read_key_file(o->api_key_file, key_from, o->key_read, sizeof o->key_read, err);
        if (st != VT_OK) return st;
        o->api_key = o->key_read;
    }
    /* HTTP takes whitespace at the ends of a header's value off (RFC 9110
     * 5.5), so no client could send such a key: refused, not a server that
     * answers every request 401 */
    const size_t key_len = o->api_key ? strlen(o->api_key) : 0;
    if (key_len > 0 && (isspace((unsigned char)o->api_key[0]) || isspace((unsigned char)o->api_key[key_len - 1])))
        return vt_fail(err, VT_ERR_INVALID,
                       "%s begins or ends with whitespace, which no client's Authorization header can carry", key_from);
    for (size_t i = 0; i < key_len; i++)
        if ((unsigned char)o->api_key[i] < 0x20 || o->api_key[i] == 0x7f)
            return vt_fail(err, VT_ERR_INVALID, "%s holds a control character, which no header can carry", key_from);
    /* A server decodes 4 sequences together unless told (--parallel, --max-seqs, ini). */
    if (strcmp(vt_options_source(&o->c.opt, "runtime.max_seqs"), "default") == 0)
        st = vt_options_set(&o->c.opt, "runtime.max_seqs", VT_CLI_SERVE_MAX_SEQS, SERVE_DEFAULT, err);
    return st;
}

/* ---- chat rendering (the HTTP side calls it; no vt_batch involved) ---- */

/* The parts of a chat a template may ignore. */
typedef enum chat_part { PART_TOOLS, PART_TOOL_CALLS, PART_TOOL_RESULTS } chat_part;

/* Whether the template renders ji the same with one part of it left out
 * (its tools, the tool calls of its assistant messages, its tool messages):
 * then the template ignores that part, and the request would be answered as
 * if it had not sent it. A render that fails counts as different. */
static bool renders_without(const vt_chat_source *c, vt_chat_jinja_input ji, const char *text, size_t len,
                            chat_part part) {
    json_t *messages = NULL;
    if (part == PART_TOOLS) {
        ji.tools = NULL;
    } else {
        messages = json_array();
        if (!messages) return false;
        size_t i;
        json_t *m;
        json_array_foreach(ji.messages, i, m) {
            if (part == PART_TOOL_RESULTS && strcmp(json_string_value(json_object_get(m, "role")), "tool") == 0)
                continue;
            json_t *kept = json_copy(m); /* shallow: only its tool_calls key may go */
            if (!kept || json_array_append_new(messages, kept)) {
                json_decref(messages);
                return false;
            }
            if (part == PART_TOOL_CALLS) json_object_del(kept, "tool_calls");
        }
        ji.messages = messages;
    }
    char *other = NULL, msg[400];
    size_t other_len = 0;
    const bool same = vt_chat_jinja_render(c->jinja, &ji, &other, &other_len, msg, sizeof msg) && other_len == len &&
                      memcmp(other, text, len) == 0;
    free(other);
    json_decref(messages);
    return same;
}

/* The first message of the chat with tool calls (part PART_TOOL_CALLS) or
 * of role tool (PART_TOOL_RESULTS), or -1. */
static long first_with(const json_t *messages, chat_part part) {
    size_t i;
    const json_t *m;
    json_array_foreach(messages, i, m) {
        const json_t *calls = json_object_get(m, "tool_calls");
        if (part == PART_TOOL_CALLS && json_is_array(calls) && json_array_size(calls) > 0) return (long)i;
        if (part == PART_TOOL_RESULTS && strcmp(json_string_value(json_object_get(m, "role")), "tool") == 0)
            return (long)i;
    }
    return -1;
}

static char *render_jinja(const vt_chat_source *c, const vt_serve_request *req, bool *add_bos, int *status, char *err,
                          size_t err_size) {
    const json_t *in = req->chat_input;
    vt_chat_jinja_input ji = {.messages = json_object_get(in, "messages"),
                              .tools = json_object_get(in, "tools"),
                              .kwargs = json_object_get(in, "kwargs"),
                              .add_generation_prompt = json_is_true(json_object_get(in, "add_generation_prompt")),
                              .bos_token = c->bos,
                              .eos_token = c->eos};
    char *text = NULL, msg[400];
    size_t len = 0;
    if (!vt_chat_jinja_render(c->jinja, &ji, &text, &len, msg, sizeof msg)) {
        /* raise_exception is the template refusing this chat (roles out of
         * order, ...). Any other failure of the template is a 400 too, as
         * vLLM answers it: sent again it fails again, and a 500 would have
         * clients do that (the openai SDK retries a 500 twice). Running out
         * of memory is the server's, a 500. */
        *status = strstr(msg, "out of memory") ? 500 : 400;
        snprintf(err, err_size, "the chat template failed on this request: %s", msg);
        return NULL;
    }
    /* Tools or tool calls the template does not write into the prompt are
     * refused, as the built-in templates refuse them: never dropped. */
    const bool has_tools = json_is_array(ji.tools) && json_array_size(ji.tools) > 0;
    const long calls = first_with(ji.messages, PART_TOOL_CALLS), results = first_with(ji.messages, PART_TOOL_RESULTS);
    if (has_tools && renders_without(c, ji, text, len, PART_TOOLS))
        snprintf(err, err_size, "tools: this chat template does not write the tools into the prompt, so the model "
                 "would never see them; use a template that renders tools (--chat-template-file)");
    else if (calls >= 0 && renders_without(c, ji, text, len, PART_TOOL_CALLS))
        snprintf(err, err_size, "messages[%ld].tool_calls: this chat template does not write tool calls into the "
                 "prompt; use a template that renders them (--chat-template-file)", calls);
    else if (results >= 0 && renders_without(c, ji, text, len, PART_TOOL_RESULTS))
        snprintf(err, err_size, "messages[%ld]: this chat template does not write tool results (role tool) into the "
                 "prompt; use a template that renders them (--chat-template-file)", results);
    else
        err[0] = 0;
    if (err[0]) {
        free(text);
        *status = 400;
        return NULL;
    }
    /* As transformers and vLLM tokenize a rendered chat: no BOS added, the
     * template writes bos_token itself when the model wants one. */
    *add_bos = false;
    return text;
}

static char *render_chat(void *user, const vt_serve_request *req, bool *add_bos, int *status, char *err,
                         size_t err_size) {
    const vt_chat_source *c = user;
    *status = 400;
    if (c->jinja) return render_jinja(c, req, add_bos, status, err, err_size);
    /* The built-in families render plain chats only: what they cannot
     * render is refused, never dropped. */
    const json_t *in = req->chat_input;
    const char *name = vt_chat_family_name(c->family);
    if (json_object_get(in, "tools") || json_object_get(in, "kwargs")) {
        const char *field = json_object_get(in, "tools") ? "tools" : "chat_template_kwargs";
        snprintf(err, err_size, "%s: the built-in %s template renders no %s; use the model's own template or "
                 "--chat-template-file", field, name, field);
        return NULL;
    }
    vt_chat_message *msgs = calloc(req->n_messages ? req->n_messages : 1, sizeof *msgs);
    if (!msgs) {
        snprintf(err, err_size, "out of memory");
        return NULL;
    }
    for (size_t i = 0; i < req->n_messages; i++) {
        const char *r = req->messages[i].role;
        json_t *m = json_array_get(json_object_get(in, "messages"), i);
        if (strcmp(r, "tool") == 0 || json_object_get(m, "tool_calls")) {
            snprintf(err, err_size, "messages[%zu]: the built-in %s template renders no tool calls or results; use "
                     "the model's own template or --chat-template-file", i, name);
            free(msgs);
            return NULL;
        }
        msgs[i].role = strcmp(r, "system") == 0 ? VT_CHAT_SYSTEM : strcmp(r, "user") == 0 ? VT_CHAT_USER : VT_CHAT_ASSISTANT;
        msgs[i].content = req->messages[i].content;
    }
    char *text = NULL;
    size_t len = 0;
    bool gen = json_is_true(json_object_get(in, "add_generation_prompt"));
    if (!vt_chat_render(c->family, msgs, req->n_messages, gen, &text, &len, err, err_size)) text = NULL;
    free(msgs);
    *add_bos = true;
    return text;
}

/* How chats are rendered: --chat-template NAME, --chat-template-file PATH,
 * or the model's own template; c->have false when the model has none (chat
 * answers 400). */
static vt_status chat_setup(const serve_opts *o, vt_batch *b, vt_chat_source *c, vt_error *err) {
    return vt_chat_source_open(c, &o->c.opt, vt_batch_meta_string(b, "tokenizer.chat_template"), o->c.model_path,
                               err);
}

/* A template that fails on a chat of one user message may still serve
 * requests whose chat_template_kwargs give what it lacks (firefunction-v2
 * wants `functions`): said at the start, not refused. */
static void warn_one_message(const vt_chat_source *c) {
    if (c->one_message_error[0])
        fprintf(stderr, "vt serve: warning: the chat template %s fails on a chat of one user message: %s; chat "
                "requests fail so too unless their chat_template_kwargs give what it lacks\n",
                c->name, c->one_message_error);
}

/* The ids a chat request stops on: the model's end-of-generation ids, and
 * each end-of-turn text of the family that is one control token of this
 * vocabulary (one id when control-token text is matched, something else
 * when it is not). The tokenizer makes the usual ones end-of-generation ids
 * already; a vocabulary that lacks the family's marker adds nothing. One
 * line on stderr says which ids, so a wrong template shows at start. */
#define MAX_CHAT_STOP_IDS 64
static size_t chat_stop_ids(vt_batch *b, const vt_chat_source *chat, int32_t *ids) {
    vt_chat_family family = chat->family;
    size_t n = vt_batch_default_stop_ids(b, ids, MAX_CHAT_STOP_IDS - 4);
    if (n > MAX_CHAT_STOP_IDS - 4) n = MAX_CHAT_STOP_IDS - 4;
    char line[512];
    int used = snprintf(line, sizeof line, "vt serve: chat requests stop on token ids");
    for (const char *const *eot = vt_chat_end_of_turn(family); chat->family_known && *eot; eot++) {
        int32_t *special = NULL, *plain = NULL;
        size_t n_special = 0, n_plain = 0;
        char msg[256];
        bool control =
            vt_batch_tokenize(b, *eot, strlen(*eot), false, true, &special, &n_special, msg, sizeof msg) == VT_OK &&
            vt_batch_tokenize(b, *eot, strlen(*eot), false, false, &plain, &n_plain, msg, sizeof msg) == VT_OK &&
            n_special == 1 && !(n_plain == 1 && plain[0] == special[0]);
        if (control) {
            bool known = false;
            for (size_t i = 0; i < n; i++) known |= ids[i] == special[0];
            if (!known && n < MAX_CHAT_STOP_IDS) ids[n++] = special[0];
        } else {
            fprintf(stderr, "vt serve: the %s end of turn %s is not a control token of this vocabulary\n",
                    vt_chat_family_name(family), *eot);
        }
        free(special);
        free(plain);
    }
    for (size_t i = 0; i < n && used < (int)sizeof line - 16; i++)
        used += snprintf(line + used, sizeof line - (size_t)used, "%s%d", i ? ", " : " ", ids[i]);
    if (n == 0) used += snprintf(line + used, sizeof line - (size_t)used, ": none (only max_tokens and stop strings)");
    fprintf(stderr, "%s\n", line);
    return n;
}

static const char *base_name(const char *path) {
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

/* SIGTERM and SIGINT, blocked in every thread, taken by one thread of
 * their own from before the model loads (SIGHUP too, to be logged and
 * ignored: a server started in the background of a shell must outlive the
 * terminal, and there is no configuration to reload): while it loads, a signal ends the
 * process at once (nothing is served yet, and a large model would otherwise
 * load to the end while a service manager waits to kill it); once ready, the
 * first starts the drain; another during the drain ends the running
 * requests without waiting out the grace period. */
typedef struct signal_watch {
    sem_t first;     /* posted at the first signal once serving */
    atomic_int sig;  /* that signal */
    atomic_int phase; /* WATCH_LOADING, WATCH_SERVING, WATCH_DRAINING, WATCH_EXITING */
    atomic_int hurry; /* a signal came during the drain */
    atomic_int announced; /* the drain's first line is out: a second signal's line follows it */
} signal_watch;
enum { WATCH_LOADING, WATCH_SERVING, WATCH_DRAINING, WATCH_EXITING };

static const char *signal_name(int sig) { return sig == SIGTERM ? "SIGTERM" : "SIGINT"; }

static void *watch_signals(void *arg) {
    signal_watch *w = arg;
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGHUP);
    for (;;) {
        int sig = 0;
        if (sigwait(&set, &sig) != 0) continue;
        if (sig == SIGHUP) {
            fprintf(stderr, "vt serve: SIGHUP ignored (no configuration to reload; SIGTERM stops the server)\n");
            continue;
        }
        /* Loading ends in serving (the main thread) or in exiting (this
         * one), whichever claims it first: a signal just as loading ends
         * must not exit under requests the engine was already given. Only
         * this thread moves serving to draining. */
        int phase = WATCH_LOADING;
        if (atomic_compare_exchange_strong(&w->phase, &phase, WATCH_EXITING)) {
            fprintf(stderr, "vt serve: %s while loading: stopped before serving\n", signal_name(sig));
            _exit(0);
        }
        if (phase == WATCH_SERVING) {
            atomic_store(&w->sig, sig);
            atomic_store(&w->phase, WATCH_DRAINING);
            sem_post(&w->first);
        } else {
            /* the log reads in order: after the drain's own line, which
             * the main thread prints as it wakes (a second at most) */
            struct timespec ms = {0, 1000000L};
            for (int k = 0; k < 1000 && !atomic_load(&w->announced); k++) nanosleep(&ms, NULL);
            fprintf(stderr, "vt serve: %s again: ending the running requests now\n", signal_name(sig));
            atomic_store(&w->hurry, 1);
        }
    }
    return NULL;
}

/* Wait for the first signal once serving, then drain. */
static void wait_and_drain(vt_server *server, vt_serve_engine *engine, double grace, signal_watch *w) {
    while (sem_wait(&w->first) != 0) continue;
    fprintf(stderr, "vt serve: %s: no new requests; %d running or waiting get %g s to finish\n",
            signal_name(atomic_load(&w->sig)), vt_serve_engine_in_flight(engine), grace);
    atomic_store(&w->announced, 1);
    vt_server_quiesce(server);
    vt_serve_engine_refuse_new(engine);
    double end = vt_serve_now() + grace;
    struct timespec tick = {0, 20 * 1000000L};
    while (vt_serve_engine_in_flight(engine) > 0 && vt_serve_now() < end && !atomic_load(&w->hurry))
        nanosleep(&tick, NULL);
    if (vt_serve_engine_in_flight(engine) > 0) {
        fprintf(stderr, "vt serve: %s: ending %d requests (as length, or 503 before their first token)\n",
                atomic_load(&w->hurry) ? "stopping now" : "grace period over", vt_serve_engine_in_flight(engine));
        vt_serve_engine_cancel_all(engine);
        while (vt_serve_engine_in_flight(engine) > 0) nanosleep(&tick, NULL);
    }
    /* Every job has ended; let the answers reach their clients (a few
     * seconds at most: a client that stopped reading is then cut). */
    double sent = vt_serve_now() + 5;
    while (vt_server_active_requests(server) > 0 && vt_serve_now() < sent) nanosleep(&tick, NULL);
}

/* A template the flags name is read, parsed and tried before the port opens
 * and the model loads: a typo must not cost a load. (The model's own
 * template can only be read once it is open.) */
static bool given_template(const serve_opts *o) {
    const vt_serve_options *so = vt_serve_options_of(&o->c.opt);
    return so->chat_template[0] || so->chat_template_file[0];
}

static vt_status check_given_template(const serve_opts *o, vt_error *err) {
    if (!given_template(o)) return VT_OK;
    vt_chat_source given;
    const vt_status st =
        vt_chat_source_open(&given, &o->c.opt, NULL, o->c.model_path, err);
    if (st == VT_OK) warn_one_message(&given);
    vt_chat_source_free(&given);
    return st;
}

/* --dry-run: load as serving would, print the plans and what would be
 * served, and stop there (no listener). */
static vt_status dry_run(const serve_opts *o, vt_error *err) {
    vt_status st = check_given_template(o, err);
    if (st != VT_OK) return st;
    vt_batch *batch = NULL;
    char msg[512] = "";
    st = vt_batch_open_resolved(o->c.model_path, &o->c.opt, &batch, msg, sizeof msg);
    if (st != VT_OK) return vt_fail(err, st, "%s", msg);
    vt_batch_explain(batch, stderr);
    vt_chat_source chat;
    st = chat_setup(o, batch, &chat, err);
    if (st == VT_OK && !given_template(o)) warn_one_message(&chat); /* a given one was warned of before the load */
    if (st == VT_OK)
        fprintf(stderr, "vt serve: dry run: would serve %s, sequences per step %d, context %lld tokens, chat template %s; "
                "not listening\n",
                o->c.model_path, o->c.opt.max_seqs, (long long)vt_batch_n_ctx(batch),
                chat.have ? chat.name : "none (only /v1/completions)");
    vt_chat_source_free(&chat);
    vt_batch_close(batch);
    return st;
}

static vt_status serve(serve_opts *o, vt_error *err) {
    vt_status st = VT_OK;
    const vt_serve_options *so = vt_serve_options_of(&o->c.opt);

    /* Signals are taken by the watcher thread only (every thread started
     * after this blocks them too); the peer's hang-up is seen by polling,
     * never by SIGPIPE. */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);
    static signal_watch watch;
    sem_init(&watch.first, 0, 0);
    atomic_init(&watch.phase, WATCH_LOADING);
    atomic_init(&watch.announced, 0);
    pthread_t watcher;
    if (pthread_create(&watcher, NULL, watch_signals, &watch) != 0)
        return vt_fail(err, VT_ERR_NOMEM, "cannot start the signal thread");
    pthread_detach(watcher);

    static vt_chat_source chat;
    vt_serve_metrics metrics;
    vt_serve_metrics_init(&metrics);
    vt_server_config cfg = {
        .host = so->host,
        .port = so->port,
        .api_key = o->api_key,
        .model_alias = so->model_alias[0] ? so->model_alias : base_name(o->c.model_path),
        .cors_origin = so->cors_origin,
        .body_limit = (size_t)so->body_limit,
        .defaults = {o->c.opt.temp, o->c.opt.top_p, o->c.opt.min_p, o->c.opt.top_k},
        .completion_special = o->c.special,
    };
    char msg[512] = "";
    st = check_given_template(o, err);
    if (st != VT_OK) {
        vt_serve_metrics_destroy(&metrics);
        return st;
    }
    vt_server *server = vt_server_start(&cfg, &metrics, msg, sizeof msg);
    if (!server) {
        vt_serve_metrics_destroy(&metrics);
        return vt_fail(err, VT_ERR_INVALID, "%s", msg);
    }
    char where[300];
    vt_server_host_port(so->host, vt_server_port(server), where, sizeof where);
    fprintf(stderr, "vt serve: listening on http://%s (loading %s)\n", where, o->c.model_path);
    const bool loopback = strncmp(so->host, "127.", 4) == 0 || strcmp(so->host, "::1") == 0 ||
                          strcmp(so->host, "localhost") == 0;
    if (!loopback && !(o->api_key && *o->api_key))
        fprintf(stderr, "vt serve: warning: listening on %s without an API key: whoever reaches the port can use it "
                "(--api-key-file)\n", so->host);

    vt_batch *batch = NULL;
    st = vt_batch_open_resolved(o->c.model_path, &o->c.opt, &batch, msg, sizeof msg);
    if (st != VT_OK) vt_fail(err, st, "%s", msg);
    if (st == VT_OK && o->c.explain) vt_batch_explain(batch, stderr);
    if (st == VT_OK) st = chat_setup(o, batch, &chat, err);
    if (st == VT_OK && !given_template(o)) warn_one_message(&chat); /* a given one was warned of before the load */
    vt_serve_engine *engine = NULL;
    int32_t stop_ids[MAX_CHAT_STOP_IDS];
    size_t n_stop_ids = st == VT_OK && chat.have ? chat_stop_ids(batch, &chat, stop_ids) : 0;
    if (st == VT_OK) {
        vt_serve_engine_config ec = {.max_waiting = o->c.opt.max_waiting,
                                     .max_seqs = o->c.opt.max_seqs,
                                     .request_timeout = so->timeout,
                                     .seed = o->c.opt.seed,
                                     .draw_seed = o->c.opt.seed_random ? vt_seed_draw : NULL,
                                     .chat_stop_ids = stop_ids,
                                     .n_chat_stop_ids = n_stop_ids};
        engine = vt_serve_engine_start(batch, &ec, &metrics);
        if (!engine) st = vt_fail(err, VT_ERR_NOMEM, "cannot start the engine thread");
    }
    if (st == VT_OK) {
        if (chat.have) vt_server_set_render(server, render_chat, &chat);
        /* the call syntax the template shows (tool_calls.h); none for a built-in family */
        const vt_tool_format tool_format = chat.text ? vt_tool_format_detect(chat.text) : VT_TOOL_FORMAT_NONE;
        vt_server_set_tool_format(server, tool_format);
        /* from here a signal drains: requests may be admitted as soon as
         * the engine is set. A signal that claimed the end of loading
         * first is ending the process: nothing is served. */
        int loading = WATCH_LOADING;
        if (!atomic_compare_exchange_strong(&watch.phase, &loading, WATCH_SERVING))
            for (;;) pause(); /* until the watcher's _exit */
        vt_server_set_engine(server, engine);
        const double kv_mib = (double)vt_batch_kv_cache_bytes(batch) / (1024.0 * 1024.0);
        /* the prefix cache off although asked for (the default): say so, as
         * every prompt is then computed whole and cached_tokens stays 0 */
        vt_batch_cache_stats cache = {.struct_size = sizeof cache};
        vt_batch_get_cache_stats(batch, &cache);
        const char *prefix = cache.enabled ? "" : o->c.opt.prefix_cache
                                 ? ", prefix cache off: this engine's prefill and decode plans compute differently "
                                   "(--explain says where)"
                                 : ", prefix cache off";
        fprintf(stderr, "vt serve: ready: %s as \"%s\", sequences per step %d, context %lld tokens (KV cache %.*f MiB %s, "
                "resident as used), chat template %s, tool calls %s%s\n",
                o->c.model_path, cfg.model_alias, o->c.opt.max_seqs, (long long)vt_batch_n_ctx(batch),
                kv_mib < 10 ? 1 : 0, kv_mib, vt_dtype_name(o->c.opt.kv_cache_dtype),
                chat.have ? chat.name : "none (only /v1/completions)", vt_tool_format_name(tool_format), prefix);
        wait_and_drain(server, engine, so->shutdown_grace, &watch);
    }
    vt_server_stop(server);
    vt_serve_engine_stop(engine);
    vt_batch_close(batch);
    vt_chat_source_free(&chat);
    vt_serve_metrics_destroy(&metrics);
    if (st == VT_OK) fprintf(stderr, "vt serve: stopped\n");
    return st;
}

int vt_cmd_serve(int argc, char **argv) {
    vt_error err = {0};
    serve_opts o;
    vt_status st = parse_serve(argc, argv, &o, &err);
    if (st == VT_OK && o.help) {
        help(stdout);
        return 0;
    }
    /* a model that cannot even be opened, or whose file is not a model vt
     * runs (truncated, another architecture, a tensor it does not read), is
     * said before the port opens: a load balancer should never see this
     * server listen. Reading the file's header and tensor table takes
     * milliseconds; the weights are read once serving loads. */
    if (st == VT_OK) st = vt_cli_require_model(o.c.model_path, &err);
    if (st == VT_OK) {
        vt_model *checked = NULL;
        st = vt_model_load(o.c.model_path, &checked, &err);
        /* and a KV cache dtype the model's heads cannot be stored in */
        if (st == VT_OK) st = vt_kv_cache_check_dtype(o.c.opt.kv_cache_dtype, checked->hp.head_dim, &err);
        vt_model_free(checked);
    }
    if (st == VT_OK) st = o.c.dry_run ? dry_run(&o, &err) : serve(&o, &err);
    return vt_cli_exit(st, &err);
}
