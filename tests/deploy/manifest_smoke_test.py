#!/usr/bin/python3
"""Serves a request with exactly the command lines, flag files and environment that a rendered
Kubernetes overlay gives the router, prefill and decode containers.

Usage: manifest_smoke_test.py REPO_ROOT BUILD_DIR OVERLAY

Only what differs between a pod and this machine is substituted: listen addresses and ports
(0.0.0.0:P -> 127.0.0.1:free port), the workers' Service names (-> loopback), the pod's network
interface (eth0 -> lo), mounted paths (-> temporary folders holding the same files) and the image's
paths (/usr/local/bin, /opt/yoco/models -> the build). A flag renamed in code but not in a manifest,
a missing mount or a wrong port fails here. The tokens must equal the in-process engine's.
"""
import json
import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.request

import yaml

IMAGE_MODELS = "/opt/yoco/models"


def render(repo, overlay):
    out = subprocess.run(["kubectl", "kustomize", os.path.join(repo, "deploy/k8s/overlays", overlay)],
                         check=True, capture_output=True, text=True).stdout
    return [d for d in yaml.safe_load_all(out) if d]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def workload(objects, component):
    for o in objects:
        if o["kind"] in ("Deployment", "StatefulSet") and \
                o["metadata"]["labels"].get("app.kubernetes.io/component") == component:
            return o
    raise AssertionError(f"no Deployment or StatefulSet for {component}")


class Rewriter:
    """Maps pod addresses and paths to this machine's, consistently for every role."""

    def __init__(self, build):
        self.build = build
        self.ports = {}    # port in the manifests -> free local port
        self.paths = {}    # mount path -> local folder
        self.live = {}     # "yoco-prefill" -> local port of ordinal 0
        self.absent = free_port()  # nothing listens: the pods beyond the replica count
        self.secrets = {}  # (Secret name, key) -> value
        self.tmp = None    # set by main: where made certificates and tokens live
        self.cas = {}      # Issuer name -> (cert path, key path) of a CA standing in for it

    def port(self, p):
        if p not in self.ports:
            self.ports[p] = free_port()
        return self.ports[p]

    def text(self, s):
        s = re.sub(r"(?:0\.0\.0\.0|127\.0\.0\.1):(\d+)",
                   lambda m: f"127.0.0.1:{self.port(int(m.group(1)))}", s)

        def service(m):
            ordinal, port = int(m.group(2)), int(m.group(3))
            return f"127.0.0.1:{self.port(port) if ordinal == 0 else self.absent}"
        s = re.sub(r"(yoco-(?:prefill|decode))-(\d+)\.yoco-(?:prefill|decode):(\d+)", service, s)
        # A headless Service's DNS name stands for its one ready pod here (DNS discovery itself
        # has its own test against a real DNS server).
        s = re.sub(r"dns:///yoco-(?:prefill|decode):(\d+)",
                   lambda m: f"127.0.0.1:{self.port(int(m.group(1)))}", s)
        # So does a k8s:// target (the Kubernetes API client has its own tests, against a
        # stand-in API server).
        s = re.sub(r"k8s://[^?\s]+\?port=(\d+)(?:&tls_name=[\w.-]+)?",
                   lambda m: f"127.0.0.1:{self.port(int(m.group(1)))}", s)
        s = s.replace("--net_devices=eth0", "--net_devices=lo")
        # One pass over every path: a local folder (the build, a temporary folder) may itself
        # lie under a mount path such as /tmp.
        paths = dict(self.paths)
        paths[IMAGE_MODELS] = os.path.join(self.build, "models")
        alternatives = "|".join(re.escape(m) for m in sorted(paths, key=len, reverse=True))
        return re.sub(rf"(?<![\w/])({alternatives})(?=/|\b|$)", lambda m: paths[m.group(1)], s)


def certificates(objects):
    """cert-manager Certificates by the Secret they fill."""
    return {o["spec"]["secretName"]: o for o in objects if o["kind"] == "Certificate"}


def openssl(*args):
    subprocess.run(["openssl", *args], check=True, capture_output=True)


