"""The CEL environment of DRA device selectors (k8s.io/dynamic-resource-allocation/cel).

A selector sees one variable, ``device``: ``device.driver``, ``device.attributes[domain].name``
and ``device.capacity[domain].name`` (a Quantity), with upstream's quantity and semver
functions and the strings, bindings and optional extensions. Expressions are compiled once
per expression string (upstream's cel.Cache) by cel-expr-python, Google's CEL runtime.

Where the bindings differ from cel-go, this module bridges:
- Quantity and Semver values are maps with one reserved key (cel-expr-python 0.1.3 has no
  opaque types); the functions below are declared on those maps, so ``quantity("1Gi")``,
  ``.compareTo()``, ``.isGreaterThan()`` and ``semver("1.2.3").major()`` work as upstream.
- Upstream's attribute and capacity maps return an empty map for an unknown domain: the
  domains an expression names are found at compile time and filled with empty maps.
- A missing attribute is a runtime error (``no such key: name``), as upstream reports it.

The cost limit. kube-scheduler evaluates a selector with a runtime cost limit of
resourceapi.CELSelectorExpressionMaxCost (1,000,000 cel-go cost units, "roughly 0.1 second"
by that constant's comment) and no compile-time estimate (its cel.Cache compiles with
DisableCostEstimation); past the limit the evaluation stops with "operation cancelled: actual
cost limit exceeded". cel-expr-python exposes no cost accounting, so kubesched bounds an
evaluation two ways and reports either with upstream's words:
- cel-cpp's comprehension budget, 10,000 loop iterations in one evaluation (measured: 99x99
  nested iterations pass, 100x100 do not). It is stricter than upstream for loops with a cheap
  body: 100x100 iterations cost cel-go about 50,000 units, which upstream allows.
- the CPU time of one evaluation on its own thread, against CEL_SELECTOR_EVALUATION_TIME_LIMIT.
  cel-cpp cannot be interrupted from Python, so an evaluation runs to its end and is then
  refused; the allocator remembers the outcome per device of a slice version, so it runs once.
  Thread CPU time, not wall time: a pause (another thread holding the GIL, a stopped or
  throttled process, a profiler) must not make a cheap selector fail, since the remembered
  failure would keep the device, and every pod that reaches it, from being scheduled. An
  evaluation over the limit is run once more and refused only when it is over again, so a
  garbage collection that happened to start inside it is not taken for its cost.
The API server's cost estimate still refuses, at creation, expressions whose worst case
exceeds the limit, which keeps the unbounded cases (exponential growth through nested
cel.bind) out of a cluster that has not been up- or downgraded.
"""

from __future__ import annotations

import re
import threading
import time
from fractions import Fraction
from functools import lru_cache
from typing import Any

from kubesched.framework.quantity import QuantityError, parse_quantity

QUANTITY_KEY = "__kubernetes.Quantity__"
SEMVER_KEY = "__kubernetes.Semver__"

_SEMVER = re.compile(r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
                     r"(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?"
                     r"(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$")
# device.attributes["domain"] / device.capacity["domain"]: the domains an expression names.
_DOMAIN_LOOKUP = re.compile(r"""device\s*\.\s*(attributes|capacity)\s*\[\s*(?:"([^"\\]*)"|'([^'\\]*)')\s*\]""")
_NOT_FOUND = re.compile(r'Key not found in map ?: ?"?([^"]*)"?')
# cel-go's words when an evaluation passes its cost limit (interpreter/runtimecost.go).
COST_LIMIT_EXCEEDED = "operation cancelled: actual cost limit exceeded"
# resourceapi.CELSelectorExpressionMaxCost is "roughly 0.1 second" of evaluation; measured on
# cel-expr-python, a selector that doubles a string through nested cel.bind reaches cel-go's
# limit at 2^22 characters, which takes cel-cpp 0.03-0.2 s.
CEL_SELECTOR_EVALUATION_TIME_LIMIT = 0.1


class CelError(Exception):
    """A compile or runtime error, worded as cel-go words it where the two differ."""


# --- Quantity ------------------------------------------------------------------------------

@lru_cache(maxsize=4096)
def _parse_quantity(text: str) -> Fraction:
    return parse_quantity(text)


