"""The pinned requirements of one wheelhouse target, from a constraints file with markers.

    python target_constraints.py CONSTRAINTS TARGET

CONSTRAINTS is roles/scheduler/files/constraints.txt (kubesched's dependencies for every
supported Python, ``name==version ; marker``); TARGET is python<major>.<minor>-<arch>. Prints
the lines whose marker holds on that target, without the marker, one a line. pip evaluates a
marker against the Python that runs it, not against ``pip download --python-version``'s
target, so wheelhouse.sh downloads exactly these pins (--no-deps) instead of resolving.
Runs on the controller's Python, with the ``packaging`` that ansible-core requires (or pip's
own copy of it).
"""

import re
import sys

try:
    from packaging.requirements import Requirement
except ImportError:  # a Python with pip but without ansible-core
    from pip._vendor.packaging.requirements import Requirement

TARGET = re.compile(r"^python(\d+)\.(\d+)-([A-Za-z0-9_]+)$")


def environment(target):
    """The marker variables of a CPython on Linux for TARGET, at a late patch release (the
    constraints are resolved from 3.9.2 on: cryptography skips 3.9.0 and 3.9.1)."""
    match = TARGET.match(target)
    if not match:
        raise ValueError("'%s' is not a target like python3.13-x86_64" % target)
    major, minor, arch = match.groups()
    return {"python_version": "%s.%s" % (major, minor), "python_full_version": "%s.%s.99" % (major, minor),
            "platform_machine": arch, "sys_platform": "linux", "platform_system": "Linux", "os_name": "posix",
            "implementation_name": "cpython", "platform_python_implementation": "CPython",
            "implementation_version": "%s.%s.99" % (major, minor), "platform_release": "", "platform_version": ""}


def pins(lines, target):
    """``name==version`` for every requirement of LINES whose marker holds on TARGET."""
    env = environment(target)
    chosen = {}
    for raw in lines:
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        requirement = Requirement(line)
        if requirement.marker is not None and not requirement.marker.evaluate(env):
            continue
        specs = list(requirement.specifier)
        if len(specs) != 1 or specs[0].operator != "==":
            raise ValueError("'%s' is not pinned with ==" % line)
        name = requirement.name.lower().replace("_", "-")
        if name in chosen and chosen[name] != specs[0].version:
            raise ValueError("%s is pinned twice for %s: %s and %s" % (name, target, chosen[name], specs[0].version))
        chosen[name] = specs[0].version
    return ["%s==%s" % (name, version) for name, version in sorted(chosen.items())]


def main(argv):
    if len(argv) != 3:
        sys.stderr.write("usage: target_constraints.py CONSTRAINTS TARGET\n")
        return 2
    try:
        with open(argv[1]) as handle:
            selected = pins(handle, argv[2])
    except (OSError, ValueError) as err:
        sys.stderr.write("target_constraints: %s\n" % err)
        return 1
    sys.stdout.write("".join(line + "\n" for line in selected))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
