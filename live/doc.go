// Package live delivers a running run's events to the clients reading it in this process: the
// client that POSTed the run and every attacher (thread or run attach, resume). There is one
// Hub per running run; the pump publishes each event to it once, and each client reads it
// through a Subscriber with the same rules: a queue bounded in bytes (a client that falls
// further behind is dropped with ErrSlowClient and resumes from its last event id; the run is
// never slowed for it), the Heartbeat comment after a silence, and direct writes from the
// queue to the client's connection. A subscriber handed the client's connection itself
// (Subscriber.ServeConn, after http.Hijacker) is written by the publisher's own call, with
// writes that never block; only a client that lags gets a goroutine, while it lags. The
// heartbeats of such subscribers come from one clock per heartbeat interval (one goroutine
// that ticks every interval/16, at most 1 s), not from a timer per stream.
//
// A Registry finds the hub of a run. For a run pumped by this process it is the pump's own
// hub, so an attacher sees an event as soon as the pump read it, without waiting for the
// store. For a run pumped by another replica, one recorder.Follower subscription per run per
// process feeds a shared hub: the store is read once per event whatever the number of local
// attachers.
//
// # The seam with the store
//
// An attacher first sends what the store holds (a compacted prelude, or the events after the
// client's cursor) up to some seq, then subscribes after that seq. Hub.Subscribe delivers
// every later event exactly once: those still in the hub's backlog (the latest events the
// store does not have yet, as the pump learns from the recorder through Hub.PublishStored,
// bounded in bytes), then those published afterwards. When the backlog no longer reaches back
// to that seq it reports the gap, and the caller reads the gap from the store first.
package live
