package main

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/agui-proxy/agui-proxy/proxy"
	"github.com/agui-proxy/agui-proxy/recorder"
)

// TestDefaultsAreTheLibrarys: every variable's default (the envDefault tag, also printed by -h
// and in the README) is the default of the field it sets in package proxy or recorder, so a
// default lives in one place and the documentation cannot drift from it.
func TestDefaultsAreTheLibrarys(t *testing.T) {
	cfg, err := loadConfig(map[string]string{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name      string
		env, want any
	}{
		{"AGUI_ROUTE", cfg.Route, proxy.DefaultRoute},
		{"AGUI_RECORDER_BUFFER", cfg.RecorderBuffer, recorder.DefaultMaxBufferedEvents},
		{"AGUI_RECORDER_BUFFER_BYTES", cfg.RecorderBufferBytes, int64(recorder.DefaultMaxBufferedBytes)},
		{"AGUI_RECORDER_FULL_WAIT", cfg.RecorderFullWait, recorder.DefaultFullWait},
		{"AGUI_RECORDER_LINGER", cfg.RecorderLinger, recorder.DefaultLinger},
		{"AGUI_RECORDER_BUSY_LINGER", cfg.RecorderBusyLinger, recorder.DefaultBusyLinger},
		{"AGUI_RECORDER_LANES", cfg.RecorderLanes, 0}, // proxy.Config's zero: per store
		{"AGUI_CHECKPOINT_MEMORY", cfg.CheckpointMemory, int64(proxy.DefaultCheckpointMemory)},
		{"AGUI_MAX_BODY_BYTES", cfg.MaxBodyBytes, int64(proxy.DefaultMaxBodyBytes)},
		{"AGUI_MAX_EVENT_BYTES", cfg.MaxEventBytes, proxy.DefaultMaxEventBytes},
		{"AGUI_MAX_RUN_DURATION", cfg.MaxRunDuration, proxy.DefaultMaxRunDuration},
		{"AGUI_MAX_RUN_BYTES", cfg.MaxRunBytes, int64(proxy.DefaultMaxRunBytes)},
		{"AGUI_UPSTREAM_HEADER_TIMEOUT", cfg.UpstreamHeaderTimeout, proxy.DefaultUpstreamHeaderTimeout},
		{"AGUI_UPSTREAM_IDLE_TIMEOUT", cfg.UpstreamIdleTimeout, proxy.DefaultUpstreamIdleTimeout},
		{"AGUI_STORE_TIMEOUT", cfg.StoreTimeout, proxy.DefaultStoreTimeout},
		{"AGUI_CLIENT_QUEUE_BYTES", cfg.ClientQueueBytes, proxy.DefaultClientQueueBytes},
		{"AGUI_HEARTBEAT", cfg.Heartbeat, proxy.DefaultHeartbeatInterval},
		{"AGUI_BODY_READ_TIMEOUT", cfg.BodyReadTimeout, proxy.DefaultBodyReadTimeout},
		{"AGUI_ATTACH_PREFIX", cfg.AttachPrefix, proxy.DefaultAttachPrefix},
		{"AGUI_ATTACH_WRITE_TIMEOUT", cfg.AttachWriteTimeout, proxy.DefaultAttachWriteTimeout},
		{"AGUI_ATTACH_RETRY", cfg.AttachRetry, proxy.DefaultAttachRetry},
		{"AGUI_ATTACH_FOLLOW_POLL", cfg.AttachFollowPoll, proxy.DefaultAttachFollowPoll},
		{"AGUI_MAX_IMPORT_BYTES", cfg.MaxImportBytes, int64(proxy.DefaultMaxImportBytes)},
		{"AGUI_LEASE_INTERVAL", cfg.LeaseInterval, proxy.DefaultLeaseInterval},
	} {
		if c.env != c.want {
			t.Errorf("%s defaults to %v, but the library's default is %v", c.name, c.env, c.want)
		}
	}
}

// TestBusyLingerDescribesBusyRuns: the variable's description names the recorder's threshold,
// so the README and -h cannot drift from it.
func TestBusyLingerDescribesBusyRuns(t *testing.T) {
	f, _ := reflect.TypeFor[config]().FieldByName("RecorderBusyLinger")
	if want := fmt.Sprintf("events of %d runs or more", recorder.BusyRuns); !strings.Contains(f.Tag.Get("doc"), want) {
		t.Errorf("AGUI_RECORDER_BUSY_LINGER's documentation does not say %q: %s", want, f.Tag.Get("doc"))
	}
	if want := fmt.Sprintf("%d runs or more", recorder.BusyRuns); !strings.Contains(f.Tag.Get("help"), want) {
		t.Errorf("AGUI_RECORDER_BUSY_LINGER's help does not say %q: %s", want, f.Tag.Get("help"))
	}
}
