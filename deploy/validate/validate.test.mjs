// node --test deploy/validate/: proves every check of validate.mjs can fail. Each case breaks
// one thing in a copy of the real manifests and requires the matching problem to be reported;
// the unbroken copy must report none. The -h outputs come from PROXY_HELP / DEMO_HELP (files
// written by scripts/validate-deploy.sh).
import assert from "node:assert/strict";
import { cpSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { checkCompose, checkK8s, checkRedisURLs, durationSeconds, loadYAML, mergePatch, parseHelp, renderOverlay } from "./validate.mjs";

const deployDir = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const k8sDir = join(deployDir, "k8s");
if (!process.env.PROXY_HELP || !process.env.DEMO_HELP) {
  throw new Error("set PROXY_HELP and DEMO_HELP to files holding `agui-proxy -h` and `demo-agent -h` (scripts/validate-deploy.sh does)");
}
const proxyVars = parseHelp(readFileSync(process.env.PROXY_HELP, "utf8"));
const demoVars = parseHelp(readFileSync(process.env.DEMO_HELP, "utf8"));

function load() {
  const docs = [];
  for (const f of readdirSync(k8sDir).filter((f) => /\.ya?ml$/.test(f)).sort()) {
    for (const obj of loadYAML(readFileSync(join(k8sDir, f), "utf8"), f)) docs.push({ file: `k8s/${f}`, obj });
  }
  const [compose] = loadYAML(readFileSync(join(deployDir, "compose.yaml"), "utf8"), "compose.yaml");
  return { docs, compose };
}

async function problems({ docs, compose }) {
  const ctx = { proxyVars, kustomizeDir: k8sDir, redisURLs: [] };
  return [
    ...(await checkK8s(docs, ctx)),
    ...checkRedisURLs(ctx.redisURLs, docs),
    ...checkCompose(compose, { proxyVars, demoVars, deployDir }),
  ];
}

const kind = (docs, k, name) => docs.find(({ obj }) => obj.kind === k && (!name || obj.metadata.name === name)).obj;
const proxyContainer = (docs) => kind(docs, "Deployment").spec.template.spec.containers[0];
const redisContainer = (docs) => kind(docs, "StatefulSet").spec.template.spec.containers[0];

test("the real deploy/ has no problem", async () => {
  assert.deepEqual(await problems(load()), []);
});

const cases = [
  ["schema: wrong type", (d) => { kind(d.docs, "Deployment").spec.replicas = "2"; }, "spec/replicas must be integer"],
  ["schema: unknown kind", (d) => { d.docs.push({ file: "x.yaml", obj: { apiVersion: "v1", kind: "Pdo", metadata: { name: "x" } } }); }, "unknown kind Pdo"],
  ["kustomization: missing resource", (d) => { kind(d.docs, "Kustomization").resources.push("missing.yaml"); }, "resource missing.yaml does not exist"],
  ["kustomization: unlisted file", (d) => { const k = kind(d.docs, "Kustomization"); k.resources = k.resources.filter((r) => r !== "pdb.yaml"); }, "pdb.yaml is not listed"],
  ["selector does not match labels", (d) => { kind(d.docs, "Deployment").spec.selector.matchLabels["app.kubernetes.io/name"] = "other"; }, "matchLabels must be non-empty and match"],
  ["one replica", (d) => { kind(d.docs, "Deployment").spec.replicas = 1; }, "run at least 2 proxies"],
  ["liveness on the wrong path", (d) => { proxyContainer(d.docs).livenessProbe.httpGet.path = "/health"; }, "livenessProbe must GET /healthz"],
  ["readiness on /healthz", (d) => { proxyContainer(d.docs).readinessProbe.httpGet.path = "/healthz"; }, "readinessProbe must GET /readyz"],
  ["probe on another port", (d) => { proxyContainer(d.docs).readinessProbe.httpGet.port = 9090; }, "readinessProbe port 9090 is not the listen port 8080"],
  ["listen port differs from container port", (d) => { kind(d.docs, "ConfigMap").data.AGUI_LISTEN = "0.0.0.0:9000"; }, "no container port 9000"],
  ["listen on loopback", (d) => { kind(d.docs, "ConfigMap").data.AGUI_LISTEN = "127.0.0.1:8080"; }, "not reachable from outside the pod"],
  ["unknown variable", (d) => { kind(d.docs, "ConfigMap").data.AGUI_DRAIN = "30s"; }, "AGUI_DRAIN is not an agui-proxy variable"],
  ["unknown variable in env", (d) => { proxyContainer(d.docs).env = [{ name: "AGUI_REDIS", value: "x" }]; }, "AGUI_REDIS is not an agui-proxy variable"],
  ["missing ConfigMap", (d) => { proxyContainer(d.docs).envFrom[0].configMapRef.name = "nope"; }, "envFrom ConfigMap nope is not defined"],
  ["no Redis URL", (d) => { delete kind(d.docs, "ConfigMap").data.AGUI_REDIS_URL; }, "AGUI_REDIS_URL is empty"],
  ["Redis URL names no Service", (d) => { kind(d.docs, "ConfigMap").data.AGUI_REDIS_URL = "redis://cache:6379/0"; }, "host cache is no Service"],
  ["Redis URL on the wrong port", (d) => { kind(d.docs, "ConfigMap").data.AGUI_REDIS_URL = "redis://redis:6380/0"; }, "port 6380 is not a port of Service redis"],
  ["grace period below drain", (d) => { kind(d.docs, "ConfigMap").data.AGUI_DRAIN_TIMEOUT = "1m"; }, "terminationGracePeriodSeconds 60 must exceed preStop 10s + AGUI_DRAIN_TIMEOUT 60s"],
  ["bad drain duration", (d) => { kind(d.docs, "ConfigMap").data.AGUI_DRAIN_TIMEOUT = "30"; }, "AGUI_DRAIN_TIMEOUT \"30\" is not a duration"],
  ["no preStop", (d) => { delete proxyContainer(d.docs).lifecycle; }, "preStop.sleep.seconds must be set"],
  ["root filesystem writable", (d) => { proxyContainer(d.docs).securityContext.readOnlyRootFilesystem = false; }, "readOnlyRootFilesystem must be true"],
  ["may run as root", (d) => { delete proxyContainer(d.docs).securityContext.runAsNonRoot; delete kind(d.docs, "Deployment").spec.template.spec.securityContext.runAsNonRoot; }, "runAsNonRoot must be true"],
  ["privilege escalation", (d) => { delete redisContainer(d.docs).securityContext.allowPrivilegeEscalation; }, "allowPrivilegeEscalation must be false"],
  ["no requests", (d) => { delete proxyContainer(d.docs).resources.requests; }, "resources.requests.cpu and .memory are required"],
  ["no memory limit", (d) => { delete redisContainer(d.docs).resources.limits; }, "resources.limits.memory is required"],
  ["Service targets no container port", (d) => { kind(d.docs, "Service", "agui-proxy").spec.ports[0].targetPort = "web"; }, "targetPort web is not a container port"],
  ["Service selects nothing", (d) => { kind(d.docs, "Service", "agui-proxy").spec.selector = { app: "x" }; }, "selector matches no workload"],
  ["PDB minAvailable 2", (d) => { kind(d.docs, "PodDisruptionBudget").spec.minAvailable = 2; }, "minAvailable 2, want 1"],
  ["PDB selects nothing", (d) => { kind(d.docs, "PodDisruptionBudget").spec.selector.matchLabels = { app: "x" }; }, "selector matches no workload"],
  ["no PDB", (d) => { d.docs = d.docs.filter(({ obj }) => obj.kind !== "PodDisruptionBudget"); }, "no PodDisruptionBudget"],
  ["Redis without AOF", (d) => { const c = redisContainer(d.docs); c.args[c.args.indexOf("--appendonly") + 1] = "no"; }, "redis must run with --appendonly yes"],
  ["Redis may evict", (d) => { const c = redisContainer(d.docs); c.args[c.args.indexOf("--maxmemory-policy") + 1] = "allkeys-lru"; }, "--maxmemory-policy noeviction"],
  ["Redis data not persistent", (d) => { kind(d.docs, "StatefulSet").spec.volumeClaimTemplates[0].metadata.name = "other"; }, "/data must be mounted from a volumeClaimTemplate"],
  ["Redis Service not headless", (d) => { delete kind(d.docs, "Service", "redis").spec.clusterIP; }, "must be headless"],
  ["duplicate object", (d) => { d.docs.push({ file: "again.yaml", obj: structuredClone(kind(d.docs, "Service", "redis")) }); }, "defined twice"],
  ["compose: no healthcheck", (d) => { delete d.compose.services.agent.healthcheck; }, "agent: healthcheck.test is required"],
  ["compose: proxy probes the wrong port", (d) => { d.compose.services.proxy.healthcheck.test[2] = "http://127.0.0.1:9000/readyz"; }, "must run /usr/local/bin/agui-healthcheck on http://127.0.0.1:8080"],
  ["compose: wrong Redis URL", (d) => { d.compose.services.proxy.environment.AGUI_REDIS_URL = "redis://localhost:6379/0"; }, "want redis://redis:6379/0"],
  ["compose: wrong upstream", (d) => { d.compose.services.proxy.environment.AGUI_UPSTREAM = "http://agent:9000"; }, "want http://agent:8000"],
  ["compose: unknown proxy variable", (d) => { d.compose.services.proxy.environment.AGUI_REDIS_ADDR = "redis:6379"; }, "AGUI_REDIS_ADDR is not an agui-proxy variable"],
  ["compose: unknown demo variable", (d) => { d.compose.services.agent.environment.DEMO_PORT = "8000"; }, "DEMO_PORT is not a demo-agent variable"],
  ["compose: Redis without AOF", (d) => { d.compose.services.redis.command = ["redis-server"]; }, "command must include --appendonly yes"],
  ["compose: Redis without volume", (d) => { delete d.compose.services.redis.volumes; }, "mounted at /data"],
  ["compose: stop grace below drain", (d) => { d.compose.services.proxy.stop_grace_period = "30s"; }, "stop_grace_period 30s must exceed"],
  ["compose: no wait for Redis", (d) => { d.compose.services.proxy.depends_on.redis.condition = "service_started"; }, "depends_on redis must wait for service_healthy"],
  ["compose: missing Dockerfile", (d) => { d.compose.services.proxy.build.dockerfile = "deploy/Containerfile"; }, "Containerfile does not exist"],
];

for (const [name, mutate, want] of cases) {
  test(name, async () => {
    const d = load();
    mutate(d);
    const got = await problems(d);
    assert.ok(got.some((p) => p.includes(want)), `problems = ${JSON.stringify(got, null, 1)}, want one containing ${JSON.stringify(want)}`);
  });
}

test("durationSeconds", () => {
  const cases = [["30s", 30], ["1m30s", 90], ["1.5h", 5400], ["500ms", 0.5], ["0", 0], ["", NaN], ["30", NaN], ["s", NaN], ["1m x", NaN]];
  for (const [in_, want] of cases) assert.ok(Object.is(durationSeconds(in_), want), `durationSeconds(${JSON.stringify(in_)}) = ${durationSeconds(in_)}, want ${want}`);
});

test("parseHelp reads defaults of both help formats", () => {
  assert.equal(proxyVars.get("AGUI_DRAIN_TIMEOUT"), "30s");
  assert.equal(proxyVars.get("AGUI_REDIS_URL"), "");
  assert.equal(demoVars.get("DEMO_LISTEN"), "127.0.0.1:8000");
});

// The Compose variants (Sentinel, Cluster): each mutation of a copy must be reported.
const loadCompose = (f) => loadYAML(readFileSync(join(deployDir, f), "utf8"), f)[0];
const composeProblems = (f, c) => checkCompose(c, { proxyVars, demoVars, deployDir, file: f });
const sentinelEnv = (c) => c.services.proxy.environment;
const initCmd = (c) => c.services["redis-cluster-init"].command;

for (const f of ["compose.sentinel.yaml", "compose.cluster.yaml"]) {
  test(`the real ${f} has no problem`, () => {
    assert.deepEqual(composeProblems(f, loadCompose(f)), []);
  });
}

const variantCases = [
  ["compose.sentinel.yaml", "sentinel: two sentinels", (c) => { sentinelEnv(c).AGUI_REDIS_SENTINEL_ADDRS = "sentinel-1:26379,sentinel-2:26379"; }, "run at least 3"],
  ["compose.sentinel.yaml", "sentinel: another master name", (c) => { sentinelEnv(c).AGUI_REDIS_SENTINEL_MASTER = "other"; }, 'does not monitor "other"'],
  ["compose.sentinel.yaml", "sentinel: no master name", (c) => { delete sentinelEnv(c).AGUI_REDIS_SENTINEL_MASTER; }, "without AGUI_REDIS_SENTINEL_MASTER"],
  ["compose.sentinel.yaml", "sentinel: unknown sentinel", (c) => { sentinelEnv(c).AGUI_REDIS_SENTINEL_ADDRS = "sentinel-1:26379,sentinel-2:26379,sentinel-9:26379"; }, "no service sentinel-9"],
  ["compose.sentinel.yaml", "sentinel: wrong port", (c) => { sentinelEnv(c).AGUI_REDIS_SENTINEL_ADDRS = "sentinel-1:26380,sentinel-2:26379,sentinel-3:26379"; }, "does not run redis-sentinel on port 26380"],
  ["compose.sentinel.yaml", "sentinel: quorum of one", (c) => { c.services["sentinel-1"] = { ...c.services["sentinel-1"], command: c.services["sentinel-1"].command.map((x) => x.replace("6379 2", "6379 1")) }; }, "quorum 1 is not a majority"],
  ["compose.sentinel.yaml", "sentinel: no replica", (c) => { c.services["redis-2"].command = c.services["redis-1"].command; }, "no service replicates this master"],
  ["compose.sentinel.yaml", "sentinel: URL too", (c) => { sentinelEnv(c).AGUI_REDIS_URL = "redis://redis-1:6379/0"; }, "are all set"],
  ["compose.sentinel.yaml", "sentinel: proxy does not wait", (c) => { delete c.services.proxy.depends_on["sentinel-2"]; }, "depends_on sentinel-2 must wait for service_healthy"],
  ["compose.sentinel.yaml", "sentinel: data node without AOF", (c) => { c.services["redis-2"].command = ["redis-server", "--replicaof", "redis-1", "6379"]; }, "redis-2: command must include --appendonly yes"],
  ["compose.cluster.yaml", "cluster: seed is no node", (c) => { sentinelEnv(c).AGUI_REDIS_CLUSTER_ADDRS = "172.28.0.99:6379"; }, "172.28.0.99:6379 is not a cluster node's address"],
  ["compose.cluster.yaml", "cluster: seed not host:port", (c) => { sentinelEnv(c).AGUI_REDIS_CLUSTER_ADDRS = "172.28.0.11"; }, "is not host:port"],
  ["compose.cluster.yaml", "cluster: node not cluster-enabled", (c) => { c.services["redis-4"].command = ["redis-server", "--appendonly", "yes", "--appendfsync", "everysec", "--maxmemory-policy", "noeviction"]; }, "redis-4: command must include --cluster-enabled yes"],
  ["compose.cluster.yaml", "cluster: node without fixed address", (c) => { delete c.services["redis-5"].networks; }, "redis-5: needs a fixed"],
  ["compose.cluster.yaml", "cluster: node left out of create", (c) => { c.services["redis-cluster-init"].command = initCmd(c).map((x) => x.replace(" 172.28.0.16:6379", "")); }, "does not include redis-6"],
  ["compose.cluster.yaml", "cluster: no replicas", (c) => { c.services["redis-cluster-init"].command = initCmd(c).map((x) => x.replace("--cluster-replicas 1", "--cluster-replicas 0")); }, "--cluster-replicas 1"],
  ["compose.cluster.yaml", "cluster: never formed", (c) => { delete c.services["redis-cluster-init"]; delete c.services.proxy.depends_on["redis-cluster-init"]; }, "the cluster is never formed"],
  ["compose.cluster.yaml", "cluster: proxy does not wait", (c) => { c.services.proxy.depends_on["redis-cluster-init"].condition = "service_started"; }, "must wait for service_completed_successfully"],
  ["compose.cluster.yaml", "cluster: init restarts", (c) => { c.services["redis-cluster-init"].restart = "on-failure"; }, "healthcheck.test is required"],
  ["compose.cluster.yaml", "cluster: five nodes", (c) => { delete c.services["redis-6"]; }, "5 cluster nodes"],
];

for (const [f, name, mutate, want] of variantCases) {
  test(name, () => {
    const c = loadCompose(f);
    mutate(c);
    const got = composeProblems(f, c);
    assert.ok(got.some((p) => p.includes(want)), `problems = ${JSON.stringify(got, null, 1)}, want one containing ${JSON.stringify(want)}`);
  });
}

// The kustomize overlays, rendered from a copy of deploy/ changed on disk.
async function overlayProblems(dir, edit) {
  const tmp = mkdtempSync(join(tmpdir(), "deploy-"));
  try {
    cpSync(k8sDir, join(tmp, "k8s"), { recursive: true });
    cpSync(join(deployDir, dir), join(tmp, dir), { recursive: true });
    edit?.(join(tmp, dir));
    const { docs, errs } = renderOverlay(join(tmp, dir), dir);
    const ctx = { proxyVars, kustomizeDir: null, redisURLs: [] };
    return [...errs, ...(await checkK8s(docs, ctx)), ...checkRedisURLs(ctx.redisURLs, docs)];
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
}
const replaceIn = (file, from, to) => writeFileSync(file, readFileSync(file, "utf8").replace(from, to));

for (const dir of ["k8s-sentinel", "k8s-cluster"]) {
  test(`the real ${dir} overlay has no problem`, async () => {
    assert.deepEqual(await overlayProblems(dir), []);
  });
}

const overlayCases = [
  ["k8s-cluster", "overlay: URL left in place", (d) => replaceIn(join(d, "configmap.yaml"), "AGUI_REDIS_URL: null", ""), "are all set"],
  ["k8s-cluster", "overlay: address not host:port", (d) => replaceIn(join(d, "configmap.yaml"), '"redis-cluster:6379"', '"redis-cluster"'), "is not host:port"],
  ["k8s-sentinel", "overlay: no master name", (d) => replaceIn(join(d, "configmap.yaml"), /\n.*AGUI_REDIS_SENTINEL_MASTER.*/, ""), "without AGUI_REDIS_SENTINEL_MASTER"],
  ["k8s-sentinel", "overlay: patch hits nothing", (d) => replaceIn(join(d, "kustomization.yaml"), "kind: StatefulSet", "kind: DaemonSet"), "patch DaemonSet/redis matches no object"],
  ["k8s-sentinel", "overlay: unused file", (d) => writeFileSync(join(d, "extra.yaml"), "a: 1\n"), "extra.yaml is not used"],
  ["k8s-sentinel", "overlay: unknown variable in the env patch", (d) => replaceIn(join(d, "deployment.yaml"), "AGUI_REDIS_PASSWORD", "AGUI_REDIS_PASS"), "AGUI_REDIS_PASS is not an agui-proxy variable"],
  ["k8s-cluster", "overlay: missing base", (d) => replaceIn(join(d, "kustomization.yaml"), "../k8s", "../k8s-base"), "resource"],
];

for (const [dir, name, edit, want] of overlayCases) {
  test(name, async () => {
    const got = await overlayProblems(dir, edit);
    assert.ok(got.some((p) => p.includes(want)), `problems = ${JSON.stringify(got, null, 1)}, want one containing ${JSON.stringify(want)}`);
  });
}

test("mergePatch: maps merge, null deletes, named lists merge by name, other lists are replaced", () => {
  const base = { a: { b: 1, c: 2 }, l: [{ name: "x", v: 1 }, { name: "y", v: 2 }], s: [1, 2] };
  const got = mergePatch(base, { a: { c: null, d: 3 }, l: [{ name: "y", w: 4 }, { name: "z" }], s: [9] });
  assert.deepEqual(got, { a: { b: 1, d: 3 }, l: [{ name: "x", v: 1 }, { name: "y", v: 2, w: 4 }, { name: "z" }], s: [9] });
  assert.deepEqual(base.a, { b: 1, c: 2 }, "the base is not changed");
});
