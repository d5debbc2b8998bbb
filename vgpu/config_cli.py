"""``vgpu config validate FILE`` and ``vgpu config defaults``."""

from __future__ import annotations

import argparse
import json
import os
import sys

from vgpu import config


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
