"""The `kubesched` command: kube-scheduler's flags, plus `validate-config`, `explain` and `whatif`.

    kubesched --config FILE [any kube-scheduler v1.37 flag, see kubesched/flags.py]
    kubesched --write-config-to FILE [--config FILE]
    kubesched validate-config FILE [--kubeconfig FILE]
    kubesched explain NAMESPACE/POD [--config FILE] [--kubeconfig FILE]
    kubesched whatif --config NEW [--current CURRENT] [--kubeconfig FILE] [-o json] [--sample N] [--seed S]
                     [--max-newly-unschedulable N] [--max-moved-percent P]

Everything that can be wrong with the configuration (the file, its plugins and their args,
the kubeconfig) is checked before the cluster is contacted, and reported as one line.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import signal
import socket
import ssl
import sys
import threading
import time
from typing import Sequence

import urllib3

from kubesched import __version__, features, flags, gctuning, klog
from kubesched.client import ApiClient, ApiError, ClusterCredentials, KubeconfigError, load_kubeconfig
from kubesched.config import ConfigError, load_config, parse_config
from kubesched.config.types import API_VERSION, KIND, KubeSchedulerConfiguration
from kubesched.framework.runtime import FrameworkError

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2


# ---------------------------------------------------------------------------------------------
# Configuration, checked in full before the cluster is contacted
# ---------------------------------------------------------------------------------------------

def _default_config(feature_gates: dict[str, bool] | None = None) -> KubeSchedulerConfiguration:
    return parse_config({"apiVersion": API_VERSION, "kind": KIND}, source="(defaults)", feature_gates=feature_gates)


def _apply_deprecated_flags(cfg: KubeSchedulerConfiguration, args: argparse.Namespace) -> None:
    """Without --config, kube-scheduler takes these from flags (its ApplyDeprecated)."""
    if args.config:
        return
    cc = cfg.client_connection
    if args.kubeconfig:
        cc.kubeconfig = args.kubeconfig
    if args.kube_api_qps is not None:
        cc.qps = args.kube_api_qps
    if args.kube_api_burst is not None:
        cc.burst = args.kube_api_burst
    if args.kube_api_content_type is not None:
        cc.content_type = args.kube_api_content_type
    if args.profiling is not None:
        cfg.enable_profiling = args.profiling
    if args.contention_profiling is not None:
        cfg.enable_contention_profiling = args.contention_profiling


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
    if args.leader_elect_resource_lock is not None:
        le.resource_lock = args.leader_elect_resource_lock
    if args.leader_elect_resource_name is not None:
        le.resource_name = args.leader_elect_resource_name
    if args.leader_elect_resource_namespace is not None:
        le.resource_namespace = args.leader_elect_resource_namespace
    try:
        validate_leader_election(le)
    except ConfigError as err:
        raise ConfigError(err.field, err.message + " (after the --leader-elect-* flags)", cfg.source) from None


def effective_config(args: argparse.Namespace) -> KubeSchedulerConfiguration:
    """The configuration file (or the defaults) with the flags kube-scheduler applies to it."""
    gates = args.feature_gates or {}
    cfg = load_config(args.config, gates) if args.config else _default_config(gates)
    _apply_deprecated_flags(cfg, args)
    _apply_leader_flags(cfg, args)
    return cfg


def prepare(args: argparse.Namespace):
    """Load and validate everything; returns (config, cluster credentials). As kube-scheduler, the
    configuration and its plugins' args are judged before the kubeconfig is read."""
    cfg = effective_config(args)
    validate_frameworks(cfg)
    kubeconfig = cfg.client_connection.kubeconfig or args.kubeconfig or os.environ.get("KUBECONFIG", "")
    if not kubeconfig and args.master:
        return cfg, ClusterCredentials(server=args.master.rstrip("/"))
    if not kubeconfig:
        raise ConfigError("clientConnection.kubeconfig", "required: set it in the configuration or pass "
                          "--kubeconfig (in-cluster configuration is not supported)", cfg.source)
    try:
        creds = load_kubeconfig(kubeconfig)
    except KubeconfigError as err:
        raise ConfigError("clientConnection.kubeconfig", str(err), cfg.source) from None
    if args.master:  # as kube-scheduler: --master overrides the kubeconfig's server
        creds = dataclasses.replace(creds, server=args.master.rstrip("/"))
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

