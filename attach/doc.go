// Package attach serves what a client needs after the live POST: reattaching to a thread or a
// run, exact resumption from an event id, the thread's history as JSON, export and import,
// and stopping a run. The proxy mounts it under a prefix (default /agui/).
//
// # Endpoints
//
//	GET  {prefix}threads/{thread}/events              thread attach (SSE)
//	GET  {prefix}threads/{thread}/runs/{run}/events   run attach (SSE)
//	GET  {prefix}threads/{thread}                     messages and state (?run= time travel)
//	GET  {prefix}threads/{thread}/runs                runs tree with statuses
//	GET  {prefix}threads/{thread}/export              the whole thread, versioned JSON
//	POST {prefix}threads/{thread}/import              an export into a new thread
//	POST {prefix}threads/{thread}/runs/{run}/stop     cancel a running run
//
// The run POST itself resumes too: the proxy hands a POST of an existing run with a
// Last-Event-ID header to ServeResume instead of answering RunAlreadyStarted.
//
// # Streams
//
// The SSE endpoints work with a browser EventSource unchanged (GET, Last-Event-ID on
// reconnect, ?after= for the first connect) and with the official AG-UI client: everything is
// LF-framed compact JSON, and every stream that carries a prelude starts with RUN_STARTED.
// A thread attach without a cursor sends the compacted history of the current branch
// (MESSAGES_SNAPSHOT and STATE_SNAPSHOT, run boundaries kept, messages still streaming
// re-opened), then a CUSTOM event named "agui-proxy.replay_complete" marking the end of the
// prelude, then the live tail. With a cursor it sends the raw events strictly after it. A
// cursor that cannot be honoured exactly (its epoch does not match the stored run, events after
// it were trimmed or lost, it belongs to another branch) never produces a silent gap: the
// thread attach answers the full compacted history with a CUSTOM "agui-proxy.resume_failed"
// event and the header X-Agui-Resume: full-history; the run attach answers 410.
//
// The seam between history and live tail has no gap and no duplicate: history is read up to a
// sequence number, and the live tail is a subscription to the run's live hub (package live)
// strictly after that number: the pump's own hub when this process pumps the run, else one
// store follower shared by the run's attachers here. What the hub's backlog no longer holds
// is read from the store first (a store read that fails there is tried again from the last
// event written, with heartbeats, while the client stays); every event is delivered in seq
// order once. Any replica sharing the store can serve any run.
//
// Preludes cost one checkpoint plus the events after it: when a run ends its compacted branch is
// stored (Checkpoint), and a checkpoint missing for any reason is rebuilt from the nearest
// ancestor's.
//
// # Concurrency
//
// A Handler is safe for concurrent use. Each stream runs on its request's goroutine; slow
// clients are dropped by their subscription's queue bound in bytes (Config.ClientQueueBytes,
// as for the client that started the run) or the per-write deadline, and resume with their
// last event id.
package attach
