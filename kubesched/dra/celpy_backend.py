"""The CEL backend for Pythons that cel-expr-python has no wheel for (CPython 3.9 and 3.10).

kubesched/dra/cel.py declares the environment (variables, upstream's quantity and semver
functions) once and hands it to a backend. This one parses with cel-python's grammar (the
``celpy`` package: CEL's grammar for lark, its literal decoding), extended with the optional
syntax (``x.?f``, ``x[?k]``), and then type-checks and evaluates the tree itself. cel-python's
own evaluator has none of what a DRA selector may use beyond core CEL (``cel.bind``, optional
values, the strings extension), no compile-time type check, no cost accounting and its own
error texts, so each of those would have to be replaced in it; what is written here is what
cel-go and cel-cpp do, so both backends give one answer:

- the checker: declared identifiers and functions, overloads resolved on the argument types
  (``dyn`` matches any), the expression's result type; errors worded and placed as cel-go
  places them (``ERROR: <input>:L:C: ...`` with the caret lines);
- the evaluator: CEL's error propagation (``&&``, ``||`` and ``all``/``exists`` absorb an
  error that the other side decides), int64 overflow, heterogeneous numeric equality on
  ``dyn`` values, map keys missing as ``no such key``;
- the cost limit: the comprehension budget of cel-cpp (10,000 iterations in one evaluation,
  so a selector passes or fails on both backends alike) and, where cel-cpp times the
  evaluation, cel-go's own charge for strings and lists that grow (0.1 unit per character
  or element produced, common.StringTraversalCostFactor) against
  resourceapi.CELSelectorExpressionMaxCost. A pure-Python evaluation can be stopped, so it
  stops the moment either is exceeded.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any, Callable

import celpy
import lark
from celpy.evaluation import celbytes, celstr

try:  # RE2, the regular expressions of cel-go and cel-cpp; cel-python depends on it
    import re2 as _regex
except ImportError:  # pragma: no cover - google-re2 publishes wheels for every target
    _regex = re

# Types are strings for the simple ones and tuples for the parameterized ones:
# ("list", elem), ("map", key, value), ("optional", inner); "dyn" matches anything.
DYN, BOOL, INT, UINT, DOUBLE, STRING, BYTES, NULL, ERROR = (
    "dyn", "bool", "int", "uint", "double", "string", "bytes", "null_type", "*error*")
COMPREHENSION_BUDGET = 10_000   # cel-cpp's comprehension_max_iterations, as measured there
MAX_COST = 1_000_000            # resourceapi.CELSelectorExpressionMaxCost
SIZE_COST_FACTOR = 0.1          # cel-go's common.StringTraversalCostFactor
INT64_MIN, INT64_MAX, UINT64_MAX = -(2**63), 2**63 - 1, 2**64 - 1
MACROS = {"all", "exists", "exists_one", "map", "filter"}


class CompileError(Exception):
    """A parse or check error, worded and placed as cel-go reports it."""


class EvalError(Exception):
    """A runtime error of one evaluation; ``cost`` marks the cost limit."""

    def __init__(self, message: str, cost: bool = False):
        super().__init__(message)
        self.cost = cost


class Uint(int):
    """A CEL uint: an int that does not equal a CEL int of the same value in the checker."""


class Optional:
    """A CEL optional value (cel-go's types.Optional)."""

    __slots__ = ("value",)

    def __init__(self, value: Any):
        self.value = value

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Optional) and _equals(self.value, other.value)

    def __hash__(self) -> int:  # pragma: no cover - optionals are never map keys
        return 0


_ABSENT = object()
OPTIONAL_NONE = Optional(_ABSENT)


def type_name(t: Any) -> str:
    """cel-go's spelling of a type in an error message."""
    if isinstance(t, tuple):
        if t[0] == "optional":
            return f"optional_type({type_name(t[1])})"
        return f"{t[0]}({', '.join(type_name(x) for x in t[1:])})"
    return t


def cel_type_name(value: Any) -> str:
    """The CEL type of a runtime value."""
    name = value_type(value)
    return {"int64": INT, "uint64": UINT}.get(name, name)


def value_type(value: Any) -> str:
    """The type name of a runtime value, as cel-cpp's overload errors print it."""
    if isinstance(value, bool):
        return BOOL
    if isinstance(value, Uint):
        return "uint64"
    if isinstance(value, int):
        return "int64"
    if isinstance(value, float):
        return DOUBLE
    if isinstance(value, str):
        return STRING
    if isinstance(value, bytes):
        return BYTES
    if value is None:
        return "null_type"
    if isinstance(value, list):
        return "list"
    if isinstance(value, dict):
        return "map"
    if isinstance(value, Optional):
        return "optional_type"
    return type(value).__name__  # pragma: no cover


def _assignable(param: Any, arg: Any, bindings: dict) -> bool:
    if arg == DYN or arg == ERROR or param == DYN:
        return True
    if isinstance(param, str) and param.startswith("_"):  # a type parameter: A, K, V
        bound = bindings.get(param)
        if bound is None or bound == DYN:
            bindings[param] = arg
            return True
        if arg == DYN or bound == arg:
            return True
        return _assignable(bound, arg, bindings)
    if isinstance(param, tuple) and isinstance(arg, tuple):
        return param[0] == arg[0] and len(param) == len(arg) and \
            all(_assignable(p, a, bindings) for p, a in zip(param[1:], arg[1:]))
    return param == arg


def _substitute(t: Any, bindings: dict) -> Any:
    if isinstance(t, tuple):
        return (t[0],) + tuple(_substitute(x, bindings) for x in t[1:])
    if isinstance(t, str) and t.startswith("_"):
        return bindings.get(t, DYN)
    return t


def _join(types: list) -> Any:
    """The common type of several candidates: the type itself when they agree, else dyn."""
    first = types[0]
    return first if all(t == first for t in types[1:]) else DYN


# --- the standard declarations (cel-go's stdlib, the strings, bindings and optional extensions) ---

