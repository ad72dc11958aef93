package thread_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/agui-proxy/agui-proxy/agui"
	"github.com/agui-proxy/agui-proxy/compact"
	"github.com/agui-proxy/agui-proxy/recorder"
	"github.com/agui-proxy/agui-proxy/thread"
)

// TestKeptEventsLikeReadBack: what KeptEvents returns of the events the proxy recorded is
// what ParseRecords returns of the same records read back from the store, for events of every
// size (past a chunk, past the largest chunk), data padded with spaces, data that is not a
// JSON event (kept as a place, left out of the events), runs of events that share bytes with
// the one before and runs that share none, and a run of one event. The bytes returned are the
// caller's: changing them changes nothing kept. Its cost is at most the data plus a bounded
// overhead, and a streamed answer costs far less than its events' data.
func TestKeptEventsLikeReadBack(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 14))
	datas := func(n int) []string {
		out := make([]string, 0, n)
		for i := range n {
			switch rng.IntN(10) {
			case 0:
				out = append(out, `{"type":"CUSTOM","name":"big","value":"`+strings.Repeat("x", rng.IntN(200<<10))+`"}`)
			case 1:
				out = append(out, `not json `+fmt.Sprint(i))
			case 2:
				out = append(out, `{"no":"type"}`)
			case 3:
				out = append(out, ` {"type":"STEP_STARTED","stepName":"s`+fmt.Sprint(i)+`"} `)
			case 4:
				out = append(out, `{"type":"NOT_AN_AGUI_TYPE","x":[1,2,{"y":null}]}`)
			default:
				out = append(out, fmt.Sprintf(`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":%q}`, strings.Repeat("w", 1+rng.IntN(40))))
			}
		}
		return out
	}
	for _, n := range []int{0, 1, 7, 300, 2000} {
		ds := datas(n)
		var k thread.KeptEvents
		recs := make([]recorder.Event, 0, n)
		size, largest := 0, 0
		for i, d := range ds {
			largest = max(largest, len(d))
			typ, _ := agui.EventType([]byte(d))
			k.Add(typ, []byte(d))
			recs = append(recs, recorder.Event{Seq: int64(i + 1), Type: typ, Frame: []byte("data: " + d + "\nid: r:1:" + fmt.Sprint(i+1) + "\n\n")})
			size += len(d)
		}
		if k.Len() != int64(n) {
			t.Fatalf("n=%d: Len = %d", n, k.Len())
		}
		want, _ := thread.ParseRecords(recs, -1)
		got := k.Events()
		same := func() bool {
			if len(got) != len(want) {
				return false
			}
			for i := range got {
				if got[i].Type != want[i].Type || string(got[i].Raw) != string(want[i].Raw) {
					return false
				}
			}
			return true
		}
		if !same() {
			t.Fatalf("n=%d: kept events (%d) differ from the records read back (%d)", n, len(got), len(want))
		}
		for i := range got {
			clear(got[i].Raw)
		}
		if got = k.Events(); !same() {
			t.Fatalf("n=%d: changing the returned events changed what is kept", n)
		}
		if c := k.Cost(); c > 2*int64(size)+2*int64(largest)+int64(n)*2*20+(64<<10)+24*int64(n+1)+1024 {
			t.Fatalf("n=%d: cost %d for %d bytes of data", n, c, size)
		}
	}
	var answer thread.KeptEvents
	size := 0
	for i := range 1000 {
		d := fmt.Sprintf(`{"type":"TEXT_MESSAGE_CONTENT","messageId":"0b7e4f8a-9d61-4c11-a3f4-2b8e6d0c5a17","delta":"word%d "}`, i)
		answer.Add("TEXT_MESSAGE_CONTENT", []byte(d))
		size += len(d)
	}
	if c := answer.Cost(); c > int64(size)/3 {
		t.Fatalf("a streamed answer of %d bytes of events costs %d kept", size, c)
	}
	var nilKept *thread.KeptEvents
	if nilKept.Len() != 0 || nilKept.Cost() != 0 || nilKept.Events() != nil {
		t.Fatal("a nil KeptEvents is not empty")
	}
}

// BenchmarkKeptEvents: keeping a run's events (the soak profile's chunks) and parsing them
// back for its checkpoint, against parsing the same records read from the store.
func BenchmarkKeptEvents(b *testing.B) {
	var datas [][]byte
	var recs []recorder.Event
	for i := range 60 {
		d := fmt.Sprintf(`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"word %d of the answer "}`, i)
		datas = append(datas, []byte(d))
		recs = append(recs, recorder.Event{Seq: int64(i + 1), Type: "TEXT_MESSAGE_CONTENT", Frame: []byte("data: " + d + "\nid: r:1:" + fmt.Sprint(i+1) + "\n\n")})
	}
	b.Run("keep+events", func(b *testing.B) {
		b.ReportAllocs()
		var out []compact.Event
		for b.Loop() {
			var k thread.KeptEvents
			for _, d := range datas {
				k.Add("TEXT_MESSAGE_CONTENT", d)
			}
			out = k.Events()
		}
		_ = out
	})
	b.Run("parse-records", func(b *testing.B) {
		b.ReportAllocs()
		var out []compact.Event
		for b.Loop() {
			out, _ = thread.ParseRecords(recs, -1)
		}
		_ = out
	})
}
