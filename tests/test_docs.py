"""The docs cannot fall behind the code silently.

- Every key of the typed configuration (``vgpu/config/``), written as in a config file
  (``scheduler.permitTimeoutSeconds``), has a row in docs/operator-guide.md's "Every key",
  and every row there is a key.
- Every flag of every ``vgpu`` subcommand (the ``vgpu.commands`` entry points of
  ``pyproject.toml``, each parser built by its module's ``configure``) is in that command's
  section of docs/cli.md, and every flag a section names is one of its command's.
- Every repository path in a code span or a link of the README and the docs pages exists,
  and every ``docs/<page>.md#<anchor>`` that the code, the manifests or the docs cite is a
  heading of that page (the pages' own links are MkDocs' to check: ``mkdocs build
  --strict`` in ``.ci/run``).

Plain Python, no MkDocs: these run under the README's test command.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import re
import tomllib
import typing
import unicodedata
from pathlib import Path

import pytest

from vgpu import cli as vgpu_cli
from vgpu.config import Config, camel
from vgpu.config import version as config_version

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
PAGES = sorted(DOCS.glob("*.md"))
MARKDOWN = [ROOT / "README.md", *PAGES]

FENCE = re.compile(r"^(```|~~~).*?^\1[^\n]*$", re.M | re.S)
SPAN = re.compile(r"(`+)(.+?)\1", re.S)
LINK = re.compile(r"\]\(([^)\s]+)\)")
HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$", re.M)
CITED_ANCHOR = re.compile(r"docs/([\w.-]+\.md)#([\w-]+)")
#: Endings that make a code span a file path even when its folder is given only in part
#: (``host/cache.py``, under vgpu_scheduler/).
FILE_ENDINGS = (".py", ".pyi", ".sh", ".yaml", ".yml", ".md", ".proto", ".json", ".toml",
                ".csv", ".gz", ".txt", ".png")
SKIPPED_FOLDERS = {".git", ".venv", "__pycache__", "build", "dist", "site", ".mypy_cache",
                   ".ruff_cache", ".pytest_cache", ".hypothesis"}


def prose(text: str) -> str:
    """Markdown without its fenced blocks (commands and outputs, not references)."""
    return FENCE.sub("", text)


def spans(text: str) -> list[str]:
    return [m.group(2) for m in SPAN.finditer(prose(text))]


def slug(heading: str) -> str:
    """The anchor Python-Markdown's toc extension (MkDocs) gives a heading."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).replace("`", "")
    text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    text = re.sub(r"[^\w\s-]", "", text).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def sections(path: Path) -> dict[str, str]:
    """Each heading's text (code marks dropped) to the text under it, up to the next
    heading of any level."""
    text = prose(path.read_text())
    found = list(HEADING.finditer(text))
    return {m.group(2).replace("`", ""): text[m.end():nxt.start() if nxt else len(text)]
            for m, nxt in zip(found, [*found[1:], None], strict=True)}


def anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    for match in HEADING.finditer(prose(path.read_text())):
        base = slug(match.group(2))
        count = seen.get(base, 0)
        seen[base] = count + 1
        out.add(base if count == 0 else f"{base}_{count}")
    return out


# --- config keys ------------------------------------------------------------------------

def config_keys(cls: typing.Any = Config, prefix: str = "") -> list[str]:
    """Every key a config file may hold, by walking the settings' dataclasses."""
    keys = [config_version.KEY] if not prefix else []
    hints = typing.get_type_hints(cls)
    for field in dataclasses.fields(cls):
        key = prefix + camel(field.name)
        if dataclasses.is_dataclass(hints[field.name]):
            keys += config_keys(hints[field.name], key + ".")
        else:
            keys.append(key)
    return keys


def documented_keys() -> list[str]:
    """The first cell of every row of the operator guide's key tables."""
    guide = (DOCS / "operator-guide.md").read_text()
    section = guide.split("\n## Every key\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^\| `([A-Za-z][\w.]*)` \|", section, re.M)


def test_every_config_key_is_in_the_operator_guide() -> None:
    missing = sorted(set(config_keys()) - set(documented_keys()))
    assert not missing, f"docs/operator-guide.md 'Every key' lacks {missing}"


def test_the_operator_guide_documents_no_key_that_does_not_exist() -> None:
    documented = documented_keys()
    assert len(documented) == len(set(documented)), "a key has two rows"
    unknown = sorted(set(documented) - set(config_keys()))
    assert not unknown, f"docs/operator-guide.md documents keys the config lacks: {unknown}"


# --- command-line flags -----------------------------------------------------------------

def subcommands() -> dict[str, str]:
    with open(ROOT / "pyproject.toml", "rb") as handle:
        project = tomllib.load(handle)["project"]
    commands: dict[str, str] = project["entry-points"][vgpu_cli.GROUP]
    return commands


def _walk(parser: argparse.ArgumentParser, name: str) -> dict[str, set[str]]:
    """Each command line (``vgpu config validate``) to its flags and positionals."""
    found: dict[str, set[str]] = {name: set()}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub_name, sub in action.choices.items():
                found.update(_walk(sub, f"{name} {sub_name}"))
        elif isinstance(action, argparse._HelpAction):
            continue
        elif action.option_strings:
            found[name].update(action.option_strings)
        else:
            found[name].add(str(action.metavar or action.dest.upper()))
    return found


