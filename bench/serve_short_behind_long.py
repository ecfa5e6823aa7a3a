#!/usr/bin/env python3
"""A short chat arriving while the server computes another client's long prompt.

Sends a chat whose user message is CHARS characters (a long prompt, nothing
shared with what follows), waits --delay seconds, then streams a short chat
with another system message, and prints when each of the short chat's events
arrived (seconds after it was sent) and how long the long one took. What it
shows: whether a short request waits for every chunk of the long prompt, and
how far apart its tokens come while the long prompt is still being computed.

    python3 bench/serve_short_behind_long.py --url http://127.0.0.1:8080 --chars 20000
"""
import argparse
import json
import random
import threading
import time
import urllib.request


def post(url, body, stream):
    req = urllib.request.Request(url + "/v1/chat/completions", json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    return urllib.request.urlopen(req, timeout=900) if stream else urllib.request.urlopen(req, timeout=900).read()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--url", default="http://127.0.0.1:8080")
    ap.add_argument("--chars", type=int, default=20000, help="length of the long prompt's message")
    ap.add_argument("--delay", type=float, default=1.5, help="seconds between the long request and the short one")
    ap.add_argument("--max-tokens", type=int, default=4, help="tokens the short chat asks for")
    a = ap.parse_args()
    rng = random.Random()
    long_body = {"max_tokens": 2, "messages": [{"role": "user", "content": "%f " % rng.random() + "a" * a.chars}]}
    long_done = {}

    def run_long():
        t0 = time.time()
        post(a.url, long_body, False)
        long_done["s"] = time.time() - t0

    th = threading.Thread(target=run_long)
    th.start()
    time.sleep(a.delay)
    short_body = {"max_tokens": a.max_tokens, "stream": True,
                  "messages": [{"role": "system", "content": "Zebra %f" % rng.random()},
                               {"role": "user", "content": "hi"}]}
    t0 = time.time()
    events = []
    for line in post(a.url, short_body, True):
        if line.startswith(b"data:") and not line.startswith(b"data: [DONE]"):
            events.append(time.time() - t0)
    th.join()
    print("short chat's events at " + ", ".join("%.2f s" % t for t in events) +
          " after it was sent (the first is the role chunk)")
    print("long prompt (%d characters) answered after %.1f s" % (a.chars, long_done.get("s", float("nan"))))


if __name__ == "__main__":
    main()
