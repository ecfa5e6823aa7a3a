/* test_chat_cli.c — `vt chat` through the real binary.
 *
 * Piped: two user lines give two answers and the second turn's prompt is
 * the first turn's prompt and answer followed by the new message (read from
 * --show-prompt's rendering and --stats' token counts, not from wording);
 * /reset forgets the history; /system and --system put a system message in
 * front; the same seed gives the same answers; --grammar-file shapes every
 * answer; bad flags, a bad template and a model without one exit non-zero
 * naming what is wrong; `vt chat --help` and `vt run --help` list the same
 * generation flags.
 *
 * In a terminal (tmux): the question typed, the answer streams, Ctrl-C stops
 * it and the chat waits at its prompt again, /exit ends it with status 0;
 * Ctrl-C at the prompt ends it too. The answer is held mid-way by the
 * step_gate test backend (tests/plugins/step_gate.c), so "still answering
 * when Ctrl-C comes" is certain, not a race the machine's speed decides;
 * every wait polls the screen with a generous deadline. tmux is installed by
 * .ci/install-deps: without it the terminal tests fail, naming it.
 *
 * The model is qwen3-tiny (random weights) with Qwen3's own chat template
 * (tests/data/chat_templates, --chat-template-file): no committed model
 * carries a template of its own. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gate_file.h"
#include "util.h"

#define MODEL VT_TEST_DATA_DIR "/models/qwen3-tiny-f32.gguf"
#define TEMPLATE VT_TEST_DATA_DIR "/chat_templates/Qwen-Qwen3-0.6B.jinja"
#define CHAT_ARGS "chat -m " MODEL " --chat-template-file " TEMPLATE " --block-size 16"

/* Deadline for anything the terminal tests wait for: the suite also runs
 * under ASan on a loaded machine, so it is generous; a pass never waits it. */
#define WAIT_SECONDS 60.0

/* ---- piped ---------------------------------------------------------------- */

