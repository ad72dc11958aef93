// The browser test's app: bundled with esbuild from the package as an app would import it,
// served on the relay's origin. The test drives it through window.app.
import { ResumableHttpAgent, REPLAY_COMPLETE } from "@agui-proxy/client";

const log = document.getElementById("log");
const state = { events: [], reconnects: [], customs: [], done: false, error: undefined };

function agentFor(threadId, cut) {
  return new ResumableHttpAgent({
    url: location.origin + "/",
    threadId,
    headers: cut ? { "x-test-cut": cut } : {},
    reconnect: { initialDelayMs: 20, maxDelayMs: 200 },
    onReconnect: (info) => state.reconnects.push({ attempt: info.attempt, lastEventId: info.lastEventId }),
  });
}

const subscriber = {
  onEvent: ({ event }) => {
    state.events.push(event);
    const li = document.createElement("li");
    li.textContent = event.type;
    log.appendChild(li);
  },
  onCustomEvent: ({ event }) => void state.customs.push(event.name),
};

window.app = {
  state,
  /** Runs a demo-agent scenario; resolves with the final messages and state. */
  async run({ threadId, runId, scenario, intervalMs, cut }) {
    sessionStorage.setItem("threadId", threadId);
    const agent = agentFor(threadId, cut);
    agent.setMessages([{ id: "u1", role: "user", content: scenario }]);
    try {
      await agent.runAgent({ runId, forwardedProps: { scenario, intervalMs } }, subscriber);
    } catch (e) {
      state.error = String(e);
    }
    state.done = true;
    return { messages: agent.messages, state: agent.state };
  },
  /** After a reload: a new agent restores the thread with connectAgent(). */
  async connect() {
    const threadId = sessionStorage.getItem("threadId");
    const agent = agentFor(threadId);
    await agent.connectAgent({}, subscriber);
    state.done = true;
    return { messages: agent.messages, state: agent.state, replayComplete: state.customs.includes(REPLAY_COMPLETE) };
  },
};
document.getElementById("status").textContent = "ready";