def command_flags() -> dict[str, set[str]]:
    found = _walk(vgpu_cli.build_parser([], commands=()), "vgpu")
    for name, target in subcommands().items():
        parser = argparse.ArgumentParser(prog=f"vgpu {name}")
        importlib.import_module(target).configure(parser)
        found.update(_walk(parser, f"vgpu {name}"))
    return found


def named_in(body: str, flag: str) -> bool:
    return re.search(r"`" + re.escape(flag) + r"(?=[` =,])", body) is not None


def test_every_flag_of_every_command_is_in_the_cli_reference() -> None:
    reference = sections(DOCS / "cli.md")
    missing = []
    for command, flags in command_flags().items():
        if command not in reference:
            missing.append(f"a section '{command}'")
            continue
        missing += [f"{command} {flag}" for flag in sorted(flags)
                    if not named_in(reference[command], flag)]
    assert not missing, f"docs/cli.md lacks {missing}"


def test_the_cli_reference_names_no_flag_a_command_lacks() -> None:
    reference = sections(DOCS / "cli.md")
    unknown = []
    for command, flags in command_flags().items():
        written = set(re.findall(r"`(--?[A-Za-z][\w-]*)(?=[` =,])", reference.get(command, "")))
        unknown += [f"{command} {flag}" for flag in sorted(written - flags - {"-h", "--help"})]
    assert not unknown, f"docs/cli.md names flags its commands lack: {unknown}"


def test_kubectl_vgpu_has_its_section() -> None:
    with open(ROOT / "pyproject.toml", "rb") as handle:
        scripts = tomllib.load(handle)["project"]["scripts"]
    assert "kubectl-vgpu" in scripts
    assert "kubectl vgpu" in sections(DOCS / "cli.md")


# --- repository paths and cited anchors --------------------------------------------------

def repository() -> tuple[set[str], set[str]]:
    """Every file and folder of the checkout, as paths relative to its root."""
    files, folders = set(), set()
    for path in ROOT.rglob("*"):
        parts = path.relative_to(ROOT).parts
        if SKIPPED_FOLDERS.intersection(parts) or any(p.endswith(".egg-info") for p in parts):
            continue
        (folders if path.is_dir() else files).add("/".join(parts))
    return files, folders


def stale(token: str, files: set[str], folders: set[str]) -> bool:
    """Whether a word of a code span names a repository path that does not exist."""
    path = token.strip(",;:()[]'\".").removeprefix("./").split("#")[0]
    if (not path or path.startswith(("/", "-", "http")) or "://" in path
            or any(c in path for c in "<>*${}~=|")):
        return False
    top = {entry.split("/")[0] for entry in files | folders}
    if "/" not in path:
        # A bare file name: some file of the checkout has it.
        return path.endswith((".py", ".sh", ".proto")) and not any(
            f.rsplit("/", 1)[-1] == path for f in files)
    first = path.split("/")[0]
    if first in top:
        return path.rstrip("/") not in files | folders
    if "." in first:
        return False  # a domain: vgpu.io/, nvidia.com/gpu, coordination.k8s.io/v1
    if path.endswith("/"):
        return not any(d == path[:-1] or d.endswith("/" + path[:-1]) for d in folders)
    if path.endswith(FILE_ENDINGS):
        return not any(f.endswith("/" + path) for f in files)
    return False  # pods/binding, policy/v1: not paths


@pytest.mark.parametrize("page", MARKDOWN, ids=lambda p: p.name)
def test_every_repository_path_the_page_names_exists(page: Path) -> None:
    files, folders = repository()
    text = page.read_text()
    words = [word for span in spans(text) for word in span.split()]
    if page.parent == ROOT:  # the README's links; MkDocs checks the pages'
        words += [t for t in LINK.findall(prose(text)) if not t.startswith(("http", "#"))]
    missing = sorted({w for w in words if stale(w, files, folders)})
    assert not missing, f"{page.relative_to(ROOT)} names paths that do not exist: {missing}"


def citing_files() -> list[Path]:
    files, _ = repository()
    endings = (".py", ".md", ".yaml", ".yml", ".toml", ".sh", ".json")
    return [ROOT / f for f in sorted(files) if f.endswith(endings) or f.startswith(".ci/")]


def test_every_cited_docs_anchor_exists() -> None:
    headings = {page.name: anchors(page) for page in PAGES}
    broken = []
    for path in citing_files():
        for page, anchor in CITED_ANCHOR.findall(path.read_text(errors="replace")):
            if anchor not in headings.get(page, set()):
                broken.append(f"{path.relative_to(ROOT)}: docs/{page}#{anchor}")
    assert not broken, f"cited anchors that no page has: {sorted(set(broken))}"


def test_the_checks_see_what_they_check() -> None:
    """The helpers agree with MkDocs' anchors and find the paths they are meant to."""
    assert slug("`kubectl vgpu why POD`") == "kubectl-vgpu-why-pod"
    assert slug("The 1.20 overlay fails open") == "the-120-overlay-fails-open"
    files, folders = repository()
    assert not stale("vgpu_scheduler/host/cache.py", files, folders)
    assert not stale("host/cache.py", files, folders)
    assert not stale("manifests/overlays/mps", files, folders)
    assert stale("vgpu_nodeagent/backends.py", files, folders)
    assert stale("nodeagent/backends.py", files, folders)
    assert not stale("nvidia.com/gpu", files, folders)
    assert "scheduler.permitTimeoutSeconds" in config_keys()
    assert "--leader-elect" in command_flags()["vgpu scheduler"]
