"""The `kubesched` command: kube-scheduler's flags, plus `validate-config` and `explain`.

    kubesched --config FILE [--leader-elect=false] [--secure-port 10259] [-v 2]
    kubesched validate-config FILE
    kubesched explain NAMESPACE/POD [--config FILE] [--kubeconfig FILE]

Everything that can be wrong with the configuration (the file, its plugins and their args,
the kubeconfig) is checked before the cluster is contacted, and reported as one line.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import ssl
import sys
import threading
import time
from typing import Sequence

from kubesched import __version__, klog
from kubesched.client import ApiClient, ApiError, KubeconfigError, load_kubeconfig
from kubesched.config import ConfigError, load_config, parse_config
from kubesched.config.types import API_VERSION, KIND, KubeSchedulerConfiguration
from kubesched.framework.runtime import FrameworkError

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2


class UsageError(Exception):
    pass


def _bool(text: str) -> bool:
    lowered = text.lower()
    if lowered in ("true", "1", "t", "yes"):
        return True
    if lowered in ("false", "0", "f", "no"):
        return False
    raise argparse.ArgumentTypeError(f"invalid boolean {text!r} (use true or false)")


def _normalise_argv(argv: Sequence[str]) -> list[str]:
    """Accept klog's `-v=2` and Go's bare boolean `--leader-elect` spellings."""
    out = []
    for arg in argv:
        if arg.startswith("-v=") or arg.startswith("--v="):
            out.extend(["--v", arg.split("=", 1)[1]])
        elif arg == "--leader-elect":
            out.append("--leader-elect=true")
        else:
            out.append(arg)
    return out


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="kubesched", description="A Kubernetes scheduler with kube-scheduler's "
                                "framework, plugins, configuration and behaviour.")
    p.add_argument("--config", default="", help="path to a KubeSchedulerConfiguration (kubescheduler.config.k8s.io/v1)")
    p.add_argument("--kubeconfig", default="", help="kubeconfig, used when the configuration's "
                   "clientConnection.kubeconfig is empty")
    p.add_argument("--leader-elect", type=_bool, default=None, metavar="BOOL",
                   help="override leaderElection.leaderElect from the configuration (default true)")
    p.add_argument("--leader-elect-lease-duration", default=None, metavar="DURATION")
    p.add_argument("--leader-elect-renew-deadline", default=None, metavar="DURATION")
    p.add_argument("--leader-elect-retry-period", default=None, metavar="DURATION")
    p.add_argument("--leader-elect-resource-name", default=None)
    p.add_argument("--leader-elect-resource-namespace", default=None)
    p.add_argument("--secure-port", type=int, default=10259, help="HTTPS port for /healthz, /livez, "
                   "/readyz, /metrics (0 picks a free port)")
    p.add_argument("--bind-address", default="0.0.0.0")
    p.add_argument("--tls-cert-file", default="")
    p.add_argument("--tls-private-key-file", default="")
    p.add_argument("--client-ca-file", default="", help="require client certificates signed by this CA for /metrics")
    p.add_argument("--v", "-v", dest="verbosity", type=int, default=0, help="log verbosity (2: one line per decision)")
    p.add_argument("--version", action="version", version=f"kubesched {__version__}")
    return p


# ---------------------------------------------------------------------------------------------
# Configuration, checked in full before the cluster is contacted
# ---------------------------------------------------------------------------------------------

def _default_config() -> KubeSchedulerConfiguration:
    return parse_config({"apiVersion": API_VERSION, "kind": KIND}, source="(defaults)")


def _apply_leader_flags(cfg: KubeSchedulerConfiguration, args: argparse.Namespace) -> None:
    """kube-scheduler honours the leader-election flags even with --config."""
    from kubesched.config.load import validate_leader_election
    from kubesched.config.types import parse_duration

    le = cfg.leader_election
    if args.leader_elect is not None:
        le.leader_elect = args.leader_elect
    for flag, attr in (("leader_elect_lease_duration", "lease_duration"),
                       ("leader_elect_renew_deadline", "renew_deadline"),
                       ("leader_elect_retry_period", "retry_period")):
        value = getattr(args, flag)
        if value is not None:
            try:
                setattr(le, attr, parse_duration(value))
            except ValueError as err:
                raise ConfigError("--" + flag.replace("_", "-"), str(err)) from None
    if args.leader_elect_resource_name is not None:
        le.resource_name = args.leader_elect_resource_name
    if args.leader_elect_resource_namespace is not None:
        le.resource_namespace = args.leader_elect_resource_namespace
    try:
        validate_leader_election(le)
    except ConfigError as err:
        raise ConfigError(err.field, err.message + " (after the --leader-elect-* flags)", cfg.source) from None


def prepare(args: argparse.Namespace):
    """Load and validate everything; returns (config, credentials path, Scheduler factory)."""
    cfg = load_config(args.config) if args.config else _default_config()
    _apply_leader_flags(cfg, args)
    kubeconfig = cfg.client_connection.kubeconfig or args.kubeconfig or os.environ.get("KUBECONFIG", "")
    if not kubeconfig:
        raise ConfigError("clientConnection.kubeconfig", "required: set it in the configuration or pass "
                          "--kubeconfig (in-cluster configuration is not supported)", cfg.source)
    try:
        creds = load_kubeconfig(kubeconfig)
    except KubeconfigError as err:
        raise ConfigError("clientConnection.kubeconfig", str(err), cfg.source) from None
    return cfg, creds


def validate_frameworks(cfg: KubeSchedulerConfiguration) -> None:
    """Build every profile's plugins offline, so plugin args are validated too."""
    from kubesched.extender import ExtenderTLSError, build_extenders
    from kubesched.framework.runtime import build_frameworks
    from kubesched.plugins.outoftree import full_registry

    try:
        build_frameworks(cfg.profiles, full_registry())
    except FrameworkError as err:
        raise ConfigError(err.field, err.message, cfg.source) from None
    try:
        build_extenders(cfg.extenders)
    except ExtenderTLSError as err:
        raise ConfigError("", str(err), cfg.source) from None


