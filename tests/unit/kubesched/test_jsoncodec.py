"""kubesched.jsoncodec decodes and encodes as the json module does, with or without orjson,
for everything the API server can send (its integers are Go int64s), and takes what orjson
alone would refuse."""

import json
import math

import pytest

from kubesched import jsoncodec

SAMPLES = [
    b'{"type":"ADDED","object":{"metadata":{"name":"p","labels":{"a":"\\u00e9"}},"spec":{"priority":-5}}}',
    b'{"max":9223372036854775807,"min":-9223372036854775808,"list":[1,2.5,true,null,"x"]}',
    b"[]",
]


@pytest.fixture(params=["orjson", "json"])
def codec(request, monkeypatch):
    if request.param == "json":
        monkeypatch.setattr(jsoncodec, "orjson", None)
    elif jsoncodec.orjson is None:
        pytest.fail("orjson is in requirements.txt; install it into .venv")
    return jsoncodec


@pytest.mark.parametrize("data", SAMPLES)
def test_loads_gives_what_json_gives(codec, data):
    assert codec.loads(data) == json.loads(data)


def test_loads_accepts_nan_as_json_does(codec):
    assert math.isnan(codec.loads(b'{"x": NaN}')["x"])


def test_loads_rejects_broken_json_with_a_value_error(codec):
    with pytest.raises(ValueError):
        codec.loads(b'{"x": ')


def test_dumps_round_trips_including_non_string_keys(codec):
    body = {"apiVersion": "v1", "kind": "Binding", "target": {"name": "n\u00e9"}, "n": [1, 2.5, None]}
    assert json.loads(codec.dumps(body)) == body
    assert json.loads(codec.dumps({1: "a"})) == {"1": "a"}
