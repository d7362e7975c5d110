#!/usr/bin/python3
"""Turns the rendered `overlays/local` into what `podman kube play` (podman 4.3) can start.

Usage: for_kube_play.py RENDERED.yaml IMAGE > PLAY.yaml

podman plays Deployments, ConfigMaps and PersistentVolumeClaims, not StatefulSets, so each
StatefulSet becomes a one-replica Deployment whose claim templates become named claims (podman
volumes). What podman has no use for on one machine (Services, NetworkPolicies, disruption
budgets, the Namespace and ServiceAccount) is left out. Nothing else changes: command lines, flag
files, environment, mounts and security settings are the manifests'.
"""
import sys

import yaml

PLAYED = {"ConfigMap", "Deployment", "StatefulSet"}


def main():
    rendered, image = sys.argv[1:3]
    out = []
    for obj in yaml.safe_load_all(open(rendered)):
        if not obj or obj["kind"] not in PLAYED:
            continue
        obj["metadata"].pop("namespace", None)
        if obj["kind"] == "StatefulSet":
            spec = obj["spec"]
            pod = spec["template"]["spec"]
            for claim in spec.pop("volumeClaimTemplates", []):
                name = f"{obj['metadata']['name']}-{claim['metadata']['name']}"
                out.append({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                            "metadata": {"name": name}, "spec": claim["spec"]})
                pod.setdefault("volumes", []).append(
                    {"name": claim["metadata"]["name"], "persistentVolumeClaim": {"claimName": name}})
            for key in ("serviceName", "podManagementPolicy", "persistentVolumeClaimRetentionPolicy",
                        "updateStrategy"):
                spec.pop(key, None)
            obj["kind"] = "Deployment"
        if obj["kind"] == "Deployment":
            obj["spec"]["replicas"] = 1
            for c in obj["spec"]["template"]["spec"]["containers"]:
                c["image"] = image
        out.append(obj)
    # ConfigMaps first, so the pods find them.
    out.sort(key=lambda o: {"ConfigMap": 0, "PersistentVolumeClaim": 1}.get(o["kind"], 2))
    yaml.safe_dump_all(out, sys.stdout, sort_keys=False)


if __name__ == "__main__":
    main()