def _feature_gates(values: list[str]) -> dict[str, bool]:
    """--feature-gates of validate-config and whatif, as the scheduler's own flag parses them."""
    try:
        return features.parse_feature_gates(values).enabled
    except features.FeatureGateError as err:
        raise ConfigError("--feature-gates", str(err)) from None


def cmd_validate_config(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="kubesched validate-config",
                                description="Check a KubeSchedulerConfiguration the way `kubesched --config` does "
                                            "(every field, plugin, plugin argument, extender and the kubeconfig), "
                                            "without contacting the cluster. Exit 0 when valid, else 1 with one line "
                                            "that says what to fix.")
    p.add_argument("file", help="the KubeSchedulerConfiguration")
    p.add_argument("--kubeconfig", default="", help="the kubeconfig to check when the configuration's "
                   "clientConnection.kubeconfig is empty")
    p.add_argument("--feature-gates", action="append", default=[], metavar="GATES",
                   help="the feature gates kubesched will run with, as its --feature-gates: they decide the "
                   "default profile (GenericWorkload=true adds GangScheduling)")
    args = p.parse_args(argv)
    try:
        gates = _feature_gates(args.feature_gates)
        cfg = load_config(args.file, gates)
        validate_frameworks(cfg)
        kubeconfig = cfg.client_connection.kubeconfig or args.kubeconfig
        if kubeconfig:
            try:
                load_kubeconfig(kubeconfig)
            except KubeconfigError as err:
                raise ConfigError("clientConnection.kubeconfig", str(err), cfg.source) from None
    except ConfigError as err:
        return _fail(str(err))
    names = ", ".join(p.scheduler_name for p in cfg.profiles)
    print(f"{args.file}: valid ({len(cfg.profiles)} profile(s): {names})")
    return EXIT_OK


def explain_kubeconfig(flag: str, cfg: KubeSchedulerConfiguration) -> str:
    """explain's kubeconfig, as kubectl finds one: --kubeconfig, the configuration's
    clientConnection.kubeconfig, the first file of $KUBECONFIG that exists, ~/.kube/config."""
    if flag:
        return flag
    if cfg.client_connection.kubeconfig:
        return cfg.client_connection.kubeconfig
    listed = [path for path in os.environ.get("KUBECONFIG", "").split(os.pathsep) if path]
    for path in listed:
        if os.path.exists(path):
            return path
    default = os.path.join(os.path.expanduser("~"), ".kube", "config")
    if os.path.exists(default):
        return default
    tried = f"$KUBECONFIG ({os.pathsep.join(listed)}) and {default} do" if listed else f"{default} does"
    raise ConfigError("clientConnection.kubeconfig", f"no kubeconfig found: {tried} not exist; pass "
                      "--kubeconfig, or set clientConnection.kubeconfig in --config", cfg.source)


def cannot_reach(server: str, err: BaseException) -> str:
    """One line for an API server that does not answer: the innermost reason urllib3 wraps."""
    reason: BaseException | None = err
    while getattr(reason, "reason", None) is not None and reason is not reason.reason:
        reason = reason.reason
    detail = getattr(reason, "strerror", None) or str(reason)
    if ": " in detail and isinstance(reason, urllib3.exceptions.NewConnectionError):
        detail = detail.rsplit(": ", 1)[-1]
    return (f"cannot reach the API server {server}: {detail} (check the kubeconfig's server, and that the API "
            "server runs and this host may connect to it)")


