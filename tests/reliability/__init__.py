"""Reliability and security suites for kubesched and the collection: failover, API server
restarts, races, bad input, role failure modes, security.

`python -m tests.reliability` runs every suite against a private lab API server (never the shared
one on :6443, because one suite restarts its API server), prints a summary and writes
tests/reliability/results/latest.json and docs/reliability.md. Each suite is a module with one
``run(...)`` entry point returning a ``SuiteResult``; the fast ones are also driven by the
pytest tests in tests/integration/reliability/.
"""
