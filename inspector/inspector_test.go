package inspector_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/agui-proxy/agui-proxy/inspector"
	"github.com/agui-proxy/agui-proxy/proxy"
)

func get(t *testing.T, client *http.Client, u string, header http.Header) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	res, err := client.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res, string(b)
}

func TestHandlerServesThePage(t *testing.T) {
	srv := httptest.NewServer(inspector.Handler("/agui/"))
	t.Cleanup(srv.Close)
	for _, tc := range []struct {
		path, ctype, contains string
	}{
		{"/agui/ui/", "text/html", `<script type="module" src="inspector.js">`},
		{"/agui/ui/inspector.js", "javascript", "new EventSource("},
		{"/agui/ui/inspector.css", "text/css", ".tree"},
	} {
		res, body := get(t, srv.Client(), srv.URL+tc.path, nil)
		if res.StatusCode != 200 || !strings.Contains(res.Header.Get("Content-Type"), tc.ctype) || !strings.Contains(body, tc.contains) {
			t.Errorf("GET %s = %d %q, body has %q: %v", tc.path, res.StatusCode, res.Header.Get("Content-Type"), tc.contains, strings.Contains(body, tc.contains))
		}
		if csp := res.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") || !strings.Contains(csp, "connect-src 'self'") {
			t.Errorf("GET %s: Content-Security-Policy = %q", tc.path, csp)
		}
		if res.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("GET %s: no nosniff", tc.path)
		}
	}
	if res, _ := get(t, srv.Client(), srv.URL+"/agui/ui/nope.js", nil); res.StatusCode != 404 {
		t.Errorf("unknown file = %d, want 404", res.StatusCode)
	}
	res, err := srv.Client().Post(srv.URL+"/agui/ui/", "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 405 || res.Header.Get("Allow") != "GET, HEAD" {
		t.Errorf("POST = %d Allow %q, want 405 GET, HEAD", res.StatusCode, res.Header.Get("Allow"))
	}
	noRedirect := *srv.Client()
	noRedirect.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	if res, _ := get(t, &noRedirect, srv.URL+"/agui/ui", nil); res.StatusCode != 301 || res.Header.Get("Location") != "ui/" {
		t.Errorf("GET /agui/ui = %d Location %q, want 301 ui/", res.StatusCode, res.Header.Get("Location"))
	}
}

func TestMatch(t *testing.T) {
	for path, want := range map[string]bool{
		"/agui/ui": true, "/agui/ui/": true, "/agui/ui/inspector.js": true,
		"/agui/uix": false, "/agui/threads/t/events": false, "/ui/": false,
	} {
		if got := inspector.Match("/agui/", path); got != want {
			t.Errorf("Match(/agui/, %q) = %v, want %v", path, got, want)
		}
	}
}

// The proxy serves the page only when Config.Inspector is set, and in multi-tenant mode only to
// identified callers.
func TestProxyMount(t *testing.T) {
	agent := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(agent.Close)
	up, _ := url.Parse(agent.URL)
	serve := func(cfg proxy.Config) string {
		cfg.Upstream = up
		h, err := proxy.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(h)
		t.Cleanup(srv.Close)
		t.Cleanup(func() { h.Shutdown(t.Context()) })
		return srv.URL
	}
	off := serve(proxy.Config{})
	if res, _ := get(t, http.DefaultClient, off+"/agui/ui/", nil); res.StatusCode != 404 {
		t.Errorf("inspector off: GET /agui/ui/ = %d, want 404", res.StatusCode)
	}
	on := serve(proxy.Config{Inspector: true})
	if res, body := get(t, http.DefaultClient, on+"/agui/ui/", nil); res.StatusCode != 200 || !strings.Contains(body, "agui-proxy inspector") {
		t.Errorf("inspector on: GET /agui/ui/ = %d", res.StatusCode)
	}
	custom := serve(proxy.Config{Inspector: true, AttachPrefix: "/_proxy/"})
	if res, _ := get(t, http.DefaultClient, custom+"/_proxy/ui/inspector.js", nil); res.StatusCode != 200 {
		t.Errorf("prefix /_proxy/: GET /_proxy/ui/inspector.js = %d, want 200", res.StatusCode)
	}
	tenants := serve(proxy.Config{Inspector: true, IdentityHeader: "X-User"})
	if res, _ := get(t, http.DefaultClient, tenants+"/agui/ui/", nil); res.StatusCode != 401 {
		t.Errorf("multi-tenant, anonymous: GET /agui/ui/ = %d, want 401", res.StatusCode)
	}
	if res, _ := get(t, http.DefaultClient, tenants+"/agui/ui/", http.Header{"X-User": {"alice"}}); res.StatusCode != 200 {
		t.Errorf("multi-tenant, identified: GET /agui/ui/ = %d, want 200", res.StatusCode)
	}
}
