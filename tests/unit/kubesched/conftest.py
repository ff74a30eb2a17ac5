import importlib.util
import threading
from http.server import ThreadingHTTPServer
from pathlib import Path

import pytest
from kubesched_fakes import FAKE_DEFAULT_PLUGINS, FAKE_REGISTRY


@pytest.fixture
def fake_registry(monkeypatch):
    """Make the config loader know the fake plugins by name; the scheduler gets their classes."""
    from kubesched.config import load

    queue_sort = frozenset(name for name, cls in FAKE_REGISTRY.items() if hasattr(cls, "less"))
    monkeypatch.setattr(load, "_plugin_names", lambda: (frozenset(FAKE_REGISTRY), FAKE_DEFAULT_PLUGINS, queue_sort))
    return FAKE_REGISTRY


SERVER = Path(__file__).resolve().parents[3] / "tests" / "integration" / "kubesched" / "extender_server.py"
_spec = importlib.util.spec_from_file_location("extender_server", SERVER)
extender_server = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(extender_server)


@pytest.fixture
def serve(tmp_path):
    """serve(*cli_args) -> (url, log path): the test extender on a free port, stopped after the test."""
    servers = []

    def start(*args: str) -> tuple[str, Path]:
        log = tmp_path / f"requests-{len(servers)}.jsonl"
        args = extender_server.parser().parse_args(["--port", "0", "--log", str(log), *args])
        server = ThreadingHTTPServer(("127.0.0.1", 0), extender_server.handler_for(
            extender_server.Extender(args)))
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_port}", log

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()
