#!/usr/bin/env python3
"""deploy/krew/gpuquota.yaml against what krew requires of a plugin manifest
(the checks of krew's ValidatePlugin: apiVersion, kind, a safe name equal to
the file's, a one-line shortDescription, a v-prefixed semantic version,
platforms each with a selector on os/arch only, uri, a 64-hex sha256, bin
and well-formed files) and against this project's release (the version of
the gpuquota binary, the archive naming of scripts/release-archive.sh).

Then, without network, what `kubectl krew install --manifest M --archive A`
does with this platform's entry: the archive made by
scripts/release-archive.sh from the gpuquota binary, its sha256 written into
the manifest, the files moved as the manifest says, bin linked into a bin/
folder under its own name; run from there as kubectl runs a plugin, the
binary must be the plugin (cli/main.c picks that from argv[0]).

With --release, the same for what `make release` wrote into RELEASE-DIR
(scripts/release.sh): its gpuquota.yaml passes the same validation, each
platform's archive is there with the manifest's sha256 and holds the one
binary of that platform's architecture, and this machine's platform installs
from it as krew installs it and is the plugin, at the release's version.

Usage: check.py MANIFEST GPUQUOTA WORK-DIR
       check.py --release RELEASE-DIR WORK-DIR
"""
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tarfile

import yaml

root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
failures = []


def check(cond, what):
    print(("ok   - " if cond else "FAIL - ") + what)
    if not cond:
        failures.append(what)


def validate(m, name, want_version):
    """krew's ValidatePlugin, then this project's conventions."""
    check(m.get("apiVersion") == "krew.googlecontainertools.github.com/v1alpha2",
          "apiVersion is krew's v1alpha2")
    check(m.get("kind") == "Plugin", "kind is Plugin")
    check(re.fullmatch(r"[\w-]+", name) is not None, f"the plugin name {name!r} is safe")
    check(m.get("metadata", {}).get("name") == name, "metadata.name is the manifest's file name")
    spec = m.get("spec") or {}
    short = spec.get("shortDescription") or ""
    check(short != "" and "\n" not in short and "\r" not in short, "a one-line shortDescription")
    version = spec.get("version") or ""
    check(re.fullmatch(r"v\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?", version) is not None,
          f"spec.version {version!r} is a v-prefixed semantic version")
    check(version == want_version, f"spec.version is the binary's version ({want_version})")
    check(str(spec.get("homepage", "")).startswith("https://"), "a homepage")
    platforms = spec.get("platforms") or []
    check(len(platforms) > 0, "at least one platform")
    seen = set()
    for p in platforms:
        sel = p.get("selector") or {}
        labels = sel.get("matchLabels") or {}
        exprs = sel.get("matchExpressions")
        check(bool(labels) or bool(exprs), "each platform has a non-empty selector")
        keys = set(labels) | {e.get("key") for e in (exprs or [])}
        check(keys <= {"os", "arch"}, f"selector keys {sorted(keys)} are os and arch only")
        plat = (labels.get("os"), labels.get("arch"))
        check(plat not in seen, f"platform {plat} listed once")
        seen.add(plat)
        want_uri = (f"https://github.com/gpuquota/gpuquota/releases/download/{version}/"
                    f"gpuquota-{version}-{plat[0]}-{plat[1]}.tar.gz")
        check(p.get("uri") == want_uri, f"{plat}: uri is the release archive {want_uri}")
        check(re.fullmatch(r"[a-f0-9]{64}", str(p.get("sha256", ""))) is not None,
              f"{plat}: sha256 is 64 lower-case hex digits")
        check(p.get("bin") == "kubectl-gpuquota", f"{plat}: bin is kubectl-gpuquota")
        files = p.get("files")
        check(files is None or (len(files) > 0 and all(f.get("from") and f.get("to") for f in files)),
              f"{plat}: files are unset or each has from and to")
        check(any(f.get("from") == "gpuquota" and f.get("to") == p.get("bin") for f in files or []),
              f"{plat}: the archive's gpuquota becomes bin")


def local_platform(m):
    """The manifest's entry for this machine's platform, or None."""
    arch = {"x86_64": "amd64", "aarch64": "arm64"}.get(os.uname().machine, os.uname().machine)
    plat = [p for p in m["spec"]["platforms"]
            if p["selector"]["matchLabels"] == {"os": os.uname().sysname.lower(), "arch": arch}]
    check(len(plat) == 1, f"the manifest has this machine's platform (linux/{arch})")
    return plat[0] if plat else None


