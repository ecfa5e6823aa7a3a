#!/usr/bin/env python3
"""check_nginx_replicas.py — `vt serve` replicas behind nginx (conf/nginx/vt.conf).

Starts replicas A, B and C on loopback ports with a tiny model, and nginx (as
this user, its pid, logs and temporary files in a temporary folder) with a
configuration made from conf/nginx/vt.conf: the same upstream, location and
proxy settings, only the ports substituted, plus an X-Upstream header (test
only) naming the replica that answered. Then:
  1. affinity: each X-Session-Id is answered by the same replica every time,
     and the keys spread over all three;
  2. A runs on the step_gate test backend (tests/plugins/step_gate.c): the
     test holds A's engine so that streams sent to A are certainly running
     when A gets SIGTERM, and non-streamed requests keep B busy meanwhile;
  3. after SIGTERM, non-streamed requests with A's session keys (not started
     anywhere yet) are all answered 200 by a survivor;
  4. A's gate opens: its streams end cleanly (a final [DONE], a finish or an
     error event, and a complete HTTP response: no cut, no hang) and A exits 0;
  5. C (also on step_gate) is killed abruptly (SIGKILL) while its engine holds
     non-streamed requests: nginx replays them on B, and each is answered 200;
  6. B's /metrics shows every KV block free and nothing running or waiting.
Timeouts are hang guards only (tens of seconds), never speed assertions.

C and A run every op on the reference backend, B on the default one.

Usage: check_nginx_replicas.py VT_BINARY MODEL PLUGIN_DIR NGINX_CONF
Exit: 0 = OK, 1 = a check failed, 77 = skipped with the reason printed (no
nginx installed, or vt serve not built).
"""
import http.client
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

HANG_GUARD = 60.0
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
    return cond