def cmd_explain(argv: list[str]) -> int:
    from kubesched.explain import explain_pod

    p = argparse.ArgumentParser(prog="kubesched explain",
                                description="Show, for a pending pod, why each node fits or not (every filter on "
                                            "every node), what its volumes and resource claims are bound or "
                                            "allocated to and which devices each node has for them, and how the "
                                            "feasible nodes score. Reads the cluster once; changes nothing.")
    p.add_argument("pod", metavar="NAMESPACE/POD", help="the pending pod")
    p.add_argument("--config", default="", help="the KubeSchedulerConfiguration whose profiles to use "
                   "(default: kube-scheduler's defaults)")
    p.add_argument("--kubeconfig", default="", help="the kubeconfig to read the cluster with (default: the "
                   "configuration's clientConnection.kubeconfig, else $KUBECONFIG, else ~/.kube/config)")
    args = p.parse_args(argv)
    if "/" not in args.pod:
        return _fail(f"pod must be given as NAMESPACE/NAME, got {args.pod!r}")
    try:
        cfg = load_config(args.config) if args.config else _default_config()
        validate_frameworks(cfg)
        kubeconfig = explain_kubeconfig(args.kubeconfig, cfg)
        try:
            creds = load_kubeconfig(kubeconfig)
        except KubeconfigError as err:
            raise ConfigError("clientConnection.kubeconfig", str(err), cfg.source) from None
    except ConfigError as err:
        return _fail(str(err))
    client = ApiClient(creds, qps=0, burst=0, user_agent=f"kubesched/{__version__} explain")
    try:
        text = explain_pod(cfg, client, args.pod)
    except ApiError as err:
        return _fail(f"the API server {creds.server} refused a read: {err} (check the kubeconfig's user and its "
                     "RBAC: explain lists nodes, pods and what the enabled plugins read)")
    except (urllib3.exceptions.HTTPError, OSError) as err:
        return _fail(cannot_reach(creds.server, err))
    except LookupError as err:
        return _fail(str(err))
    sys.stdout.write(text)
    return EXIT_OK


def _load_whatif_config(path: str, gates: dict[str, bool]) -> KubeSchedulerConfiguration:
    cfg = load_config(path, gates) if path else _default_config(gates)
    validate_frameworks(cfg)
    return cfg


def cmd_whatif(argv: list[str]) -> int:
    from kubesched import whatif

    p = argparse.ArgumentParser(prog="kubesched whatif",
                                description="Show how a proposed KubeSchedulerConfiguration would place the "
                                            "cluster's pods, next to the current one: every pending pod, and a "
                                            "re-placement of the running pods of both configurations' profiles "
                                            "in creation order, with the plugin that changed each decision and "
                                            "the spread per node and zone. Reads one snapshot; writes nothing. "
                                            f"Exit {whatif.EXIT_WITHIN_BOUNDS} within the bounds, "
                                            f"{whatif.EXIT_NEWLY_UNSCHEDULABLE} when more pods the current "
                                            "configuration places become unschedulable than "
                                            f"--max-newly-unschedulable, {whatif.EXIT_TOO_MANY_MOVES} when more "
                                            "re-placed pods move than --max-moved-percent, "
                                            f"{EXIT_FAILURE} on an error, {EXIT_USAGE} on a bad command line.")
    p.add_argument("--config", required=True, help="the proposed KubeSchedulerConfiguration")
    p.add_argument("--current", default="", help="the configuration the scheduler runs now (default: the "
                   "--config of the kube-scheduler or kubesched running on this host, else kube-scheduler's "
                   "defaults)")
    p.add_argument("--kubeconfig", default="", help="the kubeconfig to read the cluster with (default: the "
                   "new configuration's clientConnection.kubeconfig, else $KUBECONFIG, else ~/.kube/config)")
    p.add_argument("--feature-gates", action="append", default=[], metavar="GATES",
                   help="the feature gates the scheduler runs with, as its --feature-gates (they decide the default "
                   "profile and what the configurations may enable)")
    p.add_argument("-o", "--output", choices=("table", "json"), default="table", help="table (default) or json")
    p.add_argument("--sample", type=int, default=None, metavar="N",
                   help="re-place N running pods drawn with the seed, not all of them")
    p.add_argument("--seed", type=int, default=0, help="seeds the tie-break and the sample (default 0)")
    p.add_argument("--max-newly-unschedulable", type=int, default=0, metavar="N",
                   help="refuse (exit 3) when more than N pods the current configuration places become "
                   "unschedulable (default 0)")
    p.add_argument("--max-moved-percent", type=float, default=None, metavar="P",
                   help="refuse (exit 4) when more than P%% of the re-placed pods land on another node than "
                   "under the current configuration (default: no bound)")
    args = p.parse_args(argv)
    if args.sample is not None and args.sample < 0:
        return _fail(f"--sample must be 0 or more, got {args.sample}")
    if args.max_newly_unschedulable < 0:
        return _fail(f"--max-newly-unschedulable must be 0 or more, got {args.max_newly_unschedulable}")
    if args.max_moved_percent is not None and not 0 <= args.max_moved_percent <= 100:
        return _fail(f"--max-moved-percent must be between 0 and 100, got {args.max_moved_percent:g}")
    try:
        gates = _feature_gates(args.feature_gates)
        new_cfg = _load_whatif_config(args.config, gates)
        current, where = (args.current, "") if args.current else whatif.running_config()
        current_cfg = _load_whatif_config(current or "", gates)
        kubeconfig = explain_kubeconfig(args.kubeconfig, new_cfg)
        try:
            creds = load_kubeconfig(kubeconfig)
        except KubeconfigError as err:
            raise ConfigError("clientConnection.kubeconfig", str(err), new_cfg.source) from None
    except (ConfigError, whatif.CurrentConfigError) as err:
        return _fail(str(err))
    # Four schedulers' caches of the cluster live through the what-if: with CPython's default
    # thresholds the collector examined them thousands of times (3 s of 30 at 5,000 nodes).
    gctuning.tune()
    client = whatif.ReadOnlyClient(creds, qps=0, burst=0, user_agent=f"kubesched/{__version__} whatif")
    try:
        report = whatif.what_if(current_cfg, new_cfg, client, seed=args.seed, sample=args.sample,
                                progress=whatif.progress_to_stderr, feature_gates=gates)
    except ApiError as err:
        return _fail(f"the API server {creds.server} refused a read: {err} (check the kubeconfig's user and its "
                     "RBAC: whatif lists nodes, pods and what the enabled plugins read)")
    except (urllib3.exceptions.HTTPError, OSError) as err:
        return _fail(cannot_reach(creds.server, err))
    except whatif.SnapshotError as err:
        return _fail(str(err))
    if where:
        print(f"kubesched: {where}", file=sys.stderr)
    whatif.judge(report, args.max_newly_unschedulable, args.max_moved_percent)
    if args.output == "json":
        sys.stdout.write(json.dumps(report, indent=2) + "\n")
    else:
        sys.stdout.write(whatif.render(report))
    if report["refused"]:
        print(f"kubesched: refused: {report['refused']}", file=sys.stderr)
    return report["exitCode"]


