#!/usr/bin/env python3
"""serve_load.py — load generator for `vt serve` (or any OpenAI-compatible server).

For each concurrency level C, C clients each send streamed /v1/completions
requests back to back for --duration seconds (a request in flight when time is
up is finished and counted). Every request asks for the same prompt and
--max-tokens tokens with stream_options.include_usage, so the server reports
how many tokens it generated. Per level it reports:

  requests/s       finished requests / wall time of the level
  output tok/s     completion tokens (from usage) / wall time of the level
  TTFT p50/p99     request sent -> first chunk carrying text
  ITL p50/p99      gaps between consecutive text chunks of one request
  decode tok/s     clients x (tokens after the first) / (time from first to
                   last text chunk), summed over requests: the output tok/s
                   if every client were always decoding. It is what compares
                   with a decode-only benchmark (vt bench's tg): output tok/s
                   also counts each request's prompt, first token and HTTP
                   round trip, and the client's own time between requests.
                   (JSON only: decode_tok_s_median_request, clients x the
                   median over requests of each one's own decode rate: a
                   median, like vt bench's, which a single stalled request on
                   a shared machine does not pull down as it does the sum.)
  in TTFT          share of the requests' time spent before their first token
  between          share of the clients' time outside any request (connect,
                   parse, the load generator's own work)
  steal            share of this machine's CPU time its hypervisor gave to
                   others during the level (/proc/stat; "-" where unknown): on
                   a shared virtual machine a vCPU taken away for ~100 ms
                   stalls every step that needs it, which shows in ITL p99
                   and TTFT p99 whatever the server does

With --conversations C (multi-turn mode) it instead runs C chat conversations
at once on /v1/chat/completions, streamed: each starts from one system prompt
all conversations share (--system-words words, about 1.1 tokens each with the
Qwen2 vocabulary) and has --turns user turns; every turn resends the whole
history (system, the earlier user turns and the assistant's answers as they
came back), as chat clients do. It reports TTFT p50/p99 per turn number (turn
1 shares only the system prompt with the others; later turns also their own
history), the later turns' TTFT p50 over the first turn's, ITL p50/p99 over
all turns, output tok/s over the run, and, from the server's /metrics when it
has vt's histograms, their percentiles and the prefix cache's hit share over
this run (read before and after it: /metrics counts over the server's life).
Per turn it also says over how long that turn's requests were sent, and
over the run how late this client woke from a 10 ms sleep (a fraction of a
millisecond when it has a CPU): a load generator sharing the server's CPUs
at a lower priority (a server at nice -15, this at 0) can be starved while
the server computes: it then reads answers late, and requests that clients
on other machines would send together reach the server one by one (seen
once here: a turn's 8 requests started ~250 ms apart, where at the server's
priority they came within a step), which changes every figure it reports.
Run it at the server's priority (bench/serve_multiturn_vs_llama.sh does).

Only the Python standard library is used, so it runs wherever the tests run.
Usage:
  bench/serve_load.py --url http://127.0.0.1:8080 --clients 1,4,8,16 --duration 30 --max-tokens 64
  bench/serve_load.py --url http://127.0.0.1:8080 --conversations 8 --turns 3 --system-words 1390 --max-tokens 32
"""
import argparse
import http.client
import json
import os
import sys
import threading
import time
import urllib.parse


def percentile(values, p):
    if not values:
        return float("nan")
    s = sorted(values)
    k = (len(s) - 1) * p / 100.0
    lo = int(k)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


def sse_chunks(resp):
    """The JSON chunks of a Server-Sent Events response, up to [DONE]."""
    while True:
        line = resp.readline()
        if not line:
            return
        line = line.strip()
        if not line.startswith(b"data:"):
            continue
        data = line[5:].strip()
        if data == b"[DONE]":
            return
        yield json.loads(data)


