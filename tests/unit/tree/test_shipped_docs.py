"""The documentation the collection tarball ships works from an installed collection: every file,
directory, make target or Python module of this repository that a shipped doc names is in the
tarball, or is part of the user's own project. A user who installed the collection has no git
checkout, no Makefile, no lab and no .venv.

Only the README's first screen (before its first `## ` heading) may name checkout-only things:
the project's rule is that it shows `make demo` and `make test`, and it must then say that they
need the checkout."""

from __future__ import annotations

import ast
import posixpath
import re
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
import yaml
from ansible_cli import user_environment

ROOT = Path(__file__).resolve().parents[3]

# Names a doc may use for the user's own project, though the checkout has them too: the project's
# ansible.cfg, and its collections directory (`ansible-galaxy collection install -p collections`).
USERS_OWN = {"ansible.cfg", "collections"}
# Working directories of the checkout that git does not track: the venv, the lab, the caches.
CHECKOUT_WORK_DIRS = {".venv", ".lab", ".cache"}
INSTALLED_PREFIX = "ansible_collections/kubesched/scheduler/"

LINK = re.compile(r"\]\(([^)\s]+)\)")
URL = re.compile(r"\b[a-z][a-z0-9+.-]*://\S+")
# A relative path: no scheme, and not a piece of an absolute path or of a longer token.
PATH = re.compile(r"(?<![\w./~$<>{}*@:-])([\w.~$<>{}*@-]+(?:/[\w.~$<>{}*@-]*)+)")
PYTHON_MODULE = re.compile(r"-m\s+([A-Za-z_][\w.]*)")
HTML_COMMENT = re.compile(r"<!--.*?-->", re.S)
PLACEHOLDER = re.compile(r"[<>{}*$~]")


def checkout_top_level() -> set[str]:
    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    return {name.split("/", 1)[0] for name in tracked.split("\0") if name} | CHECKOUT_WORK_DIRS


