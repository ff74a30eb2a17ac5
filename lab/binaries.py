"""Where lab/k8s-binaries.sh keeps the pinned Kubernetes binaries, for Python callers.

The same rule as the script: $KUBESCHED_CACHE, else $XDG_CACHE_HOME/kubesched, else
~/.cache/kubesched; binaries under <cache>/<version>/bin.
"""

from __future__ import annotations

import os

K8S_VERSION = os.environ.get("K8S_VERSION", "v1.37.1")
CACHE_DIR = os.environ.get("KUBESCHED_CACHE") or os.path.join(
    os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "kubesched")
BIN_DIR = os.path.join(CACHE_DIR, K8S_VERSION, "bin")


def binary(name: str) -> str:
    """The path of one pinned binary (kube-scheduler, kube-apiserver, kubectl, etcd, ...)."""
    return os.path.join(BIN_DIR, name)