NUMERIC = (INT, UINT, DOUBLE)
COMPARABLE = (BOOL, INT, UINT, DOUBLE, STRING, BYTES)
# Operators and functions: name -> [(return, [params], member)]. "_A" is a type parameter.
STANDARD: dict[str, list[tuple]] = {
    "_==_": [(BOOL, ["_A", "_A"], False)],
    "_!=_": [(BOOL, ["_A", "_A"], False)],
    "_+_": [(t, [t, t], False) for t in (INT, UINT, DOUBLE, STRING, BYTES)] +
           [(("list", "_A"), [("list", "_A"), ("list", "_A")], False)],
    "_-_": [(t, [t, t], False) for t in NUMERIC],
    "_*_": [(t, [t, t], False) for t in NUMERIC],
    "_/_": [(t, [t, t], False) for t in NUMERIC],
    "_%_": [(t, [t, t], False) for t in (INT, UINT)],
    "-_": [(t, [t], False) for t in (INT, DOUBLE)],
    "!_": [(BOOL, [BOOL], False)],
    "@in": [(BOOL, ["_A", ("list", "_A")], False), (BOOL, ["_A", ("map", "_A", "_B")], False)],
    "_[_]": [("_A", [("list", "_A"), INT], False), ("_B", [("map", "_A", "_B"), "_A"], False)],
    "size": [(INT, [t], m) for t in (STRING, BYTES, ("list", "_A"), ("map", "_A", "_B")) for m in (False, True)],
    "contains": [(BOOL, [STRING, STRING], True)],
    "startsWith": [(BOOL, [STRING, STRING], True)],
    "endsWith": [(BOOL, [STRING, STRING], True)],
    "matches": [(BOOL, [STRING, STRING], True), (BOOL, [STRING, STRING], False)],
    "int": [(INT, [t], False) for t in (INT, UINT, DOUBLE, STRING)],
    "uint": [(UINT, [t], False) for t in (INT, UINT, DOUBLE, STRING)],
    "double": [(DOUBLE, [t], False) for t in (INT, UINT, DOUBLE, STRING)],
    "string": [(STRING, [t], False) for t in (INT, UINT, DOUBLE, STRING, BYTES, BOOL)],
    "bytes": [(BYTES, [t], False) for t in (STRING, BYTES)],
    "bool": [(BOOL, [t], False) for t in (BOOL, STRING)],
    "dyn": [(DYN, ["_A"], False)],
    # the strings extension (cel-go ext.Strings, as cel-cpp's ext_strings declares it)
    "charAt": [(STRING, [STRING, INT], True)],
    "indexOf": [(INT, [STRING, STRING], True), (INT, [STRING, STRING, INT], True)],
    "lastIndexOf": [(INT, [STRING, STRING], True), (INT, [STRING, STRING, INT], True)],
    "lowerAscii": [(STRING, [STRING], True)],
    "upperAscii": [(STRING, [STRING], True)],
    "replace": [(STRING, [STRING, STRING, STRING], True), (STRING, [STRING, STRING, STRING, INT], True)],
    "split": [(("list", STRING), [STRING, STRING], True), (("list", STRING), [STRING, STRING, INT], True)],
    "substring": [(STRING, [STRING, INT], True), (STRING, [STRING, INT, INT], True)],
    "trim": [(STRING, [STRING], True)],
    "join": [(STRING, [("list", STRING)], True), (STRING, [("list", STRING), STRING], True)],
    "reverse": [(STRING, [STRING], True)],
    "format": [(STRING, [STRING, ("list", DYN)], True)],
    "strings.quote": [(STRING, [STRING], False)],
    # the optional extension
    "optional.of": [(("optional", "_A"), ["_A"], False)],
    "optional.ofNonZeroValue": [(("optional", "_A"), ["_A"], False)],
    "optional.none": [(("optional", DYN), [], False)],
    "hasValue": [(BOOL, [("optional", "_A")], True)],
    "value": [("_A", [("optional", "_A")], True)],
    "orValue": [("_A", [("optional", "_A"), "_A"], True)],
    "or": [(("optional", "_A"), [("optional", "_A"), ("optional", "_A")], True)],
}
for _op in ("_<_", "_<=_", "_>_", "_>=_"):
    STANDARD[_op] = [(BOOL, [t, t], False) for t in COMPARABLE]
OPERATORS = {"==": "_==_", "!=": "_!=_", "<": "_<_", "<=": "_<=_", ">": "_>_", ">=": "_>=_", "in": "@in",
             "+": "_+_", "-": "_-_", "*": "_*_", "/": "_/_", "%": "_%_"}
_RELATIONS = {"relation_" + k: v for k, v in (("lt", "<"), ("le", "<="), ("gt", ">"), ("ge", ">="),
                                              ("eq", "=="), ("ne", "!="), ("in", "in"))}
_ADDITIONS = {"addition_add": "+", "addition_sub": "-",
              "multiplication_mul": "*", "multiplication_div": "/", "multiplication_mod": "%"}


def _grammar() -> str:
    """cel-python's grammar with cel-go's optional field and index selection."""
    text = (Path(celpy.__file__).parent / "cel.lark").read_text()
    member_rule = "member         : member_dot | member_dot_arg | member_index | member_object | primary"
    if member_rule not in text:  # pragma: no cover - a cel-python whose grammar we have not read
        raise ImportError("cel-python's grammar changed: the member rule is not where kubesched expects it")
    return text.replace(member_rule, member_rule.replace("| primary", "| member_dot_opt | member_index_opt | primary")) + \
        '\nmember_dot_opt : member "." "?" IDENT\nmember_index_opt : member "[" "?" expr "]"\n'


def _bool_literal(token: lark.Token) -> lark.Token:
    """true and false lex as identifiers; make them literals, keeping their position (cel-python's
    own callback, CELParser.ambiguous_literals, drops it)."""
    if token.value in ("true", "false"):
        return lark.Token.new_borrow_pos("BOOL_LIT", token.value, token)
    return token


_PARSER = lark.Lark(_grammar(), parser="lalr", start="expr", g_regex_flags=re.M, propagate_positions=True,
                    maybe_placeholders=False, priority="invert", lexer_callbacks={"IDENT": _bool_literal})


class Node:
    """One checked expression: its type, where it starts, and how to evaluate it."""

    __slots__ = ("type", "pos", "run")

    def __init__(self, type_: Any, pos: int, run: Callable[[Any], Any]):
        self.type, self.pos, self.run = type_, pos, run


class Budget:
    """What one evaluation has spent: comprehension iterations and cel-go's size cost."""

    __slots__ = ("iterations", "cost")

    def __init__(self) -> None:
        self.iterations = 0
        self.cost = 0.0

    def iterate(self) -> None:
        self.iterations += 1
        if self.iterations >= COMPREHENSION_BUDGET:
            raise EvalError("iteration budget exceeded", cost=True)

    def charge(self, value: Any) -> Any:
        if isinstance(value, (str, bytes, list)):
            self.cost += SIZE_COST_FACTOR * len(value)
            if self.cost > MAX_COST:
                raise EvalError("cost limit exceeded", cost=True)
        return value


class Frame:
    """The variables of one evaluation: the activation and the comprehension/bind scopes."""

    __slots__ = ("vars", "budget")

    def __init__(self, variables: dict, budget: Budget):
        self.vars, self.budget = variables, budget


class Environment:
    """Variables and functions of one CEL environment; ``compile`` checks and plans an expression.

    ``functions`` is cel.py's declaration list: (name, return type, parameter types, member,
    implementation), types as this module spells them. An implementation raises ValueError
    for a runtime error."""

    def __init__(self, variables: dict[str, Any], functions: list[tuple]):
        self.variables = dict(variables)
        self.overloads: dict[str, list[tuple]] = {name: list(decls) for name, decls in STANDARD.items()}
        self.impls: dict[tuple, Callable] = {}
        for name, ret, params, member, impl in functions:
            self.overloads.setdefault(name, []).append((ret, list(params), member))
            self.impls[(name, member, tuple(map(str, params)))] = impl
        self.library = {name for name, *_rest in functions}

    def compile(self, expression: str) -> Program:
        try:
            tree = _PARSER.parse(expression)
        except lark.exceptions.UnexpectedInput as err:
            at_end = isinstance(err, lark.exceptions.UnexpectedToken) and err.token.type == "$END"
            pos = len(expression) if at_end or err.pos_in_stream is None else err.pos_in_stream
            raise CompileError(_located(expression, pos, "Syntax error: " + _syntax_message(err))) from None
        checker = _Checker(self, expression)
        node = checker.expr(tree, {})
        if checker.errors:
            checker.errors.sort(key=lambda e: e[0])
            raise CompileError("\n".join(_located(expression, pos, msg) for pos, msg in checker.errors))
        return Program(node)