# ---------------------------------------------------------------------------------------------
# Serving
# ---------------------------------------------------------------------------------------------

def parse_flags(argv: Sequence[str]) -> tuple[argparse.Namespace, list[str]]:
    """kube-scheduler's flags: (values, warnings for flags kubesched accepts but ignores)."""
    return flags.parse(argv)


def cmd_run(argv: list[str]) -> int:
    gctuning.tune()
    gctuning.return_free_memory()
    try:
        args, warnings = parse_flags(argv)
    except flags.FlagError as err:
        print(f"kubesched: error: {err} (see kubesched --help)", file=sys.stderr)
        return EXIT_USAGE
    except features.FeatureGateError as err:
        for message, fields in err.logs:
            klog.info(message, **fields)
        klog.error("command failed", err=str(err))  # kube-scheduler's words and exit status
        return EXIT_FAILURE
    except SystemExit as exit_:  # --help
        return int(exit_.code or 0)
    for message, fields in args.feature_gate_logs:
        klog.info(message, **fields)
    if args.version is not None:
        print(flags.version_text(args))
        return EXIT_OK
    klog.set_verbosity(args.verbosity)
    for warning in warnings:
        klog.warning(warning)
    if args.write_config_to:
        return write_config(args)
    try:
        cfg, creds = prepare(args)
    except ConfigError as err:
        return _fail(str(err))
    return serve(cfg, creds, args)


def write_config(args: argparse.Namespace) -> int:
    """As kube-scheduler --write-config-to: the defaulted, flag-applied configuration, then exit 0."""
    from kubesched.config.encode import encode_config

    try:
        cfg = effective_config(args)
        validate_frameworks(cfg)
    except ConfigError as err:
        return _fail(str(err))
    try:
        with open(args.write_config_to, "w", encoding="utf-8") as fh:
            fh.write(encode_config(cfg))
    except OSError as err:
        return _fail(f"cannot write --write-config-to {args.write_config_to}: {err.strerror}")
    klog.info("Wrote configuration", file=args.write_config_to)
    return EXIT_OK