/* A file holding text, for vt chat's stdin. */
static const char *input_file(const char *name, const char *text) {
    static char path[4][512];
    static int next;
    char *p = path[next++ % 4];
    vt_test_tmpfile(p, sizeof path[0], name);
    FILE *f = fopen(p, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fputs(text, f);
    fclose(f);
    return p;
}

/* One turn's --stats line. */
typedef struct turn_stats {
    int turn;
    long prompt, cached, generated;
    double t_prompt, t_gen, rate; /* rate: 0 without one (a single token) */
} turn_stats;

/* The --stats lines of stderr, in order; returns how many. */
static int read_stats(const char *err, turn_stats *t, int max) {
    int n = 0;
    for (const char *p = err; p && n < max && (p = strstr(p, "[turn ")); p++) {
        t[n].rate = 0;
        const int got = sscanf(p, "[turn %d: prompt %ld tokens, %ld from the cache, in %lf s; generated %ld tokens in %lf s "
                               "(%lf tok/s)", &t[n].turn, &t[n].prompt, &t[n].cached, &t[n].t_prompt, &t[n].generated,
                               &t[n].t_gen, &t[n].rate);
        if (got >= 6) n++;
    }
    return n;
}

/* The --show-prompt renderings of stderr (malloc'ed copies); returns how many. */
static int read_prompts(const char *err, char **prompts, int max) {
    int n = 0;
    for (const char *p = err; p && n < max && (p = strstr(p, "[prompt]\n"));) {
        p += strlen("[prompt]\n");
        const char *end = strstr(p, "\n[/prompt]\n");
        if (!end) break;
        prompts[n] = strndup(p, (size_t)(end - p));
        n++;
        p = end;
    }
    return n;
}

static void free_all(char **p, int n) {
    for (int i = 0; i < n; i++) free(p[i]);
}

static void test_two_turns_keep_history(void) {
    const char *in = input_file("two_turns.txt", "hello there\nwhat comes next\n");
    char *out = NULL, *err = NULL;
    int rc = vt_test_run_vt_checked(&out, &err, CHAT_ARGS " -n 12 --seed 7 --stats --show-prompt < '%s'", in);
    CU_ASSERT_EQUAL(rc, 0);
    turn_stats t[4];
    char *prompts[4] = {0};
    CU_ASSERT_EQUAL_FATAL(read_stats(err, t, 4), 2);
    CU_ASSERT_EQUAL_FATAL(read_prompts(err, prompts, 4), 2);
    CU_ASSERT_EQUAL(t[0].turn, 1);
    CU_ASSERT_EQUAL(t[1].turn, 2);
    CU_ASSERT(t[0].generated > 0 && t[1].generated > 0);
    /* The printed time and rate go together: the tokens after the first over
     * the decode time, within what printing 3 decimals and 1 rounds off. */
    for (int k = 0; k < 2; k++) {
        if (t[k].generated < 2) continue;
        const double after_first = (double)(t[k].generated - 1);
        CU_ASSERT(t[k].rate > 0);
        CU_ASSERT((t[k].rate - 0.05) * (t[k].t_gen - 0.0005) <= after_first &&
                  after_first <= (t[k].rate + 0.05) * (t[k].t_gen + 0.0005));
    }
    /* Turn 1 is the user line after Qwen3's opening; turn 2 begins with all
     * of turn 1's prompt (then its answer, then the new line). */
    CU_ASSERT_STRING_EQUAL(prompts[0], "<|im_start|>user\nhello there<|im_end|>\n<|im_start|>assistant\n");
    CU_ASSERT_EQUAL(strncmp(prompts[1], prompts[0], strlen(prompts[0])), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(prompts[1], "<|im_start|>user\nwhat comes next<|im_end|>\n<|im_start|>assistant\n"));
    /* The history's tokens: more than turn 1's prompt and answer less the
     * one token never fed back, and taken from the cache in whole 16-token
     * blocks: at least turn 1's prompt rounded down to a block. */
    CU_ASSERT_EQUAL(t[0].cached, 0);
    CU_ASSERT(t[1].prompt > t[0].prompt + t[0].generated - 1);
    CU_ASSERT(t[1].cached >= t[0].prompt / 16 * 16);
    CU_ASSERT(t[1].cached > 0);
    CU_ASSERT(t[1].cached < t[1].prompt);
    /* Piped: no prompt, no banner, nothing for a terminal. */
    CU_ASSERT_PTR_NOT_NULL_FATAL(out);
    CU_ASSERT_NOT_EQUAL(strncmp(out, "> ", 2), 0);
    CU_ASSERT_PTR_NULL(strchr(out, '\x1b'));
    CU_ASSERT_PTR_NULL(strstr(err, "/help lists the commands"));
    free_all(prompts, 2);
    free(out);
    free(err);
}

/* The prefix-cache levers, each in the forms the docs give, through the
 * same two turns: off (--no-prefix-cache, --prefix-cache 0, the ini's
 * prefix_cache = 0) takes nothing from the cache; --prefix-cache-blocks 1
 * keeps one block of turn 1 (16 tokens); on by default it takes more. */
static void test_prefix_cache_levers(void) {
    const char *in = input_file("levers.txt", "hello there how are you today\nand what comes next\n");
    char ini[512];
    CU_ASSERT_PTR_NOT_NULL_FATAL(vt_test_write_tmpfile(ini, sizeof ini, "no-prefix.ini", "[kv_cache]\nprefix_cache = 0\n"));
    char ini_flag[600];
    snprintf(ini_flag, sizeof ini_flag, "--config '%s'", ini);
    const struct {
        const char *flags;
        long min_cached, max_cached; /* turn 2's tokens from the cache */
    } cases[] = {
        {"", 17, 100000}, {"--prefix-cache 1", 17, 100000}, {"--no-prefix-cache", 0, 0},
        {"--prefix-cache 0", 0, 0}, {ini_flag, 0, 0}, {"--prefix-cache-blocks 1", 1, 16},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char *out = NULL, *err = NULL;
        int rc = vt_test_run_vt_checked(&out, &err, CHAT_ARGS " -n 4 --seed 7 --stats %s < '%s'", cases[i].flags, in);
        CU_ASSERT_EQUAL(rc, 0);
        turn_stats t[4];
        CU_ASSERT_EQUAL_FATAL(read_stats(err, t, 4), 2);
        const bool ok = t[1].cached >= cases[i].min_cached && t[1].cached <= cases[i].max_cached;
        if (!ok) printf("\n  %s: turn 2 took %ld tokens from the cache", cases[i].flags, t[1].cached);
        CU_ASSERT(ok);
        free(out);
        free(err);
    }
}

static void test_reset_forgets(void) {
    const char *in = input_file("reset.txt", "hello there\n/reset\nwhat comes next\n");
    char *out = NULL, *err = NULL;
    int rc = vt_test_run_vt_checked(&out, &err, CHAT_ARGS " -n 6 --seed 7 --stats --show-prompt < '%s'", in);
    CU_ASSERT_EQUAL(rc, 0);
    char *prompts[4] = {0};
    turn_stats t[4];
    CU_ASSERT_EQUAL_FATAL(read_prompts(err, prompts, 4), 2);
    CU_ASSERT_EQUAL(read_stats(err, t, 4), 2);
    CU_ASSERT_STRING_EQUAL(prompts[1], "<|im_start|>user\nwhat comes next<|im_end|>\n<|im_start|>assistant\n");
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "[conversation cleared]"));
    free_all(prompts, 2);
    free(out);
    free(err);
}

