"""Consumable capacity (DRAConsumableCapacity, beta and on by default in v1.37).

A device with ``allowMultipleAllocations: true`` can be handed to several claims at once;
each allocation consumes part of the device's ``capacity``, as the request's
``capacity.requests`` asks, rounded up by the capacity's ``requestPolicy`` (default,
validValues, validRange with min/max/step). A device without it still checks a capacity
request against its capacity, but is allocated whole. Upstream: ``consumable_capacity.go``
of k8s.io/dynamic-resource-allocation/structured/internal/incubating.

v1.37's default gates leave DRAFractionalCapacityRange off (``kube-scheduler --help``: "BETA -
default=false", on only with ``--min-compatibility-version>=1.37``), so ranges are rounded with
integer arithmetic (Quantity.Value(), which rounds up), as here.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction
from typing import Any

from kubesched.framework.quantity import QuantityError, parse_quantity

MAX_INT64 = 2**63 - 1
NOT_REPRESENTABLE = "capacity request cannot be represented in the device's range arithmetic"


class CapacityError(Exception):
    """A capacity request that aborts the allocation (upstream's non-nil error)."""


def _q(value: Any) -> Fraction:
    try:
        return parse_quantity(str(value))
    except QuantityError as err:
        raise CapacityError(f"invalid quantity {value!r}: {err}") from None


def _value(q: Fraction) -> int:
    """Quantity.Value(): the value rounded up to an integer."""
    return math.ceil(q)


BINARY_SI, DECIMAL_SI = "BinarySI", "DecimalSI"
_BINARY_SUFFIX = re.compile(r"[KMGTPE]i$")


def quantity_format(text: Any) -> str:
    """The format a Quantity keeps from its text (its String() prints in it)."""
    return BINARY_SI if _BINARY_SUFFIX.search(str(text).strip()) else DECIMAL_SI


def format_quantity(q: Fraction, fmt: str = DECIMAL_SI) -> str:
    """Quantity.String(): the canonical text of q in its format (1024-multiples with Ki..Ei in
    BinarySI from 1024 up, else powers of 1000 with k..E or m/u/n)."""
    if fmt == BINARY_SI and q.denominator == 1 and abs(q) >= 1024:
        value, power = q.numerator, 0
        while value % 1024 == 0 and power < 6:
            value, power = value // 1024, power + 1
        return f"{value}{('', 'Ki', 'Mi', 'Gi', 'Ti', 'Pi', 'Ei')[power]}"
    if q.denominator == 1:
        value, power = q.numerator, 0
        while value != 0 and value % 1000 == 0 and power < 6:
            value, power = value // 1000, power + 1
        return f"{value}{('', 'k', 'M', 'G', 'T', 'P', 'E')[power]}"
    for suffix, scale in (("m", 1000), ("u", 10**6), ("n", 10**9)):
        scaled = q * scale
        if scaled.denominator == 1:
            return f"{scaled.numerator}{suffix}"
    return f"{math.ceil(q * 10**9)}n"  # a Quantity rounds below a nano up


def _requested(request_capacity: dict | None) -> dict:
    return (request_capacity or {}).get("requests") or {}


def _fill_empty(capacity: dict) -> tuple[Fraction, str]:
    policy = capacity.get("requestPolicy") or {}
    text = policy["default"] if policy.get("default") is not None else capacity.get("value", "0")
    return _q(text), quantity_format(text)


def _round_up_range(requested: Fraction, requested_format: str, valid_range: dict) -> tuple[Fraction, str]:
    minimum = _q(valid_range["min"])
    if requested < minimum:
        return minimum, quantity_format(valid_range["min"])
    if valid_range.get("step") is None:
        return requested, requested_format
    if requested > MAX_INT64:
        raise CapacityError(f"{NOT_REPRESENTABLE}: request {format_quantity(requested)} exceeds MaxInt64")
    requested_int, step_int, min_int = _value(requested), _value(_q(valid_range["step"])), _value(minimum)
    added = requested_int - min_int
    n = int(added / step_int)  # Go's integer division truncates toward zero
    if added % step_int != 0:
        n += 1
    if min_int >= 0 and n > (MAX_INT64 - min_int) // step_int:
        raise CapacityError(f"{NOT_REPRESENTABLE}: rounding request {format_quantity(requested)} up to the next "
                            "step passes MaxInt64")
    return Fraction(min_int + step_int * n), quantity_format(valid_range["step"])


def _consumed_one(raw: Any, capacity: dict) -> tuple[Fraction, str]:
    """calculateConsumedCapacity: what one allocation takes of one capacity, and its format."""
    if raw is None:
        return _fill_empty(capacity)
    requested, requested_format = _q(raw), quantity_format(raw)
    policy = capacity.get("requestPolicy")
    if policy is None:
        return requested, requested_format
    valid_range = policy.get("validRange")
    if valid_range is not None and valid_range.get("min") is not None:
        return _round_up_range(requested, requested_format, valid_range)
    if policy.get("validValues") is not None:
        for valid in policy["validValues"]:
            if requested <= _q(valid):
                return _q(valid), quantity_format(valid)
    return requested, requested_format


def _violates_policy(consumed: Fraction, policy: dict | None) -> bool:
    if policy is None:
        return False
    # Upstream compares with the default as Go structs; the API requires a valid default,
    # so equal values give the same answer.
    if policy.get("default") is not None and consumed == _q(policy["default"]):
        return False
    valid_range = policy.get("validRange")
    if valid_range is not None:
        if valid_range.get("max") is not None and consumed > _q(valid_range["max"]):
            return True
        if valid_range.get("step") is not None:
            requested, step = _value(consumed), _value(_q(valid_range["step"]))
            minimum = _value(_q(valid_range.get("min", "0")))
            if (requested - minimum) % step != 0:
                return True
        return False
    valid_values = policy.get("validValues") or ()
    if valid_values:
        return not any(consumed == _q(v) for v in valid_values)
    return False


def consumed_capacity(request_capacity: dict | None, capacities: dict) -> dict[str, tuple[Fraction, str]]:
    """GetConsumedCapacityFromRequest: per capacity of the device, what this allocation takes
    and the format it prints in (a capacity the request does not name takes its default, else
    all of it)."""
    out = {}
    for name, capacity in capacities.items():
        raw = _requested(request_capacity).get(name)
        try:
            out[name] = _consumed_one(raw, capacity or {})
        except CapacityError as err:
            raise CapacityError(f'capacity "{name}": {err}') from None
    return out


def request_fits(current: dict[str, Fraction] | None, request_capacity: dict | None, capacities: dict,
                 allocating: dict[str, Fraction] | None) -> bool:
    """CmpRequestOverCapacity: whether the request fits beside what is already consumed
    (``current``, from allocated claims) and what this allocation run took (``allocating``).
    CapacityError for a request that must abort the allocation."""
    capacities = capacities or {}
    if any(name not in capacities for name in _requested(request_capacity)):
        return False  # this device lacks a requested capacity; another may have it
    consumed = {name: value for name, (value, _fmt) in consumed_capacity(request_capacity, capacities).items()}
    for name, value in consumed.items():
        if value < 0:
            raise CapacityError(f'capacity "{name}": capacity value is negative')
    for name, capacity in capacities.items():
        value = consumed[name]
        if _violates_policy(value, (capacity or {}).get("requestPolicy")):
            return False
        total = value + (current or {}).get(name, 0) + (allocating or {}).get(name, 0)
        if total > _q((capacity or {}).get("value", "0")):
            return False
    return True
