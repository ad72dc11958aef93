// Package demoagent is a scripted AG-UI agent: an http.Handler that answers every POSTed
// RunAgentInput with a deterministic, protocol-valid event stream chosen by name. It needs no
// LLM and no network, so the proxy's tests, the e2e harness and the agui-bench load tool can
// drive every event family of AG-UI 1.0 (text, tools, state, reasoning, activity, snapshots,
// chunks, custom and raw events) plus the failure shapes a proxy must survive: RUN_ERROR,
// streams without RUN_FINISHED, CRLF framing, an unterminated last event, UTF-16 surrogate
// halves split across deltas, one-megabyte messages and paced or high-rate streams. The echo
// scenario answers with the message ids and state it received, so a test can see what a proxy
// forwarded.
//
// The scenario is picked from forwardedProps.scenario, else from the last user message (its
// text equal to a scenario name, or containing "scenario:<name>"), else "chat". Ids of
// messages, tool calls and reasoning spans are derived from the runId, so two runs with the
// same runId produce byte-identical streams (the bench scenario excepted: it carries its send
// time). Events returns the same events without any timing, for tests of other packages.
//
// Like a real agent, a run stops when its request context is cancelled or a write fails;
// Config.OnRunDone then reports how far it got. That is how a proxy test proves that a
// client disconnect did not stop the run upstream.
//
// An *Agent is safe for concurrent use; each request runs its scenario on the request's own
// goroutine and starts no other goroutine.
package demoagent
