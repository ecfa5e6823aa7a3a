#!/usr/bin/env python3
"""check_deb_package.py — `cpack -G DEB` makes the vt-llm, libvt0 and libvt-dev packages.

Builds the packages from the build folder into a temporary folder, then checks
with dpkg-deb what an operator gets: each package's name and Depends (the
Debian libraries the binaries link, the pinned libvt/vt of libvt-dev), the
file list (/usr/bin/vt, every built backend in /usr/lib/vt, the headers,
vt.pc, the CMake package, the systemd unit, the ini files as conffiles, each
package's /usr/share/doc/PACKAGE/copyright), and
nothing outside /usr, /etc and /lib/systemd; the maintainer scripts run against
a scratch root (what a purge removes and keeps). Then it extracts all three into a
scratch root (dpkg-deb -x: no root rights needed) and runs the extracted vt
with an empty environment: `vt version`, `vt backends` (every backend loaded
from <root>/usr/lib/vt, found relative to the binary itself), `vt serve
--help` and `vt compare` (the default model, cached under a temporary HOME).

Usage: check_deb_package.py BUILD_DIR SOURCE_DIR
Exit: 0 = OK, 1 = a check failed, 77 = skipped (the reason is printed: no
dpkg-deb or cpack on this machine), which ctest reports as a skip.
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
    return cond


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=240, **kw)


def main():
    build, source = sys.argv[1], sys.argv[2]
    for tool in ("dpkg-deb", "cpack"):
        if not shutil.which(tool):
            print("SKIP: %s is not installed (Debian package dpkg / cmake); the .deb is not checked" % tool)
            return 77
    version = None
    with open(os.path.join(build, "CMakeCache.txt")) as f:
        for line in f:
            if line.startswith("CMAKE_PROJECT_VERSION:"):
                version = line.strip().split("=", 1)[1]
    backends = sorted(n for n in os.listdir(os.path.join(build, "lib", "vt")) if n.startswith("libvt-backend-"))
    headers = sorted(os.listdir(os.path.join(source, "include", "vt")))
    serve_built = "usage" in run([os.path.join(build, "bin", "vt"), "serve", "--help"]).stdout.lower()

    tmp = tempfile.mkdtemp(prefix="vt-deb-")
    try:
        out = run(["cpack", "-G", "DEB", "--config", os.path.join(build, "CPackConfig.cmake"), "-B", tmp], cwd=build)
        if not check(out.returncode == 0, "cpack failed:\n%s%s" % (out.stdout, out.stderr)):
            return report()
        debs = {}
        for name in ("vt-llm", "libvt0", "libvt-dev"):
            path = os.path.join(tmp, "%s_%s_amd64.deb" % (name, version))
            if not os.path.exists(path):
                found = [n for n in os.listdir(tmp) if n.startswith(name + "_") and n.endswith(".deb")]
                path = os.path.join(tmp, found[0]) if found else None
            if check(path is not None, "no package %s in %s" % (name, os.listdir(tmp))):
                debs[name] = path
        if len(debs) != 3:
            return report()

        def field(deb, f):
            return run(["dpkg-deb", "-f", deb, f]).stdout.strip()

        def files(deb):
            lines = run(["dpkg-deb", "-c", deb]).stdout.splitlines()
            return {ln.split()[5].lstrip(".") for ln in lines if not ln.split()[5].endswith("/")}

        for name, deb in debs.items():
            check(field(deb, "Package") == name, "%s: Package is %r" % (deb, field(deb, "Package")))
            check(field(deb, "Version") == version, "%s: Version %r, project %s" % (name, field(deb, "Version"), version))
            info = run(["dpkg-deb", "-I", deb])
            check(info.returncode == 0, "dpkg-deb -I %s failed: %s" % (deb, info.stderr))

        # Debian's own package vt (genomics tools) ships /usr/bin/vt too: never both
        check(field(debs["vt-llm"], "Conflicts") == "vt", "vt-llm: Conflicts is %r" % field(debs["vt-llm"], "Conflicts"))
        check(field(debs["vt-llm"], "Replaces") == "vt", "vt-llm: Replaces is %r" % field(debs["vt-llm"], "Replaces"))
        vt_deps = field(debs["vt-llm"], "Depends")
        want = ["libc6", "libffi8", "libinih1"]
        if serve_built:
            want += ["libmicrohttpd12", "libjansson4"]
        if "libvt-backend-onednn.so" in backends:
            want += ["libdnnl"]
        for lib in want:
            check(lib in vt_deps, "vt-llm: Depends lacks %s: %s" % (lib, vt_deps))
        check("libc6" in field(debs["libvt0"], "Depends"), "libvt0: Depends lacks libc6")
        # named after its SONAME; it takes the place of the earlier package "libvt"
        for f in ("Conflicts", "Replaces"):
            check(field(debs["libvt0"], f) == "libvt", "libvt0: %s is %r" % (f, field(debs["libvt0"], f)))
        dev_deps = field(debs["libvt-dev"], "Depends")
        for pin in ("libvt0 (= %s)" % version, "vt-llm (= %s)" % version):
            check(pin in dev_deps, "libvt-dev: Depends lacks %s: %s" % (pin, dev_deps))

        vt_files = files(debs["vt-llm"])
        for f in ["/usr/bin/vt", "/etc/vt/vt.ini", "/etc/vt/vt-serve.ini", "/lib/systemd/system/vt-serve.service"] + [
                "/usr/lib/vt/" + b for b in backends]:
            check(f in vt_files, "vt-llm: no %s in the package" % f)
        conf = run(["dpkg-deb", "--info", debs["vt-llm"], "conffiles"]).stdout.split()
        check(sorted(conf) == ["/etc/vt/vt-serve.ini", "/etc/vt/vt.ini"], "vt-llm: conffiles %s" % conf)
        # Maintainer scripts: present, executable, valid sh, and none enables the unit.
        ctl = os.path.join(tmp, "control")
        run(["dpkg-deb", "-e", debs["vt-llm"], ctl])
        for script in ("postinst", "prerm", "postrm"):
            path = os.path.join(ctl, script)
            if check(os.path.exists(path), "vt-llm: no %s" % script):
                check(os.access(path, os.X_OK), "vt-llm: %s is not executable" % script)
                check(run(["sh", "-n", path]).returncode == 0, "vt-llm: %s is not valid sh" % script)
                check(not re.search(r"(systemctl|deb-systemd-helper) +enable", open(path).read()),
                      "vt-llm: %s enables the service" % script)
        lib_files = files(debs["libvt0"])
        check("/usr/lib/libvt.so.0" in lib_files, "libvt0: no libvt.so.0: %s" % lib_files)
        dev_files = files(debs["libvt-dev"])
        for f in ["/usr/include/vt/" + h for h in headers] + [
                "/usr/lib/pkgconfig/vt.pc", "/usr/lib/cmake/vt/vtConfig.cmake", "/usr/lib/cmake/vt/vtTargets.cmake",
                "/usr/share/doc/libvt-dev/examples/embed_batch.c",
                "/usr/share/doc/libvt-dev/examples/example-backend/example_backend.c",
                "/usr/share/doc/libvt-dev/examples/example-backend/CMakeLists.txt"]:
            check(f in dev_files, "libvt-dev: no %s in the package" % f)
        for name, got in (("vt-llm", vt_files), ("libvt0", lib_files), ("libvt-dev", dev_files)):
            for doc in ("copyright", "changelog.gz"):
                check("/usr/share/doc/%s/%s" % (name, doc) in got, "%s: no /usr/share/doc/%s/%s" % (name, name, doc))
        # what vt serve --help, the ini and the unit point to, and the manual
        for f in ("/usr/share/man/man1/vt.1.gz", "/usr/share/doc/vt-llm/README.md",
                  "/usr/share/doc/vt-llm/docs/SERVING.md", "/usr/share/doc/vt-llm/docs/COMMANDS.md",
                  "/usr/share/doc/vt-llm/examples/nginx/vt.conf", "/usr/share/doc/vt-llm/examples/k8s/vt-serve.yaml"):
            check(f in vt_files, "vt-llm: no %s in the package" % f)
        for f in vt_files | lib_files | dev_files:
            check(f.startswith(("/usr/bin/", "/usr/lib/", "/usr/include/", "/etc/vt/", "/lib/systemd/system/",
                                "/usr/share/doc/", "/usr/share/man/"))
                  and not f.startswith("/usr/local"), "file outside the package layout: %s" % f)

        check_maintainer_scripts(tmp, ctl)

        root = os.path.join(tmp, "root")
        for deb in debs.values():
            check(run(["dpkg-deb", "-x", deb, root]).returncode == 0, "dpkg-deb -x %s failed" % deb)
        # the changelog (a native package's) names this version first
        changelog = os.path.join(root, "usr", "share", "doc", "vt-llm", "changelog.gz")
        if os.path.exists(changelog):
            import gzip
            first = gzip.open(changelog, "rt").readline()
            check(first.startswith("vt (%s) " % version), "changelog starts %r, not version %s" % (first, version))
        # libvt0 tells packages linking it what to depend on, and refreshes the
        # linker's cache through dpkg's trigger; installed binaries are stripped
        members = run(["sh", "-c", 'dpkg-deb --ctrl-tarfile "$1" | tar -t', "sh", debs["libvt0"]]).stdout.split()
        for member in ("./shlibs", "./triggers"):
            check(member in members, "libvt0: no %s in its control files: %s" % (member, members))
        vt = os.path.join(root, "usr", "bin", "vt")
        if shutil.which("readelf"):
            sections = run(["readelf", "-S", vt])
            check(sections.returncode == 0 and ".symtab" not in sections.stdout, "vt-llm: /usr/bin/vt is not stripped")
        home = os.path.join(tmp, "home")
        os.mkdir(home)
        env = {"HOME": home}  # nothing else: no PATH, no VT_* variable
        out = run([vt, "version"], env=env)
        check(out.returncode == 0 and out.stdout.startswith("vt " + version), "vt version: %s%s" % (out.stdout, out.stderr))
        out = run([vt, "backends"], env=env)
        for b in backends:
            check("%s/usr/lib/vt/%s" % (root, b) in out.stdout and out.returncode == 0,
                  "vt backends does not load %s from the extracted root:\n%s%s" % (b, out.stdout, out.stderr))
        if serve_built:
            out = run([vt, "serve", "--help"], env=env)
            check(out.returncode == 0 and out.stdout.startswith("usage: vt serve"), "vt serve --help: %s" % out.stderr)
        out = run([vt, "compare"], env=env, cwd=tmp)
        check(out.returncode == 0 and "verdict:" in out.stdout, "vt compare failed:\n%s%s" % (out.stdout, out.stderr))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return report()


def check_maintainer_scripts(tmp, ctl):
    """postinst records the unit's enablement links, so a purge removes them;
    postrm purge removes those an administrator made later too, and the
    calibration cache, and keeps /var/lib/vt (a model put there is the
    administrator's). Run against a scratch DPKG_ROOT, systemctl and
    deb-systemd-helper replaced by stubs that log their arguments: nothing
    touches this machine's systemd."""
    fake = os.path.join(tmp, "dpkg-root")
    stubs = os.path.join(tmp, "stubs")
    log = os.path.join(tmp, "stub-calls.log")
    os.makedirs(stubs)
    for tool in ("deb-systemd-helper", "systemctl"):
        with open(os.path.join(stubs, tool), "w") as f:
            f.write('#!/bin/sh\necho "%s $*" >> "%s"\n' % (tool, log))
        os.chmod(os.path.join(stubs, tool), 0o755)
    wants = os.path.join(fake, "etc", "systemd", "system", "multi-user.target.wants")
    os.makedirs(wants)
    link = os.path.join(wants, "vt-serve.service")
    os.symlink("/lib/systemd/system/vt-serve.service", link)
    for d in ("var/cache/private/vt", "var/lib/private/vt"):
        os.makedirs(os.path.join(fake, d))
    os.symlink("private/vt", os.path.join(fake, "var", "cache", "vt"))
    os.symlink("private/vt", os.path.join(fake, "var", "lib", "vt"))
    open(os.path.join(fake, "var", "cache", "private", "vt", "calibration-x.txt"), "w").close()
    model = os.path.join(fake, "var", "lib", "private", "vt", "model.gguf")
    open(model, "w").close()
    env = {"PATH": stubs + ":/usr/bin:/bin", "DPKG_ROOT": fake}
    check(run(["sh", os.path.join(ctl, "postinst"), "configure", ""], env=env).returncode == 0, "postinst failed")
    check(run(["sh", os.path.join(ctl, "postrm"), "purge"], env=env).returncode == 0, "postrm purge failed")
    calls = open(log).read() if os.path.exists(log) else ""
    check("deb-systemd-helper update-state vt-serve.service" in calls,
          "postinst does not record the unit's links (deb-systemd-helper update-state): %r" % calls)
    check("deb-systemd-helper purge vt-serve.service" in calls, "postrm purge does not purge the unit: %r" % calls)
    check(not os.path.lexists(link), "postrm purge leaves the enablement link %s" % link)
    check(not os.path.lexists(os.path.join(fake, "var", "cache", "vt"))
          and not os.path.exists(os.path.join(fake, "var", "cache", "private", "vt")), "postrm purge leaves the cache")
    check(os.path.exists(model), "postrm purge deleted /var/lib/vt, where the administrator's model lives")


def report():
    for f in failures:
        print("check_deb_package: %s" % f)
    print("check_deb_package: %s" % ("FAILED" if failures else "OK"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
