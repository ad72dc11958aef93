// kubectl-free validation of deploy/: every Kubernetes manifest is checked against the
// Kubernetes JSON schemas shipped by the kubernetes-models package, then the structure that
// matters for agui-proxy is checked by hand (see checkK8s and checkCompose). The proxy's and
// the demo agent's environment variables come from their own -h output, so a renamed or
// removed variable fails here.
//
//   node validate.mjs --deploy DIR --proxy-help FILE --demo-help FILE [--rendered FILE]
//
// --rendered validates the output of `kubectl kustomize DIR` (the documents as applied) in
// addition to the files. Prints one line per problem and exits 1 when there is any.
import { existsSync, readFileSync, readdirSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { parseAllDocuments } from "yaml";

// parseHelp reads `agui-proxy -h` or `demo-agent -h` output: variable name -> default ("" when
// the help gives none).
export function parseHelp(text) {
  const vars = new Map();
  let last = null;
  for (const line of text.split("\n")) {
    const name = /^\s+((?:AGUI|DEMO)_[A-Z0-9_]+)\b/.exec(line);
    if (name) {
      last = name[1];
      const inline = /\(default "([^"]*)"\)\s*$/.exec(line); // demo-agent's format
      vars.set(last, inline ? inline[1] : "");
      continue;
    }
    const def = /^\s+default: (.*)$/.exec(line); // agui-proxy's format
    if (def && last) vars.set(last, def[1] === '""' ? "" : def[1]);
  }
  return vars;
}

// durationSeconds parses a Go duration ("30s", "1m30s", "1.5h", "0"); NaN when invalid.
export function durationSeconds(s) {
  s = String(s).trim();
  if (s === "0") return 0;
  const unit = { ns: 1e-9, us: 1e-6, "µs": 1e-6, ms: 1e-3, s: 1, m: 60, h: 3600 };
  const re = /(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)/gy;
  let total = 0;
  let pos = 0;
  let m;
  while ((m = re.exec(s)) !== null) {
    total += Number(m[1]) * unit[m[2]];
    pos = re.lastIndex;
  }
  return pos === s.length && pos > 0 ? total : NaN;
}

// loadYAML returns every document of a file as plain objects; a syntax error is thrown.
export function loadYAML(text, file) {
  return parseAllDocuments(text).flatMap((d) => {
    if (d.errors.length > 0) throw new Error(`${file}: ${d.errors[0].message}`);
    const js = d.toJS();
    return js == null ? [] : [js];
  });
}

// schemaErrors validates one Kubernetes object against its kind's JSON schema.
async function schemaErrors(obj) {
  const [group, version] = obj.apiVersion.includes("/") ? obj.apiVersion.split("/") : [null, obj.apiVersion];
  const mod = group ? `kubernetes-models/${group}/${version}` : `kubernetes-models/${version}`;
  let models;
  try {
    models = await import(mod);
  } catch {
    return [`unknown apiVersion ${obj.apiVersion}`];
  }
  const Model = models[obj.kind];
  if (!Model) return [`unknown kind ${obj.kind} in ${obj.apiVersion}`];
  try {
    new Model(obj).validate();
    return [];
  } catch (err) {
    return [`schema: ${err.message}`];
  }
}

const matches = (selector, labels) =>
  selector != null && Object.keys(selector).length > 0 &&
  Object.entries(selector).every(([k, v]) => labels?.[k] === v);

// containerPort resolves a probe's or Service's port (a number or a port name) to a number.
function containerPort(containers, port) {
  for (const c of containers) {
    for (const p of c.ports ?? []) {
      if (p.name === port || p.containerPort === port) return p.containerPort;
    }
  }
  return undefined;
}

function listenPort(listen) {
  const m = /:(\d+)$/.exec(listen ?? "");
  return m ? Number(m[1]) : undefined;
}

