"""Kubernetes resource quantities (``"3000"``, ``"3k"``, ``"2Gi"``, ``"1e3"``).

The grammar is the apimachinery one: an optionally signed decimal number followed by a
binary-SI suffix (Ki..Ei), a decimal-SI suffix (n, u, m, k, M, G, T, P, E) or a decimal
exponent (``e3``). Values are returned as exact :class:`fractions.Fraction` so that
``"1500m"`` is never silently rounded to 1 or 2.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation
from fractions import Fraction

from vgpu.errors import QuantityError

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 10**3),
    "": Fraction(1),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
}
# ASCII digits only: Python's \d also matches other scripts' digits ("٣", "３"), which
# the API server rejects.
_PATTERN = re.compile(
    r"^(?P<num>[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))"
    r"(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?[0-9]+)?$"
)


def parse_quantity(value: object) -> Fraction:
    """Parse a quantity as the API server would accept it.

    JSON numbers are accepted too, because hand-written manifests and the YAML loader
    produce them (``nvidia.com/gpu: 1``). Booleans are not numbers here.
    """
    if isinstance(value, bool) or value is None:
        raise QuantityError(f"{value!r} is not a quantity")
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, float):
        try:
            return Fraction(Decimal(repr(value)))
        except (InvalidOperation, ValueError, OverflowError):  # nan, inf (YAML's .inf)
            raise QuantityError(f"{value!r} is not a quantity") from None
    if not isinstance(value, str):
        raise QuantityError(f"{value!r} is not a quantity")
    text = value.strip()
    match = _PATTERN.match(text)
    if match is None:
        raise QuantityError(
            f"{value!r} is not a quantity (expected a number with an optional suffix such as "
            "'3000', '3k', '4Gi')"
        )
    number = Fraction(Decimal(match["num"]))
    suffix = match["suffix"] or ""
    if suffix in _BINARY:
        return number * _BINARY[suffix]
    if suffix in _DECIMAL:
        return number * _DECIMAL[suffix]
    exponent = int(suffix[1:])
    if abs(exponent) > 30:
        raise QuantityError(f"{value!r}: exponent {exponent} is out of range")
    return number * Fraction(10) ** exponent


#: The API server's Quantity.Value() is an int64; nothing vgpu counts comes near it.
_INT64_MAX = 2**63 - 1


def parse_whole(value: object) -> int:
    """Parse a quantity that must be a whole number (GPU counts, MiB, percent)."""
    # Fast path for the usual spellings ("3000", 2): every admission parses several of
    # these, and the full grammar (regex, Decimal, Fraction) costs ten times more. Same
    # result either way; anything else takes the full path. (18 digits stay within int64.)
    if type(value) is int and -_INT64_MAX - 1 <= value <= _INT64_MAX:
        return value
    if type(value) is str and len(value) <= 18 and value.isascii() and value.isdigit():
        return int(value)
    amount = parse_quantity(value)
    if amount.denominator != 1:
        raise QuantityError(f"{value!r} is not a whole number")
    # Bounded also because an int of more than 4300 digits cannot even be formatted into
    # the error message that names it.
    if not -_INT64_MAX - 1 <= amount <= _INT64_MAX:
        raise QuantityError(f"{_short(value)} is out of range (at most {_INT64_MAX})")
    return int(amount)


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:37]}..."