def issue(rw, certificate):
    """What cert-manager would put in the Certificate's Secret, from a CA made here."""
    key = ("certificate", certificate["metadata"]["name"])
    if key in rw.secrets:
        return rw.secrets[key]
    spec = certificate["spec"]
    issuer = spec.get("issuerRef", {}).get("name", "yoco-ca")  # clients' certificates: yoco-ca
    if issuer not in rw.cas:
        ca = (os.path.join(rw.tmp, issuer + ".crt"), os.path.join(rw.tmp, issuer + ".key"))
        openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                "-keyout", ca[1], "-out", ca[0], "-days", "2", "-subj", f"/CN={issuer}")
        rw.cas[issuer] = ca
    ca = rw.cas[issuer]
    base = os.path.join(rw.tmp, certificate["metadata"]["name"])
    names = [f"DNS:{n}" for n in spec.get("dnsNames", [])] + \
        [f"IP:{a}" for a in spec.get("ipAddresses", [])]
    with open(base + ".ext", "w") as f:
        f.write(f"subjectAltName={','.join(names)}\nextendedKeyUsage=serverAuth,clientAuth\n")
    openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout",
            base + ".key", "-out", base + ".csr", "-subj", f"/CN={spec.get('commonName', 'x')}")
    openssl("x509", "-req", "-in", base + ".csr", "-CA", ca[0], "-CAkey", ca[1], "-out",
            base + ".crt", "-days", "2", "-set_serial", str(len(rw.secrets) + 2), "-extfile",
            base + ".ext")
    rw.secrets[key] = {k: open(base + ext).read()
                       for k, ext in (("tls.crt", ".crt"), ("tls.key", ".key"))}
    rw.secrets[key]["ca.crt"] = open(ca[0]).read()
    rw.secrets[key]["paths"] = {k: base + ext for k, ext in (("tls.crt", ".crt"), ("tls.key", ".key"))}
    rw.secrets[key]["paths"]["ca.crt"] = ca[0]
    return rw.secrets[key]


def client_token(rw):
    return rw.secrets.setdefault(("client", "token"), "smoke-" + os.urandom(16).hex())


def client_flags(rw, objects, router):
    """yoco-cli's flags for the rendered router: a certificate of its CA under mTLS, a tenant's
    token under --tenants."""
    flags = []
    argv = " ".join(router["command"] + router.get("args", []))
    if "--tls_cert" in argv:
        client = issue(rw, {"metadata": {"name": "smoke-client"},
                            "spec": {"commonName": "smoke-client", "dnsNames": ["smoke-client"]}})
        for k in ("ca.crt", "tls.crt", "tls.key"):
            with open(os.path.join(rw.tmp, "client-" + k), "w") as f:
                f.write(client[k])
        flags += ["--tls-ca", os.path.join(rw.tmp, "client-ca.crt"), "--tls-cert",
                  os.path.join(rw.tmp, "client-tls.crt"), "--tls-key",
                  os.path.join(rw.tmp, "client-tls.key")]
    if "--tenants" in argv:
        path = os.path.join(rw.tmp, "client.token")
        with open(path, "w") as f:
            f.write(client_token(rw))
        flags += ["--token-file", path]
    return flags


def probe_command(rw, cli, port, probe):
    """The kubelet's probe as a command: a gRPC probe through yoco-cli, an exec probe as is."""
    if "exec" in probe:
        argv = probe["exec"]["local_command"]
        assert "/" not in argv[0], f"{argv[0]}: the image puts the binaries on PATH"
        return [os.path.join(rw.build, "bin", argv[0])] + argv[1:]
    assert rw.port(probe["grpc"]["port"]) == port, "probe on another port"
    return [cli, "--router", f"127.0.0.1:{port}", "health", "--service",
            probe["grpc"].get("service", ""), "--timeout-ms", "1000"]


