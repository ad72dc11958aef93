package hostile

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"

	"github.com/agui-proxy/agui-proxy/internal/redistest"
)

// roundTripFrames are the frames the generated streams are drawn from: well-formed events and
// every kind of frame an agent may send that is not one (class: export-roundtrip).
var roundTripFrames = []string{
	fMsgStart, fMsgText, fMsgEnd,
	data(`{"type":"STATE_SNAPSHOT","snapshot":{"a":[1,2],"s":"é✓"}}`),
	data(`{"type":"STATE_DELTA","delta":[{"op":"add","path":"/b","value":1}]}`),
	data(`{"type":"STATE_DELTA","delta":{"not":"an array"}}`),
	data(`{"type":"CUSTOM","name":"x","value":{"n":1e400}}`),
	data(`{"type":"FUTURE_EVENT","extra":[true,null]}`),
	data(`{"delta":"no type"}`),
	data(`{"type":7}`),
	data(`[1,2,3]`), data(`"just a string"`), data(`null`), data(`42`),
	"data: {oops}\n\n", "data: not json at all\n\n", "data:\n\n",
	"data: {\"type\":\"CUSTOM\",\ndata: \"name\":\"multi-line\"}\n\n",
	"data: {\"type\":\"CUSTOM\"}\ndata: {\"type\":\"CUSTOM\"}\n\n",
	data(`{"agui-proxy.frame":"looks like our wrapper"}`),
	data(`{"type":"CUSTOM","name":"bad utf8","value":"` + "\xff\xfe" + `"}`),
	data(`{"type":"TEXT_MESSAGE_CONTENT","messageId":"orphan","delta":"x"}`),
	"data: {\"type\":\"CUSTOM\",\"name\":\"cr\"}\r\r",
	": a comment, not recorded\n\n",
}

// TestHostileExportRoundTrip generates streams (seeded, so a failure names its seed) from
// roundTripFrames, records each through the proxy, and checks on both stores that export →
// import → export gives the same document (runs, statuses, parents, every frame).
func TestHostileExportRoundTrip(t *testing.T) {
	srv := redistest.Start(t)
	for _, kind := range []string{"memory", "redis"} {
		t.Run(kind, func(t *testing.T) {
			e := newEnv(t, kind, srv, nil)
			for seed := range uint64(12) {
				rng := rand.New(rand.NewPCG(seed, 0x5eed))
				th := e.id("rt")
				runs := 1 + rng.IntN(3)
				for range runs {
					chunks := []string{fStarted}
					for range rng.IntN(12) {
						chunks = append(chunks, roundTripFrames[rng.IntN(len(roundTripFrames))])
					}
					switch rng.IntN(4) {
					case 0: // the proxy ends it (RUN_ERROR UPSTREAM_ENDED)
					case 1:
						chunks = append(chunks, fFinished, roundTripFrames[rng.IntN(len(roundTripFrames))])
					default:
						chunks = append(chunks, fFinished)
					}
					e.run(t, th, e.id("r"), frames(chunks...))
					e.waitEnded(t, th)
				}
				first := exportOf(t, e, th)
				copyID := e.id("copy")
				imp := e.do(t, http.MethodPost, "/agui/threads/"+copyID+"/import", bytes.NewReader(first))
				if imp.status != http.StatusCreated {
					t.Fatalf("seed %d: import of the export: %d %q", seed, imp.status, trunc(imp.body))
				}
				second := exportOf(t, e, copyID)
				a, b := comparable(t, first), comparable(t, second)
				if a != b {
					t.Fatalf("seed %d: export → import → export differs:\nfirst  %s\nsecond %s", seed, a, b)
				}
			}
		})
	}
}

func exportOf(t *testing.T, e *env, thread string) []byte {
	t.Helper()
	r := e.get(t, "/agui/threads/"+thread+"/export")
	if r.status != http.StatusOK {
		t.Fatalf("export of %s: %d %q", thread, r.status, trunc(r.body))
	}
	return r.body
}

// comparable keeps what an export must preserve: every run's id, parent, status, detail, event
// count and frames (not the thread id, the export time or the runs' timestamps).
func comparable(t *testing.T, doc []byte) string {
	t.Helper()
	var d struct {
		FormatVersion int `json:"formatVersion"`
		Runs          []struct {
			RunID       string            `json:"runId"`
			ParentRunID string            `json:"parentRunId"`
			Status      string            `json:"status"`
			Detail      string            `json:"detail"`
			Events      int64             `json:"events"`
			EventList   []json.RawMessage `json:"eventList"`
		} `json:"runs"`
	}
	if err := json.Unmarshal(doc, &d); err != nil {
		t.Fatalf("export is not JSON: %v", err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "v%d", d.FormatVersion)
	for _, r := range d.Runs {
		if int64(len(r.EventList)) != r.Events {
			t.Errorf("run %s: %d frames exported of %d recorded", r.RunID, len(r.EventList), r.Events)
		}
		fmt.Fprintf(&b, " [%s<%s %s %q %d:", r.RunID, r.ParentRunID, r.Status, r.Detail, r.Events)
		for _, ev := range r.EventList {
			b.Write(ev)
			b.WriteByte(' ')
		}
		b.WriteByte(']')
	}
	return b.String()
}
