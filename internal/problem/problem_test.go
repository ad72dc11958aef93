package problem

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/agui-proxy/agui-proxy/agui"
	"github.com/agui-proxy/agui-proxy/panics"
	"github.com/agui-proxy/agui-proxy/recorder"
)

func TestForMapsEverySentinel(t *testing.T) {
	tests := []struct {
		err    error
		status int
		code   string
	}{
		{fmt.Errorf("%w: bad", agui.ErrInvalidRunInput), 400, CodeInvalidRunInput},
		{fmt.Errorf("%w: twice", ErrInvalidIdentity), 400, CodeInvalidIdentity},
		{ErrIdentityRequired, 401, CodeIdentityRequired},
		{recorder.ErrInvalidCursor, 400, CodeInvalidEventID},
		{ErrCursorForeign, 400, CodeInvalidEventID},
		{agui.ErrInvalidID, 400, CodeInvalidID},
		{ErrInvalidImport, 400, CodeInvalidImport},
		{ErrNoSuchEndpoint, 404, CodeNotFound},
		{recorder.ErrRunAlreadyStarted, 409, CodeRunAlreadyStarted},
		{recorder.ErrThreadRoomMismatch, 409, CodeThreadRoomMismatch},
		{recorder.ErrThreadBusy, 409, CodeThreadBusy},
		{ErrThreadNotEmpty, 409, CodeThreadNotEmpty},
		{ErrRunNotRunning, 409, CodeRunNotRunning},
		{fmt.Errorf("%w: limit", ErrInvalidQuery), 400, CodeInvalidQuery},
		{recorder.ErrInvalidPageCursor, 400, CodeInvalidQuery},
		{StoreErr(fmt.Errorf("listing: %w", recorder.ErrInvalidPageCursor)), 400, CodeInvalidQuery},
		{fmt.Errorf("%w: gap in run r1", ErrHistoryIncomplete), 409, CodeHistoryIncomplete},
		{fmt.Errorf("thread %q: %w", "t", recorder.ErrThreadNotFound), 404, CodeThreadNotFound},
		{recorder.ErrRunNotFound, 404, CodeRunNotFound},
		{ErrUnrecoverable, 410, CodeUnrecoverablePosition},
		{ErrLiveTailsUnsupported, 501, CodeLiveTailsUnsupported},
		{ErrShuttingDown, 503, CodeShuttingDown},
		{&panics.Error{Where: panics.Attach, Value: "boom"}, 500, CodeInternal},
		{StoreErr(fmt.Errorf("reading: %w", &panics.Error{Where: panics.Compact, Value: "boom"})), 500, CodeInternal},
		{Upstream(errors.New("connection refused")), 502, CodeUpstreamUnavailable},
		{Upstream(context.DeadlineExceeded), 504, CodeUpstreamTimeout},
		{&http.MaxBytesError{Limit: 10}, 413, CodeBodyTooLarge},
		{StoreErr(errors.New("dial tcp 10.0.0.1:6379: refused")), 503, CodeStoreUnavailable},
		{errors.New("anything else"), 503, CodeStoreUnavailable},
	}
	for _, tt := range tests {
		p := For(tt.err)
		if p.Status != tt.status || p.Code != tt.code || p.Type != "urn:agui-proxy:problem:"+tt.code || p.Title == "" {
			t.Errorf("For(%v) = %+v, want %d %s", tt.err, p, tt.status, tt.code)
		}
	}
}

func TestDetailsNeverCarryStoreErrors(t *testing.T) {
	err := StoreErr(errors.New("dial tcp 10.0.0.1:6379: connection refused"))
	if p := For(err); strings.Contains(p.Detail, "10.0.0.1") {
		t.Errorf("detail leaks the store error: %q", p.Detail)
	}
	for _, s := range []error{recorder.ErrThreadNotFound, recorder.ErrThreadBusy, context.Canceled} {
		if got := StoreErr(fmt.Errorf("x: %w", s)); errors.Is(got, ErrStoreUnavailable) {
			t.Errorf("StoreErr hid the sentinel %v", s)
		}
	}
	if StoreErr(nil) != nil {
		t.Error("StoreErr(nil) != nil")
	}
}

func TestTableCodesAreUnique(t *testing.T) {
	seen := map[string]bool{}
	for _, e := range table {
		if seen[e.code] {
			t.Errorf("code %s has two rows", e.code)
		}
		seen[e.code] = true
	}
}

func TestRespond(t *testing.T) {
	rec := httptest.NewRecorder()
	r := httptest.NewRequest("GET", "/x", nil)
	p := Respond(rec, r, slog.New(slog.DiscardHandler), ErrShuttingDown)
	if rec.Code != 503 || p.Code != CodeShuttingDown || rec.Header().Get("Retry-After") != "1" ||
		rec.Header().Get("Content-Type") != "application/problem+json" || !strings.Contains(rec.Body.String(), `"code":"ShuttingDown"`) {
		t.Errorf("Respond wrote %d %v %q", rec.Code, rec.Header(), rec.Body)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	rec = httptest.NewRecorder()
	if p := Respond(rec, r.WithContext(ctx), slog.New(slog.DiscardHandler), ErrShuttingDown); p.Status != 0 || rec.Body.Len() != 0 {
		t.Errorf("Respond to a gone client wrote %q", rec.Body)
	}
}