class Client(threading.Thread):
    """One client: streamed requests back to back until the deadline."""

    def __init__(self, url, body, headers, deadline):
        super().__init__(daemon=True)
        self.url = url
        self.body = body
        self.headers = headers
        self.deadline = deadline
        self.ttft = []
        self.itl = []
        self.tokens = 0
        self.requests = 0
        self.request_s = 0.0  # wall time inside finished requests
        self.decode_s = 0.0   # first to last text chunk, summed
        self.decode_tokens = 0  # tokens after the first, summed
        self.decode_rates = []  # per request: tokens after the first / first to last text chunk
        self.errors = []

    def one_request(self):
        conn = http.client.HTTPConnection(self.url.hostname, self.url.port or 80, timeout=600)
        t0 = time.perf_counter()
        conn.request("POST", "/v1/completions", body=self.body, headers=self.headers)
        resp = conn.getresponse()
        if resp.status != 200:
            self.errors.append("HTTP %d: %s" % (resp.status, resp.read()[:200]))
            conn.close()
            return
        first = last = None
        usage = None
        for chunk in sse_chunks(resp):
            if chunk.get("usage"):
                usage = chunk["usage"]
            choices = chunk.get("choices") or []
            if choices and choices[0].get("text"):
                now = time.perf_counter()
                if last is None:
                    first = now
                    self.ttft.append(now - t0)
                else:
                    self.itl.append(now - last)
                last = now
        conn.close()
        if usage is None:
            self.errors.append("stream ended without usage")
            return
        self.tokens += usage["completion_tokens"]
        self.requests += 1
        self.request_s += time.perf_counter() - t0
        if first is not None and last > first:
            self.decode_s += last - first
            self.decode_tokens += usage["completion_tokens"] - 1
            self.decode_rates.append((usage["completion_tokens"] - 1) / (last - first))

    def run(self):
        try:
            while time.perf_counter() < self.deadline:
                self.one_request()
        except Exception as e:  # the report says what failed; the level still ends
            self.errors.append(repr(e))


class CpuSteal:
    """The share of all CPUs' time stolen by the hypervisor between start()
    and share() (None where /proc/stat has no steal column)."""

    @staticmethod
    def _read():
        try:
            with open("/proc/stat") as f:
                fields = f.readline().split()
            return int(fields[8]) / os.sysconf("SC_CLK_TCK") if fields[0] == "cpu" and len(fields) > 8 else None
        except (OSError, ValueError, IndexError):
            return None

    def __init__(self):
        self.t0 = time.perf_counter()
        self.s0 = self._read()

    def share(self):
        s1 = self._read()
        if self.s0 is None or s1 is None:
            return None
        wall = time.perf_counter() - self.t0
        return (s1 - self.s0) / (wall * (os.cpu_count() or 1)) if wall > 0 else None


class WakeLag(threading.Thread):
    """How late this process wakes from a 10 ms sleep, all along the run: a
    few hundred microseconds when it has a CPU; tens or hundreds of
    milliseconds when the server, at a higher priority on the same CPUs,
    starves it, and then every time this client measures is late by as much."""

    def __init__(self):
        super().__init__(daemon=True)
        self.lags, self.done = [], threading.Event()
        self.start()

    def run(self):
        while not self.done.is_set():
            t = time.perf_counter()
            time.sleep(0.01)
            self.lags.append(time.perf_counter() - t - 0.01)

    def stop(self):
        self.done.set()
        self.join()

    def percentile_ms(self, p):
        return percentile(self.lags, p) * 1e3


def steal_text(share):
    return "-" if share is None else "%.1f%%" % (100 * share)


