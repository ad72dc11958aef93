// The agui-proxy thread inspector. It reads the attach endpoints of its own route by relative
// URL (this page is {prefix}ui/, the endpoints are {prefix}threads/...), renders with
// textContent only (nothing from a thread is ever parsed as HTML), and keeps at most one
// EventSource open: the selected run's raw events, live until the run ends.

const api = new URL("../", location.href);
const $ = (id) => document.getElementById(id);
const TERMINAL = new Set(["RUN_FINISHED", "RUN_ERROR"]);

/** The page's state: what is shown and the open event stream. */
const view = { thread: "", runs: [], head: "", run: "", stream: null, refreshTimer: 0, lastSeq: 0, firstStamp: undefined };
// For tests and curious people: what the page currently shows.
window.inspector = view;

/** el("li", {class: "x"}, "text", child) builds an element; strings become text nodes. */
function el(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "class") e.className = v;
    else if (k.startsWith("data-")) e.setAttribute(k, String(v));
    else e[k] = v;
  }
  for (const c of children) if (c !== undefined && c !== null) e.append(c instanceof Node ? c : String(c));
  return e;
}

const enc = encodeURIComponent;
const threadPath = (...parts) => ["threads", view.thread, ...parts].map(enc).join("/");

async function getJSON(path) {
  const res = await fetch(new URL(path, api), { headers: { Accept: "application/json" } });
  if (!res.ok) throw new Error(await problemText(res));
  return res.json();
}

async function problemText(res) {
  try {
    const p = await res.json();
    return `${res.status} ${p.title ?? ""}${p.detail ? `: ${p.detail}` : ""}`;
  } catch {
    return `${res.status} ${res.statusText}`;
  }
}

function showError(err) {
  const box = $("error");
  box.textContent = err ? String(err.message ?? err) : "";
  box.hidden = !err;
}

const time = (iso) => (iso ? new Date(iso).toLocaleTimeString([], { hour12: false }) : "");
function duration(a, b) {
  const ms = new Date(b) - new Date(a);
  return ms < 1000 ? `${ms} ms` : `${(ms / 1000).toFixed(1)} s`;
}

// ---- thread list (only where the proxy has GET {prefix}threads) ----

async function loadThreadList() {
  try {
    const res = await fetch(new URL("threads?limit=50", api), { headers: { Accept: "application/json" } });
    if (!res.ok) return;
    const list = await res.json();
    const threads = list.threads ?? [];
    if (!threads.length) return;
    const sel = $("thread-list");
    for (const t of threads) {
      const id = t.threadId ?? t.id;
      sel.append(el("option", { value: id }, t.title ? `${id} — ${t.title}` : id));
    }
    sel.hidden = false;
    sel.onchange = () => sel.value && openThread(sel.value);
  } catch {
    /* no thread list on this proxy */
  }
}

// ---- runs tree ----

async function openThread(id, runId) {
  view.thread = id;
  $("thread-id").value = id;
  const q = new URLSearchParams({ thread: id });
  if (runId) q.set("run", runId);
  history.replaceState(null, "", `?${q}`);
  showError(null);
  try {
    await loadRuns();
  } catch (err) {
    $("main").hidden = true;
    showError(err);
    return;
  }
  $("main").hidden = false;
  $("export").href = new URL(threadPath("export"), api).href;
  $("export").download = `${id}.json`;
  const run = view.runs.some((r) => r.runId === runId) ? runId : view.head;
  if (run) await selectRun(run);
}

async function loadRuns() {
  const tree = await getJSON(threadPath("runs"));
  view.runs = tree.runs;
  view.head = tree.headRunId;
  renderTree();
}

function renderTree() {
  const byParent = new Map();
  const ids = new Set(view.runs.map((r) => r.runId));
  for (const r of view.runs) {
    const parent = r.parentRunId && ids.has(r.parentRunId) ? r.parentRunId : "";
    if (!byParent.has(parent)) byParent.set(parent, []);
    byParent.get(parent).push(r);
  }
  const branch = (parent) => {
    const ul = el("ul");
    for (const r of byParent.get(parent) ?? []) {
      const kids = byParent.get(r.runId) ?? [];
      const li = el("li", { "data-run": r.runId, "data-parent": r.parentRunId ?? "", "data-status": r.status }, runButton(r, kids.length));
      if (kids.length) li.append(branch(r.runId));
      ul.append(li);
    }
    return ul;
  };
  $("runs").replaceChildren(...branch("").children);
}

