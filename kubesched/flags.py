"""kube-scheduler v1.37's command line, flag for flag.

Every flag `kube-scheduler --help` lists is accepted, so a unit file or static-pod manifest
written for kube-scheduler runs kubesched unchanged, and each has a help text (upstream's
where kubesched does the same). A flag keeps upstream's meaning where kubesched has the
feature; where it has not, the flag is parsed (a malformed value is still an error, as
upstream) and named in one warning line at start-up, never a failure. --feature-gates is
judged as kube-scheduler judges it (features.py): a gate it refuses is refused.

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


def _log_format(text: str) -> str:
    if text not in ("text", "json"):
        raise argparse.ArgumentTypeError(f"format {text!r} is not one of text, json")
    return text


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # pflag's wording, and an exception the caller turns into exit 2
        raise FlagError(message)


class FlagError(ValueError):
    pass


def _add(parser, name: str, help_: str, *, kind: str = "string", default=None, short: str = "") -> None:
    """One flag with kube-scheduler's name, type and help text; a flag kubesched ignores says so
    and why at the end of its help."""
    dest = name.replace("-", "_")
    names = [f"-{short}", f"--{name}"] if short else [f"--{name}"]
    if name in UNSUPPORTED:
        help_ += f" [kubesched: accepted and ignored: {UNSUPPORTED[name]}]"
    help_ = help_.replace("%", "%%")  # argparse formats help with %
    if kind == "bool":
        parser.add_argument(*names, dest=dest, type=_bool, nargs="?", const=True, default=default, metavar="BOOL",
                            help=help_)
        return
    types = {"string": str, "int": int, "float": float, "duration": _duration, "strings": _string_list,
             "stringToString": _key_values(str, "key=value"), "int32Slice": _int_list, "format": _log_format}
    action = "append" if kind in ("append", "featureGates") else "store"
    parser.add_argument(*names, dest=dest, type=types.get(kind, str), default=default, action=action, help=help_,
                        metavar=kind.upper() if kind != "featureGates" else "[COMPONENT:]NAME=BOOL,...")


USAGE = """kubesched [flags]
       kubesched validate-config FILE [--kubeconfig FILE]
       kubesched explain NAMESPACE/POD [--config FILE] [--kubeconfig FILE]
       kubesched whatif --config NEW [--current CURRENT] [--kubeconfig FILE] [-o json] [--sample N] [--seed S]"""
COMMANDS = """A Kubernetes scheduler with kube-scheduler v1.37's framework, plugins, configuration, flags and
behaviour.