def run_level(url, body, headers, clients, duration):
    steal = CpuSteal()
    t0 = time.perf_counter()
    workers = [Client(url, body, headers, t0 + duration) for _ in range(clients)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    wall = time.perf_counter() - t0
    ttft = [x for w in workers for x in w.ttft]
    itl = [x for w in workers for x in w.itl]
    decode_s = sum(w.decode_s for w in workers)
    request_s = sum(w.request_s for w in workers)
    return {
        "clients": clients,
        "wall_s": wall,
        "requests": sum(w.requests for w in workers),
        "requests_per_s": sum(w.requests for w in workers) / wall,
        "output_tokens": sum(w.tokens for w in workers),
        "output_tok_s": sum(w.tokens for w in workers) / wall,
        "ttft_p50_ms": percentile(ttft, 50) * 1e3,
        "ttft_p99_ms": percentile(ttft, 99) * 1e3,
        "itl_p50_ms": percentile(itl, 50) * 1e3,
        "itl_p99_ms": percentile(itl, 99) * 1e3,
        "decode_tok_s": clients * sum(w.decode_tokens for w in workers) / decode_s if decode_s > 0 else float("nan"),
        "decode_tok_s_median_request": clients * percentile([x for w in workers for x in w.decode_rates], 50),
        "ttft_share": sum(ttft) / request_s if request_s > 0 else float("nan"),
        "between_share": 1.0 - request_s / (clients * wall),
        "cpu_steal_share": steal.share(),
        "errors": [e for w in workers for e in w.errors],
    }


def stream_chat(url, headers, body):
    """One streamed chat request: (sent at s, ttft s, [gaps s], text, usage)."""
    conn = http.client.HTTPConnection(url.hostname, url.port or 80, timeout=1800)
    t0 = time.perf_counter()
    conn.request("POST", "/v1/chat/completions", body=json.dumps(body), headers=headers)
    resp = conn.getresponse()
    if resp.status != 200:
        msg = "HTTP %d: %s" % (resp.status, resp.read()[:200])
        conn.close()
        raise RuntimeError(msg)
    ttft, last, gaps, parts, usage = None, None, [], [], None
    for chunk in sse_chunks(resp):
        if chunk.get("usage"):
            usage = chunk["usage"]
        choices = chunk.get("choices") or []
        text = choices[0].get("delta", {}).get("content") if choices else None
        if text:
            now = time.perf_counter()
            if ttft is None:
                ttft = now - t0
            else:
                gaps.append(now - last)
            last = now
            parts.append(text)
    conn.close()
    if usage is None:
        raise RuntimeError("stream ended without usage")
    return t0, ttft, gaps, "".join(parts), usage


class Conversation(threading.Thread):
    """One chat: its turns one after another, each resending the history."""

    def __init__(self, url, headers, system, index, turns, max_tokens, temperature):
        super().__init__(daemon=True)
        self.url, self.headers, self.index = url, headers, index
        self.system, self.turns = system, turns
        self.max_tokens, self.temperature = max_tokens, temperature
        self.ttft = []  # per turn
        self.sent = []  # per turn: when its request went out (perf_counter)
        self.prompt_tokens, self.cached_tokens = [], []  # per turn, from the response's usage
        self.gaps = []
        self.tokens = 0
        self.errors = []

    def run(self):
        messages = [{"role": "system", "content": self.system}]
        try:
            for t in range(self.turns):
                messages.append({"role": "user", "content": "Conversation %d, question %d: what should the "
                                 "traveller pack for day %d of the journey, and why?" % (self.index, t + 1, t + 1)})
                body = {"model": "vt", "messages": messages, "max_tokens": self.max_tokens,
                        "temperature": self.temperature, "stream": True,
                        "stream_options": {"include_usage": True}}
                sent, ttft, gaps, text, usage = stream_chat(self.url, self.headers, body)
                self.sent.append(sent)
                self.ttft.append(ttft if ttft is not None else float("nan"))
                self.gaps.extend(gaps)
                self.tokens += usage["completion_tokens"]
                self.prompt_tokens.append(usage.get("prompt_tokens", 0))
                self.cached_tokens.append((usage.get("prompt_tokens_details") or {}).get("cached_tokens", 0))
                messages.append({"role": "assistant", "content": text})
        except Exception as e:  # the report says what failed
            self.errors.append(repr(e))


def system_prompt(words):
    """A deterministic system prompt of about `words` words."""
    vocab = ("the traveller keeps a map water bread lamp rope coat boots compass notebook pencil knife salt tea "
             "blanket river mountain village market bridge forest road weather north south east west morning "
             "evening rest walk carry share listen answer briefly clearly").split()
    out = ["You are a careful travel assistant. Follow these notes."]
    for i in range(words):
        out.append(vocab[(i * 7 + i // 11) % len(vocab)])
        if i % 12 == 11:
            out[-1] += "."
    return " ".join(out)


def read_metrics(url, headers):
    """vt's /metrics histogram buckets and counters as ({base: [(le, count)]},
    {name: value}), or None (not vt, or unreachable)."""
    try:
        conn = http.client.HTTPConnection(url.hostname, url.port or 80, timeout=30)
        conn.request("GET", "/metrics", headers=headers)
        resp = conn.getresponse()
        text = resp.read().decode("utf-8", "replace") if resp.status == 200 else ""
        conn.close()
    except OSError:
        return None
    hist, values = {}, {}
    for line in text.splitlines():
        if line.startswith("#") or not line.strip():
            continue
        name, _, value = line.rpartition(" ")
        if "_bucket{le=" in name:
            base, le = name.split("_bucket{le=")
            hist.setdefault(base, []).append((float(le.strip('"}').replace("+Inf", "inf")), float(value)))
        else:
            values[name] = float(value)
    if "vt_time_to_first_token_seconds" not in hist:
        return None
    return hist, values


def metrics_since(url, headers, before):
    """The histograms' percentiles and the prefix cache's hit share over what
    the server did since `before` (read_metrics' reading at the start of the
    run: /metrics counts over the server's whole life), or None."""
    now = read_metrics(url, headers)
    if now is None:
        return None
    hist, values = now
    if before is not None:
        hist = {base: [(le, count - dict(before[0].get(base, [])).get(le, 0.0)) for le, count in b]
                for base, b in hist.items()}
        values = {name: v - before[1].get(name, 0.0) for name, v in values.items()}

    def quantile(buckets, q):  # the upper bound of the bucket holding the q-th share
        total = buckets[-1][1]
        for le, count in buckets:
            if total and count >= q * total:
                return le
        return float("nan")

    out = {}
    for base, key in (("vt_time_to_first_token_seconds", "ttft"), ("vt_inter_token_latency_seconds", "itl")):
        b = sorted(hist.get(base, []))
        if b:
            out[key + "_p50_le_s"] = quantile(b, 0.5)
            out[key + "_p99_le_s"] = quantile(b, 0.99)
    hit = values.get("vt_prefix_cache_hit_tokens_total")
    query = values.get("vt_prefix_cache_query_tokens_total")
    if hit is not None and query:
        out["prefix_cache_hit_share"] = hit / query
    return out


def run_conversations(args, url, headers):
    system = system_prompt(args.system_words)
    metrics_before = read_metrics(url, headers)
    steal = CpuSteal()
    lag = WakeLag()
    t0 = time.perf_counter()
    convs = [Conversation(url, headers, system, i, args.turns, args.max_tokens, args.temperature)
             for i in range(args.conversations)]
    for c in convs:
        c.start()
    for c in convs:
        c.join()
    wall = time.perf_counter() - t0
    by_turn = []
    for t in range(args.turns):
        v = [c.ttft[t] for c in convs if len(c.ttft) > t]
        prompt = sum(c.prompt_tokens[t] for c in convs if len(c.prompt_tokens) > t)
        cached = sum(c.cached_tokens[t] for c in convs if len(c.cached_tokens) > t)
        sent = [c.sent[t] for c in convs if len(c.sent) > t]
        by_turn.append({"turn": t + 1, "n": len(v), "ttft_p50_ms": percentile(v, 50) * 1e3,
                        "ttft_p99_ms": percentile(v, 99) * 1e3, "prompt_tokens": prompt, "cached_tokens": cached,
                        "sent_over_ms": (max(sent) - min(sent)) * 1e3 if sent else float("nan")})
    later = [c.ttft[t] for c in convs for t in range(1, len(c.ttft))]
    gaps = [g for c in convs for g in c.gaps]
    lag.stop()
    result = {
        "conversations": args.conversations, "turns": args.turns, "system_words": args.system_words,
        "max_tokens": args.max_tokens, "wall_s": wall,
        "output_tokens": sum(c.tokens for c in convs),
        "output_tok_s": sum(c.tokens for c in convs) / wall,
        "ttft_by_turn": by_turn,
        "later_turns_ttft_p50_ms": percentile(later, 50) * 1e3,
        "later_over_first_turn_p50": percentile(later, 50) / percentile([c.ttft[0] for c in convs if c.ttft], 50)
        if later else float("nan"),
        "itl_p50_ms": percentile(gaps, 50) * 1e3, "itl_p99_ms": percentile(gaps, 99) * 1e3,
        "client_wake_lag_p99_ms": lag.percentile_ms(99), "client_wake_lag_max_ms": lag.percentile_ms(100),
        "cpu_steal_share": steal.share(),
        "server_metrics": metrics_since(url, headers, metrics_before),
        "errors": [e for c in convs for e in c.errors],
    }
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print("%d conversations x %d turns, system prompt of %d words, %d tokens per answer: %.1f s, "
              "output %.1f tok/s" % (args.conversations, args.turns, args.system_words, args.max_tokens, wall,
                                     result["output_tok_s"]))
        for b in by_turn:
            print("  turn %d: TTFT p50 %8.0f ms  p99 %8.0f ms  (%d requests sent over %.0f ms; %d prompt tokens, "
                  "%d of them cached)" % (b["turn"], b["ttft_p50_ms"], b["ttft_p99_ms"], b["n"], b["sent_over_ms"],
                                          b["prompt_tokens"], b["cached_tokens"]))
        print("  later turns' TTFT p50 %.0f ms = %.3f x the first turn's" %
              (result["later_turns_ttft_p50_ms"], result["later_over_first_turn_p50"]))
        print("  this client's 10 ms sleeps woke late by p99 %.1f ms, at most %.1f ms (tens of ms: it was starved)" %
              (result["client_wake_lag_p99_ms"], result["client_wake_lag_max_ms"]))
        print("  ITL p50 %.1f ms  p99 %.1f ms; CPU stolen by the hypervisor: %s" %
              (result["itl_p50_ms"], result["itl_p99_ms"], steal_text(result["cpu_steal_share"])))
        m = result["server_metrics"]
        if m:
            print("  server /metrics over this run: TTFT p50 <= %ss p99 <= %ss; ITL p50 <= %ss p99 <= %ss; "
                  "prefix cache hit "
                  "share %.3f" % (m.get("ttft_p50_le_s"), m.get("ttft_p99_le_s"), m.get("itl_p50_le_s"),
                                  m.get("itl_p99_le_s"), m.get("prefix_cache_hit_share", float("nan"))))
    for e in result["errors"][:5]:
        print("  error: %s" % e, file=sys.stderr)
    return 1 if result["errors"] else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--url", default="http://127.0.0.1:8080")
    ap.add_argument("--clients", default="1,4,8,16", help="comma-separated concurrency levels")
    ap.add_argument("--duration", type=float, default=30.0, help="seconds per level")
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--temperature", type=float, default=0.0,
                    help="0 (the default) is greedy; above 0 a seeded draw, filtered by the server's own "
                         "top_k / top_p / min_p defaults (vt serve: 40 / 0.95 / 0.05) since the request sends none")
    ap.add_argument("--prompt", default="Once upon a time, in a land far away, there lived a")
    ap.add_argument("--prompt-repeat", type=int, default=1, help="repeat the prompt text to lengthen it")
    ap.add_argument("--api-key", default=None)
    ap.add_argument("--json", action="store_true", help="print JSON instead of a table")
    ap.add_argument("--conversations", type=int, default=0,
                    help="multi-turn mode: this many chat conversations at once (see above)")
    ap.add_argument("--turns", type=int, default=3, help="multi-turn mode: user turns per conversation")
    ap.add_argument("--system-words", type=int, default=1390,
                    help="multi-turn mode: words of the shared system prompt (the default makes 1,516 "
                         "tokens with the Qwen2 vocabulary)")
    args = ap.parse_args()

    url = urllib.parse.urlparse(args.url)
    if args.conversations > 0:
        headers = {"Content-Type": "application/json"}
        if args.api_key:
            headers["Authorization"] = "Bearer " + args.api_key
        return run_conversations(args, url, headers)
    body = json.dumps({
        "model": "vt",
        "prompt": " ".join([args.prompt] * args.prompt_repeat),
        "max_tokens": args.max_tokens,
        "temperature": args.temperature,
        "stream": True,
        "stream_options": {"include_usage": True},
    })
    headers = {"Content-Type": "application/json"}
    if args.api_key:
        headers["Authorization"] = "Bearer " + args.api_key

    levels = [int(c) for c in args.clients.split(",")]
    results = []
    for c in levels:
        r = run_level(url, body, headers, c, args.duration)
        results.append(r)
        if not args.json:
            if len(results) == 1:
                print("%7s %8s %10s %12s %10s %10s %10s %10s %12s %8s %8s %6s" %
                      ("clients", "requests", "req/s", "output tok/s", "TTFT p50", "TTFT p99", "ITL p50", "ITL p99",
                       "decode tok/s", "in TTFT", "between", "steal"))
            print("%7d %8d %10.2f %12.1f %8.0fms %8.0fms %8.1fms %8.1fms %12.1f %7.1f%% %7.1f%% %6s" %
                  (c, r["requests"], r["requests_per_s"], r["output_tok_s"], r["ttft_p50_ms"], r["ttft_p99_ms"],
                   r["itl_p50_ms"], r["itl_p99_ms"], r["decode_tok_s"], 100 * r["ttft_share"],
                   100 * r["between_share"], steal_text(r["cpu_steal_share"])), flush=True)
        for e in r["errors"][:5]:
            print("  error: %s" % e, file=sys.stderr)
    if args.json:
        print(json.dumps({"url": args.url, "max_tokens": args.max_tokens, "duration_s": args.duration,
                          "results": results}, indent=2))
    return 1 if any(r["errors"] for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
