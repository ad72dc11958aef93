package thread

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/agui-proxy/agui-proxy/compact"
	"github.com/agui-proxy/agui-proxy/compact/compacttest"
)

// TestFlattenFold: the flat form of a fold's output, split where the fold says its messages
// are, is the one flatten finds by scanning the snapshot, and it joins back to the snapshot
// byte for byte; the message ids the fold gives are the ones read from the snapshot. After
// every part of a stream fed in parts, on generated streams.
func TestFlattenFold(t *testing.T) {
	n := 400
	if testing.Short() {
		n = 100
	}
	for seed := range uint64(n) {
		events := compacttest.Generate(seed, 10+int(seed%200), seed%3 == 0)
		rng := rand.New(rand.NewPCG(seed, 0xf1a7))
		f := compact.NewFold(compact.Options{})
		for fed := 0; fed < len(events); {
			part := min(1+rng.IntN(1+len(events)/3), len(events)-fed)
			if err := f.Feed(events[fed : fed+part]); err != nil {
				t.Fatalf("seed %d: %v", seed, err)
			}
			fed += part
			out, err := f.Events()
			if err != nil {
				t.Fatalf("seed %d: %v", seed, err)
			}
			got, want := flattenFold(out, f), flatten(out)
			if want.Msgs != nil && !slices.EqualFunc(got.Msgs, want.Msgs, sameRaw) || !slices.EqualFunc(got.Events, want.Events, sameRaw) {
				t.Fatalf("seed %d, %d fed: flattenFold differs from flatten", seed, fed)
			}
			gotIDs, gerr := branchMessageIDs(out, got, f)
			wantIDs, werr := branchMessageIDs(out, want, nil)
			if (gerr == nil) != (werr == nil) || !slices.Equal(gotIDs, wantIDs) {
				t.Fatalf("seed %d, %d fed: ids %q (%v), want %q (%v)", seed, fed, gotIDs, gerr, wantIDs, werr)
			}
			for i, raw := range got.Events {
				if bytes.Equal(raw, jsonNull) && !bytes.Equal(snapshotRaw(got.Msgs), out[i].Raw) {
					t.Fatalf("seed %d, %d fed: the messages do not join to the snapshot", seed, fed)
				}
			}
		}
	}
}

// TestIDsHashStable: idsHash is SHA-256 over each id's uvarint length and bytes (checkpoint
// records store it: a new way to compute it must give the stored values).
func TestIDsHashStable(t *testing.T) {
	for _, ids := range [][]string{nil, {""}, {"a"}, {"u-1", "m1", strings.Repeat("x", 200), "é"}} {
		h := sha256.New()
		for _, id := range ids {
			h.Write(binary.AppendUvarint(nil, uint64(len(id))))
			h.Write([]byte(id))
		}
		if got, want := idsHash(ids), hex.EncodeToString(h.Sum(nil)[:16]); got != want {
			t.Fatalf("idsHash(%q) = %s, want %s", ids, got, want)
		}
	}
}

// TestRecentKeepsFoldOfLargeBranches: the recent-branch cache keeps a branch's fold from
// foldMinBytes of branch on, within its bound, and drops it below (folding again is cheaper
// than keeping it for every thread) or past the bound.
func TestRecentKeepsFoldOfLargeBranches(t *testing.T) {
	branch := func(bytes int) *loadedBranch {
		b := &loadedBranch{flat: flatBranch{Msgs: []json.RawMessage{json.RawMessage(`"` + strings.Repeat("x", bytes-2) + `"`)}}}
		b.fold.Store(compact.NewFold(compact.Options{}))
		return b
	}
	c := newRecentBranches(1 << 20)
	small, large, huge := branch(foldMinBytes-100), branch(foldMinBytes), branch(300<<10)
	c.put("a", "r", "e", small)
	c.put("b", "r", "e", large)
	c.put("c", "r", "e", huge)
	if small.fold.Load() != nil || large.fold.Load() == nil || huge.fold.Load() != nil {
		t.Fatalf("folds kept: small %v, large %v, huge %v; want only the large one's",
			small.fold.Load() != nil, large.fold.Load() != nil, huge.fold.Load() != nil)
	}
	if c.get("b", "r", "e") != large || c.get("c", "r", "e") != huge {
		t.Fatal("a branch whose fold was dropped is not kept")
	}
}

func sameRaw(a, b json.RawMessage) bool { return bytes.Equal(a, b) }
