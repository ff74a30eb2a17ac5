"""Kubernetes resource quantities ("100m", "1Gi", "1e3") parsed as upstream parses them."""

from __future__ import annotations

import math
import re
from fractions import Fraction
from functools import lru_cache

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {"n": Fraction(1, 10**9), "u": Fraction(1, 10**6), "m": Fraction(1, 1000), "": 1,
            "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18}
_QUANTITY = re.compile(
    r"^(?P<num>[+-]?(?:\d+\.?\d*|\.\d+))(?:(?P<exp>[eE][+-]?\d+)|(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])?)$")


class QuantityError(ValueError):
    pass


def parse_quantity(value: str | int | float) -> Fraction:
    """Exact value of a quantity string; raises QuantityError naming the bad string."""
    if isinstance(value, (int, float)):
        return Fraction(value)
    text = str(value).strip()
    match = _QUANTITY.match(text)
    if not match:
        raise QuantityError(f"quantity {value!r} is not a Kubernetes quantity (e.g. 100m, 0.5, 1Gi, 512Mi, 1G, 1e3)")
    number = Fraction(match.group("num"))
    if match.group("exp"):
        return number * Fraction(10) ** int(match.group("exp")[1:])
    suffix = match.group("suffix") or ""
    return number * (_BINARY.get(suffix) or _DECIMAL[suffix])


# Hot path: every pod and node event parses quantities, and clusters repeat a few dozen
# strings ("100m", "1Gi"); exact Fraction arithmetic is slow, so results are memoised.
@lru_cache(maxsize=8192)
def milli_value(value: str | int | float) -> int:
    """MilliValue(): rounded up to a whole milli-unit, as resource.Quantity does."""
    return math.ceil(parse_quantity(value) * 1000)


@lru_cache(maxsize=8192)
def int_value(value: str | int | float) -> int:
    """Value(): rounded up to a whole unit, as resource.Quantity does."""
    return math.ceil(parse_quantity(value))
