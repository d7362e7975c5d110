#!/usr/bin/python3
"""Turns the rendered `overlays/local` into what `podman kube play` (podman 4.3) can start.

Usage: for_kube_play.py RENDERED.yaml IMAGE [EXISTING_VOLUME ...] > PLAY.yaml

podman plays Deployments, ConfigMaps and PersistentVolumeClaims, not StatefulSets, so each
StatefulSet becomes a one-replica Deployment whose claim templates become named claims (podman
volumes; a claim whose volume exists already is not declared again, since podman 4.3 refuses
that, and the pod mounts the volume with what an earlier run left in it). What podman has no use
for on one machine (Services, NetworkPolicies, disruption budgets, the Namespace and
ServiceAccount) is left out, and so are the containers' `ports` lists on the host network
(podman would turn them into port mappings, which it refuses there). Nothing else changes:
command lines, flag files, environment, mounts and security settings are the manifests'.
"""
import sys

import yaml

PLAYED = {"ConfigMap", "Deployment", "StatefulSet"}


def main():
    rendered, image, existing = sys.argv[1], sys.argv[2], set(sys.argv[3:])
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
                if name not in existing:
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
            pod = obj["spec"]["template"]["spec"]
            for c in pod["containers"]:
                c["image"] = image
                if pod.get("hostNetwork"):
                    c.pop("ports", None)
        out.append(obj)
    # ConfigMaps first, so the pods find them.
    out.sort(key=lambda o: {"ConfigMap": 0, "PersistentVolumeClaim": 1}.get(o["kind"], 2))
    yaml.safe_dump_all(out, sys.stdout, sort_keys=False)


if __name__ == "__main__":
    main()