def prepare(obj, objects, rw, tmp):
    """Command line and environment of the workload's one container, mounts made local."""
    pod = obj["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    volumes = {v["name"]: v for v in pod.get("volumes", [])}
    claims = {c["metadata"]["name"] for c in obj["spec"].get("volumeClaimTemplates", [])}
    config_maps = {o["metadata"]["name"]: o for o in objects if o["kind"] == "ConfigMap"}
    files = []
    for m in container.get("volumeMounts", []):
        local = tempfile.mkdtemp(dir=tmp, prefix=m["name"] + "-")
        rw.paths[m["mountPath"]] = local
        if m["name"] in claims:
            continue
        v = volumes[m["name"]]
        assert {"configMap", "emptyDir", "secret"} & v.keys(), f"unexpected volume {v}"
        if "secret" in v:
            name = v["secret"]["secretName"]
            certificate = certificates(objects).get(name)
            for item in v["secret"]["items"]:
                if certificate is not None:  # cert-manager's Secret: tls.crt, tls.key, ca.crt
                    secret = issue(rw, certificate)[item["key"]]
                elif item["key"] == "tenants.json":  # the operator's tenant file
                    secret = rw.secrets.setdefault((name, item["key"]), json.dumps(
                        {"tenants": {"smoke": {"tokens": [client_token(rw)]}}}))
                else:
                    # The operator creates the other Secrets; one random value per item stands
                    # in for each, shared by every role as the real Secret is.
                    secret = rw.secrets.setdefault((name, item["key"]), os.urandom(32).hex())
                files.append((os.path.join(local, item["path"]), secret))
        if "configMap" in v:
            cm = config_maps[v["configMap"]["name"]]
            files += [(os.path.join(local, k), data) for k, data in cm["data"].items()]
    # File contents are rewritten after every mount is known.
    for path, data in files:
        with open(path, "w") as f:
            f.write(rw.text(data))
    argv = [rw.text(a) for a in container["command"] + container.get("args", [])]
    # Exec probes' paths are this role's mounts: rewritten now, before another role's mounts
    # take the same mount paths (every role mounts its certificate at /etc/yoco-tls).
    for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
        if "exec" in container.get(probe, {}):
            container[probe]["exec"]["local_command"] = [
                rw.text(a) for a in container[probe]["exec"]["command"]]
    assert "/" not in argv[0], f"{argv[0]}: the image puts the binaries on PATH"
    argv[0] = os.path.join(rw.build, "bin", argv[0])
    env = {"PATH": os.environ["PATH"]}
    for e in container.get("env", []):
        env[e["name"]] = rw.text(e["value"])
    return argv, env, container


def scrape(port):
    return urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()


def http_api(rw, router, tokens):
    """The OpenAI HTTP API on the port the manifest names: the same prompt, 12 tokens, over
    HTTPS with a client certificate and a tenant's token where the overlay asks for them."""
    port = rw.port(next(p["containerPort"] for p in router["ports"] if p["name"] == "http"))
    argv = " ".join(router["command"] + router.get("args", []))
    context, scheme = None, "http"
    if "--tls_cert" in argv:
        scheme = "https"
        context = ssl.create_default_context(cafile=os.path.join(rw.tmp, "client-ca.crt"))
        context.check_hostname = False  # the certificate names the Service, not 127.0.0.1
        context.load_cert_chain(os.path.join(rw.tmp, "client-tls.crt"),
                                os.path.join(rw.tmp, "client-tls.key"))
    headers = {"Content-Type": "application/json"}
    if "--tenants" in argv:
        headers["Authorization"] = "Bearer " + client_token(rw)
    body = json.dumps({"prompt": [int(t) for t in tokens.split(",")], "max_tokens": 12,
                       "temperature": 0, "ignore_eos": True}).encode()
    request = urllib.request.Request(f"{scheme}://127.0.0.1:{port}/v1/completions", body, headers)
    answer = json.load(urllib.request.urlopen(request, timeout=30, context=context))
    usage = answer["usage"]
    assert usage["prompt_tokens"] == 9 and usage["completion_tokens"] == 12, answer
    print(f"HTTP API ({scheme}): {usage}")


def workers_only_for_the_router(rw, objects, roles, grpc):
    """Where the workers name --allowed_callers: a client's certificate does not open them (its CA
    is not theirs), nor does a certificate of their own CA with another identity (a worker's)."""
    argv = " ".join(roles["decode"]["command"] + roles["decode"].get("args", []))
    if "--allowed_callers" not in argv:
        return
    forged_call = os.path.join(rw.build, "bin", "forged_call")
    decode = certificates(objects)["yoco-decode-tls"]
    internal_ca = issue(rw, decode)["paths"]["ca.crt"]
    client = issue(rw, {"metadata": {"name": "smoke-client"},
                        "spec": {"commonName": "smoke-client", "dnsNames": ["smoke-client"]}})["paths"]
    worker = issue(rw, decode)["paths"]
    for who, cert, want in (("a client's certificate", client, "14"),
                            ("a worker's certificate", worker, "7")):
        r = subprocess.run([forged_call, "outsider", f"127.0.0.1:{grpc['prefill']}",
                            f"127.0.0.1:{grpc['decode']}", internal_ca, cert["tls.crt"],
                            cert["tls.key"], want], capture_output=True, text=True)
        assert r.returncode == 0, f"{who} at the workers: {r.stdout}{r.stderr}"
        print(f"workers refuse {who} (code {want} at every method)")


def main():
    repo, build, overlay = sys.argv[1:4]
    objects = render(repo, overlay)
    tmp = tempfile.mkdtemp(prefix=f"yoco-manifests-{overlay}-")
    rw = Rewriter(build)
    rw.tmp = tmp
    procs = []
    try:
        roles = {}
        for component in ("decode", "prefill", "router"):
            argv, env, container = prepare(workload(objects, component), objects, rw, tmp)
            roles[component] = container
            log = open(os.path.join(tmp, component + ".log"), "w")
            print("+", " ".join(argv), flush=True)
            procs.append((component, subprocess.Popen(argv, env=env, stdout=log, stderr=log)))
        grpc = {c: rw.port(roles[c]["ports"][0]["containerPort"]) for c in roles}
        metrics = {c: rw.port(next(p["containerPort"] for p in roles[c]["ports"]
                                   if p["name"] == "metrics")) for c in roles}
        cli = os.path.join(build, "bin", "yoco-cli")

        # The probes the manifests give the kubelet: liveness "" and the readiness service.
        deadline = time.time() + 60
        for c in ("decode", "prefill", "router"):
            ready = probe_command(rw, cli, grpc[c], roles[c]["readinessProbe"])
            while True:
                r = subprocess.run(ready, capture_output=True, text=True)
                if r.returncode == 0:
                    break
                for name, p in procs:
                    assert p.poll() is None, f"{name} exited with {p.returncode}: " + \
                        open(os.path.join(tmp, name + ".log")).read()
                assert time.time() < deadline, f"{c} not ready: {r.stdout}{r.stderr}"
                time.sleep(0.2)
            for probe in ("livenessProbe", "startupProbe"):
                r = subprocess.run(probe_command(rw, cli, grpc[c], roles[c][probe]),
                                   capture_output=True, text=True)
                assert r.returncode == 0, f"{c}: {probe} {r.stdout}{r.stderr}"

        tokens = "0,17,5,99,254,31,7,7,42"
        served = None
        for _ in range(50):  # the router's first probe of its workers may still be running
            r = subprocess.run([cli, "--router", f"127.0.0.1:{grpc['router']}"] +
                               client_flags(rw, objects, roles["router"]) +
                               ["generate", "--tokens", tokens, "--max-new-tokens", "12"],
                               capture_output=True, text=True)
            if r.returncode == 0:
                served = r.stdout.strip()
                break
            time.sleep(0.2)
        assert served is not None, f"no tokens through the router: {r.stderr}"
        model = [a for a in open(os.path.join(rw.paths["/etc/yoco"], "router.flags")).read().split()
                 if a.startswith("--model=")][0].split("=", 1)[1]
        local = subprocess.run([os.path.join(build, "bin", "yoco"), "generate", "--model", model,
                                "--tokens", tokens, "--max-new-tokens", "12"],
                               check=True, capture_output=True, text=True).stdout.strip()
        assert served == local, f"served {served}, in-process {local}"
        print(f"{overlay}: served {served} (= in-process engine)")
        http_api(rw, roles["router"], tokens)

        workers_only_for_the_router(rw, objects, roles, grpc)

        text = scrape(metrics["router"])
        assert re.search(r'^yoco_router_requests_total\{outcome="ok"\} [1-9]', text, re.M), text
        for c in ("prefill", "decode"):
            text = scrape(metrics[c])
            for name in ("yoco_worker_requests_waiting", "yoco_worker_requests_running",
                         "yoco_worker_state_memory_utilization", "yoco_service_draining",
                         "vllm:num_requests_waiting", "vllm:num_requests_running",
                         "vllm:kv_cache_usage_perc"):
                assert re.search(rf"^{re.escape(name)} ", text, re.M), f"{c}: no {name}"

        # SIGTERM, as the kubelet sends it: readiness goes NOT_SERVING, then the process exits
        # within the grace period the manifest gives.
        name, decode = procs[0]
        decode.send_signal(signal.SIGTERM)
        grace = workload(objects, "decode")["spec"]["template"]["spec"][
            "terminationGracePeriodSeconds"]
        decode.wait(timeout=grace)
        print(f"{overlay}: decode worker drained and exited with {decode.returncode}")
        assert decode.returncode == 0
    finally:
        for _, p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
