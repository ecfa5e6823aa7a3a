#!/usr/bin/env python3
"""check_k8s_manifest.py — the example Kubernetes manifest parses and agrees with vt.

No Kubernetes schema checker is packaged in Debian 12 or npm's registry in a
form CI can use offline, so this parses conf/k8s/vt-serve.yaml as YAML and
checks what a deployment depends on: a Deployment and a Service that select
the same pods, readiness and startup probes on GET /health at the port the
server listens on, a termination grace period longer than the server's own
drain, that it runs unprivileged (not root, no capabilities, a read-only root
filesystem but for a cache volume), and — when `vt serve` is built — that every option in the container's
arguments is one `vt serve --help` documents, and the metrics its comments
name for scaling are ones core/server/serve_metrics.c exports.

Usage: check_k8s_manifest.py MANIFEST [VT_BINARY]   (exit 0 = OK, 1 = a check failed)
"""
import subprocess
import sys

import yaml

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)


def arg_value(args, flag):
    return args[args.index(flag) + 1] if flag in args and args.index(flag) + 1 < len(args) else None


def main():
    path = sys.argv[1]
    vt = sys.argv[2] if len(sys.argv) > 2 else None
    with open(path) as f:
        docs = [d for d in yaml.safe_load_all(f) if d]
    kinds = {d.get("kind"): d for d in docs}
    check(set(kinds) == {"Deployment", "Service"}, "documents: %s (expected a Deployment and a Service)" % list(kinds))
    dep, svc = kinds.get("Deployment", {}), kinds.get("Service", {})
    pod = dep.get("spec", {}).get("template", {})
    labels = pod.get("metadata", {}).get("labels", {})
    selector = dep.get("spec", {}).get("selector", {}).get("matchLabels", {})
    check(selector and all(labels.get(k) == v for k, v in selector.items()), "Deployment selector does not match its pods")
    check(svc.get("spec", {}).get("selector") == selector, "Service selector differs from the Deployment's")

    containers = pod.get("spec", {}).get("containers", [])
    check(len(containers) == 1, "expected one container, got %d" % len(containers))
    c = containers[0] if containers else {}
    args = [str(a) for a in c.get("args", [])]
    check(args[:1] == ["serve"], "container args must start with `serve`: %s" % args[:1])
    port = arg_value(args, "--port")
    ports = {p.get("name"): p.get("containerPort") for p in c.get("ports", [])}
    check(port is not None and ports.get("http") == int(port), "containerPort http %s != --port %s" % (ports.get("http"), port))
    for probe in ("readinessProbe", "startupProbe"):
        get = c.get(probe, {}).get("httpGet", {})
        check(get.get("path") == "/health" and get.get("port") == "http", "%s must GET /health on port http" % probe)
    target = [p.get("targetPort") for p in svc.get("spec", {}).get("ports", [])]
    check(target == ["http"], "Service targetPort %s (expected the container's http port)" % target)
    grace = arg_value(args, "--shutdown-grace")
    term = pod.get("spec", {}).get("terminationGracePeriodSeconds")
    check(grace is not None and term is not None and term > float(grace),
          "terminationGracePeriodSeconds %s must exceed --shutdown-grace %s" % (term, grace))

    # It runs without privilege, as the systemd unit does: not root, no
    # capabilities, nothing writable but the cache volume XDG_CACHE_HOME names.
    pod_sc, sc = pod.get("spec", {}).get("securityContext", {}), c.get("securityContext", {})
    check(pod_sc.get("runAsNonRoot") is True and pod_sc.get("runAsUser", 0) != 0, "the pod may run as root")
    check(sc.get("allowPrivilegeEscalation") is False, "the container allows privilege escalation")
    check(sc.get("readOnlyRootFilesystem") is True, "the container's root filesystem is writable")
    check(sc.get("capabilities", {}).get("drop") == ["ALL"], "the container keeps capabilities")
    env = {e.get("name"): e.get("value") for e in c.get("env", [])}
    mounts = {m.get("mountPath"): m for m in c.get("volumeMounts", [])}
    cache = mounts.get(env.get("XDG_CACHE_HOME"))
    check(cache is not None and not cache.get("readOnly"), "XDG_CACHE_HOME is not a writable volume")

    # The metrics the manifest says to scale on are ones the server exports.
    import os
    import re
    metrics_c = os.path.join(os.path.dirname(os.path.abspath(path)), "..", "..", "core", "server", "serve_metrics.c")
    if os.path.exists(metrics_c):
        source = open(metrics_c).read()
        # a metric's name is a string literal handed to add_metric/add_histogram, or in a "# TYPE" line
        exported = set(re.findall(r"# TYPE (vt_[a-z_]+)", source)) | set(re.findall(r'"(vt_[a-z_]+)"', source))
        named = set(re.findall(r"\bvt_[a-z_]+\b", open(path).read()))
        check(named and named <= exported, "metrics named but not exported by serve_metrics.c: %s" % sorted(named - exported))

    if vt:
        help_run = subprocess.run([vt, "serve", "--help"], capture_output=True, text=True)
        text = help_run.stdout + help_run.stderr
        if help_run.returncode != 0 or "usage" not in text.lower():
            print("check_k8s_manifest: `vt serve` is not built here; option names not checked")
        else:
            for a in args:
                if a.startswith("-") and not a.lstrip("-").isdigit():
                    check(a in text, "option %s is not in `vt serve --help`" % a)

    for f in failures:
        print("check_k8s_manifest: %s: %s" % (path, f))
    print("check_k8s_manifest: %s: %s" % (path, "FAILED" if failures else "OK"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
