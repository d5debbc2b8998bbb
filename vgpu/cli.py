"""The ``vgpu`` command.

Subcommands live in their components; this module only knows their names, one-line help
and where to find them, and imports the chosen one lazily. That keeps the core free of
imports of the components and ``vgpu --help`` fast. A component module named here exposes
``configure(parser)`` and ``run(args) -> int``.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from dataclasses import dataclass

from vgpu import __version__, logs
from vgpu.errors import NotAvailableError, VgpuError


@dataclass(frozen=True)
class Subcommand:
    name: str
    help: str
    module: str | None  # None: not built into this version


SUBCOMMANDS: tuple[Subcommand, ...] = (
    Subcommand("webhook", "run the mutating admission webhook", "webhook.cli"),
    Subcommand("scheduler", "run the vgpu scheduler", "scheduler.cli"),
    Subcommand("nodeagent", "run the node agent (kubelet device plugin)", "nodeagent.cli"),
    Subcommand("certs", "create or renew the webhook's certificates", "certs.cli"),
    Subcommand("simulate", "replay a workload trace through the scheduler, no cluster needed",
               "scheduler.simulate.cli"),
    Subcommand("inspect", "show GPU allocation per node and GPU", "vgpu.inspect_cli"),
    Subcommand("config", "validate a config file or print the defaults", "vgpu.config.cli"),
)


def build_parser(argv: Sequence[str]) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="vgpu",
        description="GPU sharing for Kubernetes: many pods share one NVIDIA GPU, each with "
        "its own slice of memory and compute.",
    )
    parser.add_argument("--version", action="version", version=f"vgpu {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    chosen = next((a for a in argv if not a.startswith("-")), None)
    for cmd in SUBCOMMANDS:
        p = sub.add_parser(cmd.name, help=cmd.help, description=cmd.help)
        p.set_defaults(_subcommand=cmd)
        if cmd.name == chosen and cmd.module is not None:
            module = importlib.import_module(cmd.module)
            module.configure(p)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(args_list)
    # parse_known_args: a subcommand that is not built has no options configured, and
    # "unrecognized arguments: --config" would hide that the command itself is missing.
    args, unknown = parser.parse_known_args(args_list)
    cmd: Subcommand | None = getattr(args, "_subcommand", None)
    if cmd is None:
        parser.print_help()
        return 2
    if unknown and cmd.module is not None:
        parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    try:
        if cmd.module is None:
            raise NotAvailableError(f"'vgpu {cmd.name}' is not available in vgpu {__version__}")
        logs.setup()
        module = importlib.import_module(cmd.module)
        result: int = module.run(args)
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


def kubectl_main() -> int:
    """``kubectl vgpu ...``: kubectl finds ``kubectl-vgpu`` on PATH and passes the rest."""
    return main(sys.argv[1:])


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