function runButton(r, children) {
  const gaps = (r.gaps ?? []).map((g) => el("span", { class: "tag gap", title: "events the recorder could not store" }, `gap ${g.From ?? g.from}–${g.To ?? g.to}`));
  return el(
    "button",
    { class: `run${r.runId === view.run ? " selected" : ""}`, type: "button", onclick: () => selectRun(r.runId) },
    el("span", { class: "id" }, r.runId),
    r.runId === view.head ? el("span", { class: "tag head" }, "head") : null,
    children > 1 ? el("span", { class: "tag branch", title: "runs continue from here on separate branches" }, `${children} branches`) : null,
    ...gaps,
    el(
      "span",
      { class: "sub" },
      el("span", { class: `status status-${r.status}` }, r.status),
      r.detail ? ` ${r.detail}` : "",
      ` · ${r.events} events · ${time(r.createdAt)}`,
    ),
  );
}

// ---- one run: messages and state as of it, its events ----

async function selectRun(runId) {
  view.run = runId;
  const q = new URLSearchParams({ thread: view.thread, run: runId });
  history.replaceState(null, "", `?${q}`);
  renderTree();
  const r = view.runs.find((x) => x.runId === runId);
  $("run-title").textContent = runId;
  showRunStatus(r);
  await loadSnapshot();
  openEvents(runId, r?.status === "running");
}

/** The status badge, the line under it (parent, start, how long it ran) and the buttons. */
function showRunStatus(r) {
  $("run-meta").textContent = r
    ? `parent ${r.parentRunId || "—"} · created ${new Date(r.createdAt).toLocaleString()} · ${r.status === "running" ? "running for" : "lasted"} ${duration(r.createdAt, r.status === "running" ? new Date().toISOString() : r.updatedAt)}`
    : "";
  const s = $("run-status");
  s.textContent = r ? r.status + (r.detail ? ` (${r.detail})` : "") : "";
  s.className = `status status-${r?.status ?? ""}`;
  $("stop").hidden = r?.status !== "running";
  $("live").hidden = r?.status !== "running";
}

async function loadSnapshot() {
  const runId = view.run;
  try {
    const snap = await getJSON(`${threadPath()}?run=${enc(runId)}`);
    if (runId !== view.run) return; // another run was selected meanwhile
    renderMessages(snap.messages ?? []);
    $("state").textContent = JSON.stringify(snap.state ?? {}, null, 2);
  } catch (err) {
    showError(err);
  }
}

function renderMessages(messages) {
  $("messages").replaceChildren(
    ...messages.map((m) => {
      const content = typeof m.content === "string" ? m.content : m.content == null ? "" : JSON.stringify(m.content);
      const li = el("li", { class: `role-${m.role}`, "data-id": m.id, "data-role": m.role }, el("span", { class: "role" }, m.role), content);
      for (const tc of m.toolCalls ?? []) li.append(el("span", { class: "tool-call" }, `→ ${tc.function?.name}(${tc.function?.arguments ?? ""})`));
      if (m.toolCallId) li.append(el("span", { class: "tool-call" }, `← result of ${m.toolCallId}`));
      return li;
    }),
  );
}

/** The run attach: the run's recorded events from its start, then live until it ends. */
function openEvents(runId, live) {
  view.stream?.close();
  const body = $("events").tBodies[0];
  body.replaceChildren();
  const opened = performance.now();
  let last = 0;
  let count = 0;
  view.lastSeq = 0;
  view.firstStamp = undefined;
  const counter = () => ($("event-count").textContent = `${count} received${live ? ", live" : ""}`);
  counter();
  const es = new EventSource(new URL(threadPath("runs", runId, "events"), api));
  view.stream = es;
  es.onmessage = (m) => {
    if (view.stream !== es) return;
    const seq = Number(m.lastEventId.slice(m.lastEventId.lastIndexOf(":") + 1)) || 0;
    if (seq && seq <= last) return; // a reconnect's repeat: never shown twice
    if (seq > last + 1) {
      body.append(el("tr", { class: "gap", "data-gap": `${last + 1}-${seq - 1}` }, el("td", { colSpan: 4 }, `gap: events ${last + 1}–${seq - 1} are not stored`)));
    }
    last = seq || last;
    view.lastSeq = last;
    count++;
    counter();
    let ev;
    try {
      ev = JSON.parse(m.data);
    } catch {
      ev = { type: "(not JSON)" };
    }
    const at = eventTime(ev, live, opened);
    const row = el(
      "tr",
      { class: `ev-${ev.type}`, "data-seq": seq, "data-type": ev.type, title: m.lastEventId },
      el("td", { class: "seq" }, seq || "—"),
      el("td", { class: "type" }, ev.type),
      el("td", { class: "at", title: at.title }, at.text),
      el("td", { class: "detail" }, summary(ev)),
    );
    const box = $("events-box");
    const atBottom = box.scrollHeight - box.scrollTop - box.clientHeight < 40;
    body.append(row);
    if (live) {
      if (atBottom) box.scrollTop = box.scrollHeight; // follow the tail unless scrolled up
      scheduleRefresh();
    }
    if (TERMINAL.has(ev.type)) {
      es.close(); // the run is over; EventSource would otherwise reconnect
      if (live) setTimeout(() => refreshAfterEnd(runId), 50);
    }
  };
  es.onerror = () => {
    if (es.readyState === EventSource.CLOSED && view.stream === es) {
      body.append(el("tr", { class: "gap" }, el("td", { colSpan: 4 }, "the event stream could not be read (events trimmed or lost, or the run is gone)")));
    }
  };
}

