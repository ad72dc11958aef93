// Package recorder keeps every event of every run: the Store interface (store.go), an
// in-memory store (the zero-configuration default), an embedded disk store (disk.go, one bbolt
// file for a single process), a Redis Streams store, and the Writer that the proxy's per-run
// pump calls so the live stream never waits on storage (through the run's Recording, opened
// once per run: nothing per event checks or looks up the run's ids). The contract every store
// passes is the suite in package recordertest.
//
// # Positions
//
// Each event of a run has a sequence number seq = 1, 2, 3, ... in wire order, and the proxy
// writes "<runId>:<epoch>:<seq>" on its `id:` line (Cursor). The epoch is random per run
// (NewEpoch) and stored with it, so a cursor from a run that was lost and re-created, or from
// another store, is recognised instead of being served from the wrong data. Run.FirstSeq,
// Run.LastSeq and Run.Gaps say which seqs are really stored; Run.Complete(after) tells a
// resuming reader whether everything after its position is there.
//
// # Redis key layout
//
// All keys of a thread share one Redis Cluster hash tag, the thread key (ThreadKey: the id in
// the namespace of its owner and route, "<tag>/<threadId>", or the bare id for the
// single-tenant default route), and are built from one template (keys.go: key), after
// validateThreadKey and agui.ValidateID refused every key or id holding '{', '}', whitespace,
// control or glob characters:
//
//	<prefix>:{<threadKey>}:thread            hash    owner, route, created (ms)
//	<prefix>:{<threadKey>}:runs              list    run ids in creation order
//	<prefix>:{<threadKey>}:run:<runId>       hash    epoch, parent, status, detail, route,
//	                                                 owner, created, updated, last, gaps,
//	                                                 node, lease (ms), stop ("1" once requested),
//	                                                 compacted (ms, once compacted at rest)
//	<prefix>:{<threadKey>}:events:<runId>    stream  entry id "<last seq>-0": one event, fields
//	                                                 t (type), f (frame) (version 1), or a
//	                                                 batch's consecutive events, fields n
//	                                                 (count), p (packed) (version 2;
//	                                                 redis_entry.go)
//	<prefix>:{<threadKey>}:checkpoint:<runId> string the run's checkpoint
//	<prefix>:{<threadKey>}:packed:<runId>    string  a run compacted at rest: its events in one
//	                                                 compressed value (packed.go), in place of
//	                                                 its stream
//	<prefix>:{#index/<hash>}:threads         zset    the thread index of one owner on one
//	                                                 route (hash: indexTag), member thread
//	                                                 key, score its latest run start (ms)
//
// The kind word follows the closing brace and the run id comes last, so ids containing ':'
// cannot alias another key (FuzzKey checks it). The prefix may not contain braces.
//
// # What is atomic
//
// Every write that changes more than one key is one Lua script (the *.lua files, each
// listing its KEYS and ARGV), so it is all-or-nothing and no other client sees a half state:
//
//   - create_run.lua: thread claim (owner and route written only when the thread is new, so of
//     two first POSTs by different identities exactly one wins), the refusals (other owner →
//     ErrThreadNotFound, other route → ErrThreadRoomMismatch, known run → ErrRunAlreadyStarted,
//     parent not in the thread → ErrRunNotFound), run hash, runs list, TTLs.
//   - append.lua (one call per batch on one server or Sentinel, one per thread's slot on
//     Cluster, the runs of a Store.Append in one pipeline, one round trip; on its full path
//     each run costs an HMGET, an XREVRANGE, an XADD per entry, an HSET and the
//     notification): skips seqs not above the run's last stored one (so go-redis re-sending a
//     write whose reply was lost, or the Writer retrying, never duplicates — plain XADD *
//     would), records a gap on a seq jump, XADD with the explicit id "<last seq>-0" and
//     MINID ~, updates last/updated/gaps, refreshes the TTLs. A Writer's run that streams
//     takes the fast path most of the time: only its entries' XADD NOMKSTREAM and the
//     notification, as plain commands in the batch's pipeline (in the script on Cluster), the
//     metadata brought up to date by a full write at least every two seconds (and once per
//     lease interval); an XADD answered nil or refused as a duplicate sends the run down the full
//     path, which says what happened. The
//     call carries only the epoch and the events of each run; if a run hash is missing (data
//     lost) the run is sent again with Batch.Run's metadata, and re-created (thread and run)
//     with the unseen head recorded as a gap; events carrying another epoch than the stored
//     run's are dropped (the id was reused). The Writer's finishes ride in the same call:
//     a run's finish is applied after its events (finish_run.lua's rules), so a run's last
//     events and its end cost one round trip, not two.
//   - finish_run.lua (Store.FinishRun called directly): status, detail, missing tail as a
//     gap, TTL of all the thread's keys.
//   - delete_run.lua: the run's keys and the runs list together.
//   - write_checkpoints.lua (PutCheckpoint, WriteCheckpoints): checkpoints
//     written whole or appended to, in order, each only while its run exists, with the run's
//     TTL; a segment's delta and the run's pointer to it in one call.
//   - delete_thread.lua: every key of a thread, refused while a run is running.
//   - compact_run.lua (RunCompactor, compaction at rest): an ended run's stream is replaced by
//     its compacted events, packed in one string (packed:<runId>), and the run hash gets the new epoch, last, empty gaps and
//     compacted, only if the epoch is still the one the compactor read (else ErrConflict, so
//     two replicas compacting the same run store it once). A crash or a reader in between
//     sees the raw run or the compacted one, never a mix or neither; the memory store does
//     the same under its lock and the disk store in one transaction.
//
// The thread index is the one structure that spans threads, so it cannot share their slot and
// is not written by their scripts. CreateRun queues its ZADD in the same pipeline as
// create_run.lua (no extra round trip, whatever the script answers), and ListThreads checks
// every entry it returns against the thread's owner and route, removing the entries of threads
// that are gone or not the caller's. So an index entry can be stale but never shows a thread
// the caller does not hold; DeleteThread removes its entry after the script (a failure there
// is repaired by the next listing). The index key lives twice the TTL past the owner's last
// run start.
//   - lease.lua, stop.lua: node/lease and the stop flag, written only while the status is
//     running, so a renewal racing with FinishRun never revives or re-stamps an ended run.
//
// Reads are pipelines of plain commands. After a Redis restart the script cache is empty:
// the store re-sends a pipeline with EVAL on NOSCRIPT, which the seq check makes safe.
//
// # Writer
//
// The proxy records through a Writer (writer.go), one per route: a pump opens its run once
// (Writer.Open returns the run's Recording, its ids and epoch checked there) and queues each
// event and the run's end through it. The files follow the Writer's parts:
//
//   - writer.go: the configuration, the counters, and the Writer itself: Open, Flush,
//     Shutdown, Stats over its lanes;
//   - writer_recording.go: a Recording, what a pump calls per event (Append and its waiting
//     and sync variants, Stored, Finish);
//   - writer_lane.go: a lane, one queue and the goroutine that writes it batch after batch:
//     the runs of the threads that hash to it (WriterConfig.Lanes; the proxy's default is
//     DefaultLanes), so that several batches are in flight at once and one round trip does
//     not hold every run. A lane writes in queue order: a run's events and its finish are
//     stored in the order they were queued, retries included. One exception keeps a run's
//     end prompt without cutting the others' Linger short: a FinishSync's run has its queued
//     items written at once, ahead of the rest (an express write); they stay in the queue
//     marked taken, so positions and Stored still count the queue in order. Backpressure is per lane: a
//     full lane slows the runs that append to it (they wait for its next completed write, at
//     most FullWait while the store makes no progress, then drop with a gap);
//   - writer_store.go: a lane's side of the store: one Store.Append per batch (with the
//     batch's finishes and lease renewals in the same call when the store implements
//     appendFinisher, as RedisStore does), the retries, the containment of a panic in the
//     store call (the batch is written again, then run by run; a run whose own events still
//     fail gets a gap), and the batcher that groups a batch's items by run without
//     allocating per run.
//
// The fast path between a Writer and the store is private, and is this contract: a Batch
// carries its Recording (Batch.rec), through which the store keeps its key for the run
// (Recording.key, set once from the lane's goroutine) instead of building and validating it per
// batch, and what it last saw stored for the run (Recording.stored: RedisStore's fast path is
// taken only right after a write of the run it saw succeed, and after no error since);
// appendFinish stores the events, applies each finish after its run's events and renews the
// leases in one call, idempotently (an item stored twice is skipped by seq), so a failed call
// is sent again whole. A store that commits a batch as one transaction (groupCommitter,
// DiskStore) gets batches of a lane's whole buffer.
//
// # What a crash can lose, and how it shows
//
//   - Proxy crash, async mode: the events still in the Writer's buffer (at most
//     MaxBufferedEvents; normally one batch). Those runs stay "running" with a LastSeq below
//     what clients saw, until the proxy (not this package) marks them interrupted. Sync mode: nothing a client saw.
//   - Redis outage or hang: nothing, while the buffer holds; the Writer retries with backoff.
//     Beyond the buffer, events are dropped, counted (WriterStats.Dropped), logged once per
//     run, and the run's next stored event or its FinishRun records the hole as a Gap.
//   - Redis crash: what its persistence had not written (appendfsync everysec: about 1 s;
//     appendonly no: everything since the last snapshot). CheckConfig warns about that and
//     about eviction policies that may delete streams. A run whose hash vanished is re-created
//     by the next append with a gap for the lost head; a stream that vanished under its hash is
//     reported as a gap by reads and recorded by the next append or finish. Either way
//     Complete reports the loss: a store never serves a damaged run as whole.
//   - Sync mode means "in Redis memory", not "on disk" (WAITAOF needs Redis 7.2), and on
//     the master only: replication is asynchronous, so a master that dies before its replica
//     got a write takes it along when the replica is promoted (Sentinel, Cluster). The next
//     append of that run records the lost seqs as a gap. RedisConfig.WaitReplicas makes each
//     write end with WAIT, so with Sync durability a client sees an event only once a replica
//     has it.
//
// # Retention
//
// MaxEventsPerRun trims the oldest events (Redis: XADD MINID ~ at the last seq less the
// bound, which keeps somewhat more, at stream node boundaries, and counts events, not entries;
// MAXLEN ~ in entries before Redis 6.2; memory: exact); FirstSeq moves up and Complete(after) is false for
// positions before it. TTL removes a thread TTL after its last write: in Redis each append
// refreshes the thread's and the run's keys, and creating or finishing a run refreshes every
// key of the thread (a loop over its runs list), so a thread's runs expire together unless one
// run alone stays active for longer than TTL. The memory store expires whole threads.
//
// # Topologies
//
// RedisConfig chooses one of three: one server (URL or Options, as go-redis's Client), Redis
// Cluster (ClusterAddrs, go-redis's ClusterClient), or a master found through Sentinel
// (SentinelAddrs and SentinelMaster, go-redis's failover Client). Username, password, TLS and
// DB apply to all three (Cluster has only DB 0). Every multi-key command and script names
// keys of one thread, so of one hash slot (TestScriptKeysOneSlot checks each script call);
// pipelines of several threads are split by go-redis per master. A Cluster client reloads
// its slot map at least every DefaultClusterStateReload while it sends commands, and at once
// on MOVED, so after a failover writes reach the promoted replica within about a second of
// its promotion. The Sentinel client follows the sentinels' +switch-master.
//
// # Redis connections
//
// Two go-redis clients with bounded pools (per master node on Cluster): one used only by Append and FinishRun, one for
// everything else, so a storm of reads cannot starve the recorder. Timeouts of 2 s, 2 retries
// (safe: every write is an idempotent script), a pool timeout of 1 s, context deadlines
// honoured. No command of these two pools blocks.
//
// # Live tails (Follow)
//
// Follow catches up with XRANGE on the reader pool and joins the store's single tail goroutine
// at the last seq it read; the tail hands each entry to every follower below it, so nothing is
// lost or repeated at the seam, and the per-follower queue is bounded (FollowQueue; overflow →
// ErrSlowSubscriber, the tail never waits for a reader). Runs that stay quiet for half a block
// have their metadata read (one pipeline for all of them, at most once per FollowBlock):
// not running and fully delivered → io.EOF; hash gone, another epoch, or the stream gone under
// unread events → ErrRunNotFound; stored beyond what the followers got → read again.
// Events trimmed by MaxEventsPerRun before the tail read them → ErrSlowSubscriber; a recorded
// gap is followed across. A third client, started by the first Follow, serves the tail.
//
// The tail is notified. append.lua and finish_run.lua end with a sharded publish (SPUBLISH,
// Redis 7) on a channel named like the run's stream key, and the tail holds one subscriber
// connection per master node (one in all on a single server or Sentinel), SSUBSCRIBEd to the
// followed streams that node owns: the node's one blocking reader. A message marks its stream
// due; each round reads only the due streams with non-blocking XREADs from the lowest position
// of their followers (on Cluster one per slot, pipelined: one XREAD may only name keys of one
// hash slot, even on one node; go-redis sends each master its part and follows MOVED and ASK),
// so a round costs what was written, not what is followed, and an idle tail reads nothing.
// Streams are regrouped (unsubscribed from the old node, subscribed on the new, read once)
// when a subscriber connection fails (a Sentinel failover reconnects it to the new master),
// when the server ends a subscription because its slot moved, after a read error, and every
// FollowBlock from the slot map; a notification missed meanwhile is caught by the quiet runs'
// status read. Per master: one subscriber connection plus at most two pooled ones, however
// many streams are followed. While Redis is unreachable the tail backs off up to 2 s.
//
// Servers without sharded pub/sub (Redis 6): on a single server or Sentinel the tail loops on
// `XREAD COUNT 512 BLOCK <=1000 STREAMS <every followed stream> <lowest position of its
// followers>` on one connection (never BLOCK 0; socket deadline block + 1 s), and a second
// connection sends `CLIENT UNBLOCK` when a follower joins below what the read covers; on
// Cluster it reads every followed stream each round, pausing FollowPoll after an empty one.
//
// # Disk store
//
// DiskStore keeps everything in one bbolt (go.etcd.io/bbolt) file. bbolt was chosen over an
// LSM engine such as Pebble, which writes faster, because a failed write leaves a bbolt file
// usable: the transaction is rolled back and later ones succeed once space is freed, whereas
// Pebble's commit pipeline treats a failed WAL write (a full disk) as fatal and ends the
// process. Layout: buckets threads, runs, order (creation order), events, ckpt, running and
// meta; every key starts with "<threadId>" and a 0 byte (ids never hold a 0 byte), so a thread is a
// contiguous key range. Events are stored as chunks, one per run per Append (at most 128
// events each, keyed by their first seq, CRC-32C checked on every read), so one Writer batch
// of many runs is one transaction with one key per run. Concurrent writes share transactions
// (groupCommit, disk_commit.go): a run start, a finish or a lease renewal made while another
// write commits waits for it, then commits with every write queued meanwhile, in one fsync;
// alone it commits at once. Run and thread records are a small binary layout behind a
// version byte (disk_record.go), read and written once per run per batch; JSON records of
// earlier versions are still read (a file written by this version is not readable by an
// earlier one: roll back with a backup export, not the file). Retention drops whole chunks. The
// running bucket lists the runs whose status is running: bbolt locks the file, so at open they
// all belong to a process that died, and OpenDiskStore ends each with a RUN_ERROR (code
// INTERRUPTED) after its last stored event. Write errors caused by a full disk wrap
// ErrDiskFull, and Ping reports the last write's failure until a write succeeds (or the file
// system has room again). A full disk keeps nothing locked: the store opens without a write
// (the interrupted runs are ended once a write fits), reads go on, and deletes and retention
// free pages, with the reserve file (DiskReserveFileName) for a delete's copy-on-write pages
// when the disk has no byte left, then the last 256 KiB of free pages kept for deletes.
//
// # Concurrency
//
// Stores and the Writer are safe for concurrent use. The Writer starts a goroutine, which its
// Shutdown stops; a RedisStore starts its tail goroutine on the first Follow, and Close stops
// it (waiting followers get ErrClosed). The MemoryStore and the DiskStore start none: their
// followers wait on a channel that each append, FinishRun, DeleteRun and Close closes.
package recorder
