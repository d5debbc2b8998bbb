"""Heartbeat and bind times: RFC 3339 in and out, always with a time zone.

Separate from ``test_codecs``: times are plain strings in their own annotations
(``node-heartbeat``, ``bind-time``), not JSON documents.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vgpu import times
from vgpu.annotations import BIND_TIME, NODE_HEARTBEAT
from vgpu.codecs import bind_time, encode_heartbeat
from vgpu.errors import CodecError

UTC = dt.UTC
PLUS2 = dt.timezone(dt.timedelta(hours=2))

TIMES: list[tuple[str, str, dt.datetime]] = [
    ("z", "2024-05-01T12:00:00Z", dt.datetime(2024, 5, 1, 12, tzinfo=UTC)),
    ("lower-z", "2024-05-01T12:00:00z", dt.datetime(2024, 5, 1, 12, tzinfo=UTC)),
    ("fraction-z", "2024-05-01T12:00:00.250000Z",
     dt.datetime(2024, 5, 1, 12, 0, 0, 250000, tzinfo=UTC)),
    ("offset", "2024-05-01T14:00:00+02:00", dt.datetime(2024, 5, 1, 12, tzinfo=UTC)),
    ("negative-offset", "2024-05-01T07:00:00-05:00", dt.datetime(2024, 5, 1, 12, tzinfo=UTC)),
    ("zero-offset", "2024-05-01T12:00:00+00:00", dt.datetime(2024, 5, 1, 12, tzinfo=UTC)),
    ("surrounding-space", " 2024-05-01T12:00:00Z ", dt.datetime(2024, 5, 1, 12, tzinfo=UTC)),
]


@pytest.mark.parametrize(("text", "expected"), [t[1:] for t in TIMES], ids=[t[0] for t in TIMES])
def test_parse_time(text: str, expected: dt.datetime) -> None:
    got = times.parse(text)
    assert got == expected
    assert got.tzinfo is not None


BAD_TIMES: list[tuple[str, Any, str]] = [
    ("naive", "2024-05-01T12:00:00", "no time zone"),
    ("date-only", "2024-05-01", "no time zone"),
    ("garbage", "yesterday", "not an RFC 3339 time"),
    ("empty", "", "not an RFC 3339 time"),
    ("month-13", "2024-13-01T00:00:00Z", "not an RFC 3339 time"),
    ("number", 1714564800, "expected an RFC 3339 time string"),
    ("none", None, "expected an RFC 3339 time string"),
]


@pytest.mark.parametrize(("text", "fragment"), [t[1:] for t in BAD_TIMES],
                         ids=[t[0] for t in BAD_TIMES])
def test_parse_time_rejects(text: Any, fragment: str) -> None:
    with pytest.raises(CodecError) as caught:
        times.parse(text, NODE_HEARTBEAT)
    assert str(caught.value).startswith(NODE_HEARTBEAT)
    assert fragment in str(caught.value)


def test_parse_time_names_the_given_key() -> None:
    with pytest.raises(CodecError, match=f"^{BIND_TIME}: "):
        times.parse("soon", BIND_TIME)


@pytest.mark.parametrize(
    ("when", "text"),
    [
        (dt.datetime(2024, 5, 1, 12, 0, 0, 123456, tzinfo=UTC), "2024-05-01T12:00:00.123456Z"),
        (dt.datetime(2024, 5, 1, 14, 0, tzinfo=PLUS2), "2024-05-01T12:00:00.000000Z"),
    ],
    ids=["utc", "offset-converted-to-utc"],
)


def test_encode_heartbeat(when: dt.datetime, text: str) -> None:
    assert encode_heartbeat(when) == text
    assert times.parse(text) == when


def test_encode_heartbeat_rejects_naive_time() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        encode_heartbeat(dt.datetime(2024, 5, 1, 12))


@pytest.mark.parametrize(("when", "text"), [
    (dt.datetime(2024, 5, 1, 12, 0, 0, 123456, tzinfo=UTC), "2024-05-01T12:00:00Z"),
    (dt.datetime(2024, 5, 1, 14, 0, tzinfo=PLUS2), "2024-05-01T12:00:00Z"),
], ids=["fraction-dropped", "offset-converted-to-utc"])
def test_format_time_is_the_api_servers_time_to_the_second(when: dt.datetime,
                                                           text: str) -> None:
    assert times.format_time(when) == text
    assert times.parse(text) == when.replace(microsecond=0)


def test_format_time_rejects_naive_time() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        times.format_time(dt.datetime(2024, 5, 1, 12))


@settings(max_examples=100, deadline=None)
@given(st.datetimes(min_value=dt.datetime(1970, 1, 2), max_value=dt.datetime(9999, 1, 1),
                    timezones=st.integers(-14 * 60, 14 * 60).map(
                        lambda minutes: dt.timezone(dt.timedelta(minutes=minutes)))))


def test_heartbeat_round_trip(when: dt.datetime) -> None:
    assert times.parse(encode_heartbeat(when)) == when.astimezone(UTC)


@pytest.mark.parametrize(("annotations", "expected"), [
    ({BIND_TIME: "2024-05-01T10:00:00Z"},
     dt.datetime(2024, 5, 1, 10, tzinfo=dt.UTC).timestamp()),
    ({}, None),
    ({BIND_TIME: "yesterday"}, None),  # unreadable: the reader picks its own fallback
    ({BIND_TIME: 17}, None),
])


def test_bind_time(annotations: dict[str, Any], expected: float | None) -> None:
    assert bind_time(annotations) == expected