/**
 * When an event came, for the "at" column: from the event's own timestamp when it has one
 * (ms after the run's first timestamped event, so a finished run shows its real pacing), else,
 * while the run is live, its arrival (ms after the stream opened); a recorded event without a
 * timestamp has no known arrival ("—"), not "+0 ms".
 */
function eventTime(ev, live, opened) {
  if (typeof ev.timestamp === "number") {
    view.firstStamp ??= ev.timestamp;
    return { text: `+${ev.timestamp - view.firstStamp} ms`, title: `${new Date(ev.timestamp).toISOString()} (the event's timestamp)` };
  }
  if (live) return { text: `+${Math.round(performance.now() - opened)} ms`, title: "arrival, ms after the stream opened" };
  return { text: "—", title: "recorded without a timestamp: its arrival is seen only live" };
}

/** A short, readable line for an event (its raw JSON is in the row's tooltip-free detail). */
function summary(ev) {
  const { type, ...rest } = ev;
  switch (type) {
    case "TEXT_MESSAGE_CONTENT":
    case "REASONING_MESSAGE_CONTENT":
      return `${ev.messageId}: ${JSON.stringify(ev.delta)}`;
    case "TOOL_CALL_ARGS":
      return `${ev.toolCallId}: ${ev.delta}`;
    case "TOOL_CALL_START":
      return `${ev.toolCallId} ${ev.toolCallName}`;
    case "STATE_DELTA":
      return JSON.stringify(ev.delta);
    case "RUN_ERROR":
      return `${ev.code ?? ""} ${ev.message ?? ""}`;
    case "RUN_FINISHED":
      return `outcome ${ev.outcome?.type ?? "success"}`;
    case "CUSTOM":
      return `${ev.name} ${JSON.stringify(ev.value ?? null)}`;
    case "RUN_STARTED":
      return `parent ${ev.parentRunId ?? ev.metadata?.["agui-proxy"]?.parentRunId ?? "—"} · ${ev.input?.messages?.length ?? 0} new input messages`;
    default: {
      const s = JSON.stringify(rest);
      return s.length > 160 ? s.slice(0, 157) + "…" : s;
    }
  }
}

/** While a run streams, re-read its messages and state at most every 250 ms. */
function scheduleRefresh() {
  if (view.refreshTimer) return;
  view.refreshTimer = setTimeout(async () => {
    view.refreshTimer = 0;
    const r = view.runs.find((x) => x.runId === view.run);
    if (r && view.lastSeq > r.events) {
      r.events = view.lastSeq; // the tree's count follows the tail
      renderTree();
    }
    await loadSnapshot();
  }, 250);
}

async function refreshAfterEnd(runId) {
  await loadRuns();
  if (view.run !== runId) return;
  showRunStatus(view.runs.find((x) => x.runId === runId));
  await loadSnapshot();
  $("event-count").textContent = $("event-count").textContent.replace(", live", "");
}

async function stopRun() {
  const res = await fetch(new URL(threadPath("runs", view.run, "stop"), api), { method: "POST" });
  if (!res.ok) showError(new Error(await problemText(res)));
}

// ---- wiring ----

$("open").onsubmit = (e) => {
  e.preventDefault();
  const id = $("thread-id").value.trim();
  if (id) openThread(id);
};
$("refresh").onclick = async () => {
  await loadRuns();
  if (view.run) await selectRun(view.run);
};
$("stop").onclick = () => stopRun();

const params = new URLSearchParams(location.search);
loadThreadList();
if (params.get("thread")) openThread(params.get("thread"), params.get("run") ?? undefined);
