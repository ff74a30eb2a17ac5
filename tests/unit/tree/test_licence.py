"""One licence everywhere: what LICENSE holds, galaxy.yml, pyproject.toml, every role's meta
and every plugin file's header say the same."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[3]
SPDX = "GPL-3.0-or-later"
HEADER = "# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)"


def test_license_file_galaxy_and_pyproject_agree():
    assert "GNU GENERAL PUBLIC LICENSE" in (ROOT / "LICENSE").read_text(encoding="utf-8")[:200]
    assert yaml.safe_load((ROOT / "galaxy.yml").read_text(encoding="utf-8"))["license"] == [SPDX]
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert re.findall(r'^license = "(.*)"$', pyproject, re.M) == [SPDX]


@pytest.mark.parametrize("meta", sorted(ROOT.glob("roles/*/meta/main.yml")), ids=lambda p: p.parts[-3])
def test_every_role_says_the_collection_licence(meta):
    assert yaml.safe_load(meta.read_text(encoding="utf-8"))["galaxy_info"]["license"] == SPDX


@pytest.mark.parametrize("source", sorted(ROOT.glob("plugins/*/*.py")), ids=lambda p: "/".join(p.parts[-2:]))
def test_every_plugin_file_says_the_collection_licence(source):
    assert HEADER in source.read_text(encoding="utf-8").splitlines()[:5]
