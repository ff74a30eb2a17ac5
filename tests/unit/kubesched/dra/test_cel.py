"""The DRA CEL environment: upstream's variables, functions and errors on one device, through
each backend (cel-expr-python on CPython 3.11+, cel-python on 3.9 and 3.10). A selector whose
outcome or error text differs between the backends fails here; where cel-cpp's words differ from
cel-go's and cannot be translated, the test pins that cel-python says cel-go's."""

import time

import pytest

from kubesched.dra import cel
from kubesched.dra.cel import BACKENDS, CEL_EXPR_PYTHON, CEL_PYTHON, CelError, SelectorCache, device_view

DEVICE = device_view("gpu.example.com", {
    "name": "gpu-0",
    "attributes": {"model": {"string": "A100"}, "index": {"int": 3}, "healthy": {"bool": True},
                   "driverVersion": {"version": "1.10.0"}, "numa.example.com/node": {"int": 1}},
    "capacity": {"memory": {"value": "40Gi"}}})
CACHES = {backend: SelectorCache(backend=backend) for backend in BACKENDS}
GPU = 'device.attributes["gpu.example.com"]'


def outcome(backend: str, expression: str) -> object:
    """True/False, or the compile or runtime error as the allocator reports it."""
    compiled = CACHES[backend].get(expression)
    if compiled.error is not None:
        return f"compile error: {compiled.error}"
    try:
        return compiled.matches(DEVICE)
    except CelError as err:
        return f"runtime error: {err}"


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("expression, expected", [
    ('device.driver == "gpu.example.com"', True),
    (f'{GPU}.model == "A100"', True),
    (f'{GPU}.index > 2 && {GPU}.healthy', True),
    ('device.attributes["numa.example.com"].node == 1', True),
    ('device.capacity["gpu.example.com"].memory.compareTo(quantity("40960Mi")) == 0', True),
    ('device.capacity["gpu.example.com"].memory.isGreaterThan(quantity("80Gi"))', False),
    ('device.capacity["gpu.example.com"].memory.isLessThan(quantity("80Gi"))', True),
    ('quantity("1Gi") == quantity("1024Mi")', True),
    ('quantity("500m").isInteger()', False),
    ('quantity("2").add(3).asInteger() == 5', True),
    (f'{GPU}.driverVersion.isGreaterThan(semver("1.9.0"))', True),
    ('semver("1.10.0-rc.1").isLessThan(semver("1.10.0"))', True),
    (f'{GPU}.driverVersion.major() == 1', True),
    ('isSemver("1.2") || isQuantity("1Gi")', True),
    (f'{GPU}.model.lowerAscii() == "a100"', True),
    ('"a,b".split(",").size() == 2', True),
    (f'cel.bind(g, {GPU}, g.model == "A100" && g.index == 3)', True),
    (f'has({GPU}.firmware)', False),
    (f'{GPU}.?firmware.orValue("none") == "none"', True),
    ('device.attributes["other.example.com"].size() == 0', True),
])
def test_expression(backend, expression, expected):
    compiled = CACHES[backend].get(expression)
    assert compiled.error is None, compiled.error
    assert compiled.matches(DEVICE) is expected


@pytest.mark.parametrize("backend", BACKENDS)
def test_missing_attribute_is_a_runtime_error_worded_as_cel_go(backend):
    with pytest.raises(CelError, match=r"^no such key: firmware\. consider using CEL optional chaining"):
        CACHES[backend].get(f'{GPU}.firmware == "2.0"').matches(DEVICE)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("expression, message", [
    ("device.driver ==", "ERROR: <input>:1:17: Syntax error: mismatched input '<EOF>' expecting {'[', '{', '(', '.', "
                         "'-', '!', 'true', 'false', 'null', NUM_FLOAT, NUM_INT, NUM_UINT, STRING, BYTES, IDENTIFIER}\n"
                         " | device.driver ==\n | ................^"),
    ('device.driver.noSuchFunction()', "ERROR: <input>:1:29: undeclared reference to 'noSuchFunction' (in container '')"),
    ('1 + 2', "must evaluate to bool or the unknown type, not int"),
    ('[1, 2]', "must evaluate to bool or the unknown type, not list(int)"),
    ('1 == 1.0', "ERROR: <input>:1:3: found no matching overload for '_==_' applied to '(int, double)'"),
])
def test_compile_errors(backend, expression, message):
    compiled = CACHES[backend].get(expression)
    assert compiled.program is None and compiled.error.startswith(message), compiled.error


@pytest.mark.parametrize("backend", BACKENDS)
def test_programs_are_compiled_once_per_expression(backend):
    expression = f'{GPU}.index >= 0'
    assert CACHES[backend].get(expression) is CACHES[backend].get(expression)


def test_the_backend_is_cel_expr_python_where_it_is_installed():
    assert cel.installed_backend() == CEL_EXPR_PYTHON
    assert SelectorCache().backend == cel.DEFAULT_BACKEND


