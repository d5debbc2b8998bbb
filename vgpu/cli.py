"""The ``vgpu`` command.

The core names no component. Each subcommand is an entry point of the group
``vgpu.commands`` in the installed package metadata (vgpu declares its own in
``pyproject.toml``): ``NAME = "package.module"`` makes ``vgpu NAME`` run that module, which
has

- ``HELP``: its one-line help, a plain string literal on one line;
- ``configure(parser)``: adds its options to its ``argparse`` subparser;
- ``run(args) -> int``: does the work and returns the exit status.

Only the chosen module is imported. ``vgpu --help`` reads the other modules' ``HELP`` from
their source text instead, so listing the commands imports none of them, nor what they
import (aiohttp, grpc, numpy, the kubernetes client). A module that cannot be imported
makes its command fail with one line saying why, and leaves the others working.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import importlib.machinery
import importlib.util
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import metadata
from types import ModuleType

from vgpu import __version__, logs
from vgpu.errors import NotAvailableError, VgpuError

#: The entry-point group that lists the subcommands.
GROUP = "vgpu.commands"

# Entry points live in the installed metadata: a checkout used without `pip install`, or
# installed before the group existed, has none.
NO_COMMANDS = (f"no subcommands are installed (no '{GROUP}' entry points); install vgpu "
               "with pip, e.g. pip install -e .")

_HELP_LINE = re.compile(r"^HELP\s*(?::\s*str\s*)?=\s*(?P<literal>.+?)\s*$", re.MULTILINE)


@dataclass(frozen=True)
class Subcommand:
    """One ``vgpu.commands`` entry point: ``vgpu NAME`` runs module ``target``."""

    name: str
    target: str

    def load(self) -> ModuleType:
        """The command's module; :class:`NotAvailableError` with a one-line reason if it
        cannot be imported or is not a command."""
        try:
            module = importlib.import_module(self.target)
        except Exception as exc:
            # Whatever the cause (a missing dependency, a syntax error, the version check
            # of generated protobuf code), this command cannot run here; the others can.
            reason = " ".join(f"{type(exc).__name__}: {exc}".split())
            raise NotAvailableError(f"'vgpu {self.name}' is not available: cannot import "
                                    f"{self.target} ({reason})") from None
        missing = [f"{name}()" for name in ("configure", "run")
                   if not callable(getattr(module, name, None))]
        if missing:
            raise NotAvailableError(f"'vgpu {self.name}' is not available: {self.target} "
                                    f"has no {' or '.join(missing)}")
        return module

    def summary(self) -> str:
        """The one-line help, read from the module's source without importing it.

        Without a source file (a bytecode-only install) or a literal ``HELP`` in it, the
        module is imported after all: slower, but the listing stays right."""
        source = _source_file(self.target)
        if source is not None:
            help_text = _help_literal(source)
            if help_text is not None:
                return help_text
        try:
            return str(getattr(self.load(), "HELP", ""))
        except NotAvailableError:
            return f"(not available; 'vgpu {self.name}' says why)"


def _source_file(module: str) -> str | None:
    """The source file of ``module``, found without running its packages' ``__init__``:
    ``vgpu.config``'s, for one, loads YAML and every setting, which listing help does not
    need."""
    search: list[str] | None = None
    spec: importlib.machinery.ModuleSpec | None = None
    parts = module.split(".")
    try:
        for i in range(len(parts)):
            name = ".".join(parts[: i + 1])
            spec = (importlib.util.find_spec(name) if search is None
                    else importlib.machinery.PathFinder.find_spec(name, search))
            if spec is None:
                return None
            search = list(spec.submodule_search_locations or [])
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.has_location or not (spec.origin or "").endswith(".py"):
        return None
    return spec.origin


def _help_literal(path: str) -> str | None:
    """The string of a top-level ``HELP = "..."`` line of a source file, if it has one."""
    try:
        with open(path, encoding="utf-8") as handle:
            match = _HELP_LINE.search(handle.read())
        value = ast.literal_eval(match["literal"]) if match else None
    except (OSError, UnicodeDecodeError, ValueError, SyntaxError):
        return None
    return value if isinstance(value, str) else None


def subcommands() -> tuple[Subcommand, ...]:
    """Every installed ``vgpu.commands`` entry point, by name (setuptools writes them
    sorted anyway; sorting here keeps ``--help`` alike whatever built the metadata). Where
    two distributions declare one name, the first on ``sys.path`` wins."""
    found: dict[str, Subcommand] = {}
    for entry in metadata.entry_points(group=GROUP):
        found.setdefault(entry.name, Subcommand(entry.name, entry.value))
    return tuple(sorted(found.values(), key=lambda cmd: cmd.name))


def build_parser(argv: Sequence[str],
                 commands: Sequence[Subcommand] | None = None) -> argparse.ArgumentParser:
    """The parser for ``argv``: only the subcommand it names is imported and configured."""
    if commands is None:
        commands = subcommands()
    parser = argparse.ArgumentParser(
        prog="vgpu",
        description="GPU sharing for Kubernetes: many pods share one NVIDIA GPU, each with "
        "its own slice of memory and compute.",
    )
    parser.add_argument("--version", action="version", version=f"vgpu {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    chosen = next((a for a in argv if not a.startswith("-")), None)
    for cmd in commands:
        if cmd.name != chosen:
            sub.add_parser(cmd.name, help=cmd.summary())
            continue
        try:
            module = cmd.load()
        except NotAvailableError as exc:
            # No options to configure: main() reports the reason instead of letting the
            # command's options read as "unrecognized arguments".
            sub.add_parser(cmd.name).set_defaults(_subcommand=cmd, _unavailable=str(exc))
            continue
        help_text = getattr(module, "HELP", None)
        p = sub.add_parser(cmd.name, help=help_text, description=help_text)
        p.set_defaults(_subcommand=cmd)
        module.configure(p)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    commands = subcommands()
    parser = build_parser(args_list, commands)
    if not commands:
        parser.error(NO_COMMANDS)
    # parse_known_args: a subcommand that cannot be loaded has no options configured, and
    # "unrecognized arguments: --config" would hide why it cannot run.
    args, unknown = parser.parse_known_args(args_list)
    cmd: Subcommand | None = getattr(args, "_subcommand", None)
    if cmd is None:
        parser.print_help()
        return 2
    unavailable: str | None = getattr(args, "_unavailable", None)
    if unknown and unavailable is None:
        parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    try:
        if unavailable is not None:
            raise NotAvailableError(unavailable)
        logs.setup()
        result: int = cmd.load().run(args)
        return result
    except VgpuError as exc:
        print(f"vgpu {cmd.name}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # `vgpu config defaults | head` closes the pipe early; that is not an error.
        sys.stderr.close()
        return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
