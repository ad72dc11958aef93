package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"slices"
	"testing"
)

// TestHydrateAfterReload: the official client reloads (a new HttpAgent that holds only its
// newest message) and runs the next turn; through the proxy the demo agent, which echoes what
// it received, sees the whole branch, while the client's own messages stay what it holds plus
// the answer (RUN_STARTED.input carries only the new message).
func TestHydrateAfterReload(t *testing.T) {
	requireOfficialClient(t)
	proxied := startProxy(t, startDemo(t), nil)
	cmd := exec.CommandContext(t.Context(), "node", "hydrate-check.mjs", "--proxy", proxied)
	cmd.Env = append(os.Environ(), "NO_COLOR=1")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("hydrate-check: %v\n%s", err, out)
	}
	var got struct {
		First, Second  string
		SecondMessages []string
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("hydrate-check output %q: %v", out, err)
	}
	if want := "received 1 messages [u1]; state {}"; got.First != want {
		t.Errorf("first turn: agent said %q, want %q", got.First, want)
	}
	if want := "received 3 messages [u1 msg-r1-1 u2]; state {}"; got.Second != want {
		t.Errorf("after the reload: agent said %q, want %q (the whole branch)", got.Second, want)
	}
	if want := []string{"u2", "msg-r2-1"}; !slices.Equal(got.SecondMessages, want) {
		t.Errorf("reloaded client's messages = %v, want %v", got.SecondMessages, want)
	}
}
