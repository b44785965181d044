import json
import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from stream_app.core.compact_json import dumps

stored = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**80), max_value=2**80)
    | st.floats(allow_nan=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(), inner, max_size=5),
    max_leaves=30,
)


def same(a: Any, b: Any) -> bool:
    """Equal and of one type all the way down, a float to its last bit and its zero's sign."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return repr(a) == repr(b)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    return bool(a == b)


@given(stored)
def test_a_value_reads_back_as_it_was(value: Any) -> None:
    """What a stored state holds comes back as it was, to a float's last bit and -0.0's sign,
    infinities included, as `json.loads` reads it."""
    assert same(json.loads(dumps(value)), value)


def test_the_strict_comparison_sees_a_sign_and_a_type() -> None:
    assert not same(-0.0, 0.0)
    assert not same([1.0], [1])


@given(st.text())
def test_strings_are_written_as_json_dumps_writes_them(text: str) -> None:
    """Byte for byte: a stored name's size (`stored_values.name_bytes`) is what the state takes."""
    assert dumps(text) == json.dumps(text, ensure_ascii=False).encode()


def test_compact_with_infinity_as_a_literal_and_tuples_as_arrays() -> None:
    assert dumps({"a": [1.5, math.inf, None], "b": (1, "é")}) == (
        b'{"a":[1.5,Infinity,null],"b":[1,"\xc3\xa9"]}'
    )


def test_a_lone_surrogate_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="surrogate"):
        dumps({"run": "a\ud800"})
