"""Kubernetes quantity parsing: every suffix, exponents, signs, whitespace and garbage."""

from __future__ import annotations

from fractions import Fraction

import pytest

from vgpu.errors import QuantityError, RequestError
from vgpu.quantity import parse_quantity, parse_whole

KI = 2**10

ACCEPTED: list[tuple[str, object, Fraction]] = [
    ("plain", "3000", Fraction(3000)),
    ("zero", "0", Fraction(0)),
    ("json-int", 3000, Fraction(3000)),
    ("json-float", 1.5, Fraction(3, 2)),
    ("json-float-decimal-exact", 0.1, Fraction(1, 10)),
    ("decimal-point", "0.5", Fraction(1, 2)),
    ("leading-point", ".5", Fraction(1, 2)),
    ("trailing-point", "5.", Fraction(5)),
    ("plus-sign", "+5", Fraction(5)),
    ("minus-sign", "-5", Fraction(-5)),
    ("nano", "1n", Fraction(1, 10**9)),
    ("micro", "1u", Fraction(1, 10**6)),
    ("milli", "1500m", Fraction(3, 2)),
    ("milli-whole", "2000m", Fraction(2)),
    ("kilo", "3k", Fraction(3000)),
    ("mega", "1M", Fraction(10**6)),
    ("giga", "1G", Fraction(10**9)),
    ("tera", "1T", Fraction(10**12)),
    ("peta", "1P", Fraction(10**15)),
    ("exa", "1E", Fraction(10**18)),
    ("kibi", "3Ki", Fraction(3 * KI)),
    ("mebi", "1Mi", Fraction(KI**2)),
    ("gibi", "1Gi", Fraction(KI**3)),
    ("tebi", "1Ti", Fraction(KI**4)),
    ("pebi", "1Pi", Fraction(KI**5)),
    ("exbi", "1Ei", Fraction(KI**6)),
    ("fraction-with-binary-suffix", "2.5Gi", Fraction(5 * KI**3, 2)),
    ("exponent", "1e3", Fraction(1000)),
    ("exponent-upper", "1E3", Fraction(1000)),
    ("exponent-plus", "1e+3", Fraction(1000)),
    ("exponent-minus", "1e-3", Fraction(1, 1000)),
    ("exponent-fraction", "1.5e3", Fraction(1500)),
    ("exponent-at-limit", "1e30", Fraction(10**30)),
    ("surrounding-spaces", "  3k  ", Fraction(3000)),
    ("tab-and-newline", "\t7\n", Fraction(7)),
]


@pytest.mark.parametrize(("value", "expected"), [c[1:] for c in ACCEPTED],
                         ids=[c[0] for c in ACCEPTED])
def test_parse_quantity_accepts(value: object, expected: Fraction) -> None:
    assert parse_quantity(value) == expected


REJECTED: list[tuple[str, object]] = [
    ("empty", ""),
    ("only-spaces", "   "),
    ("word", "abc"),
    ("suffix-only", "k"),
    ("space-inside", "3 k"),
    ("double-suffix", "3kk"),
    ("upper-K-is-not-kilo", "3K"),
    ("bytes-unit", "3KB"),
    ("lower-binary", "3ki"),
    ("exponent-without-digits", "1e"),
    ("exponent-too-large", "1e31"),
    ("exponent-too-small", "1e-31"),
    ("double-sign", "--1"),
    ("two-points", "1.2.3"),
    ("hex", "0x10"),
    ("underscore", "1_000"),
    ("arabic-indic-digit", "\u0663"),
    ("fullwidth-digit", "\uff13k"),
    ("bool-true", True),
    ("bool-false", False),
    ("none", None),
    ("list", [1]),
    ("dict", {"a": 1}),
    ("float-nan", float("nan")),
    ("float-inf", float("inf")),
    ("float-minus-inf", float("-inf")),
    ("object", object()),
]


@pytest.mark.parametrize("value", [c[1] for c in REJECTED], ids=[c[0] for c in REJECTED])
def test_parse_quantity_rejects(value: object) -> None:
    with pytest.raises(QuantityError, match=r"quantity|out of range"):
        parse_quantity(value)


def test_quantity_error_is_a_request_error() -> None:
    # The webhook catches RequestError to deny a pod; a bad quantity must be one.
    with pytest.raises(RequestError):
        parse_quantity("abc")


WHOLE: list[tuple[str, object, int]] = [
    ("plain", "3", 3),
    ("json-int", 7, 7),
    ("json-float-whole", 2.0, 2),
    ("milli-whole", "2000m", 2),
    ("exponent", "1e3", 1000),
    ("kilo", "3k", 3000),
    ("kibi", "3Ki", 3072),
    ("negative", "-1", -1),
    ("int64-max", str(2**63 - 1), 2**63 - 1),
]


@pytest.mark.parametrize(("value", "expected"), [c[1:] for c in WHOLE], ids=[c[0] for c in WHOLE])
def test_parse_whole_accepts(value: object, expected: int) -> None:
    got = parse_whole(value)
    assert got == expected
    assert type(got) is int


NOT_WHOLE: list[tuple[str, object, str]] = [
    ("milli", "1500m", "not a whole number"),
    ("decimal", "1.5", "not a whole number"),
    ("json-float", 2.5, "not a whole number"),
    ("nano", "1n", "not a whole number"),
    ("negative-exponent", "15e-1", "not a whole number"),
    ("garbage", "x", "not a quantity"),
    # Beyond int64, as the API server's Quantity.Value(); such a number also cannot be
    # printed in an error message (Python's int-to-str digit limit).
    ("above-int64", str(2**63), "out of range"),
    ("many-digits", "1" + "0" * 5000, "out of range"),
    ("exponent-huge", "9e30", "out of range"),
]


@pytest.mark.parametrize(("value", "message"), [c[1:] for c in NOT_WHOLE],
                         ids=[c[0] for c in NOT_WHOLE])
def test_parse_whole_rejects(value: object, message: str) -> None:
    with pytest.raises(QuantityError, match=message):
        parse_whole(value)
