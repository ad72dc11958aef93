// Command agui-healthcheck probes an HTTP endpoint and exits 0 when it answers with an
// accepted status, 1 otherwise. It exists because the agui-proxy image is distroless: there
// is no shell, curl or wget to run a Docker or Compose healthcheck with.
//
//	agui-healthcheck http://127.0.0.1:8080/healthz
//	agui-healthcheck -status 405 http://127.0.0.1:8000/   # the demo agent answers GET with 405
//
// Flags:
//
//	-status   comma-separated accepted status codes (default 200)
//	-timeout  time allowed for the whole request (default 3s)
//
// It follows no redirects, reads at most 4 KiB of the body and prints one line saying why a
// probe failed on stderr.
package main
