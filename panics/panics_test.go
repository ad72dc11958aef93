package panics

import (
	"bytes"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func TestCallRecoversCountsAndLogsOnce(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	before := Count(Writer)
	err := Call(Writer, log, func() error {
		var m map[string]int
		m["x"] = 1 // a nil map write: a runtime error
		return nil
	}, slog.String("thread_id", "t1"))
	var pe *Error
	if !errors.As(err, &pe) || !errors.Is(err, ErrPanicked) || pe.Where != Writer {
		t.Fatalf("Call = %v, want a *Error in writer", err)
	}
	if Count(Writer) != before+1 {
		t.Fatalf("Count(writer) = %d, want %d", Count(Writer), before+1)
	}
	out := buf.String()
	if strings.Count(out, "recovered a panic") != 1 || !strings.Contains(out, "thread_id=t1") || !strings.Contains(out, "panics_test.go") {
		t.Fatalf("log %q: want one line with the ids and the stack", out)
	}
	if err := Call(Writer, log, func() error { return nil }); err != nil {
		t.Fatalf("Call without a panic = %v", err)
	}
	want := errors.New("plain")
	if err := Call(Writer, log, func() error { return want }); err != want {
		t.Fatalf("Call = %v, want the function's error", err)
	}
}

func TestAbortHandlerIsNotContained(t *testing.T) {
	defer func() {
		if v := recover(); v != http.ErrAbortHandler {
			t.Fatalf("recovered %v, want http.ErrAbortHandler panicked again", v)
		}
	}()
	Call(Request, slog.New(slog.DiscardHandler), func() error { panic(http.ErrAbortHandler) })
}

func TestCollectors(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(Collectors()...)
	before := Count(Tail)
	Call(Tail, slog.New(slog.DiscardHandler), func() error { panic("x") })
	mfs, err := reg.Gather()
	if err != nil || len(mfs) != 1 || mfs[0].GetName() != "agui_proxy_panics_total" {
		t.Fatalf("Gather = %v, %v; want agui_proxy_panics_total", mfs, err)
	}
	series := map[string]float64{}
	for _, m := range mfs[0].GetMetric() {
		series[m.GetLabel()[0].GetValue()] = m.GetCounter().GetValue()
	}
	if len(series) != len(All) || series["tail"] != float64(before+1) {
		t.Fatalf("series %v: want one per family, tail at %d", series, before+1)
	}
	// A second registry gets collectors of its own over the same counts.
	prometheus.NewRegistry().MustRegister(Collectors()...)
}

func TestProbe(t *testing.T) {
	Probe(Pump, "t") // no hook: nothing
	var got []string
	restore := SetHook(func(w Where, key string) { got = append(got, string(w)+":"+key) })
	if !Hooked() {
		t.Fatal("Hooked() = false with a hook set")
	}
	Probe(Pump, "t1")
	restore()
	Probe(Pump, "t2")
	if len(got) != 1 || got[0] != "pump:t1" || Hooked() {
		t.Fatalf("probes seen %v (hooked %v), want only pump:t1 before the restore", got, Hooked())
	}
}