class Program:
    """A checked expression, evaluated as often as needed."""

    __slots__ = ("node",)
    Error = EvalError

    def __init__(self, node: Node):
        self.node = node

    @property
    def return_type(self) -> str:
        return type_name(self.node.type)

    def evaluate(self, variables: dict) -> tuple[Any, str]:
        """The result and its CEL type name; EvalError for a runtime error or the cost limit."""
        value = self.node.run(Frame(variables, Budget()))
        return value, cel_type_name(value)


# cel-go's parser (ANTLR, CEL.g4) names the tokens it expected in the order of its lexer.
_ANTLR_TOKENS = [("EQUAL", "'=='"), ("NOTEQUAL", "'!='"), ("IN", "'in'"), ("LESSTHAN", "'<'"), ("LESSTHAN_EQUAL", "'<='"),
                 ("MORETHAN_EQUAL", "'>='"), ("MORETHAN", "'>'"), ("LOGICAL_AND", "'&&'"), ("LOGICAL_OR", "'||'"),
                 ("LSQB", "'['"), ("RSQB", "']'"), ("LBRACE", "'{'"), ("RBRACE", "'}'"), ("LPAR", "'('"),
                 ("RPAR", "')'"), ("DOT", "'.'"), ("COMMA", "','"), ("MINUS", "'-'"), ("BANG", "'!'"),
                 ("QMARK", "'?'"), ("COLON", "':'"), ("PLUS", "'+'"), ("STAR", "'*'"), ("SLASH", "'/'"),
                 ("PERCENT", "'%'"), ("BOOL_LIT", "'true', 'false'"), ("NULL_LIT", "'null'"),
                 ("FLOAT_LIT", "NUM_FLOAT"), ("INT_LIT", "NUM_INT"), ("UINT_LIT", "NUM_UINT"), ("STRING_LIT", "STRING"),
                 ("BYTES_LIT", "BYTES"), ("IDENT", "IDENTIFIER")]


def _syntax_message(err: lark.exceptions.UnexpectedInput) -> str:
    if isinstance(err, lark.exceptions.UnexpectedToken):
        token = "<EOF>" if err.token.type == "$END" else err.token.value
        expected = err.accepts or err.expected or set()
        if "STRING_LIT" not in expected and "MLSTRING_LIT" in expected:
            expected = set(expected) | {"STRING_LIT"}
        names = [name for terminal, name in _ANTLR_TOKENS if terminal in expected]
        if not names:
            return f"mismatched input '{token}'"
        listed = ", ".join(names)
        return f"mismatched input '{token}' expecting " + (f"{{{listed}}}" if len(names) > 1 or "," in listed else listed)
    if isinstance(err, lark.exceptions.UnexpectedCharacters):
        return f"token recognition error at: '{err.char}'"
    return "unexpected end of input"  # pragma: no cover


def _located(source: str, pos: int, message: str) -> str:
    """cel-go's error layout: position, message, the source line and a caret under the column."""
    line_start = source.rfind("\n", 0, pos) + 1
    line_no = source.count("\n", 0, pos) + 1
    column = pos - line_start
    line_end = source.find("\n", line_start)
    text = source[line_start:] if line_end < 0 else source[line_start:line_end]
    return f"ERROR: <input>:{line_no}:{column + 1}: {message}\n | {text}\n | {'.' * column}^"


