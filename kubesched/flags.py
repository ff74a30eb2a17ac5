"""kube-scheduler v1.37's command line, flag for flag.

Every flag `kube-scheduler --help` lists is accepted, so a unit file or static-pod manifest
written for kube-scheduler runs kubesched unchanged. A flag keeps upstream's meaning where
kubesched has the feature; where it has not, the flag is parsed (a malformed value is still an
error, as upstream) and named in one warning line at start-up, never a failure.

Spelling follows Go's pflag: `--flag value`, `--flag=value`, a bare `--bool-flag`, `-v 2`,
and `_` in a flag name read as `-` (kube-scheduler's word-separator normalisation).
"""

from __future__ import annotations

import argparse
from typing import Callable, Sequence

from kubesched import __version__, features

# Flags parsed and honoured nowhere: (flag, why kubesched ignores it). The warning names both.
UNSUPPORTED = {
    "tls-sni-cert-key": "the secure port serves one certificate",
    "http2-max-streams-per-connection": "the secure port speaks HTTP/1.1 only",
    "contention-profiling": "kubesched serves no profiling endpoints",
    "profiling": "kubesched serves no profiling endpoints (/debug/pprof)",
    "emulated-version": "kubesched emulates v1.37 only",
    "min-compatibility-version": "kubesched emulates v1.37 only",
    "tls-curve-preferences": "the secure port uses OpenSSL's default curves",
    "allow-metric-labels": "metric label allow-lists are not implemented",
    "allow-metric-labels-manifest": "metric label allow-lists are not implemented",
    "disabled-metrics": "disabling metrics is not implemented",
    "show-hidden-metrics-for-version": "kubesched has no hidden metrics",
    "log-flush-frequency": "kubesched writes log lines unbuffered",
    "log-json-info-buffer-size": "kubesched logs text only",
    "log-json-split-stream": "kubesched logs text only",
    "log-text-info-buffer-size": "kubesched writes log lines unbuffered",
    "log-text-split-stream": "kubesched writes every log line to stderr",
    "vmodule": "per-file verbosity is not implemented; use -v",
    "kube-api-content-type": "kubesched talks JSON to the API server",
}
# Flags that kube-scheduler honours only without --config (its "deprecated" flag set).
# (--kubeconfig is the exception: kubesched falls back to it when clientConnection.kubeconfig
# is empty, where kube-scheduler would try the in-cluster configuration.)
CONFIG_FILE_OVERRIDES = ("kube-api-qps", "kube-api-burst", "kube-api-content-type",
                         "profiling", "contention-profiling")


def _bool(text: str) -> bool:
    lowered = text.lower()
    if lowered in ("true", "1", "t"):
        return True
    if lowered in ("false", "0", "f"):
        return False
    raise argparse.ArgumentTypeError(f"invalid boolean {text!r} (use true or false)")