static void test_system_message(void) {
    /* --system from the start, /system replacing it mid-chat. */
    const char *in = input_file("system.txt", "hello there\n/system You speak like a pirate.\nagain\n");
    char *out = NULL, *err = NULL;
    int rc = vt_test_run_vt_checked(&out, &err, CHAT_ARGS " -n 4 --seed 7 --system 'Be brief.' --show-prompt < '%s'",
                                    in);
    CU_ASSERT_EQUAL(rc, 0);
    char *prompts[4] = {0};
    CU_ASSERT_EQUAL_FATAL(read_prompts(err, prompts, 4), 2);
    const char *first = "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nhello there<|im_end|>\n";
    const char *second = "<|im_start|>system\nYou speak like a pirate.<|im_end|>\n<|im_start|>user\nhello there<|im_end|>\n";
    CU_ASSERT_EQUAL(strncmp(prompts[0], first, strlen(first)), 0);
    CU_ASSERT_EQUAL(strncmp(prompts[1], second, strlen(second)), 0);
    CU_ASSERT_PTR_NULL(strstr(prompts[1], "Be brief."));
    CU_ASSERT_PTR_NOT_NULL(strstr(prompts[1], "<|im_start|>user\nagain<|im_end|>"));
    free_all(prompts, 2);
    free(out);
    free(err);
    /* --system "" is none: the template writes no empty system turn */
    const char *one = input_file("system-empty.txt", "hello there\n");
    rc = vt_test_run_vt_checked(&out, &err, CHAT_ARGS " -n 4 --seed 7 --system '' --show-prompt < '%s'", one);
    CU_ASSERT_EQUAL(rc, 0);
    CU_ASSERT_EQUAL_FATAL(read_prompts(err, prompts, 4), 1);
    CU_ASSERT_STRING_EQUAL(prompts[0], "<|im_start|>user\nhello there<|im_end|>\n<|im_start|>assistant\n");
    free_all(prompts, 1);
    free(out);
    free(err);
}

