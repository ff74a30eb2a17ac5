"""The part of the kubelet a kubeadm master's scheduler depends on, for masters without a kubelet.

The containers of the kubeadm scenario have no kubelet and no container runtime. This service
stands in for the kubelet's static pods: while a manifest is in the manifests directory, the
command of its container runs (the image's binary is the pinned one in /usr/local/bin); when
the manifest changes, the process is replaced; when it leaves, the process gets SIGTERM, as
the kubelet stops the pod; a process that exits is started again after a back-off, as with
restartPolicy Always. It reads only the `command:` list of the first container, which is all
kubeadm's kube-scheduler manifest needs: this is not a YAML parser.
"""

import os
import re
import signal
import subprocess
import sys
import time

MANIFESTS = sys.argv[1] if len(sys.argv) > 1 else "/etc/kubernetes/manifests"
STOP_GRACE_SECONDS = 30
RESTART_BACKOFF_SECONDS = 2
ITEM = re.compile(r"^\s*- (.*)$")
COMMAND = re.compile(r"^\s*(- )?command:\s*$")


def manifest_command(text):
    """The first container's command list, in order, unquoted."""
    lines = text.splitlines()
    for index, line in enumerate(lines):
        if COMMAND.match(line):
            command = []
            for item_line in lines[index + 1:]:
                item = ITEM.match(item_line)
                if not item:
                    break
                command.append(item.group(1).strip().strip("'\""))
            return command
    return []


def stop(process, name):
    """SIGTERM, then SIGKILL after the grace period, as the kubelet stops a container."""
    if process.poll() is None:
        print(f"static pod {name}: stopping pid {process.pid}", flush=True)
        process.terminate()
        try:
            process.wait(STOP_GRACE_SECONDS)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def main():
    running = {}  # manifest name -> (text, process, started_at)
    stopping = []

    def shut_down(signum, frame):
        del signum, frame
        stopping.append(True)

    signal.signal(signal.SIGTERM, shut_down)
    while not stopping:
        present = {}
        for name in sorted(os.listdir(MANIFESTS)) if os.path.isdir(MANIFESTS) else []:
            path = os.path.join(MANIFESTS, name)
            if name.startswith(".") or not os.path.isfile(path):
                continue
            with open(path, encoding="utf-8") as manifest:
                present[name] = manifest.read()
        for name in list(running):
            text, process, _started = running[name]
            if present.get(name) != text:
                stop(process, name)
                del running[name]
        for name, text in present.items():
            entry = running.get(name)
            if entry and entry[1].poll() is None:
                continue
            if entry and time.monotonic() - entry[2] < RESTART_BACKOFF_SECONDS:
                continue
            command = manifest_command(text)
            if not command:
                continue
            if entry:
                print(f"static pod {name}: exited with {entry[1].returncode}, starting again", flush=True)
            process = subprocess.Popen(command)  # pylint: disable=consider-using-with
            print(f"static pod {name}: started pid {process.pid}: {' '.join(command)}", flush=True)
            running[name] = (text, process, time.monotonic())
        time.sleep(1)
    for name, (_text, process, _started) in running.items():
        stop(process, name)


if __name__ == "__main__":
    main()