// checkK8s checks the Kubernetes objects of deploy/k8s. docs: [{file, obj}]; ctx: {proxyVars,
// kustomizeDir (null for rendered output)}. Returns a list of problems.
export async function checkK8s(docs, ctx) {
  const errs = [];
  const err = (file, obj, msg) => errs.push(`${file}: ${obj?.kind ?? "?"}/${obj?.metadata?.name ?? "?"}: ${msg}`);
  const objs = [];
  for (const { file, obj } of docs) {
    if (!obj || typeof obj !== "object" || !obj.apiVersion || !obj.kind) {
      err(file, obj, "not a Kubernetes object (apiVersion and kind required)");
      continue;
    }
    if (obj.kind === "Kustomization") {
      if (ctx.kustomizeDir) checkKustomization(file, obj, ctx.kustomizeDir, err);
      continue;
    }
    if (!obj.metadata?.name) err(file, obj, "metadata.name is required");
    for (const e of await schemaErrors(obj)) err(file, obj, e);
    objs.push({ file, obj });
  }
  const seen = new Set();
  for (const { file, obj } of objs) {
    const key = `${obj.kind}/${obj.metadata?.namespace ?? ""}/${obj.metadata?.name}`;
    if (seen.has(key)) err(file, obj, "defined twice");
    seen.add(key);
  }
  const byKind = (k) => objs.filter(({ obj }) => obj.kind === k);
  const configMaps = new Map(byKind("ConfigMap").map(({ obj }) => [obj.metadata.name, obj]));
  const services = byKind("Service");
  const workloads = [...byKind("Deployment"), ...byKind("StatefulSet")];

  for (const { file, obj } of workloads) {
    const spec = obj.spec ?? {};
    const pod = spec.template?.spec ?? {};
    const labels = spec.template?.metadata?.labels;
    if (!matches(spec.selector?.matchLabels, labels)) {
      err(file, obj, "spec.selector.matchLabels must be non-empty and match the pod template's labels");
    }
    const containers = pod.containers ?? [];
    for (const c of containers) {
      const sc = c.securityContext ?? {};
      const where = `container ${c.name}`;
      if (!(sc.runAsNonRoot ?? pod.securityContext?.runAsNonRoot)) err(file, obj, `${where}: runAsNonRoot must be true`);
      if (sc.readOnlyRootFilesystem !== true) err(file, obj, `${where}: securityContext.readOnlyRootFilesystem must be true`);
      if (sc.allowPrivilegeEscalation !== false) err(file, obj, `${where}: securityContext.allowPrivilegeEscalation must be false`);
      if (!c.resources?.requests?.cpu || !c.resources?.requests?.memory) err(file, obj, `${where}: resources.requests.cpu and .memory are required`);
      if (!c.resources?.limits?.memory) err(file, obj, `${where}: resources.limits.memory is required`);
      if (!c.readinessProbe || !c.livenessProbe) err(file, obj, `${where}: readinessProbe and livenessProbe are required`);
    }
    const isProxy = (c) => /(^|\/)agui-proxy(:|@|$)/.test(c.image ?? "");
    const proxies = containers.filter(isProxy);
    if (obj.kind === "Deployment" && proxies.length === 0) err(file, obj, "no agui-proxy container");
    for (const c of proxies) checkProxyContainer(file, obj, c, pod, configMaps, ctx, err);
    if (proxies.length > 0 && !((spec.replicas ?? 1) >= 2)) err(file, obj, `replicas ${spec.replicas ?? 1}: run at least 2 proxies`);
    if (obj.kind === "StatefulSet" && containers.some((c) => /(^|\/)redis(:|@|$)/.test(c.image ?? ""))) {
      checkRedis(file, obj, services, err);
    }
  }

  for (const { file, obj } of services) {
    const sel = obj.spec?.selector;
    const targets = workloads.filter(({ obj: w }) => matches(sel, w.spec?.template?.metadata?.labels));
    if (targets.length === 0) {
      err(file, obj, "selector matches no workload's pods");
      continue;
    }
    for (const p of obj.spec?.ports ?? []) {
      const tp = p.targetPort ?? p.port;
      for (const { obj: w } of targets) {
        if (containerPort(w.spec.template.spec.containers ?? [], tp) === undefined) {
          err(file, obj, `targetPort ${tp} is not a container port of ${w.kind}/${w.metadata.name}`);
        }
      }
    }
  }

  for (const { file, obj } of byKind("PodDisruptionBudget")) {
    const sel = obj.spec?.selector?.matchLabels;
    const targets = workloads.filter(({ obj: w }) => matches(sel, w.spec?.template?.metadata?.labels));
    if (targets.length === 0) err(file, obj, "selector matches no workload's pods");
    if (obj.spec?.minAvailable !== 1) err(file, obj, `minAvailable ${JSON.stringify(obj.spec?.minAvailable)}, want 1`);
    for (const { obj: w } of targets) {
      if (typeof obj.spec?.minAvailable === "number" && obj.spec.minAvailable >= (w.spec.replicas ?? 1)) {
        err(file, obj, `minAvailable ${obj.spec.minAvailable} >= ${w.metadata.name}'s replicas: no voluntary eviction could ever happen`);
      }
    }
  }
  if (byKind("PodDisruptionBudget").length === 0) errs.push("deploy/k8s: no PodDisruptionBudget");
  if (byKind("Deployment").length === 0) errs.push("deploy/k8s: no Deployment");
  return errs;
}

