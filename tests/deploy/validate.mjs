// Validates Kubernetes manifests offline against the Kubernetes API schema,
// from two npm packages pinned by package-lock.json:
//   - kubernetes-models: each object's validate(), compiled from the
//     Kubernetes OpenAPI schema (types, formats, enums, required fields);
//   - @kubernetes/client-node: its models' attribute maps, generated from
//     the same schema, for what validate() lets through: every field of
//     every object must be one the API has (the API server's strict field
//     validation, kubectl's default, refuses an unknown one; a typo such as
//     "hostUser" would otherwise pass unseen).
// Usage: node validate.mjs FILE.yaml...; prints one line per object, and
// every error; exit 1 when any object is invalid, 2 on a usage error.
import { readFileSync } from "node:fs";
import * as k8s from "@kubernetes/client-node";
import { parseAllDocuments } from "yaml";

// apiVersion/kind -> [kubernetes-models module, client-node model].
const KINDS = {
  "v1/ConfigMap": ["kubernetes-models/v1/ConfigMap", "V1ConfigMap"],
  "v1/Service": ["kubernetes-models/v1/Service", "V1Service"],
  "v1/Secret": ["kubernetes-models/v1/Secret", "V1Secret"],
  "apps/v1/StatefulSet": ["kubernetes-models/apps/v1/StatefulSet", "V1StatefulSet"],
  "apps/v1/Deployment": ["kubernetes-models/apps/v1/Deployment", "V1Deployment"],
  "apps/v1/DaemonSet": ["kubernetes-models/apps/v1/DaemonSet", "V1DaemonSet"],
  "policy/v1/PodDisruptionBudget": ["kubernetes-models/policy/v1/PodDisruptionBudget", "V1PodDisruptionBudget"],
  "networking.k8s.io/v1/NetworkPolicy": ["kubernetes-models/networking.k8s.io/v1/NetworkPolicy", "V1NetworkPolicy"],
  "autoscaling/v2/HorizontalPodAutoscaler": [
    "kubernetes-models/autoscaling/v2/HorizontalPodAutoscaler",
    "V2HorizontalPodAutoscaler",
  ],
};

const MAP_PREFIX = "{ [key: string]: ";

// Every key of value must be a field of the model `type` names, down the
// tree; errors get "where: why".
function strictFields(value, type, where, errors) {
  if (value === null || value === undefined) return;
  if (type.startsWith("Array<")) {
    if (!Array.isArray(value)) {
      errors.push(`${where}: expected a list`);
      return;
    }
    const inner = type.slice("Array<".length, -1);
    value.forEach((v, i) => strictFields(v, inner, `${where}[${i}]`, errors));
    return;
  }
  if (type.startsWith(MAP_PREFIX)) {
    if (typeof value !== "object" || Array.isArray(value)) {
      errors.push(`${where}: expected a map`);
      return;
    }
    const inner = type.slice(MAP_PREFIX.length, type.lastIndexOf(";"));
    for (const [k, v] of Object.entries(value)) strictFields(v, inner, `${where}.${k}`, errors);
    return;
  }
  const model = k8s[type];
  if (!model || typeof model.getAttributeTypeMap !== "function") return; // a scalar, IntOrString, Date
  if (typeof value !== "object" || Array.isArray(value)) {
    errors.push(`${where}: expected an object (${type})`);
    return;
  }
  const fields = new Map(model.getAttributeTypeMap().map((a) => [a.baseName, a.type]));
  for (const [k, v] of Object.entries(value)) {
    if (!fields.has(k)) errors.push(`${where}.${k}: no such field in ${type}`);
    else strictFields(v, fields.get(k), `${where}.${k}`, errors);
  }
}

async function validateObject(obj) {
  const errors = [];
  const key = `${obj.apiVersion}/${obj.kind}`;
  const known = KINDS[key];
  if (!known) return [`unknown apiVersion/kind ${key}`];
  const mod = await import(known[0]);
  const Model = mod[obj.kind];
  try {
    new Model(obj).validate();
  } catch (e) {
    errors.push(String(e.message || e));
  }
  strictFields(obj, known[1], "", errors);
  return errors;
}

const files = process.argv.slice(2);
if (files.length === 0) {
  console.error("usage: node validate.mjs FILE.yaml...");
  process.exit(2);
}
let bad = 0;
let objects = 0;
for (const file of files) {
  const docs = parseAllDocuments(readFileSync(file, "utf8"));
  for (const doc of docs) {
    if (doc.errors.length) {
      console.log(`${file}: YAML: ${doc.errors.map((e) => e.message).join("; ")}`);
      bad++;
      continue;
    }
    const obj = doc.toJS();
    if (obj === null) continue;
    objects++;
    const name = `${file}: ${obj.kind}/${obj.metadata?.name ?? "?"}`;
    const errors = await validateObject(obj);
    if (errors.length) {
      bad++;
      for (const e of errors) console.log(`${name}: invalid: ${e}`);
    } else {
      console.log(`${name}: valid`);
    }
  }
}
console.log(`${objects} objects, ${bad} invalid`);
process.exit(bad ? 1 : 0);
