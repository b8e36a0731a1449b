"""The Go builds' wrapper modules (deploy/*/go.mod) against each other.

CoreDNS is built after Kubernetes so that the packages they share (Kubernetes' client and what
it imports) come out of Go's build cache (deploy/kubernetes/tools.mk). That holds only while both
modules resolve every shared module to the same version: a bump of one alone still builds, and
silently compiles the client twice."""

from __future__ import annotations

from pathlib import Path

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"


def resolved_requirements(go_mod: Path) -> dict[str, str]:
    """Module path -> version, after the file's own replace directives (go.mod's grammar: one
    `require`/`replace` per line, or a parenthesized block of them; `//` comments)."""
    required: dict[str, str] = {}
    replaced: dict[str, str] = {}
    block = ""
    for raw in go_mod.read_text().splitlines():
        line = raw.split("//", 1)[0].strip()
        if not line:
            continue
        if line in {"require (", "replace ("}:
            block = line.split()[0]
            continue
        if line == ")":
            block = ""
            continue
        verb = block
        if line.startswith(("require ", "replace ")):
            verb, line = line.split(" ", 1)
        if verb == "require":
            path, version = line.split()[:2]
            required[path] = version
        elif verb == "replace" and "=>" in line:
            old, new = (side.split() for side in line.split("=>"))
            replaced[old[0]] = new[-1]
    return {path: replaced.get(path, version) for path, version in required.items()}


def test_the_parser_reads_blocks_single_lines_and_replacements(tmp_path: Path) -> None:
    go_mod = tmp_path / "go.mod"
    go_mod.write_text(
        "module example.dev/m\n\ngo 1.24.0\n\nrequire a.dev/one v1.0.0\n\n"
        "require (\n\tb.dev/two v0.2.0 // indirect\n\tc.dev/three v3.0.0\n)\n\n"
        "replace c.dev/three => c.dev/three v3.1.0\n"
        "replace (\n\t// why\n\tb.dev/two v0.2.0 => b.dev/fork v0.2.5\n)\n"
    )
    assert resolved_requirements(go_mod) == {
        "a.dev/one": "v1.0.0",
        "b.dev/two": "v0.2.5",
        "c.dev/three": "v3.1.0",
    }


def test_coredns_requires_every_module_it_shares_with_kubernetes_at_kubernetes_version() -> None:
    coredns = resolved_requirements(DEPLOY / "coredns" / "go.mod")
    kubernetes = resolved_requirements(DEPLOY / "kubernetes" / "go.mod")
    shared = set(coredns) & set(kubernetes)
    assert {"k8s.io/api", "k8s.io/apimachinery", "k8s.io/client-go"} <= shared
    differing = {
        path: (coredns[path], kubernetes[path]) for path in shared if coredns[path] != kubernetes[path]
    }
    assert not differing, f"deploy/coredns and deploy/kubernetes require these at other versions: {differing}"
