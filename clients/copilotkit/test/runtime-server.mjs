// One CopilotKit runtime instance (the real @copilotkit/runtime v2 from npm) whose agent runs
// through agui-proxy with AguiProxyAgentRunner, served over node:http on a free port. The tests
// start several of these as separate processes and kill them, as a deployment restarts them.
//
// Usage: node runtime-server.mjs --proxy http://127.0.0.1:8080/ [--identity-header x-agui-user]
//        [--bind fetch|node]  (fetch: runner.bind on the fetch handler; node: runner.runWith(req.headers)
//        around the node:http listener, as an Express middleware would)
// Prints "listening <url>" once it serves; exits on SIGTERM/SIGINT.
import { createServer } from "node:http";
import { parseArgs } from "node:util";
import { HttpAgent } from "@ag-ui/client";
import { CopilotRuntime, createCopilotRuntimeHandler } from "@copilotkit/runtime/v2";
import { createCopilotNodeHandler } from "@copilotkit/runtime/v2/node";
import { AguiProxyAgentRunner } from "../dist/index.mjs";

const { values } = parseArgs({
  options: {
    proxy: { type: "string" },
    "identity-header": { type: "string" },
    "base-path": { type: "string", default: "/api/copilotkit" },
    bind: { type: "string", default: "fetch" },
  },
});
if (!values.proxy) {
  console.error("runtime-server: --proxy is required");
  process.exit(2);
}

const agents = { default: new HttpAgent({ url: values.proxy }) };
const runner = new AguiProxyAgentRunner({ agents, identityHeader: values["identity-header"] });
const runtime = new CopilotRuntime({ agents, runner });
const fetchHandler = createCopilotRuntimeHandler({ runtime, basePath: values["base-path"] });
let listener;
if (values.bind === "fetch") {
  listener = createCopilotNodeHandler(runner.bind(fetchHandler));
} else if (values.bind === "node") {
  const node = createCopilotNodeHandler(fetchHandler);
  listener = (req, res) => runner.runWith(req.headers, () => node(req, res));
} else {
  console.error(`runtime-server: --bind is fetch or node, not ${values.bind}`);
  process.exit(2);
}
const server = createServer(listener);
server.listen(0, "127.0.0.1", () => {
  console.log(`listening http://127.0.0.1:${server.address().port}${values["base-path"]}`);
});
for (const sig of ["SIGTERM", "SIGINT"]) process.on(sig, () => process.exit(0));