def _fail(message: str) -> int:
    print(f"kubesched: error: {message}", file=sys.stderr)
    return EXIT_FAILURE


# ---------------------------------------------------------------------------------------------
# Subcommands
# ---------------------------------------------------------------------------------------------

def cmd_validate_config(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="kubesched validate-config",
                                description="Check a KubeSchedulerConfiguration the way `kubesched --config` does.")
    p.add_argument("file")
    p.add_argument("--kubeconfig", default="")
    args = p.parse_args(argv)
    try:
        cfg = load_config(args.file)
        kubeconfig = cfg.client_connection.kubeconfig or args.kubeconfig
        if kubeconfig:
            try:
                load_kubeconfig(kubeconfig)
            except KubeconfigError as err:
                raise ConfigError("clientConnection.kubeconfig", str(err), cfg.source) from None
        validate_frameworks(cfg)
    except ConfigError as err:
        return _fail(str(err))
    names = ", ".join(p.scheduler_name for p in cfg.profiles)
    print(f"{args.file}: valid ({len(cfg.profiles)} profile(s): {names})")
    return EXIT_OK


def cmd_explain(argv: list[str]) -> int:
    from kubesched.explain import explain_pod

    p = argparse.ArgumentParser(prog="kubesched explain",
                                description="Show, for a pending pod, why each node was rejected and how "
                                            "the feasible nodes score, from a fresh list of nodes and pods.")
    p.add_argument("pod", metavar="NAMESPACE/POD")
    p.add_argument("--config", default="")
    p.add_argument("--kubeconfig", default="")
    args = p.parse_args(argv)
    if "/" not in args.pod:
        return _fail(f"pod must be given as NAMESPACE/NAME, got {args.pod!r}")
    try:
        cfg = load_config(args.config) if args.config else _default_config()
        kubeconfig = cfg.client_connection.kubeconfig or args.kubeconfig or os.environ.get("KUBECONFIG", "")
        if not kubeconfig:
            raise ConfigError("clientConnection.kubeconfig", "required: pass --kubeconfig", cfg.source)
        try:
            creds = load_kubeconfig(kubeconfig)
        except KubeconfigError as err:
            raise ConfigError("clientConnection.kubeconfig", str(err), cfg.source) from None
        validate_frameworks(cfg)
    except ConfigError as err:
        return _fail(str(err))
    client = ApiClient(creds, qps=0, burst=0, user_agent=f"kubesched/{__version__} explain")
    try:
        text = explain_pod(cfg, client, args.pod)
    except (ApiError, OSError) as err:
        return _fail(f"cannot read the cluster: {err}")
    except LookupError as err:
        return _fail(str(err))
    sys.stdout.write(text)
    return EXIT_OK


# ---------------------------------------------------------------------------------------------
# Serving
# ---------------------------------------------------------------------------------------------

def cmd_run(argv: list[str]) -> int:
    try:
        args = _parser().parse_args(_normalise_argv(argv))
    except SystemExit as exit_:
        return int(exit_.code or 0)
    klog.set_verbosity(args.verbosity)
    try:
        cfg, creds = prepare(args)
        validate_frameworks(cfg)
    except ConfigError as err:
        return _fail(str(err))
    return serve(cfg, creds, args)


