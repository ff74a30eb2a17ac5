"""A scheduler extender for the tests: filters, prioritizes, preempts and binds by the rules on
its command line, over HTTP or HTTPS, speaking k8s.io/kube-scheduler/extender/v1.

    python extender_server.py --port 8888 --reject b=blocked-by-test --unresolvable c=never \\
        --score a=10 --score b=3 --kubeconfig admin.kubeconfig --log requests.jsonl

A node rule `PART=VALUE` applies to every node whose name contains PART (tests prefix node
names, so rules name a distinctive part such as "alpha"). `--misbehave VERB=garbage|sleep:SECONDS|status:CODE|error:MESSAGE` makes one verb
answer badly; a POST to /control with {"misbehave": {"VERB": "..."}} replaces those rules while it runs
(an empty object makes every verb answer well again). `--client-ca CA` (with --tls-cert/--tls-key) requires a client certificate that CA
signed, as an extender behind mutual TLS does. Every request is appended to --log as one JSON line (verb, pod, node names,
whether full nodes or names only were sent, the client certificate's CN) so a test can check what the scheduler sent.
"""

from __future__ import annotations

import argparse
import json
import ssl
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


def node_rules(values: list[str]) -> list[tuple[str, str]]:
    return [tuple(v.split("=", 1)) if "=" in v else (v, "") for v in values or ()]


def matching(rules: list[tuple[str, str]], node: str) -> str | None:
    return next((value for part, value in rules if part in node), None)


class Extender:
    def __init__(self, args: argparse.Namespace):
        self.args = args
        self.reject = node_rules(args.reject)
        self.unresolvable = node_rules(args.unresolvable)
        self.scores = node_rules(args.score)
        self.misbehave = dict(node_rules(args.misbehave))
        self.log_lock = threading.Lock()
        self.client = None
        if args.kubeconfig:
            sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
            from kubesched.client import ApiClient

            self.client = ApiClient.from_kubeconfig(args.kubeconfig, qps=0, burst=0, user_agent="test-extender")

    def record(self, verb: str, body: dict, client_cn: str = "") -> None:
        if not self.args.log:
            return
        pod = body.get("Pod") or {}
        names = body.get("NodeNames")
        entry = {"verb": verb, "pod": (pod.get("metadata") or {}).get("name") or body.get("PodName"),
                 "namespace": (pod.get("metadata") or {}).get("namespace") or body.get("PodNamespace"),
                 "full_nodes": body.get("Nodes") is not None,
                 "nodes": names if names is not None else
                 [n["metadata"]["name"] for n in (body.get("Nodes") or {}).get("items") or ()],
                 "pod_has_status": "status" in pod, "bind_node": body.get("Node"),
                 "victim_nodes": sorted((body.get("NodeNameToVictims") or body.get("NodeNameToMetaVictims") or {})),
                 "client_cn": client_cn}
        with self.log_lock, open(self.args.log, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(entry) + "\n")

    def filter(self, body: dict) -> dict:
        names = body.get("NodeNames")
        items = (body.get("Nodes") or {}).get("items") or []
        candidates = names if names is not None else [n["metadata"]["name"] for n in items]
        failed, unresolvable, passed = {}, {}, []
        for name in candidates:
            if (msg := matching(self.unresolvable, name)) is not None:
                unresolvable[name] = msg or "rejected by the test extender"
            elif (msg := matching(self.reject, name)) is not None:
                failed[name] = msg or "rejected by the test extender"
            else:
                passed.append(name)
        result = {"FailedNodes": failed, "FailedAndUnresolvableNodes": unresolvable, "Error": ""}
        if names is not None:
            result["NodeNames"] = passed
        else:
            result["Nodes"] = {"metadata": {}, "items": [n for n in items if n["metadata"]["name"] in passed]}
        return result

    def prioritize(self, body: dict) -> list:
        names = body.get("NodeNames")
        if names is None:
            names = [n["metadata"]["name"] for n in (body.get("Nodes") or {}).get("items") or ()]
        return [{"Host": name, "Score": int(matching(self.scores, name) or 0)} for name in names]

    def preempt(self, body: dict) -> dict:
        victims = body.get("NodeNameToMetaVictims")
        if victims is None:
            victims = {node: {"Pods": [{"UID": p["metadata"]["uid"]} for p in v.get("Pods") or ()],
                              "NumPDBViolations": v.get("NumPDBViolations", 0)}
                       for node, v in (body.get("NodeNameToVictims") or {}).items()}
        kept = {node: v for node, v in victims.items() if matching(self.reject, node) is None}
        return {"NodeNameToMetaVictims": kept}

    def bind(self, body: dict) -> dict:
        if self.client is None:
            return {"Error": "the test extender has no --kubeconfig to bind with"}
        try:
            self.client.request("POST", f"/api/v1/namespaces/{body['PodNamespace']}/pods/{body['PodName']}/binding", {
                "apiVersion": "v1", "kind": "Binding",
                "metadata": {"name": body["PodName"], "namespace": body["PodNamespace"], "uid": body["PodUID"],
                             "annotations": {"kubesched.io/bound-by": "test-extender"}},
                "target": {"apiVersion": "v1", "kind": "Node", "name": body["Node"]}})
        except Exception as err:  # noqa: BLE001 - the scheduler gets the failure as the extender's Error
            return {"Error": f"binding failed: {err}"}
        return {"Error": ""}