def _equals(a: Any, b: Any) -> bool:
    """CEL equality on runtime values: numbers across int, uint and double; no bool/int mixing."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        if isinstance(a, float) and math.isnan(a) or isinstance(b, float) and math.isnan(b):
            return False
        return a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_equals(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return len(a) == len(b) and all(_has_key(b, k) and _equals(v, _lookup(b, k)) for k, v in a.items())
    if type(a) is not type(b) and not (isinstance(a, str) and isinstance(b, str)):
        return False
    return a == b


def _has_key(mapping: dict, key: Any) -> bool:
    return _lookup(mapping, key) is not _ABSENT


def _lookup(mapping: dict, key: Any) -> Any:
    """A map entry by CEL key equality: 1, 1u and 1.0 name the same key."""
    if isinstance(key, bool):
        for k, v in mapping.items():
            if isinstance(k, bool) and k == key:
                return v
        return _ABSENT
    if isinstance(key, float):
        if not key.is_integer():
            return _ABSENT
        key = int(key)
    value = mapping.get(key, _ABSENT)
    if value is not _ABSENT and isinstance(key, int):
        for k in mapping:  # a bool key equal to 1 or 0 is not this key
            if k == key and not isinstance(k, bool):
                return mapping[k]
        return _ABSENT
    return value


def _no_such_key(key: Any) -> EvalError:
    return EvalError(f"no such key: {key}")


def _int64(value: int) -> int:
    if not INT64_MIN <= value <= INT64_MAX:
        raise EvalError("integer overflow")
    return value


def _uint64(value: int) -> Uint:
    if not 0 <= value <= UINT64_MAX:
        raise EvalError("unsigned integer overflow")
    return Uint(value)


def _no_overload(_name: str, *_args: Any) -> EvalError:
    return EvalError("no such overload")  # cel-go's words (types.NoSuchOverloadErr)


def _arith(op: str, a: Any, b: Any) -> Any:
    """Arithmetic on runtime values of one type, as cel-cpp applies it."""
    kinds = {type(a), type(b)}
    if bool in kinds or len(kinds) != 1:
        if not (isinstance(a, (list, str, bytes)) and type(a) is type(b)):
            raise _no_overload(OPERATORS[op], a, b)
    if isinstance(a, Uint):
        if op == "+":
            return _uint64(a + b)
        if op == "-":
            return _uint64(a - b)
        if op == "*":
            return _uint64(a * b)
        if b == 0:
            raise EvalError("division by zero" if op == "/" else "modulus by zero")
        return Uint(a // b if op == "/" else a % b)
    if isinstance(a, int):
        if op == "+":
            return _int64(a + b)
        if op == "-":
            return _int64(a - b)
        if op == "*":
            return _int64(a * b)
        if b == 0:
            raise EvalError("division by zero" if op == "/" else "modulus by zero")
        if op == "/":
            if a == INT64_MIN and b == -1:
                raise EvalError("integer overflow")
            quotient = abs(a) // abs(b)  # truncated towards zero, as Go and C++ divide
            return quotient if (a < 0) == (b < 0) else -quotient
        return int(math.fmod(a, b))
    if isinstance(a, float):
        if op == "+":
            return a + b
        if op == "-":
            return a - b
        if op == "*":
            return a * b
        if op == "/":
            if b == 0:
                return math.copysign(math.inf, a) * math.copysign(1, b) if a != 0 else math.nan
            return a / b
        raise _no_overload(OPERATORS[op], a, b)
    if op == "+":  # str, bytes, list
        return a + b
    raise _no_overload(OPERATORS[op], a, b)


def _compare(name: str, a: Any, b: Any) -> int:
    if isinstance(a, bool) != isinstance(b, bool):
        raise _no_overload(name, a, b)
    numbers = (int, float)
    if isinstance(a, numbers) and isinstance(b, numbers):
        return (a > b) - (a < b)
    if type(a) is type(b) and isinstance(a, (str, bytes, bool)):
        return (a > b) - (a < b)
    raise _no_overload(name, a, b)


def _convert(name: str, value: Any) -> Any:
    """The standard type conversions: int(), uint(), double(), string(), bytes(), bool(), dyn()."""
    try:
        if name == "int":
            if isinstance(value, float):
                if math.isnan(value) or not -9.223372036854776e18 < value < 9.223372036854776e18:
                    raise EvalError("double is out of range of int")
                return int(value)
            if isinstance(value, str):
                return _int64(int(value, 10))
            return _int64(int(value))
        if name == "uint":
            if isinstance(value, float):
                if math.isnan(value) or not -1 < value < 1.8446744073709552e19:
                    raise EvalError("double is out of range of uint")
                return Uint(int(value))
            if isinstance(value, str):
                return _uint64(int(value, 10))
            if value < 0:
                raise EvalError("int64 out of uint64 range")
            return _uint64(int(value))
        if name == "double":
            return float(value)
        if name == "string":
            if isinstance(value, bool):
                return "true" if value else "false"
            if isinstance(value, bytes):
                return value.decode("utf-8")
            if isinstance(value, float):
                return repr(value) if not value.is_integer() or abs(value) >= 1e21 else str(int(value))
            return str(value)
        if name == "bytes":
            return value.encode("utf-8") if isinstance(value, str) else bytes(value)
        if name == "bool":
            if isinstance(value, str):
                if value in ("1", "t", "true", "TRUE", "True"):
                    return True
                if value in ("0", "f", "false", "FALSE", "False"):
                    return False
                raise EvalError(f"Type conversion error from 'string' to 'bool': [{value}]")
            return bool(value)
    except (ValueError, UnicodeDecodeError):
        raise EvalError(f"cannot convert {value_type(value).replace('64', '')} to {name}") from None
    return value  # dyn


def _to_str(value: Any) -> str:
    if not isinstance(value, str) or isinstance(value, bool):
        raise _no_overload("string", value)
    return value


def _strings_call(name: str, args: list) -> Any:
    """cel-go's strings extension (ext.Strings) on runtime values."""
    target = args[0]
    if name == "charAt":
        index = args[1]
        if not 0 <= index <= len(target):
            raise EvalError(f"index out of range: {index}")
        return target[index:index + 1]
    if name in ("indexOf", "lastIndexOf"):
        needle = args[1]
        if len(args) == 3:
            offset = args[2]
            if not 0 <= offset <= len(target):
                raise EvalError(f"index out of range: {offset}")
            found = target.find(needle, offset) if name == "indexOf" else target.rfind(needle, 0, offset + len(needle))
        else:
            found = target.find(needle) if name == "indexOf" else target.rfind(needle)
        return found
    if name == "lowerAscii":
        return "".join(c.lower() if c.isascii() else c for c in target)
    if name == "upperAscii":
        return "".join(c.upper() if c.isascii() else c for c in target)
    if name == "replace":
        return target.replace(args[1], args[2], -1 if len(args) == 3 or args[3] < 0 else args[3])
    if name == "split":
        limit = args[2] if len(args) == 3 else -1
        if limit == 0:
            return []
        if args[1] == "":
            parts = list(target)
            if limit > 0 and len(parts) > limit:
                parts = parts[:limit - 1] + ["".join(parts[limit - 1:])]
            return parts
        return target.split(args[1], -1 if limit < 0 else limit - 1)
    if name == "substring":
        start = args[1]
        end = args[2] if len(args) == 3 else len(target)
        if not 0 <= start <= len(target):
            raise EvalError(f"index out of range: {start}")
        if not 0 <= end <= len(target):
            raise EvalError(f"index out of range: {end}")
        if end < start:
            raise EvalError(f"invalid substring range. start: {start}, end: {end}")
        return target[start:end]
    if name == "trim":
        return target.strip(" \t\n\v\f\r\x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009"
                            "\u200a\u2028\u2029\u202f\u205f\u3000")
    if name == "join":
        return (args[1] if len(args) == 2 else "").join(_to_str(x) for x in target)
    if name == "reverse":
        return target[::-1]
    if name == "strings.quote":
        return '"' + target.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") \
            .replace("\r", "\\r").replace("\t", "\\t") + '"'
    if name == "format":
        return _format(target, args[1])
    raise EvalError(f"no such overload: {name}")  # pragma: no cover


def _format(template: str, values: list) -> str:
    out, index, i = [], 0, 0
    while i < len(template):
        c = template[i]
        if c != "%":
            out.append(c)
            i += 1
            continue
        if i + 1 < len(template) and template[i + 1] == "%":
            out.append("%")
            i += 2
            continue
        match = re.match(r"%(?:\.(\d+))?([sdfeXxob])", template[i:])
        if not match:
            raise EvalError(f"could not parse formatting clause: unrecognized formatting clause \"{template[i + 1:i + 2]}\"")
        if index >= len(values):
            raise EvalError(f"index {index} out of range")
        value, precision, verb = values[index], match.group(1), match.group(2)
        index += 1
        if verb == "s":
            out.append(_convert("string", value))
        elif verb == "d":
            out.append(str(int(value)))
        elif verb in "fe":
            out.append(f"%.{precision or 6}{verb}" % float(value))
        elif verb in "xX":
            text = value.hex() if isinstance(value, bytes) else (
                value.encode().hex() if isinstance(value, str) else format(int(value), "x"))
            out.append(text.upper() if verb == "X" else text)
        elif verb == "o":
            out.append(format(int(value), "o"))
        else:
            out.append(format(int(value), "b"))
        i += len(match.group(0))
    return "".join(out)


def _is_zero(value: Any) -> bool:
    return value is None or value is False or value == 0 and not isinstance(value, bool) or \
        isinstance(value, (str, bytes, list, dict)) and len(value) == 0


