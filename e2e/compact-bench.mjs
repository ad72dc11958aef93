// compact-bench.mjs <file.ndjson>...: the official compactEvents (@ag-ui/client 1.0) on the
// same bytes as the Go BenchmarkCompact (which writes $TMPDIR/agui-compact-bench-<n>.ndjson):
// JSON.parse each line, compactEvents, JSON.stringify each output event. Besides wall-clock
// events/s it reports events per CPU-second of the whole process (as BenchmarkCompact does),
// which is steadier on a shared machine.
import { readFileSync } from "node:fs";
import { compactEvents } from "@ag-ui/client";

process.env.SUPPRESS_TRANSFORMATION_WARNINGS = "true";
for (const file of process.argv.slice(2)) {
  const text = readFileSync(file, "utf8");
  const run = () => {
    const events = text.trim().split("\n").map((l) => JSON.parse(l));
    const out = compactEvents(events);
    let n = 0;
    for (const e of out) n += JSON.stringify(e).length + 1;
    return [events.length, n];
  };
  for (let i = 0; i < 3; i++) run(); // warm up
  let iters = 0;
  let events = 0;
  let outBytes = 0;
  const cpu0 = process.cpuUsage();
  const start = process.hrtime.bigint();
  while (process.hrtime.bigint() - start < 2_000_000_000n || iters < 3) {
    [events, outBytes] = run();
    iters++;
  }
  const secs = Number(process.hrtime.bigint() - start) / 1e9;
  const cpu = process.cpuUsage(cpu0);
  const cpuSecs = (cpu.user + cpu.system) / 1e6; // whole process, GC threads included

  console.log(`${file}: ${events} events, ${(secs / iters * 1e3).toFixed(2)} ms/op, ${((events * iters) / secs / 1e6).toFixed(2)} M events/s, ${((events * iters) / cpuSecs / 1e6).toFixed(2)} M events/cpu-s, out/in ${(outBytes / text.length).toFixed(4)}`);
}
