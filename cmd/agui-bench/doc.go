// Command agui-bench is a load tool for AG-UI endpoints: the demo agent directly, or the
// proxy in front of it. It opens C concurrent runs, each a POST of a RunAgentInput whose
// forwardedProps ask the demo agent's bench scenario for N time-stamped events a fixed
// interval apart, reads the SSE streams, and reports:
//
//   - total events and events per second (all runs, wall clock);
//   - per-event latency, receive time minus the sentNs stamp the agent put in rawEvent,
//     as p50/p90/p99/max (both ends read the same machine's clock);
//   - time to first event (request start to first event) p50/p99;
//   - errors by kind (HTTP status, read error, stream without RUN_FINISHED, RUN_ERROR);
//   - with -pid, the target process's CPU seconds (utime+stime delta from /proc/PID/stat)
//     per event and its peak RSS (VmHWM from /proc/PID/status; a high-water mark since the
//     process started, not only during the run);
//   - with -agent-pid, the machine's CPU per event, process by process (the agent, this tool,
//     the -pid target, Redis with -redis), the share of the cores they kept busy, and the
//     events per second those costs allow on this machine's cores: a run that kept the cores
//     busy was bounded by them, whatever the target.
//
// Chat mode (-runs K) has each of the C streams perform K runs one after another, each on a
// thread of its own, the next POSTed as soon as the previous one ended, as a chat client
// does: it reports the first event of those follow-up runs apart, and the connections the
// client opened (a target that keeps each connection for the next request opens one per
// stream; one that closes it, one per run).
//
// Fan-out mode (-attach N) opens N run attachers per run once every run started; follow mode
// (-follow N) opens N ?follow=1 thread attachers per thread once every run ended, waits until
// each got the prelude's replay_complete marker, reports the target's memory per idle
// follower (VmRSS delta with -pid; heap and stack in use after forced GCs with -pprof-url,
// the proxy's AGUI_PPROF_LISTEN), then POSTs one more run per thread and counts the followers
// it reached.
//
// Usage:
//
//	agui-bench -url http://127.0.0.1:8000/ -c 50 -events 10000 -interval 0 -pid $(pgrep -n demo-agent)
//	agui-bench -url http://127.0.0.1:8080/agent -c 100 -events 200 -interval 5ms -json
//	agui-bench -url http://127.0.0.1:8080/ -c 100 -runs 10 -events 20 -interval 5ms
//	agui-bench -url http://127.0.0.1:8080/ -c 200 -events 5 -interval 0 -follow 10 -pid $(pgrep -n agui-proxy) -pprof-url http://127.0.0.1:6060
//
// Every loop is bounded: each run by its event count and all of them by -duration. Only
// loopback targets are accepted unless -allow-remote is given. The interval travels as whole
// milliseconds (intervalMs), so sub-millisecond values round down to 0 (no pause).
package main
