"""The DRA tests import their object builders (dra_objects) by name, and run through each CEL
backend: a module that says ``pytestmark = pytest.mark.usefixtures("cel_backend")`` runs every
test once with cel-expr-python and once with cel-python (both are in the development venv)."""

import os
import sys

import pytest

from kubesched.dra import cel

sys.path.insert(0, os.path.dirname(__file__))


@pytest.fixture(params=cel.BACKENDS)
def cel_backend(request, monkeypatch):
    """The backend every SelectorCache made during the test uses."""
    monkeypatch.setattr(cel, "DEFAULT_BACKEND", request.param)
    return request.param