def _client_common_name(connection) -> str:
    """The CN of the client certificate the TLS handshake verified ("" over HTTP or without one)."""
    peer = connection.getpeercert() if hasattr(connection, "getpeercert") else None
    for rdn in (peer or {}).get("subject", ()):
        for key, value in rdn:
            if key == "commonName":
                return value
    return ""


def handler_for(extender: Extender):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args) -> None:
            pass

        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            verb = self.path.rstrip("/").rsplit("/", 1)[-1]
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
            if verb == "control":
                extender.misbehave = dict(body.get("misbehave") or {})
                return self._answer(200, json.dumps({"misbehave": extender.misbehave}).encode())
            extender.record(verb, body, _client_common_name(self.connection))
            misbehaviour = extender.misbehave.get(verb, "")
            if misbehaviour.startswith("sleep:"):
                time.sleep(float(misbehaviour.split(":", 1)[1]))
            if misbehaviour.startswith("status:"):
                return self._answer(int(misbehaviour.split(":", 1)[1]), b"extender failure\n")
            if misbehaviour == "garbage":
                return self._answer(200, b"<html>not an extender</html>\n")
            if misbehaviour.startswith("error:"):
                return self._answer(200, json.dumps({"Error": misbehaviour.split(":", 1)[1]}).encode())
            action = {"filter": extender.filter, "prioritize": extender.prioritize,
                      "preempt": extender.preempt, "bind": extender.bind}.get(verb)
            if action is None:
                return self._answer(404, b"unknown verb\n")
            self._answer(200, json.dumps(action(body)).encode())

        def _answer(self, code: int, payload: bytes) -> None:
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

    return Handler


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--reject", action="append", metavar="PART[=MESSAGE]", help="FailedNodes")
    p.add_argument("--unresolvable", action="append", metavar="PART[=MESSAGE]", help="FailedAndUnresolvableNodes")
    p.add_argument("--score", action="append", metavar="PART=0..10")
    p.add_argument("--misbehave", action="append", metavar="VERB=garbage|sleep:S|status:CODE|error:MSG")
    p.add_argument("--kubeconfig", default="", help="to bind with (the bind verb)")
    p.add_argument("--tls-cert", default="")
    p.add_argument("--tls-key", default="")
    p.add_argument("--client-ca", default="", help="require a client certificate this CA signed (mutual TLS)")
    p.add_argument("--log", default="")
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    server = ThreadingHTTPServer(("127.0.0.1", args.port), handler_for(Extender(args)))
    server.daemon_threads = True
    if args.tls_cert:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(args.tls_cert, args.tls_key)
        if args.client_ca:
            context.verify_mode = ssl.CERT_REQUIRED
            context.load_verify_locations(cafile=args.client_ca)
        server.socket = context.wrap_socket(server.socket, server_side=True)
    print(f"extender listening on 127.0.0.1:{args.port}", flush=True)
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
