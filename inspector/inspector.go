// Package inspector serves the thread inspector: one static page, embedded in the binary, that
// shows a thread of agui-proxy through the attach endpoints it sits beside — the runs as a tree
// (branches visible), the messages and state as of any run, a run's raw events with their ids
// and arrival times, the live tail of a running run, gaps and interruptions, and stop and
// export buttons.
//
// The page is plain HTML, CSS and a JavaScript module in assets/ (no build step, no CDN). It
// reads nothing but the attach endpoints of its own route, by relative URLs ("../threads/...")
// from {prefix}ui/, so it sees exactly what the caller may see: with an identity header
// configured, the gateway in front of the proxy identifies the page's requests like any other.
// The proxy serves it only when enabled (proxy.Config.Inspector, AGUI_INSPECTOR).
package inspector

import (
	"embed"
	"io/fs"
	"net/http"
	"strings"
	"unicode/utf8"
)

//go:embed assets
var assets embed.FS

// Path is where the page lives under the attach prefix.
const Path = "ui/"

// Handler returns the page's handler for requests whose path starts with prefix+"ui"
// (prefix is the attach prefix, e.g. "/agui/"). It answers GET and HEAD only; "{prefix}ui"
// redirects to "{prefix}ui/".
func Handler(prefix string) http.Handler {
	sub, err := fs.Sub(assets, "assets")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	files := http.StripPrefix(prefix+Path, http.FileServerFS(sub))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		if r.URL.Path == strings.TrimSuffix(prefix+Path, "/") {
			// A relative Location (http.Redirect would make it absolute), so that it stays right
			// under a route prefix the server stripped before this handler.
			w.Header().Set("Location", Path)
			w.WriteHeader(http.StatusMovedPermanently)
			return
		}
		if name := strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, prefix+Path), "/"); name != "" && (!utf8.ValidString(name) || !fs.ValidPath(name)) {
			// A name no file can have (invalid UTF-8, "." or ".." elements): the client's
			// mistake, 404 like any file the page does not hold (the file server would take
			// the file system's refusal for its own failure and answer 500).
			http.NotFound(w, r)
			return
		}
		h := w.Header()
		// The page loads only its own files and talks only to its own origin.
		h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-cache")
		files.ServeHTTP(w, r)
	})
}

// Match reports whether path is served by Handler(prefix).
func Match(prefix, path string) bool {
	return strings.HasPrefix(path, prefix+Path) || path == strings.TrimSuffix(prefix+Path, "/")
}
