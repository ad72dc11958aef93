package gcfloor

import (
	"runtime"
	"runtime/debug"
	"testing"
)

func TestPercentFor(t *testing.T) {
	const mb = 1 << 20
	tests := []struct {
		base        int
		floor, live uint64
		want        int
	}{
		{50, 64 * mb, 8 * mb, 700},   // goal 8 × 8 = 64 MB
		{50, 64 * mb, 2 * mb, 1600},  // 3,100 would put the runtime's smallest goal (4 MB × 31) past the floor
		{50, 64 * mb, 0, 1600},       // nothing live yet: the smallest goal is the floor
		{50, 64 * mb, 48 * mb, 50},   // 48 × 1.5 = 72 MB: the base already reaches the floor
		{50, 64 * mb, 40 * mb, 60},   // 40 × 1.6 = 64 MB
		{50, 64 * mb, 200 * mb, 50},  // a large heap: the base alone
		{200, 64 * mb, 32 * mb, 200}, // the base is never lowered
		{50, 0, 10 * mb, 50},         // no floor
		{50, 64 * mb, 64 * mb, 50},   // at the floor
		{50, 1 << 40, mb, 10000},     // capped
	}
	for _, tt := range tests {
		if got := PercentFor(tt.base, tt.floor, tt.live); got != tt.want {
			t.Errorf("PercentFor(%d, %d, %d) = %d, want %d", tt.base, tt.floor, tt.live, got, tt.want)
		}
	}
}

// collections allocates 256 MB of short-lived garbage, 64 KiB at a time, while about 1 MB
// stays live, and returns how many collections ran.
func collections() uint32 {
	live := make([][]byte, 16)
	for i := range live {
		live[i] = make([]byte, 64<<10)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	var sink []byte
	for i := range 4096 {
		sink = make([]byte, 64<<10)
		sink[0] = byte(i)
	}
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(live)
	runtime.KeepAlive(sink)
	return after.NumGC - before.NumGC
}

// TestFloorCollectsLess: with a 128 MB floor, a process whose live heap is about 1 MB collects a
// few times while allocating 256 MB, against dozens at GOGC 50 alone; Stop ends the retuning.
func TestFloorCollectsLess(t *testing.T) {
	old := debug.SetGCPercent(50)
	defer debug.SetGCPercent(old)
	runtime.GC()
	without := collections()

	f := Start(50, 128<<20)
	for i := 0; i < 1000 && f.Percent() <= 50; i++ {
		runtime.GC() // (the finalizer retunes after a collection, on the finalizer goroutine)
		runtime.Gosched()
	}
	with := collections()
	f.Stop()
	t.Logf("256 MB allocated, ~1 MB live: %d collections at GOGC 50, %d with a 128 MB floor (GOGC %d)", without, with, f.Percent())
	if f.Percent() <= 50 {
		t.Errorf("Percent() = %d with a 128 MB floor and ~1 MB live, want far above 50", f.Percent())
	}
	if with*4 > without {
		t.Errorf("%d collections with the floor, %d without: want a quarter or fewer", with, without)
	}
	runtime.GC()
	runtime.GC()
	if f.tune() {
		t.Error("tune() after Stop = true, want false")
	}
}