def quantity_value(value: str) -> dict:
    """A Quantity as CEL sees it; equal quantities compare equal (canonical form)."""
    return {QUANTITY_KEY: str(_parse_quantity(value))}


def _q(value: Any) -> Fraction:
    if isinstance(value, dict) and QUANTITY_KEY in value:
        return Fraction(value[QUANTITY_KEY])
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"no such overload: expected a Quantity, got {type(value).__name__}")
    return Fraction(value)


def _quantity_fn(text: str) -> dict:
    try:
        return quantity_value(text)
    except QuantityError as err:
        raise ValueError(f"quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$': {err}") from None


def _is_quantity(text: str) -> bool:
    try:
        _parse_quantity(text)
        return True
    except QuantityError:
        return False


def _cmp(a: Fraction, b: Fraction) -> int:
    return (a > b) - (a < b)


def _as_integer(q: dict) -> int:
    v = _q(q)
    if v.denominator != 1 or not -(2**63) <= v.numerator < 2**63:
        raise ValueError("cannot convert value to integer")
    return v.numerator


def _from_fraction(v: Fraction) -> dict:
    return {QUANTITY_KEY: str(v)}


# --- Semver --------------------------------------------------------------------------------

@lru_cache(maxsize=4096)
def _parse_semver(text: str) -> tuple:
    m = _SEMVER.match(text)
    if not m:
        raise ValueError(f"No Major.Minor.Patch elements found in {text!r}" if "." not in text
                         else f"Invalid character(s) found in {text!r}")
    pre = tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in (m.group(4) or "").split(".") if p)
    return int(m.group(1)), int(m.group(2)), int(m.group(3)), pre


def semver_value(text: str) -> dict:
    _parse_semver(text)
    return {SEMVER_KEY: text}


def _sv(value: Any) -> tuple:
    if isinstance(value, dict) and SEMVER_KEY in value:
        return _parse_semver(value[SEMVER_KEY])
    raise ValueError(f"no such overload: expected a Semver, got {type(value).__name__}")


def _semver_cmp(a: Any, b: Any) -> int:
    (ma, na, pa, prea), (mb, nb, pb, preb) = _sv(a), _sv(b)
    if (ma, na, pa) != (mb, nb, pb):
        return _cmp(Fraction((ma, na, pa) > (mb, nb, pb)), Fraction((ma, na, pa) < (mb, nb, pb)))
    if prea == preb:
        return 0
    if not prea:  # a release is greater than any of its pre-releases
        return 1
    if not preb:
        return -1
    return 1 if prea > preb else -1


def _is_semver(text: str) -> bool:
    try:
        _parse_semver(text)
        return True
    except ValueError:
        return False


# --- the environment -----------------------------------------------------------------------

_env_lock = threading.Lock()
_env: Any = None