# Selectors of every kind a DRA user writes, valid and not: both backends must answer alike.
AGREEMENT = [
    f'{GPU}.healthy', f'{GPU}.index % 2 == 1', f'{GPU}.?healthy.orValue(true)',
    f'{GPU}.model.startsWith("A") || {GPU}.pcieRoot == "pci1"', f'{GPU}.pcieRoot == "pci1" || {GPU}.model.startsWith("A")',
    f'{GPU}.pcieRoot == "pci1" && {GPU}.model.startsWith("B")', f'"gpu.example.com" in device.attributes && {GPU}.index < 4',
    'noSuchVar == 1', 'a.b.c == 1', 'foo(1) == 1', f'{GPU}.model.foo(1)', 'device.driver', '{"a": 1}', '"x"',
    'true ? 1 : "a"', 'true ? device.driver : device.driver', '"a" + 1 == "a1"', 'quantity(1) == 1',
    f'{GPU}.model.size() > 1.0', f'{GPU}.model + 1 == 2', f'{GPU}.model > 1', 'dyn("a") < 1', '[1,2].all(x, x)',
    '9223372036854775807 + 1 > 0', '-9223372036854775808 - 1 > 0', '2 * 4611686018427387904 > 0', '1/0 == 1',
    '5 % 0 == 0', '1/0 == 1 || true', '[0, 1].all(x, 1 / x == 1)', '[0, 1].exists(x, 1 / x == 1)', '[1,2][5] == 1',
    'device.attributes["x"]["y"] == 1', 'device.nosuch == 1', 'device.capacity["gpu.example.com"].memory == 1',
    'quantity("abc").isInteger()', 'semver("1.2").major() == 1', 'quantity("1.5").asInteger() == 1', 'int("x") == 1',
    'uint(-1) == 1u', 'optional.none().value() == 1', '"x".matches("[")', f'{GPU}.index == 3.0', 'dyn(1) == 1.0',
    f'{GPU}.index > 2.5', f'{GPU}.index == 3u', 'dyn([1]) == [1.0]', 'dyn(1u) < -1', '{1: "a"}[1.0] == "a"',
    '-7 / 2 == -3', '-7 % 3 == -1', '1u + 2u == 3u', '1 < 2 && "a" < "b" && b"a" < b"b" && false < true',
    '[1] + [2] == [1, 2]', 'int(3.9) == 3', 'string(1.5) == "1.5"', 'bool("true")', 'size("héllo") == 5',
    '{"a": 1, "b": 2}.all(k, k.size() == 1)', '[1,2].exists_one(x, x > 1)', '[1,2].map(x, x * 2) == [2, 4]',
    '[1,2].filter(x, x > 1).size() == 1', f'{GPU}.index in [3, 4]', f'{GPU} == {{"model": "A100"}}',
    'quantity("1").sign() == 1', 'quantity("1Gi").asApproximateFloat() > 1e9', 'quantity("1").compareTo(semver("1.0.0")) == 0',
    'semver("1.2.3").minor() == 2 && semver("1.2.3").patch() == 3', 'optional.of(1).or(optional.of(2)).value() == 1',
    'optional.ofNonZeroValue(0).hasValue()', 'device.?driver.hasValue()', '[1,2][?5].orValue(0) == 0',
    'device.attributes[?"gpu.example.com"].?model.orValue("") == "A100"', '"%s-%d".format(["a", 1]) == "a-1"',
    'strings.quote("a") == "\\"a\\""', '"abc".reverse() == "cba"', '"hello".indexOf("l", 3) == 3',
    '"abc".substring(1) == "bc" && " x ".trim() == "x" && "aXa".replace("a", "b") == "bXb" && ["a","b"].join("-") == "a-b"',
    'cel.bind(x, 1, cel.bind(y, x + 1, y == 2))', r'r"a\n" == "a\\n"', '0x10 == 16', '-0.0 == 0.0', 'null == null',
    f'{GPU}.model == null', 'has(device.attributes.x)', 'device.allowMultipleAllocations', '!1', '-"a" == 1',
]


@pytest.mark.parametrize("expression", AGREEMENT)
def test_both_backends_answer_alike(expression):
    assert outcome(CEL_PYTHON, expression) == outcome(CEL_EXPR_PYTHON, expression)


@pytest.mark.parametrize("expression, cel_go, cel_cpp", [
    # ext/strings.go charAt and substr
    (f'{GPU}.model.charAt(10) == ""', "runtime error: index out of range: 10",
     "runtime error: <string>.charAt(<pos>): <pos> is greater than <string>.size()"),
    ('"a".substring(2) == ""', "runtime error: index out of range: 2",
     "runtime error: <string>.substring(<start>, <end>): <start> or <end> is greater than <string>.size()"),
    # checker/format.go formatFunctionDeclType: a member function's receiver before the dot
    ('quantity("1").compareTo(1) == 0',
     "compile error: ERROR: <input>:1:24: found no matching overload for 'compareTo' applied to 'map(string, dyn).(int)'",
     "compile error: ERROR: <input>:1:24: found no matching overload for 'compareTo' applied to '(map(string, dyn), int)'"),
])
def test_where_cel_cpp_words_an_error_otherwise_cel_python_says_what_cel_go_says(expression, cel_go, cel_cpp):
    assert outcome(CEL_PYTHON, expression).split("\n")[0] == cel_go
    assert outcome(CEL_EXPR_PYTHON, expression).split("\n")[0] == cel_cpp


