// Command demo-agent serves the scripted AG-UI agent of package internal/demoagent over HTTP,
// so the proxy, the e2e harness and agui-bench have a deterministic upstream.
//
// Configuration comes from the environment (run with -h for the list). POST a RunAgentInput
// to any path; pick the scenario with forwardedProps.scenario or a user message naming it:
//
//	DEMO_LISTEN=127.0.0.1:8000 demo-agent
//	curl -N localhost:8000 -d '{"threadId":"t","runId":"r","forwardedProps":{"scenario":"tools"}}'
//
// On SIGINT or SIGTERM the server stops accepting connections, lets running streams finish
// for up to DEMO_SHUTDOWN_TIMEOUT, then cancels them.
package main
