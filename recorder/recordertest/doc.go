// Package recordertest is the contract every recorder.Store must pass: one suite, run by the
// memory store's and the Redis store's tests alike (docs/design.md, Tests).
//
//	func TestMemoryStore(t *testing.T) {
//		recordertest.Run(t, func(t *testing.T) recorder.Store {
//			return recorder.NewMemoryStore(recorder.MemoryConfig{
//				MaxEventsPerRun: recordertest.MaxEventsPerRun, FollowQueue: recordertest.FollowQueue,
//			})
//		})
//	}
//
// The factory is called once per subtest and must return an empty store configured with
// MaxEventsPerRun = MaxEventsPerRun, FollowQueue = FollowQueue and no TTL; the suite closes
// it. Stores that implement recorder.Follower and recorder.Leaser also get the Follow/* and
// Lease/* subtests (live tails: every event once and in order, ends, slow subscribers,
// deadlines; leases and stop requests); the others skip them.
package recordertest
