"""Every row of the HAMi compatibility suite, and its counts:
``python -m tests.hami.suite`` runs them all and prints one JSON object (rows, agree,
documented differences, failures)."""

from __future__ import annotations

import json

from tests.hami import (
    table_admission,
    table_choice,
    table_fields,
    table_policies,
    table_quota,
    table_requests,
)
from tests.hami.rows import HAMI_COMMIT, Row, counts

ROWS: tuple[Row, ...] = (*table_fields.ROWS, *table_requests.ROWS, *table_admission.ROWS,
                         *table_quota.ROWS, *table_policies.ROWS,
                         *table_choice.ROWS)


def main() -> None:
    failed = []
    for row in ROWS:
        try:
            row.check()
        except AssertionError as e:
            failed.append(str(e))
    print(json.dumps({"hami_commit": HAMI_COMMIT[:7], **counts(ROWS), "failed": len(failed),
                      "failures": failed}))


if __name__ == "__main__":
    main()