class _Checker:
    """Type-checks the parse tree and plans its evaluation as nested closures."""

    def __init__(self, env: Environment, source: str):
        self.env, self.source = env, source
        self.errors: list[tuple[int, str]] = []

    def error(self, pos: int, message: str) -> Node:
        self.errors.append((pos, message))
        return Node(ERROR, pos, _raise_unchecked)

    def op_pos(self, left: lark.Tree, op: str) -> int:
        """Where an operator starts: after its left operand, past blanks and comments."""
        pos = left.meta.end_pos
        while True:
            while pos < len(self.source) and self.source[pos].isspace():
                pos += 1
            if self.source.startswith("//", pos):
                pos = self.source.find("\n", pos)
                pos = len(self.source) if pos < 0 else pos
                continue
            return pos if self.source.startswith(op, pos) else left.meta.end_pos

    # -- overloads ---------------------------------------------------------------------------

    def resolve(self, name: str, display: str, args: list[Node], member: bool, pos: int) -> tuple[Any, list]:
        """The result type and the matching declarations, or an error at pos."""
        declared = self.env.overloads.get(name)
        if declared is None:
            self.error(pos, f"undeclared reference to '{display}' (in container '')")
            return ERROR, []
        if any(a.type == ERROR for a in args):
            return ERROR, []
        matches = []
        for ret, params, is_member in declared:
            if is_member != member or len(params) != len(args):
                continue
            bindings: dict = {}
            if all(_assignable(p, a.type, bindings) for p, a in zip(params, args)):
                matches.append((_substitute(ret, bindings), params))
        if not matches:
            types = [type_name(a.type) for a in args]
            shown = f"{types[0]}.({', '.join(types[1:])})" if member else f"({', '.join(types)})"
            self.error(pos, f"found no matching overload for '{display}' applied to '{shown}'")
            return ERROR, []
        return _join([m[0] for m in matches]), matches

    # -- the grammar's rules -----------------------------------------------------------------

    def expr(self, tree: lark.Tree, scope: dict) -> Node:
        children = tree.children
        if len(children) == 1:
            return self.conditionalor(children[0], scope)
        cond = self.conditionalor(children[0], scope)
        pos = self.op_pos(children[0], "?")
        yes, no = self.conditionalor(children[1], scope), self.expr(children[2], scope)
        bindings: dict = {}
        if cond.type not in (BOOL, DYN, ERROR) or not _assignable("_A", yes.type, bindings) or \
                not _assignable("_A", no.type, bindings):
            if ERROR not in (cond.type, yes.type, no.type):
                return self.error(pos, f"found no matching overload for '_?_:_' applied to "
                                       f"'({type_name(cond.type)}, {type_name(yes.type)}, {type_name(no.type)})'")
            return Node(ERROR, pos, _raise_unchecked)
        result = yes.type if yes.type == no.type else (no.type if yes.type == DYN else (yes.type if no.type == DYN else DYN))

        def run(frame: Frame) -> Any:
            c = cond.run(frame)
            if not isinstance(c, bool):
                raise _no_overload("_?_:_", c)
            return yes.run(frame) if c else no.run(frame)
        return Node(result, cond.pos, run)

    def conditionalor(self, tree: lark.Tree, scope: dict) -> Node:
        return self._logical(tree, scope, "||", self.conditionaland, self.conditionalor)

    def conditionaland(self, tree: lark.Tree, scope: dict) -> Node:
        return self._logical(tree, scope, "&&", self.relation, self.conditionaland)

    def _logical(self, tree: lark.Tree, scope: dict, op: str, operand: Callable, same: Callable) -> Node:
        children = tree.children
        if len(children) == 1:
            return operand(children[0], scope)
        left, right = same(children[0], scope), operand(children[1], scope)
        pos = self.op_pos(children[0], op)
        name = "_||_" if op == "||" else "_&&_"
        for side in (left, right):
            if side.type not in (BOOL, DYN, ERROR):
                return self.error(pos, f"found no matching overload for '{name}' applied to "
                                       f"'({type_name(left.type)}, {type_name(right.type)})'")
        decisive = op == "||"  # the value that decides: true for ||, false for &&

        def run(frame: Frame) -> Any:
            # CEL's commutative logic: an error or a non-bool on one side is absorbed when the
            # other side decides the result.
            failure = None
            for side in (left, right):
                try:
                    value = side.run(frame)
                except EvalError as err:
                    if err.cost:
                        raise
                    failure = failure or err
                    continue
                if value is decisive:
                    return decisive
                if not isinstance(value, bool):
                    failure = failure or _no_overload(name, value)
            if failure is not None:
                raise failure
            return not decisive
        return Node(BOOL, left.pos, run)

    def relation(self, tree: lark.Tree, scope: dict) -> Node:
        return self._level(tree, scope, _RELATIONS, self.relation, self.addition)

    def addition(self, tree: lark.Tree, scope: dict) -> Node:
        return self._level(tree, scope, _ADDITIONS, self.addition, self.multiplication)

    def multiplication(self, tree: lark.Tree, scope: dict) -> Node:
        return self._level(tree, scope, _ADDITIONS, self.multiplication, self.unary)

    def _level(self, tree: lark.Tree, scope: dict, operators: dict, same: Callable, operand: Callable) -> Node:
        """One precedence level of binary operators: [op(left at this level)] right operand."""
        children = tree.children
        if len(children) == 1:
            return operand(children[0], scope)
        op_tree, right_tree = children
        op = operators[op_tree.data]
        left_tree = op_tree.children[0]
        left, right = same(left_tree, scope), operand(right_tree, scope)
        return self._binary(op, left, right, self.op_pos(left_tree, op))

    def _binary(self, op: str, left: Node, right: Node, pos: int) -> Node:
        name = OPERATORS[op]
        result, _matches = self.resolve(name, name, [left, right], False, pos)
        if result == ERROR:
            return Node(ERROR, pos, _raise_unchecked)
        lrun, rrun = left.run, right.run
        if op == "==":
            return Node(BOOL, left.pos, lambda f: _equals(lrun(f), rrun(f)))
        if op == "!=":
            return Node(BOOL, left.pos, lambda f: not _equals(lrun(f), rrun(f)))
        if op in ("<", "<=", ">", ">="):
            test = {"<": lambda c: c < 0, "<=": lambda c: c <= 0, ">": lambda c: c > 0, ">=": lambda c: c >= 0}[op]
            return Node(BOOL, left.pos, lambda f: test(_compare(name, lrun(f), rrun(f))))
        if op == "in":
            def contains(frame: Frame) -> bool:
                item, container = lrun(frame), rrun(frame)
                if isinstance(container, dict):
                    return _has_key(container, item)
                if isinstance(container, list):
                    return any(_equals(item, x) for x in container)
                raise _no_overload("@in", item, container)
            return Node(BOOL, left.pos, contains)

        def arith(frame: Frame) -> Any:
            return frame.budget.charge(_arith(op, lrun(frame), rrun(frame)))
        return Node(result, left.pos, arith)

    def unary(self, tree: lark.Tree, scope: dict) -> Node:
        children = tree.children
        if len(children) == 1:
            return self.member(children[0], scope)
        op_tree, operand_tree = children
        operand = self.unary(operand_tree, scope)
        pos = op_tree.meta.start_pos if not op_tree.meta.empty else operand.pos
        if op_tree.data == "unary_not":
            result, _m = self.resolve("!_", "!_", [operand], False, pos)

            def negate(frame: Frame) -> bool:
                value = operand.run(frame)
                if not isinstance(value, bool):
                    raise _no_overload("!_", value)
                return not value
            return Node(result, pos, negate)
        result, _m = self.resolve("-_", "-_", [operand], False, pos)

        def minus(frame: Frame) -> Any:
            value = operand.run(frame)
            if isinstance(value, bool) or isinstance(value, Uint) or not isinstance(value, (int, float)):
                raise _no_overload("-_", value)
            return -value if isinstance(value, float) else _int64(-value)
        return Node(result, pos, minus)

    def member(self, tree: lark.Tree, scope: dict) -> Node:
        child = tree.children[0]
        return getattr(self, child.data)(child, scope)

    def primary(self, tree: lark.Tree, scope: dict) -> Node:
        child = tree.children[0]
        return getattr(self, child.data)(child, scope)

    def paren_expr(self, tree: lark.Tree, scope: dict) -> Node:
        return self.expr(tree.children[0], scope)

    def literal(self, tree: lark.Tree, scope: dict) -> Node:
        token = tree.children[0]
        pos = tree.meta.start_pos
        kind, text = token.type, token.value
        if kind == "INT_LIT":
            value = int(text, 16) if text.lstrip("-").startswith("0x") else int(text)
            if text.startswith("-0x"):
                value = -int(text[3:], 16)
            if not INT64_MIN <= value <= INT64_MAX:
                return self.error(pos, "Syntax error: invalid int literal")
            return _constant(INT, pos, value)
        if kind == "UINT_LIT":
            digits = text[:-1]
            value = int(digits, 16) if digits.startswith("0x") else int(digits)
            if not 0 <= value <= UINT64_MAX:
                return self.error(pos, "Syntax error: invalid uint literal")
            return _constant(UINT, pos, Uint(value))
        if kind == "FLOAT_LIT":
            return _constant(DOUBLE, pos, float(text))
        if kind in ("STRING_LIT", "MLSTRING_LIT"):
            return _constant(STRING, pos, str(celstr(token)))
        if kind == "BYTES_LIT":
            return _constant(BYTES, pos, bytes(celbytes(token)))
        if kind == "BOOL_LIT":
            return _constant(BOOL, pos, text == "true")
        return _constant(NULL, pos, None)

    def ident(self, tree: lark.Tree, scope: dict) -> Node:
        token = tree.children[0]
        name = token.value
        if name in scope:
            slot_type = scope[name]
            return Node(slot_type, token.start_pos, lambda f: f.vars[name])
        if name in self.env.variables:
            return Node(self.env.variables[name], token.start_pos, lambda f: f.vars[name])
        return self.error(token.start_pos, f"undeclared reference to '{name}' (in container '')")

    def dot_ident(self, tree: lark.Tree, scope: dict) -> Node:
        return self.ident(tree, {})  # a leading dot names the root scope

    def list_lit(self, tree: lark.Tree, scope: dict) -> Node:
        items = [self.expr(e, scope) for e in tree.children[0].children] if tree.children else []
        elem = _join([i.type for i in items]) if items else DYN
        if ERROR in (i.type for i in items):
            return Node(ERROR, tree.meta.start_pos, _raise_unchecked)
        runs = [i.run for i in items]
        return Node(("list", elem), tree.meta.start_pos, lambda f: [r(f) for r in runs])

    def map_lit(self, tree: lark.Tree, scope: dict) -> Node:
        exprs = [self.expr(e, scope) for e in tree.children[0].children] if tree.children else []
        keys, values = exprs[0::2], exprs[1::2]
        if any(e.type == ERROR for e in exprs):
            return Node(ERROR, tree.meta.start_pos, _raise_unchecked)
        for key in keys:
            if key.type not in (INT, UINT, BOOL, STRING, DYN):
                return self.error(key.pos, f"unsupported map key type: {type_name(key.type)}")
        key_type = _join([k.type for k in keys]) if keys else DYN
        value_type_ = _join([v.type for v in values]) if values else DYN
        pairs = [(k.run, v.run) for k, v in zip(keys, values)]

        def build(frame: Frame) -> dict:
            out: dict = {}
            for krun, vrun in pairs:
                key = krun(frame)
                if isinstance(key, float) or isinstance(key, (list, dict)) or key is None:
                    raise EvalError(f"unsupported key type: {value_type(key)}")
                if _has_key(out, key):
                    raise EvalError(f"Failed with repeated key: {key}")
                out[key] = vrun(frame)
            return out
        return Node(("map", key_type, value_type_), tree.meta.start_pos, build)

    def member_object(self, tree: lark.Tree, scope: dict) -> Node:
        return self.error(tree.meta.start_pos, "message construction is not supported in a device selector")

    def member_dot(self, tree: lark.Tree, scope: dict) -> Node:
        target_tree, field = tree.children
        namespaced = self._qualified_name(tree)
        root = (namespaced or "").partition(".")[0]
        if namespaced is not None and namespaced not in scope and root not in scope and root not in self.env.variables:
            return self.error(field.start_pos - 1, f"undeclared reference to '{namespaced}' (in container '')")
        target = self.member(target_tree, scope)
        return self._select(target, field.value, field.start_pos - 1, optional=False)

    def member_dot_opt(self, tree: lark.Tree, scope: dict) -> Node:
        target_tree, field = tree.children
        target = self.member(target_tree, scope)
        return self._select(target, field.value, self.op_pos(target_tree, ".?"), optional=True)

    def _qualified_name(self, tree: lark.Tree) -> str | None:
        """``a.b.c`` as one name when it is made of identifiers only."""
        parts = []
        while tree.data in ("member_dot", "member", "primary"):
            if tree.data == "member_dot":
                parts.append(tree.children[1].value)
            tree = tree.children[0]
        if tree.data != "ident":
            return None
        parts.append(tree.children[0].value)
        return ".".join(reversed(parts))

    def _select(self, target: Node, field: str, pos: int, optional: bool) -> Node:
        if target.type == ERROR:
            return Node(ERROR, pos, _raise_unchecked)
        base = target.type
        if isinstance(base, tuple) and base[0] == "optional":
            inner = base[1]
            optional = True
        else:
            inner = base
        if inner == DYN:
            field_type = DYN
        elif isinstance(inner, tuple) and inner[0] == "map":
            field_type = inner[2]
        else:
            return self.error(pos, f"type '{type_name(inner)}' does not support field selection")
        trun = target.run
        if optional:
            def select_optional(frame: Frame) -> Optional:
                value = trun(frame)
                if isinstance(value, Optional):
                    if value is OPTIONAL_NONE or value.value is _ABSENT:
                        return OPTIONAL_NONE
                    value = value.value
                if not isinstance(value, dict):
                    raise EvalError(f"type '{value_type(value)}' does not support field selection")
                found = _lookup(value, field)
                return OPTIONAL_NONE if found is _ABSENT else Optional(found)
            return Node(("optional", field_type), target.pos, select_optional)

        def select(frame: Frame) -> Any:
            value = trun(frame)
            if not isinstance(value, dict):
                raise EvalError(f"type '{value_type(value)}' does not support field selection")
            found = _lookup(value, field)
            if found is _ABSENT:
                raise _no_such_key(field)
            return found
        return Node(field_type, target.pos, select)

    def member_index(self, tree: lark.Tree, scope: dict) -> Node:
        target_tree, index_tree = tree.children
        return self._index(tree, scope, target_tree, index_tree, optional=False)

    def member_index_opt(self, tree: lark.Tree, scope: dict) -> Node:
        target_tree, index_tree = tree.children
        return self._index(tree, scope, target_tree, index_tree, optional=True)

    def _index(self, tree: lark.Tree, scope: dict, target_tree: lark.Tree, index_tree: lark.Tree,
               optional: bool) -> Node:
        target, index = self.member(target_tree, scope), self.expr(index_tree, scope)
        pos = self.op_pos(target_tree, "[")
        base = target.type
        wrapped = isinstance(base, tuple) and base[0] == "optional"
        probe = Node(base[1] if wrapped else base, target.pos, target.run)
        result, _m = self.resolve("_[_]", "_[_]", [probe, index], False, pos)
        if result == ERROR:
            return Node(ERROR, pos, _raise_unchecked)
        trun, irun = target.run, index.run

        def get(container: Any, key: Any) -> Any:
            if isinstance(container, dict):
                if isinstance(key, (list, dict)) or key is None:
                    raise _no_overload("_[_]", container, key)
                return _lookup(container, key)
            if isinstance(container, list):
                if isinstance(key, bool) or not isinstance(key, (int, float)):
                    raise _no_overload("_[_]", container, key)
                if isinstance(key, float):
                    if not key.is_integer():
                        raise EvalError(f"unsupported index value {key} in list")
                    key = int(key)
                if not 0 <= key < len(container):
                    if optional:
                        return _ABSENT
                    raise EvalError(f"index '{key}' out of range in list size '{len(container)}'")
                return container[key]
            raise _no_overload("_[_]", container, key)

        if optional or wrapped:
            def index_optional(frame: Frame) -> Optional:
                container, key = trun(frame), irun(frame)
                if isinstance(container, Optional):
                    if container.value is _ABSENT:
                        return OPTIONAL_NONE
                    container = container.value
                found = get(container, key)
                return OPTIONAL_NONE if found is _ABSENT else Optional(found)
            return Node(("optional", result), target.pos, index_optional)

        def index_value(frame: Frame) -> Any:
            key = irun(frame)
            found = get(trun(frame), key)
            if found is _ABSENT:
                raise _no_such_key(key)
            return found
        return Node(result, target.pos, index_value)

    def ident_arg(self, tree: lark.Tree, scope: dict) -> Node:
        name_token = tree.children[0]
        args_trees = tree.children[1].children if len(tree.children) > 1 else []
        name = name_token.value
        pos = name_token.end_pos  # cel-go places a call at its opening parenthesis
        if name == "has":
            return self._has(tree, scope, args_trees, pos)
        args = [self.expr(a, scope) for a in args_trees]
        return self._call(name, name, None, args, pos)

    def dot_ident_arg(self, tree: lark.Tree, scope: dict) -> Node:
        return self.ident_arg(tree, scope)

    def _has(self, tree: lark.Tree, scope: dict, args_trees: list, pos: int) -> Node:
        select = _unwrap(args_trees[0]) if len(args_trees) == 1 else None
        if select is None or select.data != "member_dot":
            return self.error(pos, "invalid argument to has() macro")
        target = self.member(select.children[0], scope)
        field = select.children[1].value
        if target.type == ERROR:
            return Node(ERROR, pos, _raise_unchecked)
        if not (target.type == DYN or isinstance(target.type, tuple) and target.type[0] == "map"):
            return self.error(select.children[1].start_pos - 1,
                              f"type '{type_name(target.type)}' does not support field selection")
        trun = target.run

        def has(frame: Frame) -> bool:
            value = trun(frame)
            if not isinstance(value, dict):
                raise EvalError(f"type '{value_type(value)}' does not support field selection")
            return _has_key(value, field)
        return Node(BOOL, target.pos, has)

    def member_dot_arg(self, tree: lark.Tree, scope: dict) -> Node:
        target_tree, method = tree.children[0], tree.children[1]
        args_trees = tree.children[2].children if len(tree.children) > 2 else []
        name = method.value
        pos = method.end_pos
        namespace = self._qualified_name(target_tree)
        if namespace == "cel" and name == "bind" and "cel" not in scope and "cel" not in self.env.variables:
            return self._bind(args_trees, scope, pos)
        if namespace in ("optional", "strings") and namespace not in scope and namespace not in self.env.variables:
            args = [self.expr(a, scope) for a in args_trees]
            return self._call(f"{namespace}.{name}", f"{namespace}.{name}", None, args, pos)
        if name in MACROS and len(args_trees) == 2:
            variable = _unwrap(args_trees[0])
            if variable is not None and variable.data == "ident":
                return self._comprehension(name, target_tree, variable.children[0].value, args_trees[1], scope, pos)
            return self.error(pos, f"{name}() variable name must be a simple identifier")
        target = self.member(target_tree, scope)
        args = [self.expr(a, scope) for a in args_trees]
        return self._call(name, name, target, args, pos)

    def _call(self, name: str, display: str, target: Node | None, args: list[Node], pos: int) -> Node:
        member = target is not None
        nodes = ([target] if member else []) + args
        result, matches = self.resolve(name, display, nodes, member, pos)
        if result == ERROR:
            return Node(ERROR, pos, _raise_unchecked)
        runs = [n.run for n in nodes]
        start = nodes[0].pos if nodes else pos
        if name in self.env.library:
            impls = [(params, self.env.impls[(name, member, tuple(map(str, params)))]) for _ret, params in matches]

            def library(frame: Frame) -> Any:
                values = [r(frame) for r in runs]
                for params, impl in impls:
                    if all(_runtime_fits(p, v) for p, v in zip(params, values)):
                        try:
                            return frame.budget.charge(impl(*values))
                        except (ValueError, TypeError, ArithmeticError) as err:
                            raise EvalError(str(err)) from None
                raise _no_overload(name, *values)
            return Node(result, start, library)
        return Node(result, start, _standard_call(name, runs))

    def _bind(self, args_trees: list, scope: dict, pos: int) -> Node:
        if len(args_trees) != 3:
            return self.error(pos, "cel.bind() requires 3 arguments")
        variable = _unwrap(args_trees[0])
        if variable is None or variable.data != "ident":
            return self.error(pos, "cel.bind() variable names must be simple identifiers")
        name = variable.children[0].value
        init = self.expr(args_trees[1], scope)
        body = self.expr(args_trees[2], {**scope, name: init.type})
        irun, brun = init.run, body.run

        def bind(frame: Frame) -> Any:
            saved = frame.vars
            frame.vars = {**saved, name: irun(frame)}
            try:
                return brun(frame)
            finally:
                frame.vars = saved
        return Node(body.type, pos, bind)

    def _comprehension(self, macro: str, range_tree: lark.Tree, variable: str, body_tree: lark.Tree,
                       scope: dict, pos: int) -> Node:
        source = self.member(range_tree, scope)
        if source.type == ERROR:
            return Node(ERROR, pos, _raise_unchecked)
        if source.type == DYN:
            elem = DYN
        elif isinstance(source.type, tuple) and source.type[0] in ("list", "map"):
            elem = source.type[1]
        else:
            return self.error(pos, f"expression of type '{type_name(source.type)}' cannot be range of a "
                                   "comprehension (must be list, map, or dynamic)")
        body = self.expr(body_tree, {**scope, variable: elem})
        if body.type == ERROR:
            return Node(ERROR, pos, _raise_unchecked)
        if macro in ("all", "exists", "exists_one", "filter") and body.type not in (BOOL, DYN):
            # The operator cel-go's macro expansion applies to the body.
            operator, args = {"all": ("_&&_", f"bool, {type_name(body.type)}"),
                              "exists": ("_||_", f"bool, {type_name(body.type)}"),
                              "filter": ("_==_", f"{type_name(body.type)}, bool")}.get(
                macro, ("_?_:_", f"{type_name(body.type)}, int, int"))
            return self.error(pos, f"found no matching overload for '{operator}' applied to '({args})'")
        srun, brun = source.run, body.run

        def items(frame: Frame) -> list:
            value = srun(frame)
            if isinstance(value, dict):
                return list(value)
            if isinstance(value, list):
                return value
            raise EvalError(f"expression of type '{value_type(value)}' cannot be range of a comprehension")

        def each(frame: Frame, item: Any) -> Any:
            frame.budget.iterate()
            frame.vars[variable] = item
            return brun(frame)

        def scoped(loop: Callable[[Frame, list], Any]) -> Callable[[Frame], Any]:
            def run(frame: Frame) -> Any:
                values = items(frame)
                saved = frame.vars
                frame.vars = dict(saved)
                try:
                    return loop(frame, values)
                finally:
                    frame.vars = saved
            return run

        if macro in ("all", "exists"):
            decisive = macro == "exists"

            def quantify(frame: Frame, values: list) -> bool:
                failure = None
                for item in values:
                    try:
                        result = each(frame, item)
                    except EvalError as err:
                        if err.cost:
                            raise
                        failure = err
                        continue
                    if result is decisive:
                        return decisive
                    if not isinstance(result, bool):
                        failure = _no_overload("_&&_" if macro == "all" else "_||_", result)
                if failure is not None:
                    raise failure
                return not decisive
            return Node(BOOL, source.pos, scoped(quantify))
        if macro == "exists_one":
            def exactly_one(frame: Frame, values: list) -> bool:
                count = 0
                for item in values:
                    result = each(frame, item)
                    if not isinstance(result, bool):
                        raise _no_overload("_?_:_", result)
                    count += result
                return count == 1
            return Node(BOOL, source.pos, scoped(exactly_one))
        if macro == "map":
            return Node(("list", body.type), source.pos, scoped(lambda f, vs: [each(f, v) for v in vs]))

        def keep(frame: Frame, values: list) -> list:
            kept = []
            for item in values:
                result = each(frame, item)
                if not isinstance(result, bool):
                    raise _no_overload("_?_:_", result)
                if result:
                    kept.append(item)
            return kept
        return Node(("list", elem), source.pos, scoped(keep))