// proxyEnv returns the proxy container's environment (envFrom ConfigMaps, then env).
function proxyEnv(file, obj, c, configMaps, err) {
  const env = new Map();
  for (const from of c.envFrom ?? []) {
    if (!from.configMapRef) continue;
    const cm = configMaps.get(from.configMapRef.name);
    if (!cm) {
      err(file, obj, `container ${c.name}: envFrom ConfigMap ${from.configMapRef.name} is not defined`);
      continue;
    }
    for (const [k, v] of Object.entries(cm.data ?? {})) env.set(k, { value: v, from: `ConfigMap ${cm.metadata.name}` });
  }
  for (const e of c.env ?? []) env.set(e.name, { value: e.value, from: `container ${c.name}` });
  return env;
}

function checkProxyContainer(file, obj, c, pod, configMaps, ctx, err) {
  const env = proxyEnv(file, obj, c, configMaps, err);
  for (const [name, { from }] of env) {
    if (!ctx.proxyVars.has(name)) err(file, obj, `${from}: ${name} is not an agui-proxy variable (agui-proxy -h)`);
  }
  const val = (name) => env.get(name)?.value ?? ctx.proxyVars.get(name);
  const port = listenPort(val("AGUI_LISTEN"));
  if (port === undefined) err(file, obj, `AGUI_LISTEN ${JSON.stringify(val("AGUI_LISTEN"))} has no port`);
  if (!/^0\.0\.0\.0:|^:|^\[::\]:/.test(val("AGUI_LISTEN") ?? "")) {
    err(file, obj, `AGUI_LISTEN ${JSON.stringify(val("AGUI_LISTEN"))} is not reachable from outside the pod (listen on 0.0.0.0)`);
  }
  if (!(c.ports ?? []).some((p) => p.containerPort === port)) err(file, obj, `no container port ${port} (AGUI_LISTEN)`);
  const probes = [["livenessProbe", "/healthz"], ["readinessProbe", "/readyz"], ["startupProbe", "/healthz"]];
  for (const [probe, path] of probes) {
    const p = c[probe];
    if (!p) continue;
    if (p.httpGet?.path !== path) err(file, obj, `${probe} must GET ${path}, has ${JSON.stringify(p.httpGet?.path)}`);
    if (containerPort([c], p.httpGet?.port) !== port) err(file, obj, `${probe} port ${p.httpGet?.port} is not the listen port ${port}`);
  }
  if (!val("AGUI_REDIS_URL")) err(file, obj, "AGUI_REDIS_URL is empty: replicas would not share threads");
  const drain = durationSeconds(val("AGUI_DRAIN_TIMEOUT"));
  if (Number.isNaN(drain)) err(file, obj, `AGUI_DRAIN_TIMEOUT ${JSON.stringify(val("AGUI_DRAIN_TIMEOUT"))} is not a duration`);
  const sleep = c.lifecycle?.preStop?.sleep?.seconds;
  if (!(sleep > 0)) err(file, obj, "lifecycle.preStop.sleep.seconds must be set: endpoints must drop the pod before SIGTERM");
  const grace = pod.terminationGracePeriodSeconds ?? 30;
  // After SIGTERM the proxy drains for AGUI_DRAIN_TIMEOUT, then waits up to 5s for streams.
  const need = (sleep > 0 ? sleep : 0) + drain + 5;
  if (!(grace > need)) err(file, obj, `terminationGracePeriodSeconds ${grace} must exceed preStop ${sleep ?? 0}s + AGUI_DRAIN_TIMEOUT ${drain}s + 5s`);
  ctx.redisURLs?.push({ file, obj, url: val("AGUI_REDIS_URL") });
}

