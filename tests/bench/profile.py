"""Where kubesched's time goes: py-spy samples the scheduler during a benchmark run, and the
collapsed stacks are summed per function (own time, and time including callees)."""

from __future__ import annotations

import os
import re
import subprocess
from collections import Counter

from lab.private_lab import ROOT

PY_SPY = os.path.join(ROOT, ".venv", "bin", "py-spy")
# py-spy's raw format: "frame;frame;...;frame COUNT", a frame being "function (file:line)".
_FRAME = re.compile(r"^(?P<function>.*?) \((?P<file>[^():]*)(?::\d+)?\)$")


class Sampler:
    """py-spy attached to a running process until that process exits."""

    def __init__(self, pid: int, output: str, rate: int = 100):
        if not os.path.exists(PY_SPY):
            raise RuntimeError(f"{PY_SPY} is missing; 'pip install -r requirements.txt' into .venv installs py-spy")
        self.output = output
        self._log = open(output + ".log", "wb")
        # --gil: only samples that hold the GIL, i.e. Python work, not waits on the network.
        self.process = subprocess.Popen(
            [PY_SPY, "record", "--pid", str(pid), "--rate", str(rate), "--format", "raw", "--function",
             "--gil", "--nonblocking", "--subprocesses", "--output", output],
            stdout=self._log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)

    def finish(self, timeout: float = 60) -> None:
        try:
            self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.terminate()
            self.process.wait()
        self._log.close()


def _function(frame: str) -> str:
    match = _FRAME.match(frame.strip())
    if not match:
        return frame.strip()
    return f"{match['function']} ({match['file']})"


def summarise(raw_path: str, top: int = 25) -> str:
    """A plain-text table of the functions with the most own and inclusive samples."""
    own: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    total = 0
    with open(raw_path) as handle:
        for line in handle:
            stack, _unused, count = line.rstrip("\n").rpartition(" ")
            if not stack or not count.isdigit():
                continue
            samples = int(count)
            total += samples
            # --subprocesses roots each stack at a 'process PID:"COMMAND"' frame, not a function,
            # and the command line may itself hold semicolons.
            if stack.startswith("process "):
                end = stack.find('";')
                stack = stack[end + 2:] if end >= 0 else ""
            frames = [_function(frame) for frame in stack.split(";") if frame]
            if not frames:
                frames = ["(no Python frame: native code or start-up)"]
            own[frames[-1]] += samples
            for function in set(frames):
                inclusive[function] += samples
    if not total:
        return "no samples (did the scheduler run long enough, and may py-spy ptrace it?)\n"
    lines = [f"{total} samples holding the GIL", "", "own time (the function itself):"]
    lines += [f"  {100 * n / total:5.1f}%  {name}" for name, n in own.most_common(top)]
    lines += ["", "inclusive time (the function and everything it calls):"]
    lines += [f"  {100 * n / total:5.1f}%  {name}" for name, n in inclusive.most_common(top)]
    return "\n".join(lines) + "\n"
