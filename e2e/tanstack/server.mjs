#!/usr/bin/env node
// server.mjs: TanStack AI's documented RunAgentInput server (@tanstack/ai 0.58.0:
// chatParamsFromRequestBody -> chat() -> toServerSentEventsResponse) with one server tool,
// "weather", in front of a scripted model adapter (no network). The model's first call answers
// "Let me look." and calls the tool; its second call, which sees the tool's result, answers
// "It is sunny in <city>." in two deltas. With --gated, the tool of run R waits for a POST to
// /release?run=R&tool=1 and the second call's second delta for /release?run=R&answer=1 (a
// release may come first), so a test can cut a client inside the tool's part of the response.
//
//   node server.mjs --port 0 [--gated]      prints "listening <port>" once it listens
import { AsyncLocalStorage } from "node:async_hooks";
import http from "node:http";
import { chat, chatParamsFromRequestBody, toServerSentEventsResponse, toolDefinition } from "@tanstack/ai";

const argv = process.argv.slice(2);
const port = Number(argv[argv.indexOf("--port") + 1] ?? 0);
const gated = argv.includes("--gated");

// gates: a promise per run and name, resolved by POST /release?run=R&<name>=1 (at once
// without --gated); the run is the request's, carried through chat() by AsyncLocalStorage.
const gates = new Map();
const request = new AsyncLocalStorage();
function gateOf(run, name) {
  const k = `${run}\x00${name}`;
  if (!gates.has(k)) {
    let resolve;
    const promise = new Promise((r) => (resolve = r)); // (Node 20 has no Promise.withResolvers)
    gates.set(k, { promise, resolve });
  }
  return gates.get(k);
}
function gate(name) {
  if (!gated) return Promise.resolve();
  return gateOf(request.getStore().runId, name).promise;
}

const weather = toolDefinition({
  name: "weather",
  description: "The weather in a city.",
  inputSchema: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
}).server(async ({ city }) => {
  await gate("tool");
  return { city, sky: "sunny" };
});

const scripted = {
  kind: "text",
  name: "scripted",
  model: "scripted-1",
  "~types": {},
  async *chatStream(options) {
    const last = options.messages.at(-1);
    const id = last?.role === "tool" ? "msg-answer" : "msg-look";
    const now = Date.now();
    yield { type: "RUN_STARTED", runId: options.runId ?? "run", threadId: options.threadId ?? "thread", timestamp: now, model: "scripted-1" };
    if (last?.role !== "tool") {
      yield { type: "TEXT_MESSAGE_START", messageId: id, role: "assistant", timestamp: now, model: "scripted-1" };
      yield { type: "TEXT_MESSAGE_CONTENT", messageId: id, delta: "Let me look.", timestamp: now, model: "scripted-1" };
      yield { type: "TEXT_MESSAGE_END", messageId: id, timestamp: now, model: "scripted-1" };
      yield { type: "TOOL_CALL_START", toolCallId: "call-1", toolCallName: "weather", toolName: "weather", parentMessageId: id, index: 0, timestamp: now, model: "scripted-1" };
      yield { type: "TOOL_CALL_ARGS", toolCallId: "call-1", delta: '{"city":"Oslo"}', timestamp: now, model: "scripted-1" };
      yield { type: "TOOL_CALL_END", toolCallId: "call-1", toolName: "weather", input: { city: "Oslo" }, timestamp: now, model: "scripted-1" };
      yield { type: "RUN_FINISHED", runId: options.runId ?? "run", threadId: options.threadId ?? "thread", finishReason: "tool_calls", timestamp: now, model: "scripted-1" };
      return;
    }
    const city = JSON.parse(typeof last.content === "string" ? last.content : "{}").city ?? "?";
    yield { type: "TEXT_MESSAGE_START", messageId: id, role: "assistant", timestamp: now, model: "scripted-1" };
    yield { type: "TEXT_MESSAGE_CONTENT", messageId: id, delta: "It is sunny ", timestamp: now, model: "scripted-1" };
    await gate("answer");
    yield { type: "TEXT_MESSAGE_CONTENT", messageId: id, delta: `in ${city}.`, timestamp: now, model: "scripted-1" };
    yield { type: "TEXT_MESSAGE_END", messageId: id, timestamp: now, model: "scripted-1" };
    yield { type: "RUN_FINISHED", runId: options.runId ?? "run", threadId: options.threadId ?? "thread", finishReason: "stop", timestamp: now, model: "scripted-1" };
  },
  async structuredOutput() {
    throw new Error("not scripted");
  },
};

const server = http.createServer(async (req, res) => {
  const url = new URL(req.url, "http://x");
  if (url.pathname === "/release") {
    const run = url.searchParams.get("run");
    for (const name of url.searchParams.keys()) if (name !== "run") gateOf(run, name).resolve();
    res.end("ok\n");
    return;
  }
  let body = "";
  for await (const c of req) body += c;
  let params;
  try {
    params = await chatParamsFromRequestBody(JSON.parse(body));
  } catch (e) {
    res.writeHead(400).end(String(e?.message ?? e));
    return;
  }
  await request.run({ runId: params.runId }, async () => {
    const stream = chat({ adapter: scripted, messages: params.messages, tools: [weather], threadId: params.threadId, runId: params.runId });
    const answer = toServerSentEventsResponse(stream);
    res.writeHead(answer.status, Object.fromEntries(answer.headers));
    for await (const chunk of answer.body) res.write(chunk);
    res.end();
  });
});
server.listen(port, "127.0.0.1", () => console.log(`listening ${server.address().port}`));