function checkRedis(file, obj, services, err) {
  const c = obj.spec.template.spec.containers.find((c) => /(^|\/)redis(:|@|$)/.test(c.image));
  const args = [...(c.command ?? []), ...(c.args ?? [])].join(" ");
  for (const [flag, want] of [["--appendonly", "yes"], ["--appendfsync", "everysec"], ["--maxmemory-policy", "noeviction"]]) {
    if (!new RegExp(`${flag}[ =]${want}(\\s|$)`).test(args)) err(file, obj, `redis must run with ${flag} ${want}`);
  }
  const claims = (obj.spec.volumeClaimTemplates ?? []).map((t) => t.metadata?.name);
  const data = (c.volumeMounts ?? []).find((m) => m.mountPath === "/data");
  if (!data || !claims.includes(data.name)) err(file, obj, "/data must be mounted from a volumeClaimTemplate (the AOF lives there)");
  const svc = services.find(({ obj: s }) => s.metadata.name === obj.spec.serviceName);
  if (!svc) err(file, obj, `serviceName ${obj.spec.serviceName} is not a defined Service`);
  else {
    if (svc.obj.spec?.clusterIP !== "None") err(file, obj, `Service ${svc.obj.metadata.name} must be headless (clusterIP: None)`);
    if (!matches(svc.obj.spec?.selector, obj.spec.template.metadata?.labels)) err(file, obj, `Service ${svc.obj.metadata.name} does not select its pods`);
  }
}

function checkKustomization(file, obj, dir, err) {
  const listed = obj.resources ?? [];
  for (const r of listed) {
    if (!existsSync(join(dir, r))) err(file, obj, `resource ${r} does not exist`);
  }
  for (const f of readdirSync(dir)) {
    if (/\.ya?ml$/.test(f) && f !== "kustomization.yaml" && !listed.includes(f)) err(file, obj, `${f} is not listed in resources`);
  }
}

// checkRedisURLs: the proxy's AGUI_REDIS_URL names a Service of the manifests and its port.
export function checkRedisURLs(urls, docs) {
  const errs = [];
  for (const { file, obj, url } of urls) {
    let u;
    try {
      u = new URL(url);
    } catch {
      errs.push(`${file}: ${obj.kind}/${obj.metadata.name}: AGUI_REDIS_URL ${JSON.stringify(url)} is not a URL`);
      continue;
    }
    const host = u.hostname.split(".")[0];
    const svc = docs.map((d) => d.obj).find((o) => o?.kind === "Service" && o.metadata?.name === host);
    if (!svc) {
      errs.push(`${file}: ${obj.kind}/${obj.metadata.name}: AGUI_REDIS_URL host ${u.hostname} is no Service of deploy/k8s (a managed Redis? then remove this check's Service too)`);
      continue;
    }
    const port = Number(u.port || 6379);
    if (!(svc.spec?.ports ?? []).some((p) => p.port === port)) {
      errs.push(`${file}: ${obj.kind}/${obj.metadata.name}: AGUI_REDIS_URL port ${port} is not a port of Service ${host}`);
    }
  }
  return errs;
}

