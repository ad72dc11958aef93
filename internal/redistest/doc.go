// Package redistest starts private redis-server processes for tests and puts a small TCP fault
// proxy in front of them.
//
// Every test gets its own server on a free loopback port with persistence off (unless the
// test passes other arguments) and its data directory in t.TempDir(); the server is killed in
// t.Cleanup. The shared instance on 6379 is never touched. A missing redis-server binary fails
// the test with the install hint: Redis tests are never skipped.
//
// Servers can be frozen (Stop/Continue, SIGSTOP/SIGCONT), crashed (Kill) and started again on
// the same port and directory (Restart), which is how the recorder's fault tests simulate a
// hung Redis, a crash with AOF, and a restart that lost everything.
//
// A Server's methods must be called from the test goroutine; a FaultProxy is safe for
// concurrent use.
package redistest
