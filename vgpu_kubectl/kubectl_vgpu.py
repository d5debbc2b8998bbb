"""``kubectl vgpu ...``: kubectl finds ``kubectl-vgpu`` on PATH and passes it the rest of
the command line, which is then a ``vgpu`` command line (``kubectl vgpu inspect -d`` runs
``vgpu inspect -d``)."""

from __future__ import annotations

import sys

from vgpu import cli


def main() -> int:
    return cli.main(sys.argv[1:])


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