def _unwrap(tree: lark.Tree) -> lark.Tree | None:
    """The innermost node of a chain of single-child rules (expr -> ... -> member)."""
    while isinstance(tree, lark.Tree) and len(tree.children) == 1 and isinstance(tree.children[0], lark.Tree) and \
            tree.data in ("expr", "conditionalor", "conditionaland", "relation", "addition", "multiplication", "unary",
                          "member", "primary"):
        tree = tree.children[0]
    return tree if isinstance(tree, lark.Tree) else None


def _constant(type_: str, pos: int, value: Any) -> Node:
    return Node(type_, pos, lambda _frame: value)


def _raise_unchecked(_frame: Frame) -> Any:  # pragma: no cover - a program with errors is never run
    raise EvalError("expression did not compile")


def _runtime_fits(param: Any, value: Any) -> bool:
    """Whether a runtime value fits a declared parameter type (for dyn arguments)."""
    if param == DYN or isinstance(param, str) and param.startswith("_"):
        return True
    if isinstance(param, tuple):
        kind = {"list": list, "map": dict, "optional": Optional}[param[0]]
        return isinstance(value, kind)
    if param == BOOL:
        return isinstance(value, bool)
    if param == INT:
        return isinstance(value, int) and not isinstance(value, (bool, Uint))
    if param == UINT:
        return isinstance(value, Uint)
    if param == DOUBLE:
        return isinstance(value, float)
    if param == STRING:
        return isinstance(value, str)
    if param == BYTES:
        return isinstance(value, bytes)
    return value is None


