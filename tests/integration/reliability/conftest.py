"""Fixtures for the reliability tests: a private lab control plane of their own.

One test restarts the API server, so these tests never use the shared lab on :6443. The
private lab lives in /tmp/rel-lab-test on 127.0.0.1:16743 (etcd 12679/12680), a different
place from `make reliability`'s, so both can run at once.
"""

from __future__ import annotations

import pytest

from lab.cluster import Cluster
from lab.private_lab import PrivateLab
from tests.reliability.instances import stop_all


@pytest.fixture(scope="session")
def private_lab():
    lab = PrivateLab("/tmp/rel-lab-test", 16743, 12679, 12680)
    lab.up()
    yield lab
    stop_all()
    lab.down()


@pytest.fixture
def cluster(private_lab):
    """The private lab's API, with 20 schedulable fake nodes; reconnects for every test."""
    cluster = Cluster(private_lab.kubeconfig)
    cluster.ensure_nodes(20)
    yield cluster
    cluster.close()


@pytest.fixture
def workdir(tmp_path):
    return str(tmp_path)
