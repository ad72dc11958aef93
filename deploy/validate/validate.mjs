// kubectl-free validation of deploy/: every Kubernetes manifest is checked against the
// Kubernetes JSON schemas shipped by the kubernetes-models package, then the structure that
// matters for agui-proxy is checked by hand (see checkK8s and checkCompose). The proxy's and
// the demo agent's environment variables come from their own -h output, so a renamed or
// removed variable fails here.
//
//   node validate.mjs --deploy DIR --proxy-help FILE --demo-help FILE [--rendered FILE]...
//
// --rendered (repeatable) validates the output of `kubectl kustomize DIR` of the base or an
// overlay (the documents as applied) in addition to the files. Prints one line per problem and exits 1 when there is any.
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
    const assigned = /^\s+((?:AGUI|DEMO)_[A-Z0-9_]+)=(\S*)/.exec(line); // agui-proxy's format: NAME=default  help
    if (assigned) {
      vars.set(assigned[1], assigned[2]);
      last = null;
      continue;
    }
    const name = /^\s+((?:AGUI|DEMO)_[A-Z0-9_]+)\b/.exec(line);
    if (name) {
      last = name[1];
      const inline = /\(default "([^"]*)"\)\s*$/.exec(line); // demo-agent's format
      vars.set(last, inline ? inline[1] : "");
      continue;
    }
    const def = /^\s+default: (.*)$/.exec(line); // a default on the line below its name
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
  return parseAllDocuments(text, { merge: true }).flatMap((d) => {
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
  for (const e of redisTopologyErrors(val)) err(file, obj, e);
  const drain = durationSeconds(val("AGUI_DRAIN_TIMEOUT"));
  if (Number.isNaN(drain)) err(file, obj, `AGUI_DRAIN_TIMEOUT ${JSON.stringify(val("AGUI_DRAIN_TIMEOUT"))} is not a duration`);
  const sleep = c.lifecycle?.preStop?.sleep?.seconds;
  if (!(sleep > 0)) err(file, obj, "lifecycle.preStop.sleep.seconds must be set: endpoints must drop the pod before SIGTERM");
  const grace = pod.terminationGracePeriodSeconds ?? 30;
  // After SIGTERM the proxy drains for AGUI_DRAIN_TIMEOUT, then waits up to 5s for streams.
  const need = (sleep > 0 ? sleep : 0) + drain + 5;
  if (!(grace > need)) err(file, obj, `terminationGracePeriodSeconds ${grace} must exceed preStop ${sleep ?? 0}s + AGUI_DRAIN_TIMEOUT ${drain}s + 5s`);
  if (val("AGUI_REDIS_URL")) ctx.redisURLs?.push({ file, obj, url: val("AGUI_REDIS_URL") });
}

// redisTopologyErrors checks the proxy's Redis settings (val: name -> value): exactly one of
// AGUI_REDIS_URL, AGUI_REDIS_CLUSTER_ADDRS and AGUI_REDIS_SENTINEL_ADDRS, addresses as
// host:port, a master name with sentinels.
export function redisTopologyErrors(val) {
  const set = ["AGUI_REDIS_URL", "AGUI_REDIS_CLUSTER_ADDRS", "AGUI_REDIS_SENTINEL_ADDRS"].filter((n) => val(n));
  if (set.length === 0) return ["AGUI_REDIS_URL is empty (and no AGUI_REDIS_CLUSTER_ADDRS or AGUI_REDIS_SENTINEL_ADDRS): replicas would not share threads"];
  if (set.length > 1) return [`${set.join(" and ")} are all set: the proxy takes exactly one Redis topology`];
  const errs = [];
  for (const name of ["AGUI_REDIS_CLUSTER_ADDRS", "AGUI_REDIS_SENTINEL_ADDRS"]) {
    for (const a of redisAddrs(val(name))) {
      if (!/^[A-Za-z0-9.-]+:\d+$/.test(a)) errs.push(`${name}: ${JSON.stringify(a)} is not host:port`);
    }
  }
  if (val("AGUI_REDIS_SENTINEL_ADDRS") && !val("AGUI_REDIS_SENTINEL_MASTER")) errs.push("AGUI_REDIS_SENTINEL_ADDRS without AGUI_REDIS_SENTINEL_MASTER");
  return errs;
}

const redisAddrs = (v) => (v ? String(v).split(",").map((a) => a.trim()) : []);

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

// checkCompose checks a Compose file of deploy/: compose.yaml (one Redis), compose.sentinel.yaml
// or compose.cluster.yaml; the topology is the one the proxy's environment names. ctx:
// {proxyVars, demoVars, deployDir, file (default "compose.yaml")}.
export function checkCompose(doc, ctx) {
  const errs = [];
  const file = ctx.file ?? "compose.yaml";
  const err = (svc, msg) => errs.push(`${file}: ${svc}: ${msg}`);
  const services = doc?.services ?? {};
  const proxy = services.proxy;
  const penv = composeEnv(proxy);
  const topology = penv.get("AGUI_REDIS_SENTINEL_ADDRS") ? "sentinel" : penv.get("AGUI_REDIS_CLUSTER_ADDRS") ? "cluster" : "single";
  for (const name of ["proxy", "agent", ...(topology === "single" ? ["redis"] : [])]) if (!services[name]) err(name, "service missing");
  // A one-shot service (restart "no") that the proxy waits for to complete needs no healthcheck.
  const oneShot = (name, svc) => svc.restart === "no" && proxy?.depends_on?.[name]?.condition === "service_completed_successfully";
  for (const [name, svc] of Object.entries(services)) {
    const test = svc.healthcheck?.test;
    if (!oneShot(name, svc) && (!Array.isArray(test) || test.length < 2 || svc.healthcheck?.disable)) err(name, "healthcheck.test is required");
    if (svc.build) {
      const df = resolve(ctx.deployDir, svc.build.context ?? ".", svc.build.dockerfile ?? "Dockerfile");
      if (!existsSync(df)) err(name, `build dockerfile ${df} does not exist`);
    }
  }
  if (proxy) {
    const env = penv;
    for (const k of env.keys()) if (!ctx.proxyVars.has(k)) err("proxy", `${k} is not an agui-proxy variable (agui-proxy -h)`);
    for (const e of redisTopologyErrors((n) => env.get(n))) err("proxy", e);
    if (topology === "single" && env.get("AGUI_REDIS_URL") !== "redis://redis:6379/0") err("proxy", `AGUI_REDIS_URL ${JSON.stringify(env.get("AGUI_REDIS_URL"))}, want redis://redis:6379/0`);
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
    for (const dep of [...(topology === "single" ? ["redis"] : []), "agent"]) {
      if (proxy.depends_on?.[dep]?.condition !== "service_healthy") err("proxy", `depends_on ${dep} must wait for service_healthy`);
    }
    const drain = durationSeconds(env.get("AGUI_DRAIN_TIMEOUT") ?? ctx.proxyVars.get("AGUI_DRAIN_TIMEOUT"));
    const grace = durationSeconds(proxy.stop_grace_period ?? "10s");
    if (!(grace > drain + 5)) err("proxy", `stop_grace_period ${proxy.stop_grace_period ?? "10s (default)"} must exceed AGUI_DRAIN_TIMEOUT ${drain}s + 5s`);
    if (topology === "sentinel") checkComposeSentinel(services, env, err);
    if (topology === "cluster") checkComposeCluster(services, env, err);
  }
  const agent = services.agent;
  if (agent) {
    const env = composeEnv(agent);
    for (const k of env.keys()) if (!ctx.demoVars.has(k)) err("agent", `${k} is not a demo-agent variable (demo-agent -h)`);
    if (listenPort(env.get("DEMO_LISTEN")) !== 8000 || !/^0\.0\.0\.0:/.test(env.get("DEMO_LISTEN") ?? "")) err("agent", "DEMO_LISTEN must be 0.0.0.0:8000 (AGUI_UPSTREAM is http://agent:8000)");
  }
  // Every Redis data node: AOF every second, no eviction, /data on a volume.
  for (const [name, svc] of Object.entries(services)) {
    const cmd = composeCommand(svc);
    if (!/^redis-server(\s|$)/.test(cmd)) continue;
    for (const [flag, want] of [["--appendonly", "yes"], ["--appendfsync", "everysec"], ["--maxmemory-policy", "noeviction"]]) {
      if (!new RegExp(`${flag}[ =]${want}(\\s|$)`).test(cmd)) err(name, `command must include ${flag} ${want}`);
    }
    if (!(svc.volumes ?? []).some((v) => String(v).endsWith(":/data"))) err(name, "a volume must be mounted at /data (the AOF lives there)");
  }
  if (topology === "single" && services.redis && !/^redis-server(\s|$)/.test(composeCommand(services.redis))) err("redis", "command must include --appendonly yes (run redis-server)");
  return errs;
}

const composeCommand = (svc) => [].concat(svc?.command ?? []).join(" ");

// checkComposeSentinel: every sentinel address is a service running redis-sentinel on that
// port and monitoring AGUI_REDIS_SENTINEL_MASTER on a data service with a quorum that is a
// majority of the sentinels; a data service replicates that master; the proxy waits for each
// sentinel to be healthy.
function checkComposeSentinel(services, env, err) {
  const addrs = redisAddrs(env.get("AGUI_REDIS_SENTINEL_ADDRS"));
  if (addrs.length < 3) err("proxy", `AGUI_REDIS_SENTINEL_ADDRS lists ${addrs.length} sentinels; run at least 3 (a majority must agree on a failover)`);
  const master = env.get("AGUI_REDIS_SENTINEL_MASTER");
  const monitored = new Set();
  for (const a of addrs) {
    const [host, port] = a.split(":");
    const svc = services[host];
    if (!svc) {
      err("proxy", `sentinel ${a}: no service ${host}`);
      continue;
    }
    const cmd = composeCommand(svc);
    if (!/redis-sentinel|--sentinel/.test(cmd) || !new RegExp(`port ${port}\\b`).test(cmd)) err(host, `does not run redis-sentinel on port ${port}`);
    const m = new RegExp(`sentinel monitor (\\S+) (\\S+) (\\d+) (\\d+)`).exec(cmd);
    if (!m || m[1] !== master) {
      err(host, `does not monitor ${JSON.stringify(master)} (AGUI_REDIS_SENTINEL_MASTER)`);
      continue;
    }
    if (!services[m[2]] || !/^redis-server(\s|$)/.test(composeCommand(services[m[2]])) || m[3] !== "6379") err(host, `monitors ${m[2]}:${m[3]}, not a redis-server service on 6379`);
    const quorum = Number(m[4]);
    if (!(quorum > addrs.length / 2 && quorum <= addrs.length)) err(host, `quorum ${quorum} is not a majority of the ${addrs.length} sentinels`);
    monitored.add(m[2]);
    if (env && services.proxy.depends_on?.[host]?.condition !== "service_healthy") err("proxy", `depends_on ${host} must wait for service_healthy`);
  }
  for (const m of monitored) {
    const replicas = Object.entries(services).filter(([, svc]) => new RegExp(`--replicaof ${m} 6379(\\s|$)`).test(composeCommand(svc)));
    if (replicas.length === 0) err(m, "no service replicates this master (--replicaof): a failover would have nothing to promote");
  }
}

// checkComposeCluster: every seed address is the fixed address of a cluster-enabled data
// service; there are at least 6 of those (3 masters with a replica each); a one-shot service
// creates the cluster from all of them with one replica per master, and the proxy waits for it.
function checkComposeCluster(services, env, err) {
  const ipOf = (svc) => Object.values(svc.networks ?? {}).map((n) => n?.ipv4_address).find(Boolean);
  const nodes = Object.entries(services).filter(([, svc]) => /^redis-server(\s|$)/.test(composeCommand(svc)));
  for (const [name, svc] of nodes) {
    if (!/--cluster-enabled[ =]yes(\s|$)/.test(composeCommand(svc))) err(name, "command must include --cluster-enabled yes");
    if (!ipOf(svc)) err(name, "needs a fixed networks.*.ipv4_address (cluster nodes announce their address)");
  }
  if (nodes.length < 6) err("proxy", `${nodes.length} cluster nodes; run at least 6 (3 masters, one replica each)`);
  for (const a of redisAddrs(env.get("AGUI_REDIS_CLUSTER_ADDRS"))) {
    const [ip, port] = a.split(":");
    if (port !== "6379" || !nodes.some(([, svc]) => ipOf(svc) === ip)) err("proxy", `AGUI_REDIS_CLUSTER_ADDRS ${a} is not a cluster node's address and port`);
  }
  const init = Object.entries(services).find(([, svc]) => /--cluster create/.test(composeCommand(svc)));
  if (!init) {
    err("proxy", "no service runs redis-cli --cluster create: the cluster is never formed");
    return;
  }
  const [iname, isvc] = init;
  const icmd = composeCommand(isvc);
  for (const [name, svc] of nodes) {
    if (!icmd.includes(`${ipOf(svc)}:6379`)) err(iname, `--cluster create does not include ${name} (${ipOf(svc)}:6379)`);
  }
  if (!/--cluster-replicas 1(\s|$)/.test(icmd)) err(iname, "--cluster create must give every master a replica (--cluster-replicas 1)");
  if (services.proxy.depends_on?.[iname]?.condition !== "service_completed_successfully") err("proxy", `depends_on ${iname} must wait for service_completed_successfully`);
  if (isvc.restart !== "no") err(iname, `restart ${JSON.stringify(isvc.restart)}: a one-shot service must have restart "no"`);
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
  for (const [i, text] of [].concat(rendered ?? []).entries()) {
    const rdocs = loadYAML(text, "kustomize output").map((obj) => ({ file: `kustomize build #${i + 1}`, obj }));
    const rctx = { proxyVars, kustomizeDir: null, redisURLs: [] };
    errs.push(...(await checkK8s(rdocs, rctx)));
    errs.push(...checkRedisURLs(rctx.redisURLs, rdocs));
  }
  for (const f of composeFiles(deployDir)) {
    try {
      const [compose] = loadYAML(readFileSync(join(deployDir, f), "utf8"), f);
      errs.push(...checkCompose(compose, { proxyVars, demoVars, deployDir, file: f }));
    } catch (e) {
      errs.push(`${f}: ${e.message}`);
    }
  }
  if (!composeFiles(deployDir).includes("compose.yaml")) errs.push("compose.yaml: missing");
  for (const dir of overlayDirs(deployDir)) {
    try {
      const { docs: odocs, errs: oerrs } = renderOverlay(join(deployDir, dir), dir);
      errs.push(...oerrs);
      const octx = { proxyVars, kustomizeDir: null, redisURLs: [] };
      errs.push(...(await checkK8s(odocs, octx)));
      errs.push(...checkRedisURLs(octx.redisURLs, odocs));
    } catch (e) {
      errs.push(`${dir}: ${e.message}`);
    }
  }
  return errs;
}

// composeFiles lists deploy/compose.yaml and its variants compose.<topology>.yaml.
export const composeFiles = (deployDir) => readdirSync(deployDir).filter((f) => /^compose(\.[a-z]+)?\.yaml$/.test(f)).sort();

// overlayDirs lists the kustomize overlays of deploy/: the k8s-* directories.
export const overlayDirs = (deployDir) => readdirSync(deployDir).filter((f) => /^k8s-[a-z]+$/.test(f) && existsSync(join(deployDir, f, "kustomization.yaml"))).sort();

// renderOverlay applies a kustomize overlay the way `kubectl kustomize` would for the features
// deploy/'s overlays use: resources that are directories (their kustomization's resources,
// recursively) or files, then patches (inline or by path) that are strategic merge patches:
// `$patch: delete` removes the object, maps merge, a null value removes the key, lists of
// objects with a name merge by name, other lists are replaced. Every patch must hit an object
// and every YAML file of the overlay must be used. Returns the objects as {file, obj} and the
// problems found.
export function renderOverlay(dir, label) {
  const errs = [];
  const docs = [];
  const used = new Set(["kustomization.yaml"]);
  const [k] = loadYAML(readFileSync(join(dir, "kustomization.yaml"), "utf8"), `${label}/kustomization.yaml`);
  const load = (d, rel) => {
    const kfile = join(d, "kustomization.yaml");
    if (existsSync(kfile)) {
      const [kk] = loadYAML(readFileSync(kfile, "utf8"), kfile);
      for (const r of kk.resources ?? []) load(join(d, r), `${rel}/${r}`);
      return;
    }
    if (!existsSync(d)) {
      errs.push(`${label}/kustomization.yaml: resource ${rel} does not exist`);
      return;
    }
    for (const obj of loadYAML(readFileSync(d, "utf8"), rel)) docs.push({ file: rel, obj });
  };
  for (const r of k.resources ?? []) {
    if (!r.includes("/")) used.add(r);
    load(join(dir, r), `${label}/${r}`);
  }
  for (const p of k.patches ?? []) {
    let patches;
    if (p.path) {
      used.add(p.path);
      if (!existsSync(join(dir, p.path))) {
        errs.push(`${label}/kustomization.yaml: patch ${p.path} does not exist`);
        continue;
      }
      patches = loadYAML(readFileSync(join(dir, p.path), "utf8"), p.path);
    } else {
      patches = loadYAML(p.patch ?? "", "inline patch");
    }
    for (const patch of patches) {
      const i = docs.findIndex(({ obj }) => obj.kind === patch.kind && obj.metadata?.name === patch.metadata?.name);
      if (i < 0) {
        errs.push(`${label}: patch ${patch.kind}/${patch.metadata?.name} matches no object`);
        continue;
      }
      if (patch.$patch === "delete") docs.splice(i, 1);
      else docs[i] = { file: `${label}/${p.path ?? "inline patch"}`, obj: mergePatch(docs[i].obj, patch) };
    }
  }
  for (const f of readdirSync(dir)) {
    if (/\.ya?ml$/.test(f) && !used.has(f)) errs.push(`${label}: ${f} is not used by kustomization.yaml`);
  }
  return { docs, errs };
}

// mergePatch is a strategic merge of patch into obj (see renderOverlay); obj is not changed.
export function mergePatch(obj, patch) {
  if (Array.isArray(patch)) {
    if (!Array.isArray(obj) || !patch.every((p) => p && typeof p === "object" && "name" in p)) return structuredClone(patch);
    const out = structuredClone(obj);
    for (const p of patch) {
      const i = out.findIndex((o) => o?.name === p.name);
      if (i < 0) out.push(structuredClone(p));
      else out[i] = mergePatch(out[i], p);
    }
    return out;
  }
  if (patch === null || typeof patch !== "object") return patch;
  const out = obj && typeof obj === "object" && !Array.isArray(obj) ? structuredClone(obj) : {};
  for (const [key, v] of Object.entries(patch)) {
    if (v === null) delete out[key];
    else out[key] = mergePatch(out[key], v);
  }
  return out;
}

async function main() {
  const { values } = parseArgs({
    options: {
      deploy: { type: "string", default: resolve(dirname(fileURLToPath(import.meta.url)), "..") },
      "proxy-help": { type: "string" },
      "demo-help": { type: "string" },
      rendered: { type: "string", multiple: true },
    },
  });
  if (!values["proxy-help"] || !values["demo-help"]) {
    console.error("usage: node validate.mjs [--deploy DIR] --proxy-help FILE --demo-help FILE [--rendered FILE]...");
    process.exit(2);
  }
  const proxyVars = parseHelp(readFileSync(values["proxy-help"], "utf8"));
  const demoVars = parseHelp(readFileSync(values["demo-help"], "utf8"));
  if (!proxyVars.has("AGUI_DRAIN_TIMEOUT") || !demoVars.has("DEMO_LISTEN")) {
    console.error("the -h outputs list no AGUI_DRAIN_TIMEOUT / DEMO_LISTEN: wrong files?");
    process.exit(2);
  }
  const rendered = (values.rendered ?? []).map((f) => readFileSync(f, "utf8"));
  const errs = await validateDeploy({ deployDir: values.deploy, proxyVars, demoVars, rendered });
  for (const e of errs) console.error("FAIL " + e);
  const files = readdirSync(join(values.deploy, "k8s")).filter((f) => /\.ya?ml$/.test(f)).length;
  const overlays = overlayDirs(values.deploy);
  console.log(`validate: ${files} k8s files${rendered.length > 0 ? ` + ${rendered.length} kustomize outputs` : ""}, overlays ${overlays.join(" ")}, ${composeFiles(values.deploy).join(" ")}, ${proxyVars.size} proxy variables: ${errs.length} problems`);
  process.exit(errs.length === 0 ? 0 : 1);
}

if (process.argv[1] === fileURLToPath(import.meta.url)) await main();