def _build_env() -> Any:
    from cel_expr_python import cel
    from cel_expr_python.ext import ext_bindings, ext_optional, ext_strings

    t = cel.Type
    obj = t.Map(t.STRING, t.DYN)

    def fn(name: str, *overloads: tuple) -> Any:
        return cel.FunctionDecl(name, [cel.Overload(f"{name}_{i}", ret, params, is_member=member, impl=impl)
                                       for i, (ret, params, member, impl) in enumerate(overloads)])

    functions = [
        fn("quantity", (obj, [t.STRING], False, _quantity_fn)),
        fn("isQuantity", (t.BOOL, [t.STRING], False, _is_quantity)),
        fn("semver", (obj, [t.STRING], False, semver_value)),
        fn("isSemver", (t.BOOL, [t.STRING], False, _is_semver)),
        # Members of Quantity (and of Semver, which shares compareTo and friends).
        fn("compareTo", (t.INT, [obj, obj], True,
                         lambda a, b: _semver_cmp(a, b) if SEMVER_KEY in a else _cmp(_q(a), _q(b)))),
        fn("isGreaterThan", (t.BOOL, [obj, obj], True,
                             lambda a, b: (_semver_cmp(a, b) if SEMVER_KEY in a else _cmp(_q(a), _q(b))) > 0)),
        fn("isLessThan", (t.BOOL, [obj, obj], True,
                          lambda a, b: (_semver_cmp(a, b) if SEMVER_KEY in a else _cmp(_q(a), _q(b))) < 0)),
        fn("sign", (t.INT, [obj], True, lambda a: _cmp(_q(a), Fraction(0)))),
        fn("isInteger", (t.BOOL, [obj], True, lambda a: _q(a).denominator == 1)),
        fn("asInteger", (t.INT, [obj], True, _as_integer)),
        fn("asApproximateFloat", (t.DOUBLE, [obj], True, lambda a: float(_q(a)))),
        fn("add", (obj, [obj, obj], True, lambda a, b: _from_fraction(_q(a) + _q(b))),
           (obj, [obj, t.INT], True, lambda a, b: _from_fraction(_q(a) + _q(b)))),
        fn("sub", (obj, [obj, obj], True, lambda a, b: _from_fraction(_q(a) - _q(b))),
           (obj, [obj, t.INT], True, lambda a, b: _from_fraction(_q(a) - _q(b)))),
        fn("major", (t.INT, [obj], True, lambda a: _sv(a)[0])),
        fn("minor", (t.INT, [obj], True, lambda a: _sv(a)[1])),
        fn("patch", (t.INT, [obj], True, lambda a: _sv(a)[2])),
    ]
    return cel.NewEnv(variables={"device": obj}, functions=functions,
                      extensions=[ext_strings.ExtStrings(), ext_bindings.ExtBindings(), ext_optional.ExtOptional()])


def _environment() -> Any:
    global _env
    if _env is None:
        with _env_lock:
            if _env is None:
                _env = _build_env()
    return _env


def _clean(message: str) -> str:
    if "Iteration budget exceeded" in message:
        return COST_LIMIT_EXCEEDED
    m = _NOT_FOUND.search(message)
    if m:
        return (f"no such key: {m.group(1)}. consider using CEL optional chaining (.? followed by orValue()) "
                "or guarding the check with has() for optional fields")
    for prefix in ("INVALID_ARGUMENT: ", "NOT_FOUND: ", "OUT_OF_RANGE: ", "UNKNOWN: "):
        if message.startswith(prefix):
            message = message[len(prefix):]
    return message.replace(" [INVALID_ARGUMENT]", "").strip()


class CompiledSelector:
    """One compiled expression; ``error`` is set instead when it does not compile."""

    __slots__ = ("expression", "program", "error", "attribute_domains", "capacity_domains")

    def __init__(self, expression: str):
        self.expression = expression
        self.program = None
        self.error: str | None = None
        self.attribute_domains: tuple[str, ...] = ()
        self.capacity_domains: tuple[str, ...] = ()
        try:
            self.program = _environment().compile(expression)
        except ImportError as err:
            self.error = f"the CEL runtime is not installed ({err}); install kubesched with its dependencies"
            return
        except Exception as err:  # noqa: BLE001 - the bindings raise RuntimeError for every compile error
            self.error = _clean(str(err))
            return
        return_type = self.program.return_type().name()
        if return_type not in ("bool", "dyn", "BOOL", "DYN"):
            self.program, self.error = None, f"must evaluate to bool or the unknown type, not {return_type.lower()}"
            return
        attrs, caps = set(), set()
        for kind, dq, sq in _DOMAIN_LOOKUP.findall(expression):
            (attrs if kind == "attributes" else caps).add(dq or sq)
        self.attribute_domains, self.capacity_domains = tuple(attrs), tuple(caps)

    def matches(self, device: dict) -> bool:
        """Evaluate on a device view (device_view()); CelError on a runtime error."""
        data = device
        if self.attribute_domains or self.capacity_domains:
            data = _with_domains(device, self.attribute_domains, self.capacity_domains)
        value, type_name, cpu = self._evaluate(data)
        if cpu > CEL_SELECTOR_EVALUATION_TIME_LIMIT:
            value, type_name, cpu = self._evaluate(data)
            if cpu > CEL_SELECTOR_EVALUATION_TIME_LIMIT:
                raise CelError(COST_LIMIT_EXCEEDED)
        if isinstance(value, bool):
            return value
        if type_name in ("ERROR", "error"):
            raise CelError(_clean(str(value)))
        raise CelError(f"CEL result of type {type_name.lower()} could not be converted to bool")

    def _evaluate(self, data: dict) -> tuple[Any, str, float]:
        """The result's value and type name, and the thread CPU seconds the evaluation took."""
        started = time.thread_time()
        try:
            result = self.program.eval(data={"device": data})
            value = result.value()
            type_name = result.type().name()
        except Exception as err:  # noqa: BLE001
            raise CelError(_clean(str(err))) from None
        return value, type_name, time.thread_time() - started