def serve(cfg: KubeSchedulerConfiguration, creds, args: argparse.Namespace) -> int:
    from kubesched.leaderelection import LeaderElector, new_identity
    from kubesched.scheduler import Scheduler
    from kubesched.server import HealthServer

    cc = cfg.client_connection
    agent = f"kubesched/{__version__}"
    # Separate clients, as kube-scheduler creates them: events and leader election must not
    # wait behind binds in one token bucket.
    client = ApiClient(creds, qps=cc.qps, burst=cc.burst, pool_size=80, user_agent=agent + " scheduler")
    event_client = ApiClient(creds, qps=cc.qps, burst=cc.burst, pool_size=8, user_agent=agent + " events")
    le_client = ApiClient(creds, qps=0, burst=0, pool_size=2, user_agent=agent + " leader-election",
                          timeout=max(1.0, cfg.leader_election.renew_deadline / 2))
    host = socket.gethostname()
    identity = new_identity(host)
    scheduler = Scheduler(cfg, client, event_client=event_client, instance=host)
    stop = threading.Event()
    elector: LeaderElector | None = None
    exit_code = [EXIT_OK]

    def liveness() -> str | None:
        return elector.check_health() if elector is not None else None

    def readiness() -> str | None:
        if cfg.delay_cache_until_active and elector is not None and not elector.is_leader():
            return None  # a standby that delays its caches is ready by design
        return None if scheduler.caches_synced() else "caches not synced"

    try:
        server = HealthServer(args.bind_address, args.secure_port, cert_file=args.tls_cert_file,
                              key_file=args.tls_private_key_file, client_ca_file=args.client_ca_file,
                              livez_checks={"leaderElection": liveness},
                              readyz_checks={"sched-handler-sync": readiness})
        server.start()
    except (OSError, ssl.SSLError) as err:
        return _fail(f"cannot serve on {args.bind_address}:{args.secure_port}: {err}")

    def on_signal(signum: int, _frame) -> None:
        klog.info("Received signal, shutting down", signal=signal.Signals(signum).name)
        stop.set()
        if elector is not None:
            elector.stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    klog.info("Starting kubesched", version=__version__, profiles=",".join(scheduler.frameworks))
    # delayCacheUntilActive: a standby then holds no cache, at the price of a slower takeover.
    delay_cache = cfg.delay_cache_until_active and cfg.leader_election.leader_elect

    def sync_caches() -> bool:
        scheduler.start_informers(stop)
        while not stop.is_set() and not scheduler.wait_for_cache_sync(timeout=1.0):
            pass
        if not stop.is_set():
            klog.info("Caches are synced")
        return not stop.is_set()

    if not delay_cache and not sync_caches():
        server.stop()
        return EXIT_OK

    scheduling_done = threading.Event()
    leading = threading.Event()

    def lead() -> None:
        leading.set()
        try:
            if not delay_cache or sync_caches():
                scheduler.run(stop)
        finally:
            scheduling_done.set()

    if cfg.leader_election.leader_elect:
        def stopped_leading() -> None:
            if stop.is_set():
                klog.info("Requested to terminate, exiting")
                return
            klog.error("Leaderelection lost")
            exit_code[0] = EXIT_FAILURE
            stop.set()

        def stop_scheduling() -> None:
            stop.set()
            scheduling_done.wait(timeout=5.0)
            # No bind may reach the API server after the lease is released.
            scheduler.wait_for_binds(timeout=5.0)

        elector = LeaderElector(le_client, cfg.leader_election, identity, on_started_leading=lead,
                                on_stopped_leading=stopped_leading, before_release=stop_scheduling)
        elector.run()
    else:
        thread = threading.Thread(target=lead, name="scheduling", daemon=True)
        thread.start()
        while not stop.wait(0.5):
            pass
    stop.set()
    if leading.is_set():  # a standby never scheduled: nothing to wait for
        scheduling_done.wait(timeout=5.0)
    scheduler.shutdown(timeout=2.0)
    server.stop()
    if exit_code[0] != EXIT_OK:
        # As kube-scheduler: leadership lost means exit non-zero, let the supervisor restart us.
        os._exit(exit_code[0])
    return exit_code[0]


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "validate-config":
        return cmd_validate_config(argv[1:])
    if argv and argv[0] == "explain":
        return cmd_explain(argv[1:])
    started = time.monotonic()
    code = cmd_run(argv)
    if klog.V(4):
        klog.info("kubesched exiting", seconds=round(time.monotonic() - started, 3))
    return code


if __name__ == "__main__":
    sys.exit(main())