def secure_serving(args: argparse.Namespace, creds, livez_checks, readyz_checks):
    """The secure port with kube-scheduler's delegated authentication and authorization."""
    from kubesched.auth import (
        CAReloader,
        DelegatingAuthenticator,
        DelegatingAuthorizer,
        RequestHeaderConfig,
        delegation_client,
    )
    from kubesched.server import HealthServer

    authn_client = delegation_client(args.authentication_kubeconfig, creds, "authentication")
    authz_client = delegation_client(args.authorization_kubeconfig, creds, "authorization")
    client_ca_pem = _read_file(args.client_ca_file, "--client-ca-file")
    request_header = None
    if args.requestheader_client_ca_file:
        request_header = RequestHeaderConfig(
            ca_pem=_read_file(args.requestheader_client_ca_file, "--requestheader-client-ca-file"),
            allowed_names=args.requestheader_allowed_names, username_headers=args.requestheader_username_headers,
            group_headers=args.requestheader_group_headers, extra_prefixes=args.requestheader_extra_headers_prefix,
            uid_headers=args.requestheader_uid_headers)
    try:
        authenticator = DelegatingAuthenticator(client_ca_pem=client_ca_pem, request_header=request_header,
                                                token_client=authn_client,
                                                token_cache_ttl=args.authentication_token_webhook_cache_ttl)
    except ValueError as err:
        raise ConfigError("--client-ca-file/--requestheader-client-ca-file",
                          f"not a bundle of PEM certificates: {err}") from None
    authorizer = DelegatingAuthorizer(always_allow_paths=args.authorization_always_allow_paths, sar_client=authz_client,
                                      allowed_ttl=args.authorization_webhook_cache_authorized_ttl,
                                      denied_ttl=args.authorization_webhook_cache_unauthorized_ttl)
    if authz_client is None:
        klog.warning("No authorization kubeconfig and not in a cluster: only always-allowed paths are served")
    server = HealthServer(args.bind_address, args.secure_port, cert_file=args.tls_cert_file,
                          key_file=args.tls_private_key_file, cert_dir=args.cert_dir,
                          tls_min_version=args.tls_min_version, tls_cipher_suites=args.tls_cipher_suites,
                          permit_port_sharing=args.permit_port_sharing, authenticator=authenticator,
                          authorizer=authorizer, livez_checks=livez_checks, readyz_checks=readyz_checks)
    lookup_client = None
    if not args.authentication_skip_lookup and (not client_ca_pem or request_header is None):
        if authn_client is None:
            klog.warning("No authentication kubeconfig and not in a cluster: the client CA and request-header "
                         "settings are not looked up; client certificates need --client-ca-file")
        else:
            if not args.authentication_tolerate_lookup_failure:
                _look_up_client_cas(authn_client, server)
            # The reloader reads it (again) in the background: an API server that does not answer
            # must not hold up the health port when failures are tolerated.
            lookup_client = authn_client
    # As kube-scheduler's dynamiccertificates: CA files and the published CAs are reloaded on change.
    CAReloader(authenticator, client_ca_file=args.client_ca_file,
               requestheader_client_ca_file=args.requestheader_client_ca_file, lookup_client=lookup_client).start()
    return server


def _look_up_client_cas(client: ApiClient, server) -> None:
    """Trust the CAs the API server publishes in kube-system/extension-apiserver-authentication, or fail."""
    from kubesched.auth import lookup_authentication_config

    try:
        found = lookup_authentication_config(client)
    except (ApiError, OSError, ValueError) as err:
        message = ("cannot read kube-system/extension-apiserver-authentication to look up the client CA "
                   f"({err}); grant get on it, pass --client-ca-file, or pass --authentication-skip-lookup")
        raise ConfigError("--authentication-kubeconfig", message) from None
    try:
        server.trust_looked_up(found.get("client_ca_pem", b""), found.get("request_header"))
    except (ValueError, ssl.SSLError) as err:
        klog.warning("The client CAs in kube-system/extension-apiserver-authentication are not usable PEM "
                     "certificates; client certificates need --client-ca-file", err=str(err))


def _read_file(path: str, flag: str) -> bytes:
    if not path:
        return b""
    try:
        with open(path, "rb") as fh:
            return fh.read()
    except OSError as err:
        raise ConfigError(flag, f"cannot read {path}: {err.strerror}") from None


def serve(cfg: KubeSchedulerConfiguration, creds, args: argparse.Namespace) -> int:
    from kubesched.apiproc import ApiProcesses

    # The informers and the scheduler's and events' requests run in child processes
    # (apiproc.py), which end with this function (or, on any exit, when their pipe closes).
    api_processes = ApiProcesses(creds, qps=cfg.client_connection.qps, burst=cfg.client_connection.burst,
                                 user_agent=f"kubesched/{__version__}")
    try:
        return _serve(cfg, creds, args, api_processes)
    finally:
        api_processes.close()


