#!/usr/bin/env python3
"""One version everywhere: the workspace version (Cargo.toml [workspace.package]) must be the one
every checked-in manifest and generated file states. Static files only (no build); the built
artifacts' runtime versions (rl_version(), rl.__version__, `rl --version`, the jar's manifest) are
checked against the same value by scripts/test-dist.sh.

    python3 scripts/check-versions.py          check; print the version; exit 1 on any mismatch
    python3 scripts/check-versions.py --get    print the workspace version only
    python3 scripts/check-versions.py --set X.Y.Z
                                               write X.Y.Z everywhere this script checks (then run
                                               bindings-c/regen-header.sh --check and the tests)

Stdlib only: it runs where only python3 is installed.
"""
from __future__ import annotations

import json
import re
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Callable, List, Tuple

ROOT = Path(__file__).resolve().parent.parent
POM_NS = "{http://maven.apache.org/POM/4.0.0}"
SEMVER = re.compile(r"^(\d+)\.(\d+)\.(\d+)$")


def workspace_version() -> str:
    text = (ROOT / "Cargo.toml").read_text()
    section = re.search(r"^\[workspace\.package\]\n(.*?)(?=^\[|\Z)", text, re.S | re.M)
    if not section:
        sys.exit("check-versions: Cargo.toml has no [workspace.package]")
    m = re.search(r'^version\s*=\s*"([^"]+)"', section.group(1), re.M)
    if not m:
        sys.exit("check-versions: [workspace.package] has no version")
    return m.group(1)


def rel(p: Path) -> str:
    return str(p.relative_to(ROOT))


# Each finder returns (place, version found) pairs; place names the file and the field.
def crates() -> List[Tuple[str, str]]:
    """Every workspace crate inherits the version (version.workspace = true)."""
    out = []
    for toml in sorted(ROOT.glob("*/Cargo.toml")) + sorted(ROOT.glob("*/*/Cargo.toml")):
        if "target" in toml.parts or "node_modules" in toml.parts:
            continue
        # fuzz/ is cargo-fuzz's own workspace (never built or shipped as rl): not a member.
        if toml.parts[len(ROOT.parts)] == "fuzz":
            continue
        text = toml.read_text()
        if "[package]" not in text:
            continue
        m = re.search(r"^version(\.workspace)?\s*=\s*(.*)$", text, re.M)
        if m and m.group(1):
            continue
        out.append((f"{rel(toml)} [package] version (must be version.workspace = true)", m.group(2) if m else "missing"))
    return out


def pyproject() -> List[Tuple[str, str]]:
    """maturin takes the version from the crate when pyproject declares it dynamic."""
    p = ROOT / "bindings-python/pyproject.toml"
    text = p.read_text()
    project = re.search(r"^\[project\]\n(.*?)(?=^\[|\Z)", text, re.S | re.M).group(1)
    static = re.search(r'^version\s*=\s*"([^"]+)"', project, re.M)
    if static:
        return [(f"{rel(p)} [project] version", static.group(1))]
    if not re.search(r'^dynamic\s*=\s*\[[^\]]*"version"', project, re.M):
        return [(f"{rel(p)} [project] dynamic", "version is neither static nor dynamic")]
    return []


def package_jsons() -> List[Tuple[str, str]]:
    out = []
    for p in [ROOT / "bindings-node/package.json"]:
        data = json.loads(p.read_text())
        out.append((f"{rel(p)} version", data["version"]))
        for name, spec in data.get("optionalDependencies", {}).items():
            if name.startswith("rl-limiter-"):
                out.append((f"{rel(p)} optionalDependencies.{name}", spec))
    # napi-rs writes the package version into the loader's platform-package version checks.
    index = ROOT / "bindings-node/index.js"
    for v in sorted(set(re.findall(r"bindingPackageVersion !== '([^']+)'", index.read_text()))):
        out.append((f"{rel(index)} platform package version check", v))
    return out


def poms() -> List[Tuple[str, str]]:
    """Every dev.rl coordinate in every pom: the project's own and its dev.rl dependencies."""
    out = []
    for p in sorted((ROOT / "bindings-java").rglob("pom.xml")):
        if "target" in p.relative_to(ROOT).parts:
            continue
        root = ET.parse(p).getroot()
        elems = [root] + root.findall(f".//{POM_NS}dependency") + root.findall(f".//{POM_NS}parent")
        for e in elems:
            group = e.findtext(f"{POM_NS}groupId")
            artifact = e.findtext(f"{POM_NS}artifactId")
            version = e.findtext(f"{POM_NS}version")
            if group == "dev.rl" and version is not None:
                out.append((f"{rel(p)} dev.rl:{artifact}", version))
    return out