// composeEnv returns a service's environment as a Map (list or map form).
function composeEnv(svc) {
  const env = new Map();
  const e = svc?.environment ?? {};
  if (Array.isArray(e)) {
    for (const kv of e) {
      const i = kv.indexOf("=");
      env.set(i < 0 ? kv : kv.slice(0, i), i < 0 ? "" : kv.slice(i + 1));
    }
  } else {
    for (const [k, v] of Object.entries(e)) env.set(k, v == null ? "" : String(v));
  }
  return env;
}

// checkCompose checks deploy/compose.yaml. ctx: {proxyVars, demoVars, deployDir}.
export function checkCompose(doc, ctx) {
  const errs = [];
  const err = (svc, msg) => errs.push(`compose.yaml: ${svc}: ${msg}`);
  const services = doc?.services ?? {};
  for (const name of ["proxy", "agent", "redis"]) if (!services[name]) err(name, "service missing");
  for (const [name, svc] of Object.entries(services)) {
    const test = svc.healthcheck?.test;
    if (!Array.isArray(test) || test.length < 2 || svc.healthcheck?.disable) err(name, "healthcheck.test is required");
    if (svc.build) {
      const df = resolve(ctx.deployDir, svc.build.context ?? ".", svc.build.dockerfile ?? "Dockerfile");
      if (!existsSync(df)) err(name, `build dockerfile ${df} does not exist`);
    }
  }
  const proxy = services.proxy;
  if (proxy) {
    const env = composeEnv(proxy);
    for (const k of env.keys()) if (!ctx.proxyVars.has(k)) err("proxy", `${k} is not an agui-proxy variable (agui-proxy -h)`);
    if (env.get("AGUI_REDIS_URL") !== "redis://redis:6379/0") err("proxy", `AGUI_REDIS_URL ${JSON.stringify(env.get("AGUI_REDIS_URL"))}, want redis://redis:6379/0`);
    if (env.get("AGUI_UPSTREAM") !== "http://agent:8000") err("proxy", `AGUI_UPSTREAM ${JSON.stringify(env.get("AGUI_UPSTREAM"))}, want http://agent:8000`);
    const listen = env.get("AGUI_LISTEN") ?? ctx.proxyVars.get("AGUI_LISTEN");
    const port = listenPort(listen);
    if (!/^0\.0\.0\.0:/.test(listen ?? "")) err("proxy", `AGUI_LISTEN ${JSON.stringify(listen)} is not reachable from other containers`);
    const test = (proxy.healthcheck?.test ?? []).join(" ");
    if (!new RegExp(`^CMD /usr/local/bin/agui-healthcheck http://127\\.0\\.0\\.1:${port}/(readyz|healthz)$`).test(test)) {
      err("proxy", `healthcheck ${JSON.stringify(test)} must run /usr/local/bin/agui-healthcheck on http://127.0.0.1:${port}/readyz or /healthz`);
    }
    for (const p of proxy.ports ?? []) {
      if (!String(p).endsWith(`:${port}`)) err("proxy", `port mapping ${p} does not reach the listen port ${port}`);
    }
    for (const dep of ["redis", "agent"]) {
      if (proxy.depends_on?.[dep]?.condition !== "service_healthy") err("proxy", `depends_on ${dep} must wait for service_healthy`);
    }
    const drain = durationSeconds(env.get("AGUI_DRAIN_TIMEOUT") ?? ctx.proxyVars.get("AGUI_DRAIN_TIMEOUT"));
    const grace = durationSeconds(proxy.stop_grace_period ?? "10s");
    if (!(grace > drain + 5)) err("proxy", `stop_grace_period ${proxy.stop_grace_period ?? "10s (default)"} must exceed AGUI_DRAIN_TIMEOUT ${drain}s + 5s`);
  }
  const agent = services.agent;
  if (agent) {
    const env = composeEnv(agent);
    for (const k of env.keys()) if (!ctx.demoVars.has(k)) err("agent", `${k} is not a demo-agent variable (demo-agent -h)`);
    if (listenPort(env.get("DEMO_LISTEN")) !== 8000 || !/^0\.0\.0\.0:/.test(env.get("DEMO_LISTEN") ?? "")) err("agent", "DEMO_LISTEN must be 0.0.0.0:8000 (AGUI_UPSTREAM is http://agent:8000)");
  }
  const redis = services.redis;
  if (redis) {
    const cmd = [].concat(redis.command ?? []).join(" ");
    for (const [flag, want] of [["--appendonly", "yes"], ["--appendfsync", "everysec"], ["--maxmemory-policy", "noeviction"]]) {
      if (!new RegExp(`${flag}[ =]${want}(\\s|$)`).test(cmd)) err("redis", `command must include ${flag} ${want}`);
    }
    if (!(redis.volumes ?? []).some((v) => String(v).endsWith(":/data"))) err("redis", "a volume must be mounted at /data (the AOF lives there)");
  }
  return errs;
}