def _serve(cfg: KubeSchedulerConfiguration, creds, args: argparse.Namespace, api_processes) -> int:
    from kubesched.backend.debugger import listen_for_signal
    from kubesched.leaderelection import LeaderElector, new_identity
    from kubesched.scheduler import Scheduler
    from kubesched.server import ServingError

    cc = cfg.client_connection
    agent = f"kubesched/{__version__}"
    # Separate clients, as kube-scheduler creates them: events and leader election must not
    # wait behind binds in one token bucket. Leader election stays in this process, so a
    # stalled child cannot keep the lease renewed.
    client = api_processes.client(qps=cc.qps, burst=cc.burst, user_agent=agent + " scheduler", watches=True)
    event_client = api_processes.client(qps=cc.qps, burst=cc.burst, user_agent=agent + " events")
    le_client = ApiClient(creds, qps=0, burst=0, pool_size=2, user_agent=agent + " leader-election",
                          timeout=max(1.0, cfg.leader_election.renew_deadline / 2))
    host = socket.gethostname()
    identity = new_identity(host)
    scheduler = Scheduler(cfg, client, event_client=event_client, instance=host, feature_gates=args.feature_gates)
    scheduler.queue.max_in_unschedulable = args.pod_max_in_unschedulable_pods_duration
    stop = threading.Event()
    elector: LeaderElector | None = None

    def liveness() -> str | None:
        return elector.check_health() if elector is not None else None

    def readiness() -> str | None:
        if cfg.delay_cache_until_active and elector is not None and not elector.is_leader():
            return None  # a standby that delays its caches is ready by design
        return None if scheduler.caches_synced() else "caches not synced"

    try:
        server = secure_serving(args, creds, {"leaderElection": liveness}, {"sched-handler-sync": readiness})
    except (ConfigError, ServingError, KubeconfigError) as err:
        return _fail(str(err))
    except (OSError, ssl.SSLError) as err:
        return _fail(f"cannot set up the secure port (check --tls-cert-file, --tls-private-key-file, "
                     f"--cert-dir): {err}")
    try:
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
    listen_for_signal(scheduler, stop)  # SIGUSR2: compare the cache with the informers, dump it
    klog.info("Starting kubesched", version=__version__, profiles=",".join(scheduler.frameworks))
    # delayCacheUntilActive: a standby then holds no cache, at the price of a slower takeover.
    delay_cache = cfg.delay_cache_until_active and cfg.leader_election.leader_elect

    def sync_caches() -> bool:
        scheduler.start_informers(stop)
        while not stop.is_set() and not scheduler.wait_for_cache_sync(timeout=1.0):
            pass
        if not stop.is_set():
            klog.info("Caches are synced")
            gctuning.freeze_synced()
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
                if cfg.leader_election.leader_elect:
                    # Its own client: the informers' watch process may be what lags.
                    probe = ApiClient(creds, qps=0, burst=0, pool_size=len(scheduler.informers.requested),
                                      user_agent=agent + " catch-up")
                    scheduler.catch_up(probe, stop, cfg.leader_election.lease_duration)
                scheduler.run(stop)
        finally:
            scheduling_done.set()

    if cfg.leader_election.leader_elect:
        def stopped_leading() -> None:
            if stop.is_set():
                klog.info("Requested to terminate, exiting")
                return
            # As kube-scheduler (klog.FlushAndExit in OnStoppedLeading): exit at once, and the
            # child processes with us. Waiting for the binds in flight let the API server
            # complete them once it could write again, after another instance had taken the
            # Lease and scheduled without knowing of them (the soak saw a node overcommitted so,
            # after an etcd restart); a closed connection makes the API server drop a write it
            # has not made yet.
            klog.error("Leaderelection lost")
            os._exit(EXIT_FAILURE)

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
    return EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "validate-config":
        return cmd_validate_config(argv[1:])
    if argv and argv[0] == "explain":
        return cmd_explain(argv[1:])
    if argv and argv[0] == "whatif":
        return cmd_whatif(argv[1:])
    started = time.monotonic()
    code = cmd_run(argv)
    if klog.V(4):
        klog.info("kubesched exiting", seconds=round(time.monotonic() - started, 3))
    return code


if __name__ == "__main__":
    sys.exit(main())