def archive_of(p, where):
    """The platform's archive in where, checked against its sha256; its path."""
    archive = os.path.join(where, os.path.basename(p["uri"]))
    check(os.path.isfile(archive), f"the archive {os.path.basename(archive)} is there")
    if os.path.isfile(archive):
        with open(archive, "rb") as f:
            check(hashlib.sha256(f.read()).hexdigest() == p["sha256"],
                  f"{os.path.basename(archive)}: the manifest's sha256 is the archive's")
    return archive


def elf_machine_of(archive):
    """e_machine of the archive's gpuquota: 0x3e x86-64, 0xb7 AArch64."""
    with tarfile.open(archive) as t:
        head = t.extractfile("gpuquota").read(20)
    return head[:4] == b"\x7fELF" and int.from_bytes(head[18:20], "little")


def install(p, archive, work, name, want_version):
    """krew install --manifest --archive: unpack, the files moves, bin linked
    into a bin/ folder under kubectl-NAME; then run it as kubectl does."""
    store = os.path.join(work, "store")
    with tarfile.open(archive) as t:
        members = t.getmembers()
        check(all(x.isfile() and "/" not in x.name and x.name != ".." for x in members),
              "the archive holds plain files at its top only")
        if hasattr(tarfile, "data_filter"):
            t.extractall(store, filter="data")
        else:
            t.extractall(store)
    for op in p["files"]:
        os.rename(os.path.join(store, op["from"]), os.path.join(store, op["to"]))
    binp = os.path.join(store, p["bin"])
    check(os.access(binp, os.X_OK), "bin is an executable file after the moves")
    if not os.access(binp, os.X_OK):
        return
    bindir = os.path.join(work, "bin")
    os.makedirs(bindir)
    link = os.path.join(bindir, "kubectl-" + name)
    os.symlink(binp, link)
    out = subprocess.run([link, "--help"], capture_output=True, text=True)
    check(out.stdout.startswith("usage: kubectl gpuquota COMMAND"),
          "run as kubectl runs the plugin, it is `kubectl gpuquota`")
    out = subprocess.run([binp, "top", "--help"], capture_output=True, text=True)
    check("kubectl gpuquota top" in out.stdout + out.stderr,
          "bin itself, under its own name, is the plugin too")
    out = subprocess.run([link, "version"], capture_output=True, text=True)
    check(out.stdout.strip() == "gpuquota " + want_version[1:],
          f"the installed plugin is version {want_version}")


def finish():
    if failures:
        print(f"{len(failures)} check(s) failed")
        sys.exit(1)
    print("krew manifest: ok")


def check_release(release, work):
    """What make release wrote: the filled manifest and every platform's archive."""
    with open(os.path.join(root, "CMakeLists.txt")) as f:
        version = "v" + re.search(r"project\(gpuquota VERSION ([0-9.]+)", f.read()).group(1)
    with open(os.path.join(release, "gpuquota.yaml")) as f:
        m = yaml.safe_load(f)
    validate(m, "gpuquota", version)
    machines = {"amd64": 0x3E, "arm64": 0xB7}
    for p in m["spec"]["platforms"]:
        arch = p["selector"]["matchLabels"].get("arch")
        check(p["sha256"] != "0" * 64, f"{arch}: the sha256 is filled in")
        archive = archive_of(p, release)
        if os.path.isfile(archive):
            check(elf_machine_of(archive) == machines.get(arch),
                  f"{arch}: the archive's gpuquota is a linux/{arch} binary")
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    p = local_platform(m)
    if p and os.path.isfile(os.path.join(release, os.path.basename(p["uri"]))):
        install(p, os.path.join(release, os.path.basename(p["uri"])), work, "gpuquota", version)
    finish()


if sys.argv[1] == "--release":
    check_release(sys.argv[2], sys.argv[3])
    sys.exit(0)
manifest_path, gq, work = sys.argv[1:4]
version = "v" + subprocess.run([gq, "version"], capture_output=True, text=True,
                               check=True).stdout.split()[1]
name = os.path.splitext(os.path.basename(manifest_path))[0]
with open(manifest_path) as f:
    validate(yaml.safe_load(f), name, version)

# krew install --manifest --archive, for this machine's platform.
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
filled = subprocess.run([os.path.join(root, "scripts/release-archive.sh"), gq, work, manifest_path],
                        capture_output=True, text=True)
check(filled.returncode == 0, "release-archive.sh makes the archive and fills the manifest"
      + ("" if filled.returncode == 0 else ": " + filled.stderr.strip()))
m = yaml.safe_load(filled.stdout)
validate(m, name, version)
p = local_platform(m)
if p:
    archive = archive_of(p, work)
    if os.path.isfile(archive):
        install(p, archive, work, name, version)
finish()