def _duration(text: str) -> float:
    from kubesched.config.load import parse_duration

    try:
        return parse_duration(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def _string_list(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def _key_values(value_type: Callable[[str], object], what: str) -> Callable[[str], dict]:
    def parse(text: str) -> dict:
        out = {}
        for part in _string_list(text):
            key, sep, value = part.partition("=")
            if not sep or not key.strip():
                raise argparse.ArgumentTypeError(f"{part!r} is not key=value ({what})")
            out[key.strip()] = value_type(value.strip())
        return out
    return parse


def _int_list(text: str) -> list[int]:
    try:
        return [int(part) for part in _string_list(text)]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of integers") from None


def _feature_gates(text: str) -> dict:
    """`Name=true,...`, each name optionally after a component and a colon (`kube:Name=true`)."""
    gates = _key_values(_bool, "[component:]Name=true|false")(text)
    return {name.split(":", 1)[-1]: value for name, value in gates.items()}


def _log_format(text: str) -> str:
    if text not in ("text", "json"):
        raise argparse.ArgumentTypeError(f"format {text!r} is not one of text, json")
    return text


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # pflag's wording, and an exception the caller turns into exit 2
        raise FlagError(message)


class FlagError(ValueError):
    pass


def _add(parser: argparse.ArgumentParser, name: str, *, kind: str = "string", default=None, help_: str = "",
         short: str = "") -> None:
    dest = name.replace("-", "_")
    names = [f"-{short}", f"--{name}"] if short else [f"--{name}"]
    if kind == "bool":
        parser.add_argument(*names, dest=dest, type=_bool, nargs="?", const=True, default=default, metavar="BOOL",
                            help=help_)
        return
    types = {"string": str, "int": int, "float": float, "duration": _duration, "strings": _string_list,
             "featureGates": _feature_gates, "stringToString": _key_values(str, "key=value"),
             "int32Slice": _int_list, "format": _log_format}
    action = "append" if kind == "append" else "store"
    parser.add_argument(*names, dest=dest, type=types.get(kind, str), default=default, action=action, help=help_)


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="kubesched", description="A Kubernetes scheduler with kube-scheduler's framework, plugins, "
                "configuration, flags and behaviour.", allow_abbrev=False)
    # misc
    _add(p, "config", default="", help_="path to a KubeSchedulerConfiguration (kubescheduler.config.k8s.io/v1)")
    _add(p, "master", default="", help_="the API server's address (overrides the kubeconfig's server)")
    _add(p, "write-config-to", default="", help_="write the effective configuration to this file and exit")
    # secure serving
    _add(p, "bind-address", default="0.0.0.0")
    _add(p, "secure-port", kind="int", default=10259, help_="HTTPS port for /healthz, /livez, /readyz, /metrics "
         "(0 picks a free port)")
    _add(p, "cert-dir", default="", help_="where a self-signed kube-scheduler.{crt,key} is kept when no "
         "--tls-cert-file is given")
    _add(p, "tls-cert-file", default="")
    _add(p, "tls-private-key-file", default="")
    _add(p, "tls-min-version", default="", help_="VersionTLS12 (default) or VersionTLS13 (also VersionTLS10/11)")
    _add(p, "tls-cipher-suites", kind="strings", default=[], help_="Go cipher suite names")
    _add(p, "tls-curve-preferences", kind="int32Slice", default=[])
    _add(p, "tls-sni-cert-key", kind="append", default=[])
    _add(p, "permit-port-sharing", kind="bool", default=False, help_="SO_REUSEPORT on the secure port")
    _add(p, "permit-address-sharing", kind="bool", default=False, help_="SO_REUSEADDR (always set by kubesched)")
    _add(p, "http2-max-streams-per-connection", kind="int", default=0)
    _add(p, "disable-http2-serving", kind="bool", default=False, help_="kubesched serves HTTP/1.1 only in any case")
    # authentication
    _add(p, "authentication-kubeconfig", default="", help_="kubeconfig for TokenReviews (default: in-cluster, "
         "else the scheduler's kubeconfig)")
    _add(p, "authentication-skip-lookup", kind="bool", default=False,
         help_="do not read missing CAs from kube-system/extension-apiserver-authentication")
    _add(p, "authentication-token-webhook-cache-ttl", kind="duration", default=10.0)
    _add(p, "authentication-tolerate-lookup-failure", kind="bool", default=True)
    _add(p, "client-ca-file", default="", help_="client certificates signed by this CA authenticate as CN/O")
    _add(p, "requestheader-client-ca-file", default="")
    _add(p, "requestheader-allowed-names", kind="strings", default=[])
    _add(p, "requestheader-username-headers", kind="strings", default=["x-remote-user"])
    _add(p, "requestheader-group-headers", kind="strings", default=["x-remote-group"])
    _add(p, "requestheader-extra-headers-prefix", kind="strings", default=["x-remote-extra-"])
    _add(p, "requestheader-uid-headers", kind="strings", default=[])
    # authorization
    _add(p, "authorization-kubeconfig", default="", help_="kubeconfig for SubjectAccessReviews (default: "
         "in-cluster, else the scheduler's kubeconfig)")
    _add(p, "authorization-always-allow-paths", kind="strings", default=["/healthz", "/readyz", "/livez"])
    _add(p, "authorization-webhook-cache-authorized-ttl", kind="duration", default=10.0)
    _add(p, "authorization-webhook-cache-unauthorized-ttl", kind="duration", default=10.0)
    # deprecated (honoured only without --config, as upstream)
    _add(p, "kubeconfig", default="", help_="kubeconfig, used when the configuration's clientConnection.kubeconfig "
         "is empty")
    _add(p, "kube-api-qps", kind="float")
    _add(p, "kube-api-burst", kind="int")
    _add(p, "kube-api-content-type")
    _add(p, "profiling", kind="bool")
    _add(p, "contention-profiling", kind="bool")
    _add(p, "pod-max-in-unschedulable-pods-duration", kind="duration", default=300.0)
    # leader election (override the configuration file)
    _add(p, "leader-elect", kind="bool", help_="override leaderElection.leaderElect (default true)")
    for name in ("lease-duration", "renew-deadline", "retry-period"):
        _add(p, f"leader-elect-{name}")
    for name in ("resource-lock", "resource-name", "resource-namespace"):
        _add(p, f"leader-elect-{name}")
    # feature gates
    _add(p, "feature-gates", kind="featureGates", default={})
    _add(p, "emulated-version", kind="strings", default=[])
    _add(p, "min-compatibility-version", kind="strings", default=[])
    # metrics
    _add(p, "allow-metric-labels", kind="stringToString", default={})
    _add(p, "allow-metric-labels-manifest", default="")
    _add(p, "disabled-metrics", kind="strings", default=[])
    _add(p, "show-hidden-metrics-for-version", default="")
    # logs
    _add(p, "logging-format", kind="format", default="text", help_="text (json is accepted and logged as text)")
    _add(p, "log-flush-frequency", kind="duration", default=5.0)
    _add(p, "log-json-info-buffer-size", default="0")
    _add(p, "log-json-split-stream", kind="bool", default=False)
    _add(p, "log-text-info-buffer-size", default="0")
    _add(p, "log-text-split-stream", kind="bool", default=False)
    p.add_argument("-v", "--v", dest="verbosity", type=int, default=0, help="log verbosity (2: one line per decision)")
    _add(p, "vmodule", default="")
    p.add_argument("--version", nargs="?", const="true", default=None, metavar="true|raw",
                   help="print the version and exit")
    return p


def normalise(argv: Sequence[str]) -> list[str]:
    """pflag's spellings argparse does not take: `--a_b` as `--a-b`, `-v=2`, bare `--version`."""
    out = []
    for arg in argv:
        if arg.startswith("--") and len(arg) > 2:
            name, sep, value = arg[2:].partition("=")
            arg = "--" + name.replace("_", "-") + sep + value
        if arg.startswith("-v="):
            out.extend(["--v", arg[3:]])
        else:
            out.append(arg)
    return out


def parse(argv: Sequence[str]) -> tuple[argparse.Namespace, list[str]]:
    """(flags, warnings). Raises FlagError with pflag-like wording for a bad flag or value."""
    args = build_parser().parse_args(normalise(argv))
    given = {a[2:].split("=", 1)[0] for a in normalise(argv) if a.startswith("--")}
    args.given = given
    warnings = []
    for name in sorted(given):
        if args.config and name in CONFIG_FILE_OVERRIDES:
            warnings.append(f"flag --{name} is ignored because --config is given (as kube-scheduler: set it in "
                            "the configuration file)")
        elif name in UNSUPPORTED and not _is_default_value(args, name):
            warnings.append(f"flag --{name} is accepted and ignored: {UNSUPPORTED[name]}")
    for gate in features.ignored(args.feature_gates):
        warnings.append(f"feature gate {gate} is accepted and ignored: kubesched honours only "
                        f"{', '.join(features.HONOURED)} and keeps v1.37's default for every other gate")
    if args.logging_format == "json":
        warnings.append("flag --logging-format=json is accepted; kubesched logs in klog's text format")
    return args, warnings


def _is_default_value(args: argparse.Namespace, name: str) -> bool:
    """--profiling=false or --feature-gates= ask for what kubesched does anyway: no warning."""
    value = getattr(args, name.replace("-", "_"))
    return value in (False, None, "", [], {}, 0)


def version_text(args: argparse.Namespace) -> str:
    return f"kubesched {__version__} (kube-scheduler v1.37 compatible)"