// validateDeploy runs every check on a deploy/ directory and returns the problems found.
export async function validateDeploy({ deployDir, proxyVars, demoVars, rendered }) {
  const errs = [];
  const k8sDir = join(deployDir, "k8s");
  const docs = [];
  for (const f of readdirSync(k8sDir).filter((f) => /\.ya?ml$/.test(f)).sort()) {
    try {
      for (const obj of loadYAML(readFileSync(join(k8sDir, f), "utf8"), f)) docs.push({ file: `k8s/${f}`, obj });
    } catch (e) {
      errs.push(`k8s/${f}: ${e.message}`);
    }
  }
  const ctx = { proxyVars, kustomizeDir: k8sDir, redisURLs: [] };
  errs.push(...(await checkK8s(docs, ctx)));
  errs.push(...checkRedisURLs(ctx.redisURLs, docs));
  if (rendered != null) {
    const rdocs = loadYAML(rendered, "kustomize output").map((obj) => ({ file: "kustomize build", obj }));
    const rctx = { proxyVars, kustomizeDir: null, redisURLs: [] };
    errs.push(...(await checkK8s(rdocs, rctx)));
    errs.push(...checkRedisURLs(rctx.redisURLs, rdocs));
  }
  try {
    const [compose] = loadYAML(readFileSync(join(deployDir, "compose.yaml"), "utf8"), "compose.yaml");
    errs.push(...checkCompose(compose, { proxyVars, demoVars, deployDir }));
  } catch (e) {
    errs.push(`compose.yaml: ${e.message}`);
  }
  return errs;
}

async function main() {
  const { values } = parseArgs({
    options: {
      deploy: { type: "string", default: resolve(dirname(fileURLToPath(import.meta.url)), "..") },
      "proxy-help": { type: "string" },
      "demo-help": { type: "string" },
      rendered: { type: "string" },
    },
  });
  if (!values["proxy-help"] || !values["demo-help"]) {
    console.error("usage: node validate.mjs [--deploy DIR] --proxy-help FILE --demo-help FILE [--rendered FILE]");
    process.exit(2);
  }
  const proxyVars = parseHelp(readFileSync(values["proxy-help"], "utf8"));
  const demoVars = parseHelp(readFileSync(values["demo-help"], "utf8"));
  if (!proxyVars.has("AGUI_DRAIN_TIMEOUT") || !demoVars.has("DEMO_LISTEN")) {
    console.error("the -h outputs list no AGUI_DRAIN_TIMEOUT / DEMO_LISTEN: wrong files?");
    process.exit(2);
  }
  const rendered = values.rendered ? readFileSync(values.rendered, "utf8") : null;
  const errs = await validateDeploy({ deployDir: values.deploy, proxyVars, demoVars, rendered });
  for (const e of errs) console.error("FAIL " + e);
  const files = readdirSync(join(values.deploy, "k8s")).filter((f) => /\.ya?ml$/.test(f)).length;
  console.log(`validate: ${files} k8s files${rendered != null ? " + kustomize output" : ""} + compose.yaml, ${proxyVars.size} proxy variables: ${errs.length} problems`);
  process.exit(errs.length === 0 ? 0 : 1);
}

if (process.argv[1] === fileURLToPath(import.meta.url)) await main();
