package main

import (
	"strings"
	"testing"
)

// TestBadDurationNamesVariable: a bad value is reported under its variable's name.
func TestBadDurationNamesVariable(t *testing.T) {
	_, err := loadConfig(map[string]string{"AGUI_MAX_RUN_DURATION": "1 hour", "AGUI_MAX_BODY_BYTES": "ten"})
	if err == nil {
		t.Fatal("loadConfig accepted a bad duration")
	}
	msg := err.Error()
	for _, want := range []string{"AGUI_MAX_RUN_DURATION", "AGUI_MAX_BODY_BYTES"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not name %s", msg, want)
		}
	}
	for _, field := range []string{"MaxRunDuration", "MaxBodyBytes"} {
		if strings.Contains(msg, `"`+field+`"`) {
			t.Errorf("error %q names the Go field %s", msg, field)
		}
	}
}

// TestUnknownVariableWarns: a misspelled AGUI_* variable is reported with the closest known
// name; known and foreign variables are not.
func TestUnknownVariableWarns(t *testing.T) {
	got := unknownVars(map[string]string{
		"AGUI_MAX_BODY_BYTE": "1", "AGUI_REDIS_ULR": "redis://x", "AGUI_LISTEN": "x", "PATH": "/bin", "DEMO_LISTEN": "x",
	})
	if len(got) != 2 {
		t.Fatalf("warnings %q, want 2", got)
	}
	if !strings.Contains(got[0], "AGUI_MAX_BODY_BYTE ") || !strings.Contains(got[0], "did you mean AGUI_MAX_BODY_BYTES?") {
		t.Errorf("warning %q", got[0])
	}
	if !strings.Contains(got[1], "AGUI_REDIS_ULR ") || !strings.Contains(got[1], "did you mean AGUI_REDIS_URL?") {
		t.Errorf("warning %q", got[1])
	}
}

// TestLimitsContradict: a client queue smaller than the body or event limit is refused,
// naming the variables.
func TestLimitsContradict(t *testing.T) {
	_, err := loadConfig(map[string]string{"AGUI_CLIENT_QUEUE_BYTES": "1048576", "AGUI_MAX_BODY_BYTES": "2097152"})
	if err == nil || !strings.Contains(err.Error(), "AGUI_CLIENT_QUEUE_BYTES") || !strings.Contains(err.Error(), "AGUI_MAX_BODY_BYTES") {
		t.Fatalf("loadConfig = %v, want an error naming AGUI_CLIENT_QUEUE_BYTES and AGUI_MAX_BODY_BYTES", err)
	}
	if _, err := loadConfig(map[string]string{}); err != nil {
		t.Fatalf("the defaults: %v", err)
	}
}

// TestRequireIdentityValues: AGUI_REQUIRE_IDENTITY is true, false or unset, and only with an
// identity header.
func TestRequireIdentityValues(t *testing.T) {
	for env, ok := range map[[2]string]bool{
		{"", ""}: true, {"X-User", ""}: true, {"X-User", "true"}: true, {"X-User", "false"}: true,
		{"X-User", "yes"}: false, {"", "true"}: false,
	} {
		m := map[string]string{}
		if env[0] != "" {
			m["AGUI_IDENTITY_HEADER"] = env[0]
		}
		if env[1] != "" {
			m["AGUI_REQUIRE_IDENTITY"] = env[1]
		}
		if _, err := loadConfig(m); (err == nil) != ok {
			t.Errorf("loadConfig(%v) = %v, want ok %v", m, err, ok)
		}
	}
}
