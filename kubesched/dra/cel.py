"""The CEL environment of DRA device selectors (k8s.io/dynamic-resource-allocation/cel).

A selector sees one variable, ``device``: ``device.driver``, ``device.attributes[domain].name``
and ``device.capacity[domain].name`` (a Quantity), with upstream's quantity and semver
functions and the strings, bindings and optional extensions. Expressions are compiled once
per expression string (upstream's cel.Cache) by one of two backends, chosen at import:
cel-expr-python (Google's cel-cpp) where it publishes a wheel, CPython 3.11 and later, and
elsewhere (3.9, 3.10) kubesched/dra/celpy_backend.py on cel-python's parser. pyproject.toml's
environment markers install the one a master's Python can have; the tests run every selector
and every DRA golden scenario through both, so they give one answer.

Where the bindings differ from cel-go, this module bridges:
- Quantity and Semver values are maps with one reserved key (cel-expr-python 0.1.3 has no
  opaque types); the functions below are declared on those maps, so ``quantity("1Gi")``,
  ``.compareTo()``, ``.isGreaterThan()`` and ``semver("1.2.3").major()`` work as upstream.
- Upstream's attribute and capacity maps return an empty map for an unknown domain: the
  domains an expression names are found at compile time and filled with empty maps.
- A missing attribute is a runtime error (``no such key: name``), as upstream reports it;
  cel-cpp's words for a failed overload, a list index and a division by zero become cel-go's.

The cost limit. kube-scheduler evaluates a selector with a runtime cost limit of
resourceapi.CELSelectorExpressionMaxCost (1,000,000 cel-go cost units, "roughly 0.1 second"
by that constant's comment) and no compile-time estimate (its cel.Cache compiles with
DisableCostEstimation); past the limit the evaluation stops with "operation cancelled: actual
cost limit exceeded". Neither backend has cel-go's cost accounting, so kubesched bounds an
evaluation two ways and reports either with upstream's words:
- cel-cpp's comprehension budget: 10,000 loop iterations in one evaluation (measured: 9,999
  pass, 10,000 do not, nested loops counted together), which celpy_backend counts alike. It
  is stricter than upstream for loops with a cheap body: 100x100 iterations cost cel-go about
  50,000 units, which upstream allows.
- what grows without loops (a string doubled through nested cel.bind): cel-expr-python runs
  the evaluation on its own thread and measures its CPU time against
  CEL_SELECTOR_EVALUATION_TIME_LIMIT; celpy_backend charges cel-go's 0.1 unit per character
  or element produced and stops at the limit.
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
# cel-cpp's words that cel-go words otherwise (cel-go common/types/err.go, list.go).
_CEL_GO_WORDS = ((re.compile(r"^No matching overloads found : .*$"), "no such overload"),
                 (re.compile(r"^Index error: index=(-?\d+) size=(\d+)$"), r"index '\1' out of range in list size '\2'"),
                 (re.compile(r"^divide by zero$"), "division by zero"))
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

# Backends, chosen at import: cel-expr-python (Google's cel-cpp) where it publishes a wheel
# (CPython 3.11+), else the cel-python backend (kubesched/dra/celpy_backend.py). pyproject's
# environment markers install one or the other; the tests run every selector through both.
CEL_EXPR_PYTHON, CEL_PYTHON = "cel-expr-python", "cel-python"
BACKENDS = (CEL_EXPR_PYTHON, CEL_PYTHON)

# Types as both backends spell them; a Quantity or a Semver is a map with its reserved key.
BOOL, INT, DOUBLE, STRING, OBJECT = "bool", "int", "double", "string", ("map", "string", "dyn")


def _compare_values(a: Any, b: Any) -> int:
    return _semver_cmp(a, b) if SEMVER_KEY in a else _cmp(_q(a), _q(b))


# Upstream's quantity and semver libraries (k8s.io/apiserver/pkg/cel/library/quantity.go and
# semver.go): (name, return type, parameter types, member function, implementation).
LIBRARY: tuple[tuple, ...] = (
    ("quantity", OBJECT, (STRING,), False, _quantity_fn),
    ("isQuantity", BOOL, (STRING,), False, _is_quantity),
    ("semver", OBJECT, (STRING,), False, semver_value),
    ("isSemver", BOOL, (STRING,), False, _is_semver),
    # Members of Quantity (and of Semver, which shares compareTo and friends).
    ("compareTo", INT, (OBJECT, OBJECT), True, _compare_values),
    ("isGreaterThan", BOOL, (OBJECT, OBJECT), True, lambda a, b: _compare_values(a, b) > 0),
    ("isLessThan", BOOL, (OBJECT, OBJECT), True, lambda a, b: _compare_values(a, b) < 0),
    ("sign", INT, (OBJECT,), True, lambda a: _cmp(_q(a), Fraction(0))),
    ("isInteger", BOOL, (OBJECT,), True, lambda a: _q(a).denominator == 1),
    ("asInteger", INT, (OBJECT,), True, _as_integer),
    ("asApproximateFloat", DOUBLE, (OBJECT,), True, lambda a: float(_q(a))),
    ("add", OBJECT, (OBJECT, OBJECT), True, lambda a, b: _from_fraction(_q(a) + _q(b))),
    ("add", OBJECT, (OBJECT, INT), True, lambda a, b: _from_fraction(_q(a) + _q(b))),
    ("sub", OBJECT, (OBJECT, OBJECT), True, lambda a, b: _from_fraction(_q(a) - _q(b))),
    ("sub", OBJECT, (OBJECT, INT), True, lambda a, b: _from_fraction(_q(a) - _q(b))),
    ("major", INT, (OBJECT,), True, lambda a: _sv(a)[0]),
    ("minor", INT, (OBJECT,), True, lambda a: _sv(a)[1]),
    ("patch", INT, (OBJECT,), True, lambda a: _sv(a)[2]),
)


def installed_backend() -> str:
    """cel-expr-python where it is installed, else cel-python."""
    try:
        import cel_expr_python  # noqa: F401 - only whether it imports
    except ImportError:
        return CEL_PYTHON
    return CEL_EXPR_PYTHON


DEFAULT_BACKEND = installed_backend()


def _build_cel_expr_python() -> Any:
    from cel_expr_python import cel
    from cel_expr_python.ext import ext_bindings, ext_optional, ext_strings

    t = cel.Type
    types = {BOOL: t.BOOL, INT: t.INT, DOUBLE: t.DOUBLE, STRING: t.STRING, OBJECT: t.Map(t.STRING, t.DYN)}
    overloads: dict[str, list] = {}
    for name, ret, params, member, impl in LIBRARY:
        overloads.setdefault(name, []).append(
            cel.Overload(f"{name}_{len(overloads.get(name, ()))}", types[ret], [types[p] for p in params],
                         is_member=member, impl=impl))
    functions = [cel.FunctionDecl(name, decls) for name, decls in overloads.items()]
    return cel.NewEnv(variables={"device": types[OBJECT]}, functions=functions,
                      extensions=[ext_strings.ExtStrings(), ext_bindings.ExtBindings(), ext_optional.ExtOptional()])


def _build_cel_python() -> Any:
    # Imported here: its library (cel-python) is installed only where cel-expr-python is not,
    # and in the development venv, which has both.
    from kubesched.dra import celpy_backend

    return celpy_backend.Environment(variables={"device": OBJECT}, functions=list(LIBRARY))


_env_lock = threading.Lock()
_envs: dict[str, Any] = {}


def _environment(backend: str) -> Any:
    env = _envs.get(backend)
    if env is None:
        with _env_lock:
            env = _envs.get(backend)
            if env is None:
                env = _envs[backend] = _build_cel_expr_python() if backend == CEL_EXPR_PYTHON else _build_cel_python()
    return env


def _clean(message: str) -> str:
    """cel-cpp's words for an error, in cel-go's where the two differ."""
    if "Iteration budget exceeded" in message:
        return COST_LIMIT_EXCEEDED
    m = _NOT_FOUND.search(message)
    if m:
        return _no_such_key(m.group(1))
    for prefix in ("INVALID_ARGUMENT: ", "NOT_FOUND: ", "OUT_OF_RANGE: ", "UNKNOWN: ", "FAILED_PRECONDITION: "):
        if message.startswith(prefix):
            message = message[len(prefix):]
    message = message.replace(" [INVALID_ARGUMENT]", "").strip()
    for pattern, words in _CEL_GO_WORDS:
        message = pattern.sub(words, message)
    return message


def _no_such_key(key: str) -> str:
    return (f"no such key: {key}. consider using CEL optional chaining (.? followed by orValue()) "
            "or guarding the check with has() for optional fields")


class CompiledSelector:
    """One compiled expression; ``error`` is set instead when it does not compile."""

    __slots__ = ("expression", "backend", "program", "error", "attribute_domains", "capacity_domains")

    def __init__(self, expression: str, backend: str | None = None):
        self.expression = expression
        self.backend = backend or DEFAULT_BACKEND
        self.program = None
        self.error: str | None = None
        self.attribute_domains: tuple[str, ...] = ()
        self.capacity_domains: tuple[str, ...] = ()
        try:
            env = _environment(backend)
        except ImportError as err:
            self.error = f"the CEL runtime is not installed ({err}); install kubesched with its dependencies"
            return
        try:
            self.program = env.compile(expression)
        except Exception as err:  # noqa: BLE001 - cel-expr-python raises RuntimeError for every compile error
            self.error = _clean(str(err))
            return
        return_type = self._return_type()
        if return_type not in ("bool", "dyn"):
            self.program, self.error = None, f"must evaluate to bool or the unknown type, not {return_type}"
            return
        attrs, caps = set(), set()
        for kind, dq, sq in _DOMAIN_LOOKUP.findall(expression):
            (attrs if kind == "attributes" else caps).add(dq or sq)
        self.attribute_domains, self.capacity_domains = tuple(attrs), tuple(caps)

    def _return_type(self) -> str:
        """cel-go's spelling of the expression's type: list(int), map(string, int)."""
        if self.backend == CEL_EXPR_PYTHON:
            return self.program.return_type().name().lower().replace("<", "(").replace(">", ")")
        return self.program.return_type

    def matches(self, device: dict) -> bool:
        """Evaluate on a device view (device_view()); CelError on a runtime error."""
        data = device
        if self.attribute_domains or self.capacity_domains:
            data = _with_domains(device, self.attribute_domains, self.capacity_domains)
        if self.backend == CEL_PYTHON:
            value, type_name = self._evaluate_celpy(data)
        else:
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
        """cel-expr-python: the result's value and type name, and the thread CPU seconds the
        evaluation took."""
        started = time.thread_time()
        try:
            result = self.program.eval(data={"device": data})
            value = result.value()
            type_name = result.type().name()
        except Exception as err:  # noqa: BLE001
            raise CelError(_clean(str(err))) from None
        return value, type_name, time.thread_time() - started

    def _evaluate_celpy(self, data: dict) -> tuple[Any, str]:
        """cel-python: the result's value and CEL type name; stopped at the cost limit."""
        try:
            return self.program.evaluate({"device": data})
        except self.program.Error as err:
            if err.cost:
                raise CelError(COST_LIMIT_EXCEEDED) from None
            message = str(err)
            if message.startswith("no such key: "):
                message = _no_such_key(message[len("no such key: "):])
            raise CelError(message) from None


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

    def __init__(self, max_size: int = 10000, max_outcomes: int = 500_000, backend: str | None = None):
        self.backend = backend or DEFAULT_BACKEND
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
            compiled = CompiledSelector(expression, self.backend)
            with self._lock:
                if len(self._cache) >= self._max:
                    self._cache.pop(next(iter(self._cache)))
                self._cache[expression] = compiled
        return compiled
