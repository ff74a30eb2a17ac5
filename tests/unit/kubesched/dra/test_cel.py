"""The DRA CEL environment: upstream's variables, functions and errors on one device."""

import pytest

from kubesched.dra.cel import CelError, SelectorCache, device_view

DEVICE = device_view("gpu.example.com", {
    "name": "gpu-0",
    "attributes": {"model": {"string": "A100"}, "index": {"int": 3}, "healthy": {"bool": True},
                   "driverVersion": {"version": "1.10.0"}, "numa.example.com/node": {"int": 1}},
    "capacity": {"memory": {"value": "40Gi"}}})
CACHE = SelectorCache()


@pytest.mark.parametrize("expression, expected", [
    ('device.driver == "gpu.example.com"', True),
    ('device.attributes["gpu.example.com"].model == "A100"', True),
    ('device.attributes["gpu.example.com"].index > 2 && device.attributes["gpu.example.com"].healthy', True),
    ('device.attributes["numa.example.com"].node == 1', True),
    ('device.capacity["gpu.example.com"].memory.compareTo(quantity("40960Mi")) == 0', True),
    ('device.capacity["gpu.example.com"].memory.isGreaterThan(quantity("80Gi"))', False),
    ('device.capacity["gpu.example.com"].memory.isLessThan(quantity("80Gi"))', True),
    ('quantity("1Gi") == quantity("1024Mi")', True),
    ('quantity("500m").isInteger()', False),
    ('quantity("2").add(3).asInteger() == 5', True),
    ('device.attributes["gpu.example.com"].driverVersion.isGreaterThan(semver("1.9.0"))', True),
    ('semver("1.10.0-rc.1").isLessThan(semver("1.10.0"))', True),
    ('device.attributes["gpu.example.com"].driverVersion.major() == 1', True),
    ('isSemver("1.2") || isQuantity("1Gi")', True),
    ('device.attributes["gpu.example.com"].model.lowerAscii() == "a100"', True),
    ('"a,b".split(",").size() == 2', True),
    ('cel.bind(g, device.attributes["gpu.example.com"], g.model == "A100" && g.index == 3)', True),
    ('has(device.attributes["gpu.example.com"].firmware)', False),
    ('device.attributes["gpu.example.com"].?firmware.orValue("none") == "none"', True),
    ('device.attributes["other.example.com"].size() == 0', True),
])
def test_expression(expression, expected):
    compiled = CACHE.get(expression)
    assert compiled.error is None, compiled.error
    assert compiled.matches(DEVICE) is expected


def test_missing_attribute_is_a_runtime_error_worded_as_cel_go():
    with pytest.raises(CelError, match=r"^no such key: firmware\. consider using CEL optional chaining"):
        CACHE.get('device.attributes["gpu.example.com"].firmware == "2.0"').matches(DEVICE)


@pytest.mark.parametrize("expression, message", [
    ("device.driver ==", "Syntax error"),
    ('device.driver.noSuchFunction()', "undeclared reference to 'noSuchFunction'"),
    ('1 + 2', "must evaluate to bool or the unknown type, not int"),
])
def test_compile_errors(expression, message):
    compiled = CACHE.get(expression)
    assert compiled.program is None and message in compiled.error


def test_programs_are_compiled_once_per_expression():
    expression = 'device.attributes["gpu.example.com"].index >= 0'
    assert CACHE.get(expression) is CACHE.get(expression)
