package thread_test

import (
	"bytes"
	"strconv"
	"testing"

	"github.com/agui-proxy/agui-proxy/agui"
	"github.com/agui-proxy/agui-proxy/recorder"
	"github.com/agui-proxy/agui-proxy/sse"
	"github.com/agui-proxy/agui-proxy/thread"
)

// FuzzKeptEvents feeds a run's events (the input split at 0x1e, each piece one event's data as
// the proxy's SSE reader hands it over: lines joined with LF, never a CR; typed as the proxy
// types it) to KeptEvents: what it returns must be exactly what ParseRecords returns of the
// same events framed as the proxy records them and read back from the store, whatever bytes
// the events share or not, and its Len the number of events. Seeds in
// testdata/fuzz/FuzzKeptEvents.
func FuzzKeptEvents(f *testing.F) {
	f.Add([]byte(`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"a"}` + "\x1e" + `{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"ab"}`))
	f.Add([]byte("not json\x1e{\"type\":\"RAW\",\n\"event\":1}\x1e\x1e{\"type\":\"RAW\",\"event\":1}\x1e{}"))
	f.Add([]byte(`{"type":"CUSTOM","name":"x","value":"` + string(bytes.Repeat([]byte("y"), 700)) + `"}` + "\x1e" + `{"type":"CUSTOM","name":"x","value":"` + string(bytes.Repeat([]byte("y"), 699)) + `"}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		var k thread.KeptEvents
		var recs []recorder.Event
		for i, d := range bytes.Split(in, []byte{0x1e}) {
			d = bytes.ReplaceAll(d, []byte("\r"), []byte("\n"))
			typ, _ := agui.EventType(d)
			k.Add(typ, d)
			frame, err := sse.AppendEvent(nil, sse.Event{ID: "r:1:" + strconv.Itoa(i+1), Data: d})
			if err != nil {
				t.Fatal(err)
			}
			recs = append(recs, recorder.Event{Seq: int64(i + 1), Type: typ, Frame: frame})
		}
		if k.Len() != int64(len(recs)) {
			t.Fatalf("Len = %d, want %d", k.Len(), len(recs))
		}
		want, _ := thread.ParseRecords(recs, -1)
		got := k.Events()
		if len(got) != len(want) {
			t.Fatalf("%d events kept, %d read back", len(got), len(want))
		}
		for i := range got {
			if got[i].Type != want[i].Type || !bytes.Equal(got[i].Raw, want[i].Raw) {
				t.Fatalf("event %d: kept %s %q, read back %s %q", i, got[i].Type, got[i].Raw, want[i].Type, want[i].Raw)
			}
		}
	})
}
