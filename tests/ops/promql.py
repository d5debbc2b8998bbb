"""The metric names a PromQL expression reads, for checking dashboards against exporters.

Not a PromQL parser: a tokenizer that drops what cannot be a metric name (strings, label
matchers, ranges, grouping label lists, numbers, durations, function and aggregation
names, keywords, Grafana variables) and keeps the identifiers left. It covers the forms
the dashboards use; ``tests/ops/test_dashboards.py`` pins it on tricky cases.
"""

from __future__ import annotations

import re

KEYWORDS = frozenset({
    "by", "without", "on", "ignoring", "group_left", "group_right", "bool", "offset",
    "and", "or", "unless", "atan2", "inf", "nan", "Inf", "NaN",
})

_STRING = re.compile(r'"(?:\\.|[^"\\])*"|\'(?:\\.|[^\'\\])*\'|`[^`]*`')
_GRAFANA_VAR = re.compile(r"\$\{[^}]*\}|\$\w+")
_RANGE = re.compile(r"\[[^\]]*\]")
_MATCHERS = re.compile(r"\{[^}]*\}")
_GROUPING = re.compile(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)")
_DURATION = re.compile(r"\b\d+(?:ms|[smhdwy])\b")
_NUMBER = re.compile(r"\b0x[0-9a-fA-F]+\b|(?<![\w:])\d+(?:\.\d*)?(?:[eE][+-]?\d+)?")
_IDENT = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")


def metric_names(expr: str) -> set[str]:
    if "__name__" in expr:
        raise ValueError(f"selects by __name__, which this check cannot follow: {expr}")
    text = _STRING.sub('""', expr)
    text = _GRAFANA_VAR.sub("1m", text)
    text = _RANGE.sub(" ", text)
    text = _MATCHERS.sub(" ", text)
    text = _GROUPING.sub(" ", text)
    text = _DURATION.sub(" ", text)
    text = _NUMBER.sub(" ", text)
    names: set[str] = set()
    for match in _IDENT.finditer(text):
        word = match.group()
        rest = text[match.end():].lstrip()
        if word in KEYWORDS or rest.startswith("("):
            continue
        names.add(word)
    return names
