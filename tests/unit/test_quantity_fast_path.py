"""parse_whole's fast path gives exactly what the full quantity grammar gives."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from vgpu.errors import QuantityError
from vgpu.quantity import parse_quantity, parse_whole

INT64 = (-(2**63), 2**63 - 1)


def reference(value: int | str) -> int | str:
    """The full grammar and the int64 bound, without the fast path."""
    amount = int(parse_quantity(value))
    return amount if INT64[0] <= amount <= INT64[1] else "out of range"


def fast(value: int | str) -> int | str:
    try:
        return parse_whole(value)
    except QuantityError:
        return "out of range"


@given(st.one_of(
    st.integers(-10**20, 10**20),
    st.integers(0, 10**20).map(str),
    st.tuples(st.integers(0, 5), st.integers(0, 10**6)).map(lambda t: "0" * t[0] + str(t[1])),
    st.text(alphabet="0123456789", min_size=1, max_size=25),
))
def test_fast_path_agrees_with_the_grammar(value: int | str) -> None:
    assert fast(value) == reference(value)
