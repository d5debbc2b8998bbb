"""``vgpu config validate FILE`` and ``vgpu config defaults``, and the ``--config`` option
every component command takes."""

from __future__ import annotations

import argparse
import json
import os
import sys

from vgpu import config
from vgpu.config import scoring_keys

#: The line `vgpu --help` shows; vgpu.cli reads it from this file without importing
#: the module, so it stays a plain one-line literal.
HELP = "validate a config file or print the defaults"

#: What ``--config`` means to the components (the ``vgpu inspect`` help says more).
CONFIG_HELP = "vgpu config file (default: $VGPU_CONFIG; VGPU_* variables override it)"


def add_config_option(parser: argparse.ArgumentParser, help_text: str = CONFIG_HELP) -> None:
    """``--config FILE``, defaulting to ``$VGPU_CONFIG``."""
    parser.add_argument("--config", metavar="FILE", default=os.environ.get("VGPU_CONFIG"),
                        help=help_text)


def load_config(args: argparse.Namespace) -> config.Config:
    """The configuration ``--config`` names, with the ``VGPU_*`` overrides of the process."""
    return config.load(args.config, os.environ)


def configure(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    validate = sub.add_parser("validate", help="check a config file (and VGPU_* overrides)")
    validate.add_argument("file")
    defaults = sub.add_parser("defaults", help="print the default configuration")
    defaults.add_argument("--explain", action="store_true",
                          help="one line per key with its meaning")


def run(args: argparse.Namespace) -> int:
    if args.action == "validate":
        cfg = config.load(args.file, os.environ)
        print(f"{args.file}: valid")
        for warning in scoring_keys.warnings(cfg.scheduler):
            print(f"warning: {warning}", file=sys.stderr)
        json.dump(config.to_mapping(cfg), sys.stdout, indent=2)
        print()
        return 0
    if args.explain:
        for key, default, doc in config.describe():
            print(f"{key:40} {default:34} {doc}")
        return 0
    json.dump(config.to_mapping(config.from_mapping({})), sys.stdout, indent=2)
    print()
    return 0
