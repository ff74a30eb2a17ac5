"""TLS material held in memory (client-go's transport package keeps it in memory too).

Python's ``ssl`` loads a certificate chain from files only, so a key that came as data (a
kubeconfig's ``client-key-data``, an extender's ``keyData``, a self-signed serving pair) is
handed over through an anonymous memory file (``memfd_create``), which no other process and
no directory ever sees. Where the kernel or a seccomp filter refuses memfd_create, the pair
goes to a 0600 file in a 0700 directory of our own, removed before this function returns,
whatever happens.
"""

from __future__ import annotations

import os
import shutil
import ssl
import tempfile


def load_cert_chain_data(context: ssl.SSLContext, cert_pem: bytes, key_pem: bytes | None = None) -> None:
    """context.load_cert_chain for PEM bytes; key_pem None when cert_pem holds the key too."""
    try:
        memory_files = [_memory_file("cert", cert_pem)]
        if key_pem is not None:
            memory_files.append(_memory_file("key", key_pem))
    except (AttributeError, OSError):  # no memfd_create here (old kernel, seccomp, not Linux)
        _load_through_private_directory(context, cert_pem, key_pem)
        return
    try:
        paths = [f"/proc/self/fd/{fd}" for fd in memory_files]
        context.load_cert_chain(paths[0], paths[1] if key_pem is not None else None)
    finally:
        for fd in memory_files:
            os.close(fd)


def _memory_file(name: str, data: bytes) -> int:
    fd = os.memfd_create(f"kubesched-{name}", os.MFD_CLOEXEC)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        if not os.path.exists(f"/proc/self/fd/{fd}"):  # no /proc: the path below would not open
            raise OSError("/proc/self/fd is not available")
    except BaseException:
        os.close(fd)
        raise
    return fd


def _load_through_private_directory(context: ssl.SSLContext, cert_pem: bytes, key_pem: bytes | None) -> None:
    directory = tempfile.mkdtemp(prefix="kubesched-tls-")  # 0700
    try:
        cert = os.path.join(directory, "tls.crt")
        key = os.path.join(directory, "tls.key")
        for path, data in ((cert, cert_pem), (key, key_pem)):
            if data is None:
                continue
            with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb") as fh:
                fh.write(data)
        context.load_cert_chain(cert, key if key_pem is not None else None)
    finally:
        shutil.rmtree(directory, ignore_errors=True)
