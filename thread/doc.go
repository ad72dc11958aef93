// Package thread is the domain of the proxy's threads, below the two HTTP doors (package
// proxy, which starts runs, and package attach, which serves everything after) and above the
// store (package recorder) and compaction (package compact). Everything that decides who may
// use a thread, what a branch holds and how a run starts and ends lives here once; the doors
// translate HTTP to these calls and errors to problems (internal/problem).
//
// # Access
//
// Service.Identify reads the caller's identity from the configured header, once per request
// (the proxy stores it on the request context with WithOwner; Service.Owner reads it back).
// Every owner (identity; in single-tenant mode the one owner "") on every route has its own
// namespace of thread ids: the store files a thread under its key, Service.Key (see
// recorder.ThreadKey). Two owners can both use thread id "t", and whatever another owner's
// request does with an id (a run POST, an import, a read, a delete) gets exactly what an
// unused id gets, because it reaches its own namespace only. Service.Access and
// Service.AccessRun look a thread up in the caller's namespace and return it with Thread.ID
// the key; in multi-tenant mode an anonymous caller gets problem.ErrIdentityRequired.
//
// Thread ids come in from clients (Access, AccessRun, StartRun, Delete take them); every
// other method taking a threadID takes the store key, Thread.ID or Run.ThreadID as the store
// returned them. What a client reads names the id (recorder.ThreadIDOf), never the key.
//
// # Branches and checkpoints
//
// A thread's runs form a tree by parentRunId; a branch is the path from the root to one run.
// Service.Lineage walks it, Service.Branch returns its compacted events (from the run's
// checkpoint, or the nearest ancestor's plus the events after it), Service.Checkpoint stores
// the compacted branch of an ended run so the next prelude or run start reads it in two
// records, and Service.MessageIDs names the messages a client holds after replaying a branch
// (the messages RUN_STARTED.input need not repeat). Checkpoints are stored in segments (a base
// branch and per-run deltas, checkpoint.go), so a thread's checkpoint bytes grow with the
// thread, not with the square of its runs; each carries a checksum (a damaged one is rebuilt
// from the events, never served) and the count and hash of its branch's message ids. The
// Service keeps the branch of the last checkpoint it built per thread (bounded in bytes,
// recent.go), so the checkpoint of the next run extends it in memory and reads that run's
// events only, not the thread's segment. A segment the thread no longer extends is stored
// compressed.
//
// Compaction at rest (rest.go): Service.CompactRun replaces an ended run's raw events by their
// merged form (compact.Concat) once it is checked to replay the same (the stores keep a
// compacted run's events in one compressed value), and RestSweeper runs it over every thread
// of a store for runs older than an age (AGUI_COMPACT_AFTER); it also stores compressed
// (record version 3) the checkpoint segment of a thread whose runs are all at rest (older
// segments are compressed when the thread goes on in a newer one).
//
// # Starting and ending runs
//
// Service.StartRun registers a run in one store call (recorder.Store.CreateRun): duplicate
// run id, parent and the busy rule (one running run per thread unless
// Config.AllowConcurrentRuns) are checked atomically in the store, so of two concurrent starts
// exactly one wins; a run without parentRunId continues the thread's latest run, and the run
// carries its parent's epoch as the store answered it (recorder.Run.ParentEpoch). Together with
// Service.KnownMessageIDs (nothing read when this process built the parent's branch, found by
// that epoch; else one small checkpoint read when the parent has a checkpoint and the request
// repeats the branch's messages, as a client that replayed it does) a run start costs one or
// two store round trips, whatever the thread's length. Service.BranchInput (hydration) reads
// only the parent's record for a branch built here and known whole, and takes the messages and
// state from the branch's snapshots (a compacted ended branch's shape) instead of replaying it.
//
// The busy rule reads the previous run's status, so whoever pumps a run must have the store
// record the run's end before a client sees its terminal event (the proxy does, with
// recorder.Recording.FinishSync): a client that saw a run end can then start the next run at
// once, on any replica. The proxy stores the run's checkpoint then too (Service.Checkpoint;
// not on the disk store, where it is two synced writes), so that next run start finds it.
//
// RunError builds the one RUN_ERROR event the proxy writes when it ends a run itself, with a
// code from the Code constants; Service.ReapOrphan ends a running run whose replica stopped
// renewing its lease with it. Service.Pumping registers a run this process pumps, so that
// Service.Stop cancels it directly (a run pumped elsewhere is stopped through the store,
// recorder.Leaser), and opens the run's live hub in Service.Live, the registry every reader of
// a running run in this process subscribes through (package live).
//
// # Extending
//
// New per-thread rules go on Service (access, branch or run life cycle) with their store
// operation on recorder.Store; the doors should stay translations. A Service is safe for
// concurrent use. It starts no goroutine itself (RestSweeper.Run runs in its caller's); its
// live registry runs one follower goroutine per run pumped elsewhere that has subscribers
// here, which ends with the run or its last subscriber.
package thread
