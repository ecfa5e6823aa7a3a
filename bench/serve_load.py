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

Only the Python standard library is used, so it runs wherever the tests run.
Usage:
  bench/serve_load.py --url http://127.0.0.1:8080 --clients 1,4,8,16 --duration 30 --max-tokens 64
"""
import argparse
import http.client
import json
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
        while True:
            line = resp.readline()
            if not line:
                break
            line = line.strip()
            if not line.startswith(b"data:"):
                continue
            data = line[5:].strip()
            if data == b"[DONE]":
                break
            chunk = json.loads(data)
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


def run_level(url, body, headers, clients, duration):
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
        "errors": [e for w in workers for e in w.errors],
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
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
    args = ap.parse_args()

    url = urllib.parse.urlparse(args.url)
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
                print("%7s %8s %10s %12s %10s %10s %10s %10s %12s %8s %8s" %
                      ("clients", "requests", "req/s", "output tok/s", "TTFT p50", "TTFT p99", "ITL p50", "ITL p99",
                       "decode tok/s", "in TTFT", "between"))
            print("%7d %8d %10.2f %12.1f %8.0fms %8.0fms %8.1fms %8.1fms %12.1f %7.1f%% %7.1f%%" %
                  (c, r["requests"], r["requests_per_s"], r["output_tok_s"], r["ttft_p50_ms"], r["ttft_p99_ms"],
                   r["itl_p50_ms"], r["itl_p99_ms"], r["decode_tok_s"], 100 * r["ttft_share"],
                   100 * r["between_share"]), flush=True)
        for e in r["errors"][:5]:
            print("  error: %s" % e, file=sys.stderr)
    if args.json:
        print(json.dumps({"url": args.url, "max_tokens": args.max_tokens, "duration_s": args.duration,
                          "results": results}, indent=2))
    return 1 if any(r["errors"] for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
