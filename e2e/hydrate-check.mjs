#!/usr/bin/env node
// hydrate-check.mjs: the official AG-UI client (@ag-ui/client HttpAgent) after a page reload.
// A first agent object runs one turn on a thread; a NEW agent object (what a reloaded page or
// a second device has) knows only its newest message and runs the next turn on the same
// thread. The demo agent's echo scenario answers with the message ids and state it received,
// so the output shows whether the agent saw the whole conversation.
//
//   node hydrate-check.mjs --proxy http://127.0.0.1:8080/ [--state '{"k":1}']
//
// Prints one JSON line: {first, second, secondMessages} (the echo texts and the reloaded
// client's final messages).

import { HttpAgent } from "@ag-ui/client";

const args = process.argv.slice(2);
const opt = (name) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : undefined;
};
const url = opt("--proxy");
if (!url) {
  process.stderr.write("hydrate-check: --proxy URL is required\n");
  process.exit(2);
}
const threadId = `hydrate-${process.pid}-${Date.now()}`;
const echo = { scenario: "echo" };
const lastText = (agent) => {
  const m = agent.messages.filter((m) => m.role === "assistant").at(-1);
  return m ? m.content : undefined;
};

const first = new HttpAgent({ url, threadId, initialState: JSON.parse(opt("--state") ?? "{}") });
first.addMessage({ id: "u1", role: "user", content: "first question" });
await first.runAgent({ runId: "r1", forwardedProps: echo });

const reloaded = new HttpAgent({ url, threadId });
reloaded.addMessage({ id: "u2", role: "user", content: "second question" });
await reloaded.runAgent({ runId: "r2", forwardedProps: echo });

process.stdout.write(JSON.stringify({
  first: lastText(first),
  second: lastText(reloaded),
  secondMessages: reloaded.messages.map((m) => m.id),
}) + "\n");