def make_targets() -> set[str]:
    return set(re.findall(r"^([a-z][\w-]*):", (ROOT / "Makefile").read_text(encoding="utf-8"), re.M))


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading."""
    text = re.sub(r"[`*_]|\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


class Tarball:
    def __init__(self, path: Path):
        with tarfile.open(path) as archive:
            self.texts = {m.name: archive.extractfile(m).read().decode("utf-8", "replace")
                          for m in archive.getmembers() if m.isfile()}
        self.files = set(self.texts)
        self.dirs = {posixpath.dirname(name) for name in self.files}
        self.dirs |= {d.rsplit("/", i)[0] for d in list(self.dirs) for i in range(1, d.count("/") + 1)}

    def has(self, path: str) -> bool:
        """path names a file or directory of the tarball, from its root or, for a path that
        starts inside a role or a package (`meta/argument_specs.yml`), below some directory."""
        path = posixpath.normpath(path).rstrip("/")
        if path in self.files or path in self.dirs:
            return True
        return any(name.endswith("/" + path) for name in self.files | self.dirs)

    def anchors(self, doc: str) -> set[str]:
        headings = re.findall(r"^#{1,6} (.+)$", self.texts.get(doc, ""), re.M)
        return {slug(h) for h in headings}

    def docs(self) -> dict[str, str]:
        """What a user reads: every Markdown file; the role variables and module documentation
        ansible-doc shows. Not the changelog: it records what a past release changed."""
        docs = {name: text for name, text in self.texts.items() if name.endswith(".md")}
        docs |= {name: text for name, text in self.texts.items()
                 if re.fullmatch(r"roles/[^/]+/meta/argument_specs\.yml", name)}
        for name, text in self.texts.items():
            if re.fullmatch(r"plugins/(modules|doc_fragments)/[^/]+\.py", name):
                docs[name] = "\n".join(module_documentation(text))
        return docs


def module_documentation(source: str) -> list[str]:
    strings = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            if any(getattr(t, "id", "") in ("DOCUMENTATION", "EXAMPLES", "RETURN") for t in node.targets):
                strings.append(node.value.value)
    return strings


def missing_references(doc: str, text: str, tarball: Tarball, top_level: set[str], targets: set[str]):
    """(line number, line, reference) for each thing the doc names that the tarball lacks."""
    text = HTML_COMMENT.sub(lambda m: "\n" * m.group(0).count("\n"), text)
    base = posixpath.dirname(doc)
    for number, line in enumerate(text.splitlines(), 1):
        for target in LINK.findall(line):
            if URL.match(target) or target.startswith("mailto:"):
                continue
            path, _hash, anchor = target.partition("#")
            resolved = posixpath.normpath(posixpath.join(base, path)) if path else doc
            if path and not tarball.has(resolved):
                yield number, line, target
            elif anchor and resolved.endswith(".md") and anchor not in tarball.anchors(resolved):
                yield number, line, target
        line_without_urls = URL.sub(" ", line)
        for token in PATH.findall(line_without_urls):
            token = token.lstrip("@").rstrip(".,:;")      # `-e @vars.yml`; the end of a sentence
            if INSTALLED_PREFIX in token:
                inside = token.split(INSTALLED_PREFIX, 1)[1]
                if not tarball.has(concrete_part(inside) or "."):
                    yield number, line, token
                continue
            first = token.split("/", 1)[0]
            if first in top_level and first not in USERS_OWN and not tarball.has(concrete_part(token)):
                yield number, line, token
        for word in re.findall(r"[\w.-]+", line_without_urls):
            if word in top_level and word not in USERS_OWN and "." in word[1:] and not tarball.has(word):
                yield number, line, word        # a top-level file: Makefile is below, galaxy.yml, ...
            elif word == "Makefile":
                yield number, line, word
        for module in PYTHON_MODULE.findall(line_without_urls):
            parts = module.split(".")
            if parts[0] in top_level and not (tarball.has("/".join(parts) + ".py") or tarball.has("/".join(parts))):
                yield number, line, f"-m {module}"
        for target in re.findall(r"\bmake\s+([a-z][\w-]*)", line_without_urls):
            if target in targets:
                yield number, line, f"make {target}"


def concrete_part(path: str) -> str:
    """The part of a path before its first placeholder (`roles/<role>/...` -> `roles`)."""
    parts = []
    for part in path.split("/"):
        if PLACEHOLDER.search(part):
            break
        parts.append(part)
    return "/".join(parts)


def first_screen_end(text: str) -> int:
    """The line number of the README's first `## ` heading."""
    for number, line in enumerate(text.splitlines(), 1):
        if line.startswith("## "):
            return number
    return len(text.splitlines()) + 1


@pytest.fixture(scope="module")
def tarball(collection_tarball) -> Tarball:
    return Tarball(collection_tarball)


def test_shipped_docs_name_only_what_ships(tarball):
    top_level, targets = checkout_top_level(), make_targets()
    found = []
    for doc, text in sorted(tarball.docs().items()):
        readme_first_screen = first_screen_end(text) if doc == "README.md" else 0
        found += [f"{doc}:{number}: {reference}    ({line.strip()[:100]})"
                  for number, line, reference in missing_references(doc, text, tarball, top_level, targets)
                  if number >= readme_first_screen]
    assert found == [], (f"{len(found)} references to what the collection tarball does not ship (move checkout-only "
                         "material to docs/development.md, or name the installed path):\n" + "\n".join(found))


