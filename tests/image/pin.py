"""Pin every kustomization of ``manifests/`` to one image, by digest:

    python -m tests.image.pin REGISTRY/PATH/vgpu@sha256:<digest>

What a release does once it has pushed its image (the digest is the registry's, from the
push: ``docker push`` prints it, ``crane digest`` reads it), and what a test of the
release checks. Each kustomization that adds a workload carries the same ``images:``
entry (kustomize applies a base's own transformer to the base's objects only), so the
entry is rewritten in every one of them, comments kept.

The repository's own pin, before any release, is :data:`UNRELEASED`: a fully qualified
name under the ``.invalid`` domain (RFC 2606: it never resolves), so an install made
without pinning its own build cannot pull anything, least of all an image someone else
published under a short name such as ``vgpu`` (which a runtime looks for on docker.io).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MANIFESTS = ROOT / "manifests"
#: The name every workload's container names in manifests/ (the transformer's key).
NAME = "vgpu"
UNRELEASED = "vgpu.invalid/vgpu@sha256:" + "0" * 64
#: A fully qualified reference pinned by digest: a registry host (with a dot or a port,
#: or localhost), a path, a sha256 digest.
PINNED = re.compile(r"(?P<name>(?:[a-z0-9-]+(?:\.[a-z0-9-]+)+(?::\d+)?|localhost(?::\d+)?)"
                    r"/[a-z0-9._/-]+)@(?P<digest>sha256:[0-9a-f]{64})")
_ENTRY = re.compile(r"(?m)^- name: vgpu\n(?:  (?:newName|newTag|digest): .*\n)+")


def entry(reference: str) -> str:
    match = PINNED.fullmatch(reference)
    if match is None:
        raise ValueError(f"{reference!r} is not REGISTRY/PATH@sha256:<64 hex digits>")
    return f"- name: {NAME}\n  newName: {match['name']}\n  digest: {match['digest']}\n"


def kustomizations(root: Path = MANIFESTS) -> list[Path]:
    """The kustomizations that carry the image entry."""
    return sorted(p for p in root.rglob("kustomization.yaml") if _ENTRY.search(p.read_text()))


def pin(reference: str, root: Path = MANIFESTS) -> list[Path]:
    """Rewrite every entry to ``reference``; returns the files changed."""
    new = entry(reference)
    changed = []
    for path in kustomizations(root):
        text = path.read_text()
        pinned = _ENTRY.sub(new, text)
        if pinned != text:
            path.write_text(pinned)
            changed.append(path)
    return changed


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    try:
        changed = pin(argv[0])
    except ValueError as exc:
        print(f"pin: {exc}", file=sys.stderr)
        return 2
    for path in changed:
        print(path.relative_to(ROOT))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