Commands:
  (none)           run the scheduler, with kube-scheduler's flags (below); every kube-scheduler
                   flag is accepted, and those kubesched ignores say so
  validate-config  check a KubeSchedulerConfiguration as --config would (its plugins, their args,
                   extenders, the kubeconfig), without contacting the cluster, and exit
  explain          show why a pending pod fits each node or not, what its volumes and resource
                   claims are bound or allocated to, and how the feasible nodes score
  whatif           show how a proposed configuration would place the cluster's pending and running
                   pods next to the current one, and which plugin changed each decision; writes nothing
  Run `kubesched validate-config --help`, `kubesched explain --help` or `kubesched whatif --help`
  for their flags."""


def build_parser() -> argparse.ArgumentParser:
    """kube-scheduler v1.37's flags in its groups, with its help texts (`kube-scheduler --help`)
    where kubesched does the same, and kubesched's own words where it does not."""
    p = _Parser(prog="kubesched", usage=USAGE, allow_abbrev=False,
                formatter_class=argparse.RawDescriptionHelpFormatter, description=COMMANDS)
    misc = p.add_argument_group("Misc flags")
    _add(misc, "config", "The path to the configuration file (a KubeSchedulerConfiguration, "
         "kubescheduler.config.k8s.io/v1).", default="")
    _add(misc, "master", "The address of the Kubernetes API server (overrides any value in kubeconfig)", default="")
    _add(misc, "write-config-to", "If set, write the configuration values to this file and exit.", default="")

    serving = p.add_argument_group("Secure serving flags")
    _add(serving, "bind-address", "The IP address on which to listen for the --secure-port port. If blank or an "
         "unspecified address (0.0.0.0 or ::), all interfaces are used. (default 0.0.0.0)", default="0.0.0.0")
    _add(serving, "secure-port", "The port on which to serve HTTPS (/healthz, /livez, /readyz, /metrics) with "
         "authentication and authorization. kubesched: 0 picks a free port. (default 10259)", kind="int",
         default=10259)
    _add(serving, "cert-dir", "The directory where the TLS certs are located. If --tls-cert-file and "
         "--tls-private-key-file are provided, this flag will be ignored. Without either, a self-signed pair "
         "is made at start-up and kept in memory.", default="")
    _add(serving, "tls-cert-file", "File containing the default x509 Certificate for HTTPS. (CA cert, if any, "
         "concatenated after server cert). If HTTPS serving is enabled, and --tls-cert-file and "
         "--tls-private-key-file are not provided, a self-signed certificate and key are generated for the public "
         "address and saved to the directory specified by --cert-dir.", default="")
    _add(serving, "tls-private-key-file", "File containing the default x509 private key matching --tls-cert-file.",
         default="")
    _add(serving, "tls-min-version", "Minimum TLS version supported. Possible values: VersionTLS10, VersionTLS11, "
         "VersionTLS12, VersionTLS13 (default VersionTLS12)", default="")
    _add(serving, "tls-cipher-suites", "Comma-separated list of cipher suites for the server, by their Go names "
         "(TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256, ...). If omitted, OpenSSL's default suites are used.",
         kind="strings", default=[])
    _add(serving, "tls-curve-preferences", "Comma-separated list of numeric Go crypto/tls CurveID values, as the "
         "allowed key exchange mechanisms for the server.", kind="int32Slice", default=[])
    _add(serving, "tls-sni-cert-key", "A pair of x509 certificate and private key file paths, optionally suffixed "
         "with a list of domain patterns. Examples: \"example.crt,example.key\" or "
         "\"foo.crt,foo.key:*.foo.com,foo.com\".", kind="append", default=[])
    _add(serving, "permit-port-sharing", "If true, SO_REUSEPORT will be used when binding the port, which allows "
         "more than one instance to bind on the same address and port. [default=false]", kind="bool", default=False)
    _add(serving, "permit-address-sharing", "If true, SO_REUSEADDR will be used when binding the port. kubesched "
         "always sets it. [default=false]", kind="bool", default=False)
    _add(serving, "http2-max-streams-per-connection", "The limit that the server gives to clients for the maximum "
         "number of streams in an HTTP/2 connection.", kind="int", default=0)
    _add(serving, "disable-http2-serving", "If true, HTTP2 serving will be disabled. kubesched serves HTTP/1.1 "
         "only in any case. [default=false]", kind="bool", default=False)

    authn = p.add_argument_group("Authentication flags")
    _add(authn, "authentication-kubeconfig", "kubeconfig file pointing at the 'core' kubernetes server with enough "
         "rights to create tokenreviews.authentication.k8s.io. If empty: the in-cluster configuration, else "
         "(kubesched) the scheduler's own kubeconfig.", default="")
    _add(authn, "authentication-skip-lookup", "If false, the authentication-kubeconfig will be used to lookup "
         "missing authentication configuration from the cluster.", kind="bool", default=False)
    _add(authn, "authentication-token-webhook-cache-ttl", "The duration to cache responses from the webhook token "
         "authenticator. (default 10s)", kind="duration", default=10.0)
    _add(authn, "authentication-tolerate-lookup-failure", "If true, failures to look up missing authentication "
         "configuration from the cluster are not considered fatal. Note that this can result in authentication "
         "that treats all requests as anonymous. (default true)", kind="bool", default=True)
    _add(authn, "client-ca-file", "If set, any request presenting a client certificate signed by one of the "
         "authorities in the client-ca-file is authenticated with an identity corresponding to the CommonName of "
         "the client certificate.", default="")
    _add(authn, "requestheader-client-ca-file", "Root certificate bundle to use to verify client certificates on "
         "incoming requests before trusting usernames in headers specified by --requestheader-username-headers.",
         default="")
    _add(authn, "requestheader-allowed-names", "List of client certificate common names to allow to provide "
         "usernames in headers specified by --requestheader-username-headers. If empty, any client certificate "
         "validated by the authorities in --requestheader-client-ca-file is allowed.", kind="strings", default=[])
    _add(authn, "requestheader-username-headers", "List of request headers to inspect for usernames. X-Remote-User "
         "is common. (default [x-remote-user])", kind="strings", default=["x-remote-user"])
    _add(authn, "requestheader-group-headers", "List of request headers to inspect for groups. X-Remote-Group is "
         "suggested. (default [x-remote-group])", kind="strings", default=["x-remote-group"])
    _add(authn, "requestheader-extra-headers-prefix", "List of request header prefixes to inspect. X-Remote-Extra- "
         "is suggested. (default [x-remote-extra-])", kind="strings", default=["x-remote-extra-"])
    _add(authn, "requestheader-uid-headers", "List of request headers to inspect for UIDs. X-Remote-Uid is "
         "suggested.", kind="strings", default=[])

    authz = p.add_argument_group("Authorization flags")
    _add(authz, "authorization-always-allow-paths", "A list of HTTP paths to skip during authorization, i.e. these "
         "are authorized without contacting the 'core' kubernetes server. (default [/healthz,/readyz,/livez])",
         kind="strings", default=["/healthz", "/readyz", "/livez"])
    _add(authz, "authorization-kubeconfig", "kubeconfig file pointing at the 'core' kubernetes server with enough "
         "rights to create subjectaccessreviews.authorization.k8s.io. If empty: the in-cluster configuration, "
         "else (kubesched) the scheduler's own kubeconfig.", default="")
    _add(authz, "authorization-webhook-cache-authorized-ttl", "The duration to cache 'authorized' responses from "
         "the webhook authorizer. (default 10s)", kind="duration", default=10.0)
    _add(authz, "authorization-webhook-cache-unauthorized-ttl", "The duration to cache 'unauthorized' responses "
         "from the webhook authorizer. (default 10s)", kind="duration", default=10.0)

    deprecated = p.add_argument_group("Deprecated flags")
    ignored_with_config = "This parameter is ignored if a config file is specified in --config."
    _add(deprecated, "contention-profiling", f"DEPRECATED: enable block profiling, if profiling is enabled. "
         f"{ignored_with_config}", kind="bool")
    _add(deprecated, "kube-api-burst", f"DEPRECATED: burst to use while talking with kubernetes apiserver. "
         f"{ignored_with_config} (default 100)", kind="int")
    _add(deprecated, "kube-api-content-type", f"DEPRECATED: content type of requests sent to apiserver. "
         f"{ignored_with_config}")
    _add(deprecated, "kube-api-qps", f"DEPRECATED: QPS to use while talking with kubernetes apiserver. "
         f"{ignored_with_config} (default 50)", kind="float")
    _add(deprecated, "kubeconfig", "DEPRECATED: path to kubeconfig file with authorization and master location "
         "information. kubesched uses it whenever the configuration's clientConnection.kubeconfig is empty, with "
         "--config too.", default="")
    _add(deprecated, "pod-max-in-unschedulable-pods-duration", "DEPRECATED: the maximum time a pod can stay in "
         "unschedulablePods. If a pod stays in unschedulablePods for longer than this value, the pod will be "
         "moved from unschedulablePods to backoffQ or activeQ. (default 5m0s)", kind="duration", default=300.0)
    _add(deprecated, "profiling", f"DEPRECATED: enable profiling via web interface host:port/debug/pprof/. "
         f"{ignored_with_config}", kind="bool")

    election = p.add_argument_group("Leader election flags")
    _add(election, "leader-elect", "Start a leader election client and gain leadership before executing the main "
         "loop. Enable this when running replicated components for high availability. (default true)", kind="bool")
    _add(election, "leader-elect-lease-duration", "The duration that non-leader candidates will wait after "
         "observing a leadership renewal until attempting to acquire leadership of a led but unrenewed leader "
         "slot. This is only applicable if leader election is enabled. (default 15s)")
    _add(election, "leader-elect-renew-deadline", "The interval between attempts by the acting master to renew a "
         "leadership slot before it stops leading. This must be less than the lease duration. (default 10s)")
    _add(election, "leader-elect-resource-lock", "The type of resource object that is used for locking during "
         "leader election. Supported options are 'leases'. (default \"leases\")")
    _add(election, "leader-elect-resource-name", "The name of resource object that is used for locking during "
         "leader election. (default \"kube-scheduler\")")
    _add(election, "leader-elect-resource-namespace", "The namespace of resource object that is used for locking "
         "during leader election. (default \"kube-system\")")
    _add(election, "leader-elect-retry-period", "The duration the clients should wait between attempting "
         "acquisition and renewal of a leadership. (default 2s)")

    gates = p.add_argument_group("Feature gate flags")
    _add(gates, "feature-gates", "Comma-separated list of component:key=value pairs that describe feature gates. "
         "If the component is not specified, defaults to \"kube\". This flag can be repeatedly invoked. Every "
         "gate kube-scheduler v1.37 knows is accepted and an unknown one refused, as kube-scheduler refuses it; "
         f"kubesched honours {', '.join(features.HONOURED)} and keeps v1.37's default for every other gate.",
         kind="featureGates", default=[])
    _add(gates, "emulated-version", "The versions different components emulate their capabilities (APIs, "
         "features, ...) of. Options are: kube=1.37", kind="strings", default=[])
    _add(gates, "min-compatibility-version", "The min version of control plane components the server should be "
         "compatible with. Options are: kube=1.36..1.37", kind="strings", default=[])

    metrics = p.add_argument_group("Metrics flags")
    _add(metrics, "allow-metric-labels", "The map from metric-label to value allow-list of this label. The key's "
         "format is <MetricName>,<LabelName>. The value's format is <allowed_value>,<allowed_value>...",
         kind="stringToString", default={})
    _add(metrics, "allow-metric-labels-manifest", "The path to the manifest file that contains the allow-list "
         "mapping. Note that the flag --allow-metric-labels will override the manifest file.", default="")
    _add(metrics, "disabled-metrics", "This flag provides an escape hatch for misbehaving metrics. You must provide "
         "the fully qualified metric name in order to disable it.", kind="strings", default=[])
    _add(metrics, "show-hidden-metrics-for-version", "The previous version for which you want to show hidden "
         "metrics. The format is <major>.<minor>, e.g.: '1.16'.", default="")

    logs = p.add_argument_group("Logs flags")
    _add(logs, "log-flush-frequency", "Maximum number of seconds between log flushes (default 5s)",
         kind="duration", default=5.0)
    _add(logs, "log-json-info-buffer-size", "[Alpha] In JSON format with split output streams, the info messages "
         "can be buffered for a while to increase performance.", default="0")
    _add(logs, "log-json-split-stream", "[Alpha] In JSON format, write error messages to stderr and info messages "
         "to stdout.", kind="bool", default=False)
    _add(logs, "log-text-info-buffer-size", "[Alpha] In text format with split output streams, the info messages "
         "can be buffered for a while to increase performance.", default="0")
    _add(logs, "log-text-split-stream", "[Alpha] In text format, write error messages to stderr and info messages "
         "to stdout.", kind="bool", default=False)
    _add(logs, "logging-format", "Sets the log format. Permitted formats: \"json\", \"text\"; kubesched writes "
         "klog's text format in both cases. (default \"text\")", kind="format", default="text")
    logs.add_argument("-v", "--v", dest="verbosity", type=int, default=0, metavar="LEVEL",
                      help="number for the log level verbosity (2: one line per scheduling decision)")
    _add(logs, "vmodule", "comma-separated list of pattern=N settings for file-filtered logging (only works for "
         "text log format)", default="")

    global_flags = p.add_argument_group("Global flags")
    global_flags.add_argument("--version", nargs="?", const="true", default=None, metavar="true|raw",
                              help="--version, --version=raw prints version information and quits")
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
    """(flags, warnings). Raises FlagError with pflag-like wording for a bad flag or value, and
    features.FeatureGateError with kube-scheduler's for --feature-gates it refuses."""
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
    gates = features.parse_feature_gates(args.feature_gates)
    args.feature_gates = gates.enabled
    args.feature_gate_logs = gates.logs
    for gate in features.ignored(gates.explicit):
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