static void test_seeded_output_repeats(void) {
    const char *in = input_file("seeded.txt", "hello there\nwhat comes next\n");
    char *out[2] = {0}, *err[2] = {0};
    /* without --seed, the seed drawn is printed, and replays the chat */
    CU_ASSERT_EQUAL(vt_test_run_vt_checked(&out[0], &err[0], CHAT_ARGS " -n 16 --temp 0.9 < '%s'", in), 0);
    const char *said = err[0] ? strstr(err[0], "vt chat: seed ") : NULL;
    CU_ASSERT_PTR_NOT_NULL_FATAL(said);
    const unsigned long long seed = strtoull(said + 14, NULL, 10);
    CU_ASSERT_EQUAL(vt_test_run_vt_checked(&out[1], &err[1], CHAT_ARGS " -n 16 --seed %llu --temp 0.9 < '%s'", seed, in),
                    0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(out[0]);
    CU_ASSERT_PTR_NOT_NULL_FATAL(out[1]);
    CU_ASSERT(strlen(out[0]) > 2); /* two answers, not two empty lines */
    CU_ASSERT_STRING_EQUAL(out[0], out[1]);
    for (int k = 0; k < 2; k++) {
        free(out[k]);
        free(err[k]);
    }
}

static void test_grammar_shapes_answers(void) {
    const char *grammar = input_file("yes_no.gbnf", "root ::= \"yes please\" | \"no thanks\"\n");
    const char *in = input_file("grammar.txt", "first question\nsecond question\n");
    char *out = NULL, *err = NULL;
    int rc = vt_test_run_vt_checked(&out, &err, CHAT_ARGS " -n 16 --seed 3 --show-prompt --grammar-file '%s' < '%s'",
                                    grammar, in);
    CU_ASSERT_EQUAL(rc, 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(out);
    char *first = NULL;
    int answers = 0;
    for (char *line = strtok(out, "\n"); line; line = strtok(NULL, "\n")) {
        CU_ASSERT(strcmp(line, "yes please") == 0 || strcmp(line, "no thanks") == 0);
        if (!first) first = line;
        answers++;
    }
    CU_ASSERT_EQUAL(answers, 2);
    /* The answer the grammar completed is kept whole in the conversation:
     * its last token is the answer's, not a stop token left out. */
    char *prompts[4] = {0};
    CU_ASSERT_EQUAL_FATAL(read_prompts(err, prompts, 4), 2);
    char kept[64];
    snprintf(kept, sizeof kept, "<|im_start|>assistant\n%s<|im_end|>", first ? first : "?");
    if (!strstr(prompts[1], kept)) printf("\nturn 2's prompt lacks '%s':\n%s", kept, prompts[1]);
    CU_ASSERT_PTR_NOT_NULL(strstr(prompts[1], kept));
    free_all(prompts, 2);
    free(out);
    free(err);
}

/* vt chat ARGS exits with status `want`, its message naming `names`. */
static void expect_refusal(const char *args, int want, const char *names) {
    char *out = NULL, *err = NULL;
    int rc = vt_test_run_vt_checked(&out, &err, "%s", args);
    if (rc != want || !err || !strstr(err, names))
        fprintf(stderr, "\n  vt %s: status %d (want %d), stderr: %s\n", args, rc, want, err ? err : "(none)");
    CU_ASSERT_EQUAL(rc, want);
    CU_ASSERT(err && strstr(err, names));
    free(out);
    free(err);
}

static void test_refusals(void) {
    char bad_template[512];
    FILE *f = fopen(vt_test_tmpfile(bad_template, sizeof bad_template, "broken.jinja"), "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fputs("{% for m in messages %}{{ m.content }", f);
    fclose(f);
    char args[1024];
    expect_refusal("chat --no-such-flag", 2, "--no-such-flag");
    expect_refusal("chat", 2, "no model");
    expect_refusal(CHAT_ARGS " -n 0", 2, "-n 0");
    expect_refusal(CHAT_ARGS " --temp -1", 2, "--temp");
    expect_refusal("chat -m " MODEL " --chat-template nonesuch", 2, "nonesuch");
    expect_refusal("chat -m " MODEL " --chat-template-file /nonexistent/t.jinja", 2, "/nonexistent/t.jinja");
    snprintf(args, sizeof args, "chat -m %s --chat-template-file %s", MODEL, bad_template);
    expect_refusal(args, 2, bad_template);
    /* one that parses but fails on a chat of one user message answers no
     * turn: refused at start, not per turn with exit 0 */
    char failing[512];
    CU_ASSERT_PTR_NOT_NULL_FATAL(vt_test_write_tmpfile(failing, sizeof failing, "failing.jinja",
                                                       "{{ messages[0].content | nosuchfilter }}"));
    snprintf(args, sizeof args, "chat -m %s --chat-template-file %s < /dev/null", MODEL, failing);
    expect_refusal(args, 2, "fails on a chat of one user message: line 1: unknown filter 'nosuchfilter'");
    /* qwen3-tiny carries no template: the message names the way out. */
    expect_refusal("chat -m " MODEL " < /dev/null", 4, "--chat-template-file");
    expect_refusal("chat -m /nonexistent/model.gguf --chat-template chatml", 2, "/nonexistent/model.gguf");
}

/* The lines of `vt CMD --help` that describe FLAG (its line and the
 * continuation lines under it), malloc'ed. */
static char *help_of(const char *cmd, const char *flag) {
    char *out = NULL;
    CU_ASSERT_EQUAL(vt_test_run_vt_checked(&out, NULL, "%s --help", cmd), 0);
    if (!out) return NULL;
    char *result = NULL;
    for (char *line = out; *line;) {
        char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        char *hit = memmem(line, len, flag, strlen(flag));
        size_t indent = strspn(line, " ");
        if (hit && (hit[strlen(flag)] == ' ' || hit[strlen(flag)] == ',') && indent < 8 && line[indent] == '-') {
            /* the flag's own line, then lines indented past the flag column */
            char *stop = end ? end + 1 : line + len;
            while (*stop && strncmp(stop, "                           ", 27) == 0) {
                char *e = strchr(stop, '\n');
                stop = e ? e + 1 : stop + strlen(stop);
            }
            result = strndup(line, (size_t)(stop - line));
            break;
        }
        line = end ? end + 1 : line + len;
    }
    free(out);
    return result;
}

static void test_help_shares_the_generation_flags(void) {
    static const char *const flags[] = {"--temp",  "--top-k",        "--seed",       "--presence-penalty",
                                        "--stop",  "--grammar-file", "--ignore-eos", "--kv-cache-dtype",
                                        "--threads", NULL};
    for (const char *const *f = flags; *f; f++) {
        char *chat = help_of("chat", *f), *run = help_of("run", *f);
        if (!chat || !run || strcmp(chat, run) != 0)
            fprintf(stderr, "\n  %s: vt chat --help says [%s], vt run --help says [%s]\n", *f, chat ? chat : "nothing",
                    run ? run : "nothing");
        CU_ASSERT_PTR_NOT_NULL(chat);
        CU_ASSERT_PTR_NOT_NULL(run);
        if (chat && run) CU_ASSERT_STRING_EQUAL(chat, run);
        free(chat);
        free(run);
    }
}

/* ---- in a terminal ---------------------------------------------------------- */

/* A tmux server of this test's own (its socket named after the process), so
 * nothing else running tmux is touched; one session, one pane. */
typedef struct term {
    char socket[64];
    char gate[512]; /* the step_gate folder */
    char status[600]; /* where vt chat's exit status is written */
    bool started;
} term;

static bool have_tmux(void) { return vt_test_run_cmd("command -v tmux", NULL, NULL) == 0; }

static int tmux(const term *t, const char *args, char **out) {
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "tmux -L '%s' %s", t->socket, args);
    return vt_test_run_cmd(cmd, out, NULL);
}

/* vt chat in a 120x40 terminal on the step_gate backend, forwards up to
 * number `allow` let through (-1: all). bash runs it and writes its exit
 * status to a file: tmux does not always reap a pane's process at once, so
 * its own record of the status is not waited on. A Ctrl-C reaches bash too;
 * bash waits for vt and goes on, since vt does not die of it. */
static bool term_start(term *t, const char *name, long allow, const char *extra) {
    snprintf(t->socket, sizeof t->socket, "vt-test-chat-%ld-%s", (long)getpid(), name);
    char gate_name[80];
    snprintf(gate_name, sizeof gate_name, "%s-gate", name);
    vt_test_tmpfile(t->gate, sizeof t->gate, gate_name);
    char mk[600];
    snprintf(mk, sizeof mk, "mkdir -p '%s'", t->gate);
    if (vt_test_run_cmd(mk, NULL, NULL) != 0) return false;
    if (allow >= 0 && !gate_write_number(t->gate, "allow", allow)) return false;
    snprintf(t->status, sizeof t->status, "%s/status", t->gate);
    char conf[512];
    vt_test_tmpfile(conf, sizeof conf, "tmux.conf");
    FILE *f = fopen(conf, "w");
    if (!f) return false;
    fputs("set -g remain-on-exit on\nset -g history-limit 5000\n", f);
    fclose(f);
    char args[4096];
    snprintf(args, sizeof args,
             "-f '%s' new-session -d -x 120 -y 40 -s chat \"exec bash -c 'env -u VT_KV_CACHE_DTYPE "
             "-u VT_KV_CACHE_F32 -u VT_CONFIG -u VT_BACKEND -u VT_CTX_SIZE TERM=xterm VT_BACKEND_PATH=%s "
             "VT_TEST_STEP_GATE=%s %s " CHAT_ARGS " --backend step_gate -c 2048 %s; echo \\$? > %s'\"",
             conf, VT_TEST_PLUGIN_DIR, t->gate, VT_CLI_PATH, extra, t->status);
    t->started = tmux(t, args, NULL) == 0;
    return t->started;
}

static void term_stop(term *t) {
    if (t->started) tmux(t, "kill-server", NULL);
    t->started = false;
}

/* The pane's text (malloc'ed), the scrollback included. */
static char *screen(const term *t) {
    char *out = NULL;
    tmux(t, "capture-pane -p -J -S - -t chat", &out);
    return out;
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void pause_briefly(void) {
    const struct timespec p = {0, 50 * 1000 * 1000};
    nanosleep(&p, NULL);
}

/* Poll the screen until it contains `text` after the position of `after`'s
 * last occurrence (NULL: anywhere), up to the deadline; the screen (or NULL
 * when it never did) is returned, malloc'ed. */
static char *wait_for_text(const term *t, const char *after, const char *text) {
    for (double end = now() + WAIT_SECONDS; now() < end; pause_briefly()) {
        char *s = screen(t);
        const char *from = s;
        for (const char *p = s && after ? strstr(s, after) : NULL; p; p = strstr(p + 1, after)) from = p;
        if (s && (!after || from != s || strncmp(s, after, strlen(after)) == 0) && strstr(from, text)) return s;
        free(s);
    }
    char *s = screen(t);
    fprintf(stderr, "\n  waited %.0f s for [%s]; the screen:\n%s\n", WAIT_SECONDS, text, s ? s : "(none)");
    free(s);
    return NULL;
}

/* Wait for vt chat to exit; its status into *status. */
static bool chat_exited(const term *t, int *status) {
    for (double end = now() + WAIT_SECONDS; now() < end; pause_briefly()) {
        char *text = vt_test_read_file(t->status, NULL);
        const bool got = text && sscanf(text, "%d", status) == 1;
        free(text);
        if (!got) continue;
        if (*status != 0) {
            char *s = screen(t);
            fprintf(stderr, "\n  vt chat exited with status %d; the screen:\n%s\n", *status, s ? s : "(none)");
            free(s);
        }
        return true;
    }
    char *s = screen(t);
    fprintf(stderr, "\n  vt chat still running after %.0f s; the screen:\n%s\n", WAIT_SECONDS, s ? s : "(none)");
    free(s);
    return false;
}

/* The answer is held at forward `n` (it has begun and waits). */
static bool held_at(const term *t, long n) {
    for (double end = now() + WAIT_SECONDS; now() < end; pause_briefly())
        if (gate_read_number(t->gate, "reached") >= n) return true;
    return false;
}

static void test_terminal_ctrl_c_stops_the_answer(void) {
    if (!have_tmux()) {
        CU_FAIL("tmux is not installed (bash .ci/install-deps installs it): the terminal test cannot run");
        return;
    }
    term t = {0};
    /* 24 forwards may run (the question's prompt, then the answer's first
     * tokens), then the gate holds the answer. */
    const long allowed = 24;
    CU_ASSERT_FATAL(term_start(&t, "ctrl_c", allowed, "-n 100000 --ignore-eos --seed 5 --stats"));
    char *s = wait_for_text(&t, NULL, "/help lists the commands");
    CU_ASSERT_PTR_NOT_NULL(s);
    free(s);
    CU_ASSERT_PTR_NOT_NULL(s = wait_for_text(&t, "/help lists the commands", "\n> "));
    free(s);
    tmux(&t, "send-keys -t chat -l 'tell me a long story'", NULL);
    tmux(&t, "send-keys -t chat Enter", NULL);
    /* Held mid-answer: what came so far is on the screen, the answer is not
     * over (no stats line), and nothing is interrupted yet. */
    CU_ASSERT_FATAL(held_at(&t, allowed + 1));
    s = wait_for_text(&t, "> tell me a long story\n", "\n");
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    {
        const char *answer = strstr(s, "> tell me a long story\n") + strlen("> tell me a long story\n");
        bool visible = false;
        for (const char *p = answer; *p; p++) visible |= *p != ' ' && *p != '\n';
        CU_ASSERT(visible); /* streamed: text on the screen while the answer is held */
        CU_ASSERT_PTR_NULL(strstr(s, "[turn 1:"));
        CU_ASSERT_PTR_NULL(strstr(s, "[interrupted]"));
    }
    free(s);
    tmux(&t, "send-keys -t chat C-c", NULL);
    /* The keypress reaches vt when the terminal delivers it; until vt has
     * seen it, let the answer on one forward at a time (it would run to the
     * end of the context without Ctrl-C). */
    long allow = allowed;
    char *after = NULL;
    for (double end = now() + WAIT_SECONDS; now() < end && !after; pause_briefly()) {
        char *scr = screen(&t);
        if (scr && strstr(scr, "[interrupted]")) {
            after = scr;
            break;
        }
        free(scr);
        if (gate_read_number(t.gate, "reached") > allow) CU_ASSERT_FATAL(gate_write_number(t.gate, "allow", ++allow));
    }
    CU_ASSERT_PTR_NOT_NULL(after);
    free(after);
    CU_ASSERT(allow - allowed < 200); /* stopped soon after Ctrl-C, far from the context's end */
    /* Still running, at its prompt again. */
    CU_ASSERT_PTR_NOT_NULL(s = wait_for_text(&t, "[interrupted]", "\n> "));
    free(s);
    int status = -1;
    char *exited = vt_test_read_file(t.status, NULL);
    CU_ASSERT_PTR_NULL(exited); /* still running */
    free(exited);
    char allow_file[600];
    snprintf(allow_file, sizeof allow_file, "%s/allow", t.gate);
    remove(allow_file); /* the gate open from here on */
    tmux(&t, "send-keys -t chat -l '/exit'", NULL);
    tmux(&t, "send-keys -t chat Enter", NULL);
    CU_ASSERT(chat_exited(&t, &status));
    CU_ASSERT_EQUAL(status, 0);
    term_stop(&t);
}

static void test_terminal_ctrl_c_at_the_prompt_ends(void) {
    if (!have_tmux()) {
        CU_FAIL("tmux is not installed (bash .ci/install-deps installs it): the terminal test cannot run");
        return;
    }
    term t = {0};
    CU_ASSERT_FATAL(term_start(&t, "prompt_c", -1, "-n 4 --seed 5"));
    char *s = wait_for_text(&t, "/help lists the commands", "\n> ");
    CU_ASSERT_PTR_NOT_NULL(s);
    free(s);
    tmux(&t, "send-keys -t chat C-c", NULL);
    int status = -1;
    CU_ASSERT(chat_exited(&t, &status));
    CU_ASSERT_EQUAL(status, 0);
    term_stop(&t);
}

int main(void) {
    static CU_TestInfo piped[] = {
        {"two turns: the second prompt holds the first, from the cache", test_two_turns_keep_history},
        {"the prefix-cache levers (flags, ini) change what turn 2 takes from the cache", test_prefix_cache_levers},
        {"/reset forgets the conversation", test_reset_forgets},
        {"--system and /system put the system message first", test_system_message},
        {"the seed a chat drew is printed and replays it", test_seeded_output_repeats},
        {"--grammar-file shapes every answer", test_grammar_shapes_answers},
        {"bad flags, templates and models exit non-zero naming them", test_refusals},
        {"vt chat --help and vt run --help list the same generation flags", test_help_shares_the_generation_flags},
        CU_TEST_INFO_NULL,
    };
    static CU_TestInfo terminal[] = {
        {"Ctrl-C stops a streaming answer; the chat goes on; /exit ends it", test_terminal_ctrl_c_stops_the_answer},
        {"Ctrl-C at the prompt ends the chat", test_terminal_ctrl_c_at_the_prompt_ends},
        CU_TEST_INFO_NULL,
    };
    vt_test_add_suite("vt chat piped", NULL, NULL, piped);
    vt_test_add_suite("vt chat in a terminal", NULL, NULL, terminal);
    return vt_test_run();
}