def _standard_call(name: str, runs: list) -> Callable[[Frame], Any]:
    """The evaluation of a standard or extension function on its evaluated arguments."""
    def run(frame: Frame) -> Any:
        values = [r(frame) for r in runs]
        return frame.budget.charge(_apply_standard(name, values))
    return run


def _apply_standard(name: str, values: list) -> Any:
    if name == "size":
        value = values[0]
        if isinstance(value, (str, bytes, list, dict)):
            return len(value)
        raise _no_overload("size", value)
    if name in ("contains", "startsWith", "endsWith", "matches"):
        text, arg = values
        if not isinstance(text, str) or not isinstance(arg, str):
            raise _no_overload(name, text, arg)
        if name == "contains":
            return arg in text
        if name == "startsWith":
            return text.startswith(arg)
        if name == "endsWith":
            return text.endswith(arg)
        try:
            return _regex.search(arg, text) is not None
        except Exception as err:  # noqa: BLE001 - re2 and re raise their own error types
            reason = err.args[0] if err.args else err
            reason = reason.decode() if isinstance(reason, bytes) else reason
            raise EvalError(f"invalid regular expression: {reason}") from None
    if name in ("int", "uint", "double", "string", "bytes", "bool", "dyn"):
        return _convert(name, values[0])
    if name.startswith("optional."):
        if name == "optional.none":
            return OPTIONAL_NONE
        if name == "optional.ofNonZeroValue" and _is_zero(values[0]):
            return OPTIONAL_NONE
        return Optional(values[0])
    if name in ("hasValue", "value", "orValue", "or"):
        opt = values[0]
        if not isinstance(opt, Optional):
            raise _no_overload(name, *values)
        present = opt.value is not _ABSENT
        if name == "hasValue":
            return present
        if name == "value":
            if not present:
                raise EvalError("optional.none() dereference")
            return opt.value
        if name == "orValue":
            return opt.value if present else values[1]
        return opt if present else values[1]
    if not isinstance(values[0], str if name != "join" else list):
        raise _no_overload(name, *values)
    return _strings_call(name, values)
