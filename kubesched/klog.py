"""klog-style structured logs: ``I1121 10:00:00.123456  4242 file.py:12] "Message" key="value"``.

Verbosity works as klog's -v: ``if klog.V(2): klog.info(...)`` costs one comparison when off,
which matters on the per-pod path.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from typing import Any, TextIO

_verbosity = 0
_lock = threading.Lock()
_stream: TextIO = sys.stderr
_PID = os.getpid()


def set_verbosity(level: int, stream: TextIO | None = None) -> None:
    global _verbosity, _stream
    _verbosity = level
    if stream is not None:
        _stream = stream


def verbosity() -> int:
    return _verbosity


def V(level: int) -> bool:  # noqa: N802 - named as klog names it
    return _verbosity >= level


def _quote(value: Any) -> str:
    if isinstance(value, bool):  # as logr renders a Go bool
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    text = str(value)
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _emit(severity: str, msg: str, kv: dict[str, Any]) -> None:
    now = time.time()
    frame = sys._getframe(2)
    where = f"{os.path.basename(frame.f_code.co_filename)}:{frame.f_lineno}"
    stamp = time.strftime("%m%d %H:%M:%S", time.gmtime(now)) + f".{int(now % 1 * 1e6):06d}"
    fields = "".join(f" {k}={_quote(v)}" for k, v in kv.items())
    line = f"{severity}{stamp} {_PID:>7} {where}] {_quote(msg)}{fields}\n"
    with _lock:
        _stream.write(line)
        _stream.flush()


def info(msg: str, **kv: Any) -> None:
    _emit("I", msg, kv)


def warning(msg: str, **kv: Any) -> None:
    _emit("W", msg, kv)


def error(msg: str, **kv: Any) -> None:
    _emit("E", msg, kv)