def free_port():
    """A port free now, below Linux's ephemeral range (32768-60999): between
    this check and the server's bind, a port from that range could become the
    source port of any test's outgoing connection; one below it cannot."""
    rng = random.Random(os.getpid() ^ int(time.time() * 1e6))
    for _ in range(200):
        port = rng.randrange(20000, 32000)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    with socket.socket() as s:  # the range is crowded: any free port
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def request(port, method, path, body=None, headers=None):
    """(status, headers dict, body text); raises on a broken connection."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=HANG_GUARD)
    try:
        data = json.dumps(body) if body is not None else None
        h = {"Content-Type": "application/json"} if data else {}
        h.update(headers or {})
        c.request(method, path, body=data, headers=h)
        r = c.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read().decode("utf-8", "replace")
    finally:
        c.close()


def wait_for(cond, seconds=HANG_GUARD, step=0.05):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(step)
    return cond()


def healthy(port):
    try:
        return request(port, "GET", "/health")[0] == 200
    except OSError:
        return False


def refuses(port):
    """The port refuses connections (a slow accept is not a refusal)."""
    try:
        socket.create_connection(("127.0.0.1", port), timeout=HANG_GUARD).close()
        return False
    except ConnectionRefusedError:
        return True
    except ConnectionResetError:  # accepted into a backlog the closing listener then dropped: ask again
        return False


def completion(port, key, stream=False, max_tokens=1):
    body = {"prompt": "Once upon a time", "max_tokens": max_tokens, "temperature": 0, "stream": stream}
    return request(port, "POST", "/v1/completions", body, {"X-Session-Id": key})


def nginx_config(template, tmp, listen, replicas):
    text = open(template).read()
    servers = [m for m in re.finditer(r"^\s*server 127\.0\.0\.1:\d+ (.*);$", text, re.M)]
    if len(servers) < 2:
        raise SystemExit("check_nginx_replicas: %s: expected the upstream's server lines" % template)
    params = servers[0].group(1)
    lines = "".join("    server 127.0.0.1:%d %s;\n" % (p, params) for p in replicas)
    text = text[:servers[0].start()] + "\n" + lines.rstrip("\n") + text[servers[-1].end():]
    text, n = re.subn(r"^(\s*)listen (?:127\.0\.0\.1:)?\d+;", r"\1listen 127.0.0.1:%d;\n\1add_header X-Upstream $upstream_addr always;"
                      % listen, text, flags=re.M)
    if n != 1:
        raise SystemExit("check_nginx_replicas: %s: expected one listen line" % template)
    temps = "".join("%s_temp_path %s/%s;\n" % (t, tmp, t) for t in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
    user = "user root;\n" if os.geteuid() == 0 else ""  # a root master would hand workers to nobody
    return ("%sworker_processes 1;\ndaemon off;\npid %s/nginx.pid;\nerror_log %s/error.log;\n"
            "events { worker_connections 256; }\nhttp {\naccess_log %s/access.log;\n%s%s\n}\n"
            % (user, tmp, tmp, tmp, temps, text))


def gate_count(gate):
    """Forwards the step_gate backend has begun (tests/serve_gate.h)."""
    try:
        return int(open(os.path.join(gate, "reached")).read())
    except (OSError, ValueError):  # no forward yet
        return None


def hold(gate):
    """Let no further forward start; the count of those begun (the count
    file is replaced by a rename, so its absence means none has begun)."""
    reached = gate_count(gate) or 0
    with open(os.path.join(gate, "allow.tmp"), "w") as f:
        f.write(str(reached))
    os.rename(os.path.join(gate, "allow.tmp"), os.path.join(gate, "allow"))
    return reached


def last_upstream(addrs):
    """The replica that answered: $upstream_addr lists every one tried."""
    return addrs.split(", ")[-1].split(" : ")[-1]


def stream_outcome(port, key, results, i):
    """Read one streamed completion to its end; record how it ended."""
    try:
        status, headers, text = completion(port, key, stream=True, max_tokens=200)
        events = [ln[6:] for ln in text.splitlines() if ln.startswith("data: ")]
        last = events[-1] if events else ""
        clean = last == "[DONE]" or '"finish_reason":"' in last.replace(" ", "") or '"error"' in last
        results[i] = (status, headers.get("x-upstream", ""), clean, last[:200])
    except Exception as e:  # a cut connection or a hang guard expiring
        results[i] = (None, "", False, repr(e))


def main():
    vt, model, plugin_dir, template = sys.argv[1:5]
    nginx = shutil.which("nginx") or ("/usr/sbin/nginx" if os.access("/usr/sbin/nginx", os.X_OK) else None)
    if not nginx:
        print("SKIP: nginx is not installed (Debian package nginx)")
        return 77
    if subprocess.run([vt, "serve", "--help"], capture_output=True).returncode != 0:
        print("SKIP: vt serve is not built (libmicrohttpd-dev, libjansson-dev)")
        return 77
    tmp = tempfile.mkdtemp(prefix="vt-nginx-")
    procs = {}
    try:
        gate, gate_c = os.path.join(tmp, "gate"), os.path.join(tmp, "gate_c")
        os.mkdir(gate)
        os.mkdir(gate_c)
        pa, pb, pc, pn = free_port(), free_port(), free_port(), free_port()
        common = ["serve", "-m", model, "--parallel", "2", "--threads", "1", "--shutdown-grace", "5"]
        logs = {n: open(os.path.join(tmp, n + ".log"), "w") for n in ("a", "b", "c", "nginx")}
        for name, port, g in (("a", pa, gate), ("c", pc, gate_c)):
            env = dict(os.environ, VT_BACKEND_PATH=plugin_dir, VT_TEST_STEP_GATE=g)
            procs[name] = subprocess.Popen([vt] + common + ["--port", str(port), "--backend", "step_gate"], env=env,
                                           stdout=logs[name], stderr=subprocess.STDOUT)
        procs["b"] = subprocess.Popen([vt] + common + ["--port", str(pb)], stdout=logs["b"], stderr=subprocess.STDOUT)
        conf = os.path.join(tmp, "nginx.conf")
        with open(conf, "w") as f:
            f.write(nginx_config(template, tmp, pn, [pa, pb, pc]))
        procs["nginx"] = subprocess.Popen([nginx, "-p", tmp, "-c", conf, "-e", os.path.join(tmp, "error.log")],
                                          stdout=logs["nginx"], stderr=subprocess.STDOUT)
        if not check(wait_for(lambda: healthy(pa) and healthy(pb) and healthy(pc)), "the replicas are not healthy"):
            return report(tmp)
        if not check(wait_for(lambda: not refuses(pn)), "nginx is not listening"):
            return report(tmp)
        up_a, up_b, up_c = ("127.0.0.1:%d" % p for p in (pa, pb, pc))

        # 0. A body over the proxy's limit: nginx's own 413, in vt's JSON error shape. The head
        # alone, declaring 5 MiB and asking first (Expect): nginx answers without the body.
        with socket.create_connection(("127.0.0.1", pn), timeout=HANG_GUARD) as sock:
            sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                         b"Content-Length: %d\r\nExpect: 100-continue\r\nConnection: close\r\n\r\n" % (5 << 20))
            answer = b""
            while True:
                piece = sock.recv(65536)
                if not piece:
                    break
                answer += piece
        head, _, text = answer.decode("utf-8", "replace").partition("\r\n\r\n")
        ok = head.startswith("HTTP/1.1 413") and "application/json" in head.lower()
        try:
            ok = ok and json.loads(text)["error"]["type"] == "invalid_request_error"
        except (ValueError, KeyError, TypeError):
            ok = False
        check(ok, "a body over nginx's limit: %s" % answer[:300])

        # 1. Affinity: which replica each key reaches, twice.
        owner = {}
        for i in range(36):
            key = "session-%d" % i
            seen = set()
            for _ in range(2):
                status, headers, _ = completion(pn, key)
                check(status == 200, "%s: status %s" % (key, status))
                seen.add(headers.get("x-upstream"))
            check(len(seen) == 1, "%s went to several replicas: %s" % (key, seen))
            owner[key] = seen.pop()
        keys_a = [k for k, u in owner.items() if u == up_a]
        keys_b = [k for k, u in owner.items() if u == up_b]
        keys_c = [k for k, u in owner.items() if u == up_c]
        spread = "%d on A, %d on B, %d on C" % (len(keys_a), len(keys_b), len(keys_c))
        print("affinity: 36 keys, each on one replica: " + spread)
        if not check(len(keys_a) >= 3 and keys_b and keys_c, "keys do not spread: " + spread):
            return report(tmp)

        # 1b. A web page: one served through this proxy (its Origin names the host the proxy was
        # reached at, which the config passes on as X-Forwarded-Host) may POST; another origin's
        # page may not, though it needs no preflight for a plain-text POST.
        body = {"prompt": "Once upon a time", "max_tokens": 1, "temperature": 0}
        for origin, want in (("http://127.0.0.1:%d" % pn, 200), ("https://elsewhere.example", 403)):
            status, _, text = request(pn, "POST", "/v1/completions", body, {"Origin": origin})
            check(status == want, "a page of %s through the proxy: %s %s" % (origin, status, text[:200]))

        # 2. Hold A's engine, stream to A until a forward is held, keep B busy.
        reached = hold(gate)
        streams = [None] * 2
        threads = [threading.Thread(target=stream_outcome, args=(pn, keys_a[i], streams, i)) for i in range(2)]
        busy = [None] * 4

        def busy_b(i):
            try:
                busy[i] = completion(pn, keys_b[i % len(keys_b)], max_tokens=16)[0]
            except Exception as e:
                busy[i] = repr(e)
        threads += [threading.Thread(target=busy_b, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()

        check(wait_for(lambda: (gate_count(gate) or 0) > reached), "no stream reached A's engine")

        # 3. SIGTERM A mid-stream; once it refuses, A's keys go to B.
        procs["a"].send_signal(signal.SIGTERM)
        check(wait_for(lambda: refuses(pa)), "A still accepts after SIGTERM")
        moved = [None] * 6

        def moved_request(i):
            try:
                status, headers, body = completion(pn, keys_a[i % len(keys_a)], max_tokens=4)
                moved[i] = (status, headers.get("x-upstream", ""))
            except Exception as e:
                moved[i] = (None, repr(e))
        mthreads = [threading.Thread(target=moved_request, args=(i,)) for i in range(len(moved))]
        for t in mthreads:
            t.start()
        for t in mthreads:
            t.join(HANG_GUARD * 2)
        print("after A's SIGTERM, requests with A's keys answered by: %s" % [m and m[1] for m in moved])
        for status, up in [m or (None, "no answer: hung") for m in moved]:
            check(status == 200 and last_upstream(up) in (up_b, up_c),
                  "a request with A's key after A's SIGTERM: status %s from %s (expected 200 from B or C)" % (status, up))

        # 4. Open A's gate: its streams drain and end cleanly, A exits 0.
        os.remove(os.path.join(gate, "allow"))
        for t in threads:
            t.join(HANG_GUARD * 2)
            check(not t.is_alive(), "a request through nginx hangs")
        for s in streams:
            print("stream on A: status %s via %s, last event: %s" % (s[0], s[1], s[3]) if s else "stream: none")
            status, up, clean, last = s or (None, "", False, "no outcome")
            check(status == 200 and clean, "a stream on A did not end cleanly: status %s from %s, last event %s"
                  % (status, up, last))
        check(all(b == 200 for b in busy), "requests to B during the run: %s" % busy)
        try:
            rc = procs["a"].wait(HANG_GUARD)
        except subprocess.TimeoutExpired:
            rc = "still running"
        check(rc == 0, "A after SIGTERM: exit %s (expected 0 after its drain)" % rc)

        # 5. C is killed (SIGKILL) while its engine holds requests: nginx sees
        # the connections cut and replays those requests on B, the survivor.
        reached_c = hold(gate_c)
        cut = [None] * 3

        def cut_request(i):
            try:
                status, headers, _ = completion(pn, keys_c[i % len(keys_c)], max_tokens=4)
                cut[i] = (status, headers.get("x-upstream", ""))
            except Exception as e:
                cut[i] = (None, repr(e))
        cthreads = [threading.Thread(target=cut_request, args=(i,)) for i in range(len(cut))]
        for t in cthreads:
            t.start()
        check(wait_for(lambda: (gate_count(gate_c) or 0) > reached_c), "no request reached C's engine")
        procs["c"].kill()
        procs["c"].wait()
        for t in cthreads:
            t.join(HANG_GUARD * 2)
        print("after C's SIGKILL, requests C was running answered by: %s" % [c and c[1] for c in cut])
        for status, up in [c or (None, "no answer: hung") for c in cut]:
            check(status == 200 and last_upstream(up) == up_b,
                  "a request C held when killed: status %s from %s (expected 200 from B)" % (status, up))

        # 6. B holds no KV block and no request once everything has answered.
        def metric(text, name):
            m = re.search(r"^%s (\d+)$" % name, text, re.M)
            return int(m.group(1)) if m else None

        def b_idle():
            text = request(pb, "GET", "/metrics")[2]
            return all(metric(text, n) == 0 for n in ("vt_kv_blocks_used", "vt_requests_running",
                                                      "vt_requests_waiting"))
        print("A exited %s; B during the run: %s" % (rc, busy))
        if not check(wait_for(b_idle), "B's /metrics does not show every block free"):
            failures.append(request(pb, "GET", "/metrics")[2][:2000])

        # 7. Every replica gone: nginx's own answer is a 503 with Retry-After in vt's JSON error shape.
        procs["b"].send_signal(signal.SIGTERM)
        procs["b"].wait(HANG_GUARD)
        status, headers, text = completion(pn, "after-all-gone")
        try:
            shape = json.loads(text)["error"]["type"] == "server_error"
        except (ValueError, KeyError, TypeError):
            shape = False
        check(status == 503 and "retry-after" in headers and shape,
              "no replica left: %s %s %s" % (status, headers, text[:200]))
    finally:
        for name, p in procs.items():
            if p.poll() is None:
                p.send_signal(signal.SIGQUIT if name == "nginx" else signal.SIGTERM)
                try:
                    p.wait(10)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
    return report(tmp)


def report(tmp):
    for f in failures:
        print("check_nginx_replicas: %s" % f)
    if failures:
        for n in ("a.log", "b.log", "error.log"):
            path = os.path.join(tmp, n)
            if os.path.exists(path):
                print("---- %s (tail)\n%s" % (n, open(path).read()[-3000:]))
    print("check_nginx_replicas: %s" % ("FAILED" if failures else "OK"))
    shutil.rmtree(tmp, ignore_errors=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