# --- the cost limit ---------------------------------------------------------------------------------

def zeros(n: int) -> str:
    return "[" + ",".join(["0"] * n) + "]"


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("expression, passes", [
    (zeros(9999) + ".all(a, a == 0)", True),
    (zeros(10000) + ".all(a, a == 0)", False),
    (zeros(101) + ".all(a, " + zeros(98) + ".all(b, true))", True),    # 9,999 iterations in all
    (zeros(100) + ".all(a, " + zeros(99) + ".all(b, true))", False),   # 10,000
    (zeros(20000) + ".exists(a, a == 0)", True),                       # stops at the first
    ("cel.bind(x, " + zeros(6000) + ", x.all(a, a == 0) && x.all(a, a == 0))", False),
])
def test_the_comprehension_budget_is_cel_cpps_on_both_backends(backend, expression, passes):
    compiled = CACHES[backend].get(expression)
    if passes:
        assert compiled.matches(DEVICE) is True
    else:
        with pytest.raises(CelError, match="^operation cancelled: actual cost limit exceeded$"):
            compiled.matches(DEVICE)


def doubled(times: int) -> str:
    """A string that doubles ``times`` times through nested cel.bind."""
    body = "s%d.size() > 0" % times
    for level in range(times, 0, -1):
        body = f"cel.bind(s{level}, s{level - 1} + s{level - 1}, {body})"
    return f'cel.bind(s0, "x", {body})'


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_string_that_grows_past_cel_gos_cost_is_refused_and_a_small_one_is_not(backend):
    assert CACHES[backend].get(doubled(16)).matches(DEVICE) is True
    with pytest.raises(CelError, match="^operation cancelled: actual cost limit exceeded$"):
        CACHES[backend].get(doubled(28)).matches(DEVICE)


def test_cel_python_stops_at_cel_gos_size_cost_not_after_the_evaluation():
    # cel-go charges 0.1 per character a concatenation produces: doubling to 2^22 characters
    # produces 2^23 in all and passes, to 2^23 does not. The pure-Python evaluation stops there,
    # before the next doubling.
    assert CACHES[CEL_PYTHON].get(doubled(22)).matches(DEVICE) is True
    with pytest.raises(CelError, match="^operation cancelled: actual cost limit exceeded$"):
        CACHES[CEL_PYTHON].get(doubled(23)).matches(DEVICE)
    started = time.thread_time()
    with pytest.raises(CelError, match="^operation cancelled: actual cost limit exceeded$"):
        CACHES[CEL_PYTHON].get(doubled(40)).matches(DEVICE)  # 2^40 characters if it went on
    assert time.thread_time() - started < 5


# cel-expr-python cannot be interrupted: it is timed on its thread's CPU clock instead.

def test_a_cel_expr_python_evaluation_longer_than_the_measured_limit_is_refused(monkeypatch):
    monkeypatch.setattr(cel, "CEL_SELECTOR_EVALUATION_TIME_LIMIT", -1.0)
    with pytest.raises(cel.CelError, match="^operation cancelled: actual cost limit exceeded$"):
        SelectorCache(backend=CEL_EXPR_PYTHON).get('device.driver == "x"').matches(device_view("x", {"name": "d"}))


def test_a_pause_while_evaluating_is_not_taken_for_the_selectors_cost(monkeypatch):
    # Another thread holding the GIL, a stopped process or a profiler stretches the wall time of
    # an evaluation, not its CPU time; a device refused for it would stay refused.
    monkeypatch.setattr(cel, "CEL_SELECTOR_EVALUATION_TIME_LIMIT", 0.05)
    compiled = SelectorCache(backend=CEL_EXPR_PYTHON).get('device.driver == "x"')
    program = compiled.program

    class Paused:
        def eval(self, data):
            time.sleep(0.2)
            return program.eval(data=data)

    compiled.program = Paused()
    assert compiled.matches(device_view("x", {"name": "d"})) is True


def test_one_slow_evaluation_is_measured_again_before_the_device_is_refused(monkeypatch):
    # A garbage collection that starts inside one evaluation costs that evaluation's thread CPU.
    ticks = iter([0.0, 0.5, 1.0, 1.0001])
    monkeypatch.setattr(cel.time, "thread_time", lambda: next(ticks))
    cache = SelectorCache(backend=CEL_EXPR_PYTHON)
    assert cache.get('device.driver == "x"').matches(device_view("x", {"name": "d"})) is True
    ticks = iter([0.0, 0.5, 1.0, 1.5])
    monkeypatch.setattr(cel.time, "thread_time", lambda: next(ticks))
    with pytest.raises(cel.CelError, match="^operation cancelled: actual cost limit exceeded$"):
        cache.get('device.driver == "y"').matches(device_view("x", {"name": "d"}))