def _with_domains(device: dict, attribute_domains: tuple[str, ...], capacity_domains: tuple[str, ...]) -> dict:
    attrs, caps = device["attributes"], device["capacity"]
    missing_a = [d for d in attribute_domains if d not in attrs]
    missing_c = [d for d in capacity_domains if d not in caps]
    if not missing_a and not missing_c:
        return device
    out = dict(device)
    if missing_a:
        out["attributes"] = {**attrs, **{d: {} for d in missing_a}}
    if missing_c:
        out["capacity"] = {**caps, **{d: {} for d in missing_c}}
    return out


def attribute_value(attr: dict) -> Any:
    """One DeviceAttribute as CEL sees it (getAttributeValue)."""
    if "int" in attr:
        return int(attr["int"])
    if "bool" in attr:
        return bool(attr["bool"])
    if "string" in attr:
        return str(attr["string"])
    if "version" in attr:
        try:
            return semver_value(str(attr["version"]))
        except ValueError as err:
            raise CelError(f"parse semantic version: {err}") from None
    raise CelError("unsupported attribute value")


def split_qualified_name(name: str, default_domain: str) -> tuple[str, str]:
    domain, sep, ident = name.partition("/")
    return (domain, ident) if sep else (default_domain, name)


def device_view(driver: str, device: dict) -> dict:
    """The ``device`` variable for one ResourceSlice device; CelError for a bad attribute."""
    attributes: dict[str, dict] = {}
    for name, attr in (device.get("attributes") or {}).items():
        try:
            value = attribute_value(attr or {})
        except CelError as err:
            raise CelError(f"attribute {name}: {err}") from None
        domain, ident = split_qualified_name(name, driver)
        attributes.setdefault(domain, {})[ident] = value
    capacity: dict[str, dict] = {}
    for name, cap in (device.get("capacity") or {}).items():
        domain, ident = split_qualified_name(name, driver)
        try:
            capacity.setdefault(domain, {})[ident] = quantity_value(str((cap or {}).get("value", "0")))
        except QuantityError as err:
            raise CelError(f"capacity {name}: {err}") from None
    return {"driver": driver, "allowMultipleAllocations": bool(device.get("allowMultipleAllocations")),
            "attributes": attributes, "capacity": capacity}


class SelectorCache:
    """Compiled programs per expression string, shared by every scheduling cycle (cel.Cache),
    and the outcome of each expression on each device of a ResourceSlice version: a published
    slice never changes in place, so a selector is evaluated once per device, not once per
    pod and node (upstream evaluates again each time; the answer is the same)."""

    def __init__(self, max_size: int = 10000, max_outcomes: int = 500_000):
        self._lock = threading.Lock()
        self._cache: dict[str, CompiledSelector] = {}
        self._max = max_size
        self._outcomes: dict[tuple, bool | str] = {}
        self._max_outcomes = max_outcomes

    def outcome(self, key: tuple) -> bool | str | None:
        """True/False, or the runtime error text, of an earlier evaluation; None if none."""
        return self._outcomes.get(key)

    def remember(self, key: tuple, outcome: bool | str) -> None:
        if len(self._outcomes) >= self._max_outcomes:
            with self._lock:
                self._outcomes.clear()
        self._outcomes[key] = outcome

    def get(self, expression: str) -> CompiledSelector:
        compiled = self._cache.get(expression)
        if compiled is None:
            compiled = CompiledSelector(expression)
            with self._lock:
                if len(self._cache) >= self._max:
                    self._cache.pop(next(iter(self._cache)))
                self._cache[expression] = compiled
        return compiled
