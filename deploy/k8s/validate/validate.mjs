// Validates every rendered overlay offline, three ways:
//   1. each object against its Kubernetes (or Prometheus Operator, cert-manager) JSON schema
//      (kubernetes-models);
//   2. each object as a TypeScript literal of that model's interface, so that a misspelled or
//      misplaced field, which the schemas let through, is an excess-property error (tsc);
//   3. our own policy for every container: image pinned to the release's tag, resources, probes,
//      non-root, read-only root filesystem, no privilege escalation, no capabilities.
// `node validate.mjs --self-test` breaks rendered objects on purpose and fails unless each
// check catches its breakage.
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import YAML from "yaml";

const here = path.dirname(fileURLToPath(import.meta.url));
const repo = path.resolve(here, "../../..");
const version = fs.readFileSync(path.join(repo, "VERSION"), "utf8").trim();
const overlays = fs.readdirSync(path.join(here, "../overlays")).sort();

function render(overlay) {
  const out = execFileSync("kubectl", ["kustomize", path.join(here, "../overlays", overlay)], {
    encoding: "utf8",
    maxBuffer: 64 << 20,
  });
  return YAML.parseAllDocuments(out).map((d) => d.toJS()).filter(Boolean);
}

// apiVersion + kind -> the module that models it.
function modelModule(obj) {
  const [group, ver] = obj.apiVersion.includes("/") ? obj.apiVersion.split("/") : ["", obj.apiVersion];
  if (group === "monitoring.coreos.com") {
    return `@kubernetes-models/prometheus-operator/${group}/${ver}/${obj.kind}`;
  }
  if (group === "cert-manager.io") {
    return `@kubernetes-models/cert-manager/${group}/${ver}/${obj.kind}`;
  }
  return `kubernetes-models/${group ? group + "/" : ""}${ver}/${obj.kind}`;
}

async function schemaErrors(obj) {
  const mod = await import(modelModule(obj)).catch(() => null);
  if (!mod) return [`${obj.kind} ${obj.apiVersion}: no model`];
  const Model = mod[obj.kind];
  try {
    new Model(obj).validate();
    return [];
  } catch (e) {
    return [`${obj.kind}/${obj.metadata?.name}: ${e.message.split("\n").slice(0, 3).join(" ")}`];
  }
}

function typeErrors(objects) {
  const dir = fs.mkdtempSync(path.join(here, ".tsc-"));
  try {
    const lines = [];
    objects.forEach((obj, i) => {
      lines.push(`import type { I${obj.kind} as T${i} } from "${modelModule(obj)}";`);
      lines.push(`export const o${i}: T${i} = ${JSON.stringify(obj, null, 2)};`);
    });
    fs.writeFileSync(path.join(dir, "objects.ts"), lines.join("\n") + "\n");
    try {
      execFileSync(
        path.join(here, "node_modules/.bin/tsc"),
        ["--noEmit", "--strict", "--skipLibCheck", "--module", "nodenext", "--moduleResolution",
         "nodenext", "--target", "es2022", path.join(dir, "objects.ts")],
        { encoding: "utf8", cwd: here },
      );
      return [];
    } catch (e) {
      return (e.stdout || e.message).split("\n").filter((l) => l.includes("error TS")).map(
        (l) => l.replace(/^.*objects\.ts/, "objects.ts"));
    }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

function policyErrors(obj) {
  const pod = obj.spec?.template?.spec;
  if (!pod) return [];
  const errors = [];
  const where = `${obj.kind}/${obj.metadata.name}`;
  for (const c of [...(pod.initContainers || []), ...pod.containers]) {
    const at = `${where} container ${c.name}`;
    const tag = c.image.includes(":") ? c.image.slice(c.image.lastIndexOf(":") + 1) : "";
    if (tag !== version) errors.push(`${at}: image ${c.image} is not pinned to ${version}`);
    if (!c.resources?.requests?.cpu || !c.resources?.requests?.memory || !c.resources?.limits?.memory) {
      errors.push(`${at}: needs cpu and memory requests and a memory limit`);
    }
    for (const p of ["startupProbe", "livenessProbe", "readinessProbe"]) {
      if (!c[p]) errors.push(`${at}: no ${p}`);
    }
    const nonRoot = c.securityContext?.runAsNonRoot ?? pod.securityContext?.runAsNonRoot;
    if (nonRoot !== true) errors.push(`${at}: runAsNonRoot is not set`);
    if (c.securityContext?.readOnlyRootFilesystem !== true) errors.push(`${at}: root filesystem is writable`);
    if (c.securityContext?.allowPrivilegeEscalation !== false) errors.push(`${at}: privilege escalation allowed`);
    if (!(c.securityContext?.capabilities?.drop || []).includes("ALL")) errors.push(`${at}: capabilities not dropped`);
  }
  return errors;
}

async function check(objects) {
  const errors = [];
  for (const obj of objects) errors.push(...(await schemaErrors(obj)), ...policyErrors(obj));
  errors.push(...typeErrors(objects));
  return errors;
}

async function selfTest() {
  const base = render("cpu");
  const workload = (objs) => objs.find((o) => o.kind === "StatefulSet");
  const breakages = {
    "misspelled field (terminationGracePeriodSecond)": (objs) => {
      const pod = workload(objs).spec.template.spec;
      pod.terminationGracePeriodSecond = pod.terminationGracePeriodSeconds;
      delete pod.terminationGracePeriodSeconds;
    },
    "wrong type (replicas: \"two\")": (objs) => { workload(objs).spec.replicas = "two"; },
    "unpinned image": (objs) => { workload(objs).spec.template.spec.containers[0].image = "yoco-serve:latest"; },
    "no resources": (objs) => { delete workload(objs).spec.template.spec.containers[0].resources; },
    "writable root": (objs) => {
      workload(objs).spec.template.spec.containers[0].securityContext.readOnlyRootFilesystem = false;
    },
  };
  let failed = 0;
  for (const [name, breakIt] of Object.entries(breakages)) {
    const objs = structuredClone(base);
    breakIt(objs);
    const errors = await check(objs);
    console.log(`${errors.length ? "caught " : "MISSED "} ${name}${errors.length ? ": " + errors[0] : ""}`);
    if (!errors.length) failed++;
  }
  return failed;
}

if (process.argv.includes("--self-test")) {
  process.exit((await selfTest()) ? 1 : 0);
}
let failed = 0;
for (const overlay of overlays) {
  const objects = render(overlay);
  const errors = await check(objects);
  console.log(`${overlay}: ${objects.length} objects, ${errors.length ? "FAILED" : "valid"}`);
  for (const e of errors) console.log(`  ${e}`);
  if (errors.length) failed++;
}
process.exit(failed ? 1 : 0);
