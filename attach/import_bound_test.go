package attach_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agui-proxy/agui-proxy/attach"
	"github.com/agui-proxy/agui-proxy/internal/problem"
	"github.com/agui-proxy/agui-proxy/internal/redistest"
	"github.com/agui-proxy/agui-proxy/recorder"
)

// slowStore makes every call of the import path take at least delay, and records the
// largest Append.
type slowStore struct {
	recorder.Store
	delay time.Duration

	mu        sync.Mutex
	calls     int
	maxEvents int
	maxBytes  int
}

// wait takes delay, or ends with the call's context, as a store that honours deadlines (the
// Redis store does) answers.
func (s *slowStore) wait(ctx context.Context) error {
	s.mu.Lock()
	s.calls++
	s.mu.Unlock()
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-time.After(s.delay):
		return nil
	}
}

func (s *slowStore) Thread(ctx context.Context, id string) (recorder.Thread, error) {
	if err := s.wait(ctx); err != nil {
		return recorder.Thread{}, err
	}
	return s.Store.Thread(ctx, id)
}

func (s *slowStore) CreateRun(ctx context.Context, r recorder.Run, o recorder.CreateOptions) (recorder.Thread, error) {
	if err := s.wait(ctx); err != nil {
		return recorder.Thread{}, err
	}
	return s.Store.CreateRun(ctx, r, o)
}

func (s *slowStore) Append(ctx context.Context, b []recorder.Batch) error {
	if err := s.wait(ctx); err != nil {
		return err
	}
	s.mu.Lock()
	for _, x := range b {
		size := 0
		for _, e := range x.Events {
			size += len(e.Frame)
		}
		s.maxEvents, s.maxBytes = max(s.maxEvents, len(x.Events)), max(s.maxBytes, size)
	}
	s.mu.Unlock()
	return s.Store.Append(ctx, b)
}

func (s *slowStore) FinishRun(ctx context.Context, th, run string, st recorder.RunStatus, d string, last int64) error {
	if err := s.wait(ctx); err != nil {
		return err
	}
	return s.Store.FinishRun(ctx, th, run, st, d, last)
}

// importDoc is an export document of runs runs (a linear chain), the first with extra
// CUSTOM events.
func importDoc(runs, extra int) attach.ExportDoc {
	var b strings.Builder
	b.WriteString(`{"formatVersion":1,"runs":[`)
	for i := 1; i <= runs; i++ {
		parent := ""
		if i > 1 {
			b.WriteString(",")
			parent = fmt.Sprintf(`"parentRunId":"r%d",`, i-1)
		}
		fmt.Fprintf(&b, `{"runId":"r%d",%s"status":"finished","eventList":[{"type":"RUN_STARTED","threadId":"x","runId":"r%d"}`, i, parent, i)
		if i == 1 {
			for j := range extra {
				fmt.Fprintf(&b, `,{"type":"CUSTOM","name":"n","value":%d}`, j)
			}
		}
		fmt.Fprintf(&b, `,{"type":"RUN_FINISHED","threadId":"x","runId":"r%d"}]}`, i)
	}
	b.WriteString("]}")
	doc, err := attach.DecodeExport([]byte(b.String()))
	if err != nil {
		panic(err)
	}
	return doc
}

// TestImportBoundedPerCall: an import whose store calls each answer quickly, but that takes
// longer in all than the store timeout, finishes when each call is bounded (its deadline grows
// with the document), where one deadline for the whole import can never be met (a retry would
// fail the same way). No Append carries more than ImportBatchEvents events or about
// ImportBatchBytes bytes, whatever the run's size. On memory, the disk store and Redis.
func TestImportBoundedPerCall(t *testing.T) {
	srv := redistest.Start(t)
	stores := map[string]func(t *testing.T) recorder.Store{
		"memory": func(t *testing.T) recorder.Store { return recorder.NewMemoryStore(recorder.MemoryConfig{}) },
		"disk": func(t *testing.T) recorder.Store {
			s, err := recorder.OpenDiskStore(t.Context(), recorder.DiskConfig{Dir: t.TempDir(), NoSync: true})
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
		"redis": func(t *testing.T) recorder.Store {
			s, err := recorder.NewRedisStore(t.Context(), recorder.RedisConfig{URL: srv.URL(), Prefix: "imp-" + t.Name()})
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
	}
	for name, open := range stores {
		t.Run(name, func(t *testing.T) {
			base := open(t)
			defer base.Close()
			// 150 runs: 1 + 3 x 150 calls of at least 3 ms each, over 1.3 s in all; every call
			// is given 1 s.
			const runs, extra, timeout = 150, 10000, time.Second
			s := &slowStore{Store: base, delay: 3 * time.Millisecond}
			doc := importDoc(runs, extra)

			// One deadline for the whole import: it cannot finish, and nothing is left.
			ctx, cancel := context.WithTimeout(t.Context(), timeout)
			_, err := attach.ImportThread(ctx, s, attach.ImportTarget{ThreadID: "whole"}, doc)
			cancel()
			if err == nil {
				t.Fatalf("an import of %d calls of at least %v finished within %v", 1+3*runs, s.delay, timeout)
			}
			if _, err := base.Thread(t.Context(), attach.ImportTarget{ThreadID: "whole"}.Key()); !errors.Is(err, recorder.ErrThreadNotFound) {
				t.Fatalf("the failed import left its thread: %v", err)
			}

			// Each call bounded: it finishes.
			n, err := attach.ImportThreadBounded(t.Context(), s, attach.ImportTarget{ThreadID: "bounded"}, doc, timeout)
			if err != nil || n != runs {
				t.Fatalf("ImportThreadBounded = %d, %v; want %d runs", n, err, runs)
			}
			first, err := base.Run(t.Context(), attach.ImportTarget{ThreadID: "bounded"}.Key(), "r1")
			if err != nil || first.LastSeq != extra+2 || !first.Complete(0) || first.Status != recorder.StatusFinished {
				t.Fatalf("run r1 after the import: %+v, %v; want %d events, complete, finished", first, err, extra+2)
			}
			if s.maxEvents > attach.ImportBatchEvents || s.maxBytes > attach.ImportBatchBytes {
				t.Fatalf("an Append carried %d events, %d bytes; the bound is %d, %d", s.maxEvents, s.maxBytes, attach.ImportBatchEvents, attach.ImportBatchBytes)
			}
		})
	}
}

// TestImportBoundedStoreDown: a store that does not answer one call fails the import after
// that call's bound with StoreUnavailable (503), not after the whole document's.
func TestImportBoundedStoreDown(t *testing.T) {
	s := &slowStore{Store: recorder.NewMemoryStore(recorder.MemoryConfig{}), delay: time.Hour}
	_, err := attach.ImportThreadBounded(t.Context(), s, attach.ImportTarget{ThreadID: "t"}, importDoc(3, 0), 50*time.Millisecond)
	if !errors.Is(err, problem.ErrStoreUnavailable) {
		t.Fatalf("import on a store that does not answer = %v, want StoreUnavailable", err)
	}
}
