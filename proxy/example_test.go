package proxy_test

import (
	"log"
	"net/http"
	"net/url"

	"github.com/agui-proxy/agui-proxy/proxy"
)

// Example mounts the proxy as middleware inside an existing net/http server: the agent's
// routes live under /agent/, the proxy's attach endpoints under /agui/, and the application
// keeps its own routes.
func Example() {
	agent, _ := url.Parse("http://127.0.0.1:8000")
	h, err := proxy.New(proxy.Config{Upstream: agent})
	if err != nil {
		log.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/agent/", http.StripPrefix("/agent", h)) // POST /agent/ runs through the proxy
	mux.Handle("/agui/", h)                              // attach, resume, history
	mux.HandleFunc("/app/health", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) })
	srv := &http.Server{Addr: "127.0.0.1:8080", Handler: mux, ReadHeaderTimeout: 5e9}
	_ = srv // srv.ListenAndServe(); on shutdown: srv.Shutdown(ctx) then h.Shutdown(ctx)
	// Output:
}