def test_the_readme_first_screen_shows_the_two_commands_and_says_they_need_the_checkout(tarball):
    readme = tarball.texts["README.md"]
    first_screen = "\n".join(readme.splitlines()[:first_screen_end(readme) - 1])
    assert "make demo" in first_screen and "make test" in first_screen
    assert re.search(r"\bgit checkout\b", first_screen), "the README's first screen must say that make needs the checkout"
    # What it links to is in the checkout, then.
    for target in LINK.findall(first_screen):
        path, _hash, anchor = target.partition("#")
        if path:
            assert (ROOT / path).exists(), f"README links to {target}, which the checkout lacks"
            headings = re.findall(r"^#{1,6} (.+)$", (ROOT / path).read_text(encoding="utf-8"), re.M)
            assert not anchor or anchor in {slug(h) for h in headings}, f"README links to {target}: no such section"


def test_the_check_catches_checkout_paths_commands_and_broken_links(tarball):
    top_level, targets = checkout_top_level(), make_targets()
    doc = "\n".join([
        "Run `bash lab/wheelhouse.sh`, then `.venv/bin/kubesched --help`.",
        "    ansible-playbook -i inventories/lab/hosts.yml playbooks/site.yml",
        "See [the tests](../tests/unit) and [the lab](user-guide.md#no-such-section).",
        "make demo; python -m lab.fake_nodes --count 3; edit galaxy.yml; -e @inventories/lab/my-scheduler.yml.",
        # Nothing to report below: the user's own project, the installed collection, hosts' paths, URLs.
        "bash collections/ansible_collections/kubesched/scheduler/roles/scheduler/files/wheelhouse.sh",
        "<collections>/ansible_collections/kubesched/scheduler/roles/scheduler/files/wheelhouse.sh",
        "`ansible.cfg`, `inventory/hosts.yml`, `/etc/kubernetes/pki/ca.crt`, `~/.cache/kubesched/wheelhouse`,",
        "`roles/<role>/meta/argument_specs.yml`, [modules](modules/README.md), https://dl.k8s.io/release/v1/bin",
    ])
    found = [(number, reference) for number, _line, reference in missing_references(
        "docs/x.md", doc, tarball, top_level, targets)]
    assert found == [(1, "lab/wheelhouse.sh"), (1, ".venv/bin/kubesched"), (2, "inventories/lab/hosts.yml"),
                     (3, "../tests/unit"), (3, "user-guide.md#no-such-section"),
                     (4, "inventories/lab/my-scheduler.yml"), (4, "galaxy.yml"), (4, "-m lab.fake_nodes"),
                     (4, "make demo")]


def test_the_user_guides_second_scheduler_is_the_one_the_demo_runs(tarball):
    """The demo deploys inventories/lab/my-scheduler.yml; the guide shows its scheduler variables."""
    guide = tarball.texts["docs/user-guide.md"]
    section = guide[guide.index("## A second scheduler beside the default one"):]
    shown = yaml.safe_load(section[section.index("```yaml") + 7:section.index("```", section.index("```yaml") + 7)])
    demo = yaml.safe_load((ROOT / "inventories/lab/my-scheduler.yml").read_text(encoding="utf-8"))
    assert shown == {name: value for name, value in demo.items() if name.startswith("scheduler_")}


def test_the_shipped_plugin_example_passes_its_tests_against_the_shipped_kubesched(collection_tarball, tmp_path):
    """docs/plugins.md: the example, copied out of the installed collection, tested with the
    collection's own kubesched on PYTHONPATH."""
    collection = tmp_path / "collections/ansible_collections/kubesched/scheduler"
    collection.mkdir(parents=True)
    with tarfile.open(collection_tarball) as archive:
        archive.extractall(collection, filter="data")
    shutil.copytree(collection / "examples/kubesched-plugin-example", tmp_path / "my-plugin")
    env = user_environment() | {"PYTHONPATH": str(collection)}
    imported = subprocess.run([sys.executable, "-c", "import kubesched; print(kubesched.__file__)"], env=env,
                              cwd=tmp_path, capture_output=True, text=True, check=True).stdout.strip()
    assert imported.startswith(str(collection)), imported
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "my-plugin/tests"], env=env,
                          cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.search(r"\b[1-9]\d* passed", done.stdout), done.stdout