def c_header() -> List[Tuple[str, str]]:
    out = []
    for p, pattern in [
        (ROOT / "include/rl.h", r"^#define RL_VERSION_{} (\d+)$"),
        (ROOT / "bindings-c/src/lib.rs", r"^pub const RL_VERSION_{}: u32 = (\d+);$"),
    ]:
        text = p.read_text()
        parts = []
        for part in ("MAJOR", "MINOR", "PATCH"):
            m = re.search(pattern.format(part), text, re.M)
            parts.append(m.group(1) if m else "?")
        out.append((f"{rel(p)} RL_VERSION_MAJOR/MINOR/PATCH", ".".join(parts)))
    return out


def changelog(version: str) -> List[Tuple[str, str]]:
    p = ROOT / "CHANGELOG.md"
    m = re.search(r"^## \[?(\d+\.\d+\.\d+)\]?", p.read_text(), re.M) if p.exists() else None
    return [(f"{rel(p)} newest entry", m.group(1) if m else "missing")]


FINDERS: List[Callable[[], List[Tuple[str, str]]]] = [crates, pyproject, package_jsons, poms, c_header]


def check() -> int:
    version = workspace_version()
    found = [pair for f in FINDERS for pair in f()] + changelog(version)
    bad = [(place, v) for place, v in found if v != version]
    for place, v in bad:
        print(f"check-versions: {place} is {v!r}, the workspace version is {version!r}", file=sys.stderr)
    if bad:
        print("check-versions: run `python3 scripts/check-versions.py --set X.Y.Z` to write one version everywhere", file=sys.stderr)
        return 1
    print(f"check-versions: {version} in {len(found)} places")
    return 0


def set_version(new: str) -> None:
    m = SEMVER.match(new)
    if not m:
        sys.exit(f"check-versions: {new!r} is not MAJOR.MINOR.PATCH")
    old = workspace_version()
    major, minor, patch = m.groups()

    def sub(path: Path, pattern: str, repl: str, count: int = 0) -> None:
        text = path.read_text()
        new_text = re.sub(pattern, repl, text, count=count, flags=re.M)
        path.write_text(new_text)

    sub(ROOT / "Cargo.toml", r'(\[workspace\.package\]\nversion = ")[^"]+"', rf'\g<1>{new}"', 1)
    for p in [ROOT / "bindings-node/package.json", ROOT / "bindings-node/package-lock.json"]:
        # The package's own version only (the first "version" keys), never a dependency's.
        sub(p, r'^(  "version": ")[^"]+"', rf'\g<1>{new}"', 1)
        if p.name == "package-lock.json":
            sub(p, r'^(      "version": ")[^"]+"', rf'\g<1>{new}"', 1)
    sub(ROOT / "bindings-node/index.js", re.escape(f"'{old}'"), f"'{new}'")
    sub(ROOT / "bindings-node/index.js", re.escape(f"expected {old} but"), f"expected {new} but")
    for p in sorted((ROOT / "bindings-java").rglob("pom.xml")):
        if "target" in p.relative_to(ROOT).parts:
            continue
        sub(p, rf"(<groupId>dev\.rl</groupId>\s*<artifactId>[^<]+</artifactId>\s*<version>){re.escape(old)}(</version>)", rf"\g<1>{new}\g<2>")
    for part, value in (("MAJOR", major), ("MINOR", minor), ("PATCH", patch)):
        sub(ROOT / "include/rl.h", rf"^(#define RL_VERSION_{part}) \d+$", rf"\g<1> {value}")
        sub(ROOT / "bindings-c/src/lib.rs", rf"^(pub const RL_VERSION_{part}: u32 = )\d+;$", rf"\g<1>{value};")
    print(f"check-versions: {old} -> {new}; add a CHANGELOG.md entry, then run the tests (Cargo.lock updates on the next build)")


def main() -> int:
    if sys.argv[1:] == ["--get"]:
        print(workspace_version())
        return 0
    if len(sys.argv) == 3 and sys.argv[1] == "--set":
        set_version(sys.argv[2])
        return 0
    if sys.argv[1:]:
        print(__doc__, file=sys.stderr)
        return 2
    return check()


if __name__ == "__main__":
    sys.exit(main())
