#!/usr/bin/env python3
"""check_systemd_unit.py — conf/systemd/vt-serve.service passes systemd-analyze verify
and agrees with vt serve.

systemd-analyze verify checks the unit's syntax, every directive against this
systemd, and that ExecStart's binary exists; the unit names /usr/bin/vt, so
the copy verified names the build's vt instead. verify exits 0 even on an
unknown directive (it only warns), so any output at all is a failure.
Then what verify cannot know: the unit reads /etc/vt/vt-serve.ini with
--config, that ini loads in this vt (`vt config --config`), TimeoutStopSec
exceeds the ini's [server] shutdown_grace (a stop never SIGKILLs a drain),
the user is unprivileged (DynamicUser=yes), the calibration cache has a
writable home (CacheDirectory=vt, XDG_CACHE_HOME=%C), the sandboxing and
restart options are there, and nothing enables the unit but the operator.

Usage: check_systemd_unit.py UNIT INI VT_BINARY
Exit: 0 = OK, 1 = a check failed, 77 = skipped with the reason printed (no
systemd-analyze, or it cannot verify even a trivial unit here).
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)


def verify(path):
    r = subprocess.run(["systemd-analyze", "verify", "--man=no", path], capture_output=True, text=True, timeout=60)
    return r.returncode, (r.stdout + r.stderr).strip()


def main():
    unit_path, ini_path, vt = sys.argv[1:4]
    if not shutil.which("systemd-analyze"):
        print("SKIP: systemd-analyze is not installed (Debian package systemd)")
        return 77
    with open(unit_path) as f:
        unit = f.read()
    tmp = tempfile.mkdtemp(prefix="vt-unit-")
    try:
        probe = os.path.join(tmp, "vt-probe.service")
        with open(probe, "w") as f:
            f.write("[Service]\nExecStart=/bin/true\n")
        rc, out = verify(probe)
        if rc != 0 or out:
            print("SKIP: systemd-analyze verify cannot run here (a trivial unit fails: %s)" % out)
            return 77
        copy = os.path.join(tmp, "vt-serve.service")
        with open(copy, "w") as f:
            f.write(unit.replace("ExecStart=/usr/bin/vt ", "ExecStart=%s " % os.path.abspath(vt)))
        rc, out = verify(copy)
        check(rc == 0 and not out, "systemd-analyze verify: exit %d:\n%s" % (rc, out))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    keys = {}
    section = None
    for line in unit.splitlines():
        line = line.strip()
        if line.startswith("["):
            section = line.strip("[]")
        elif "=" in line and not line.startswith("#"):
            k, v = line.split("=", 1)
            keys.setdefault((section, k), v)
    svc = lambda k: keys.get(("Service", k))
    exec_start = svc("ExecStart") or ""
    check(exec_start.startswith("/usr/bin/vt serve ") and "--config /etc/vt/vt-serve.ini" in exec_start,
          "ExecStart must run /usr/bin/vt serve --config /etc/vt/vt-serve.ini: %s" % exec_start)
    for k, v in [("DynamicUser", "yes"), ("NoNewPrivileges", "yes"), ("ProtectSystem", "strict"),
                 ("ProtectHome", "yes"), ("PrivateTmp", "yes"), ("Restart", "on-failure")]:
        check(svc(k) == v, "[Service] %s=%s expected, got %s" % (k, v, svc(k)))
    check(svc("User") is None, "User=%s: DynamicUser=yes is the unprivileged user" % svc("User"))
    # backend = auto keeps its calibration in $XDG_CACHE_HOME/vt: under
    # ProtectSystem=strict only a CacheDirectory= there is writable
    env = [line.split("=", 1)[1].strip() for line in unit.splitlines() if line.strip().startswith("Environment=")]
    check(svc("CacheDirectory") == "vt" and "XDG_CACHE_HOME=%C" in env,
          "CacheDirectory=vt with Environment=XDG_CACHE_HOME=%%C expected (the calibration cache), got %s, %s"
          % (svc("CacheDirectory"), env))
    check(keys.get(("Install", "WantedBy")) == "multi-user.target", "[Install] WantedBy=multi-user.target expected")

    r = subprocess.run([vt, "config", "--config", ini_path], capture_output=True, text=True, timeout=60)
    check(r.returncode == 0, "vt config --config %s: %s" % (ini_path, r.stderr.strip()))
    m = re.search(r"^server\.shutdown_grace\s*=\s*(\d+)", r.stdout, re.M)
    grace = int(m.group(1)) if m else None
    stop = svc("TimeoutStopSec")
    check(grace is not None and stop is not None and stop.isdigit() and int(stop) > grace,
          "TimeoutStopSec %s must exceed the ini's shutdown_grace %s" % (stop, grace))

    for f in failures:
        print("check_systemd_unit: %s" % f)
    print("check_systemd_unit: %s: %s" % (unit_path, "FAILED" if failures else "OK"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
