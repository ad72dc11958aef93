// Package proxy is the AG-UI reverse proxy: an http.Handler that sits in front of an AG-UI
// agent and gives its runs durable, resumable event streams without changing the agent.
//
// # What is a run
//
// A request is a run candidate when it is a POST that accepts text/event-stream (the official
// HttpAgent always sends Accept: text/event-stream), or a POST with a JSON body that has
// top-level "threadId" and "runId" members, whether it is labelled application/json, not at
// all, or with a client's default (application/x-www-form-urlencoded from curl -d, text/plain
// from fetch). A candidate's body must be a valid RunAgentInput
// (agui.DecodeRunInput: strict keys, validated ids) or it is refused with 400. It becomes a
// run when the upstream answers 2xx with Content-Type text/event-stream; any other answer is
// passed through unchanged and the run id is released (not recorded, so a retry is allowed).
// Every other request is proxied untouched by httputil.ReverseProxy.
//
// # How a run flows
//
// The run is registered in the Store first, through package thread, in the caller's namespace
// of thread ids (one per identity and route); RunAlreadyStarted and the ThreadBusy rule are
// checked atomically there, in one store call. The outbound request gets a context of its own, so
// a client that disconnects does not cancel the agent: the run's pump goroutine reads the
// upstream stream to its end, gives every frame an id ("<runId>:<epoch>:<seq>", see
// recorder.Cursor), records it through a recorder.Writer and publishes it to the run's live hub
// (package live), which the client's stream and every attacher in this process read with the
// same rules: a queue bounded in bytes written straight to the connection, heartbeats, and a
// client that falls too far behind is disconnected (it can resume); it never slows the run.
//
// Frames are forwarded byte for byte with the id line appended. Only RUN_STARTED is
// re-encoded: when the agent's lacks them, "parentRunId" (the request's, else the thread's
// latest run) and "input" (the RunAgentInput with only the messages not already in the
// thread's history) are appended to its members. A run whose agent sends no RUN_STARTED gets
// one first; a run that ends without RUN_FINISHED or RUN_ERROR gets a RUN_ERROR whose code says
// why (UPSTREAM_ENDED, UPSTREAM_DISCONNECTED, UPSTREAM_IDLE, RUN_TIMEOUT, FRAME_TOO_LARGE, RUN_TOO_LARGE,
// INTERRUPTED, STORAGE_UNAVAILABLE), so a recorded run always ends well-formed. The run's end is
// recorded in the store before its terminal event is sent to any client, so a client that saw
// the end can start the thread's next run at once, on any replica.
//
// # Errors
//
// Before a stream starts, every refusal is an RFC 9457 problem (application/problem+json) with
// a stable code (see the Code constants). Once the stream started, failures end it with a
// RUN_ERROR event instead.
//
// # Concurrency
//
// A Handler is safe for concurrent use. It owns one pump goroutine per live run and the
// recorder's writer goroutine; Shutdown stops them.
package proxy
