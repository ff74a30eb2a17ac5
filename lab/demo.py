"""Lab helpers (run with PYTHONPATH at the repository root) for `make demo` and the Molecule scenarios.

    python lab/demo.py nodes --prefix demo-node- --count 3   create the missing fake nodes
    python lab/demo.py delete-nodes --prefix demo-node-      delete the nodes with that prefix
    python lab/demo.py workloads                             the demo's S2, S3, S5, S6 pods
    python lab/demo.py table                                 where each demo pod landed, and why
    python lab/demo.py delete-workloads                      remove the demo's namespaces
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from lab.fake_nodes import core_v1_from_kubeconfig, create_nodes, delete_nodes

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_KUBECONFIG = os.path.join(ROOT, ".lab", "admin.kubeconfig")


def existing_nodes(core_v1, prefix: str) -> set[str]:
    return {n.metadata.name for n in core_v1.list_node().items if n.metadata.name.startswith(prefix)}


def cmd_nodes(core_v1, args) -> int:
    present = existing_nodes(core_v1, args.prefix)
    wanted = [f"{args.prefix}{i}" for i in range(args.count)]
    if all(name in present for name in wanted):
        print(f"nodes: {len(wanted)} present")
        return 0
    # create_nodes names them <prefix>0..count-1; remove partial leftovers first so the set is whole.
    delete_nodes(core_v1, sorted(present))
    create_nodes(core_v1, args.count, prefix=args.prefix)
    print(f"nodes: created {args.count}")
    return 0


def cmd_delete_nodes(core_v1, args) -> int:
    names = sorted(existing_nodes(core_v1, args.prefix))
    delete_nodes(core_v1, names)
    print(f"nodes: deleted {len(names)}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kubeconfig", default=DEFAULT_KUBECONFIG)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("nodes", help="create the missing fake nodes")
    p.add_argument("--prefix", default="demo-node-")
    p.add_argument("--count", type=int, default=3)
    p = sub.add_parser("delete-nodes", help="delete the fake nodes with a prefix")
    p.add_argument("--prefix", default="demo-node-")
    args = parser.parse_args(argv)
    if not os.path.exists(args.kubeconfig):
        print(f"demo: {args.kubeconfig} does not exist; run 'make lab-up' first", file=sys.stderr)
        return 1
    core_v1 = core_v1_from_kubeconfig(args.kubeconfig)
    start = time.monotonic()
    handler = {"nodes": cmd_nodes, "delete-nodes": cmd_delete_nodes}[args.command]
    rc = handler(core_v1, args)
    if os.environ.get("DEMO_TIMING"):
        print(f"demo: {args.command} took {time.monotonic() - start:.1f} s")
    return rc


if __name__ == "__main__":
    sys.exit(main())
