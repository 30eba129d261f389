// The server under attack and careless clients (issue 20's rows, each as a bounded check): deep
// JSON, oversized prompts, number overflow, impossible requests, the context rule, HTTP framing
// (Content-Length, chunked bodies, header floods, methods, ranges), admission under a burst and
// the queue-depth gauge. After each group the server must still answer a normal request.
//
//   node abuse.mjs <url-a> <api-key-a> <url-b>
// Server A: --api-key, --parallel 4 --max-queue 4 (capacity 8). Server B: --ctx-size 256
// --parallel 4 --max-queue 0 (a context of 256 tokens, and a KV pool of 16 blocks of 16).
import net from "node:net";

const [urlA, key, urlB] = process.argv.slice(2);
const failures = [];
let checks = 0;
const check = (ok, what) => { ++checks; if (!ok) failures.push(what); return ok; };
const auth = { Authorization: `Bearer ${key}`, "Content-Type": "application/json" };
const C = "/v1/completions", CH = "/v1/chat/completions";

async function post(url, path, body, headers = auth) {
  const r = await fetch(`${url}${path}`, { method: "POST", headers, body: typeof body === "string" || Buffer.isBuffer(body) ? body : JSON.stringify(body) });
  const text = await r.text();
  let json = null;
  try { json = JSON.parse(text); } catch { /* checked by the caller */ }
  return { status: r.status, json, headers: r.headers };
}

// Expect a JSON error with this status, param (null: none) and code.
function expectError(r, status, param, code, label) {
  const e = r.json?.error;
  return check(r.status === status && e && typeof e.message === "string" && e.message.length > 0 &&
               (e.param ?? null) === param && (code === undefined || e.code === code),
               `${label}: got ${r.status} ${JSON.stringify(r.json).slice(0, 300)}; expected ${status} param ${param} code ${code}`);
}

async function stillServing(url, label, headers = auth) {
  const r = await post(url, C, { prompt: "def f(", max_tokens: 2 }, headers);
  check(r.status === 200 && r.json?.usage?.completion_tokens === 2, `${label}: normal request afterwards got ${r.status}`);
}

// Raw HTTP on a fresh socket: sends `chunks` (strings or Buffers), returns the first response head
// and body text the server sends before closing or `ms` passing, and how long that took.
function raw(url, chunks, ms = 3000) {
  const { hostname, port } = new URL(url);
  return new Promise((resolve) => {
    const t0 = Date.now();
    const sock = net.connect(Number(port), hostname);
    let data = "";
    const done = () => { sock.destroy(); resolve({ text: data, status: Number((data.match(/^HTTP\/1\.1 (\d+)/) ?? [])[1] ?? 0), elapsed: Date.now() - t0 }); };
    const timer = setTimeout(done, ms);
    sock.on("connect", async () => {
      for (const c of chunks) { if (!sock.write(c)) await new Promise((r) => sock.once("drain", r)); }
    });
    sock.on("data", (d) => {
      data += d.toString("latin1");
      const head = data.indexOf("\r\n\r\n");
      const len = Number((data.match(/\r\ncontent-length: (\d+)/i) ?? [])[1] ?? -1);
      if (head >= 0 && len >= 0 && data.length >= head + 4 + len) { clearTimeout(timer); done(); }
    });
    sock.on("error", () => {});
    sock.on("close", () => { clearTimeout(timer); done(); });
  });
}
const head = (url, method, path, extra = "") =>
  `${method} ${path} HTTP/1.1\r\nHost: ${new URL(url).host}\r\nAuthorization: Bearer ${key}\r\n${extra}`;

async function gauge(url, name) {
  const text = await (await fetch(`${url}/metrics`, { headers: auth })).text();
  return Number((text.match(new RegExp(`^lockstep_${name} (\\S+)`, "m")) ?? [])[1] ?? NaN);
}
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// Row 1: 30,000 levels of `[` (a 60 KB body) wherever JSON becomes template values.
const deep = "[".repeat(30000) + "]".repeat(30000);
const msg = '[{"role": "user", "content": "hi"}]';
for (const [path, body, param] of [
  [CH, `{"messages": ${msg}, "tools": ${deep}}`, "tools"],
  [CH, `{"messages": ${msg}, "chat_template_kwargs": {"x": ${deep}}}`, "chat_template_kwargs"],
  [CH, `{"messages": [{"role": "user", "content": "hi", "extra": ${deep}}]}`, "messages"],
  ["/tokenize", `{"messages": [{"role": "user", "content": ${deep}}]}`, "messages"],
  [C, `{"prompt": ${deep}}`, "prompt"],
]) expectError(await post(urlA, path, body), 400, param, "invalid_value", `deep JSON in ${param} (${path})`);
// 63 levels below the body still work: a tool schema nested deeply but within the limit.
let okDeep = '{"type": "string"}';
for (let i = 0; i < 20; ++i) okDeep = `{"type": "object", "properties": {"p": ${okDeep}}}`;
const toolsOk = await post(urlA, CH, `{"messages": ${msg}, "max_tokens": 2, "tools": [{"type": "function", "function": {"name": "f", "parameters": ${okDeep}}}]}`);
check(toolsOk.status === 200, `a tool schema 44 levels deep: ${toolsOk.status} ${JSON.stringify(toolsOk.json).slice(0, 200)}`);
await stillServing(urlA, "deep JSON");

// Row 10: a number no double holds.
expectError(await post(urlA, C, '{"prompt": "x", "temperature": 1e999}'), 400, null, "invalid_json", "temperature 1e999");
expectError(await post(urlA, C, '{"prompt": [1e999]}'), 400, null, "invalid_json", "token id 1e999");

// Malformed bodies that already passed: invalid UTF-8, NUL, wrong types (the full list is api.mjs).
const badUtf8 = Buffer.concat([Buffer.from('{"prompt": "'), Buffer.from([0xff, 0xfe]), Buffer.from('"}')]);
expectError(await post(urlA, C, badUtf8), 400, null, "invalid_json", "invalid UTF-8 in a string");
const nul = await post(urlA, C, { prompt: "a\u0000b", max_tokens: 2 });
check(nul.status === 200, `a NUL character in the prompt: ${nul.status}`);
expectError(await post(urlA, C, { prompt: "x", n: "2" }), 400, "n", "invalid_type", "n as a string");

// Row 8: a prompt far over any context is refused before it is tokenized (fast, not seconds).
const huge = "x = 1\n".repeat(1_500_000);  // 9 MB
for (const [path, body, param] of [
  [C, { prompt: huge, max_tokens: 1 }, "prompt"],
  [CH, { messages: [{ role: "user", content: huge }], max_tokens: 1 }, "messages"],
  ["/tokenize", { content: huge }, "content"],
]) {
  const t0 = Date.now();
  const r = await post(urlA, path, body);
  const ms = Date.now() - t0;
  expectError(r, 400, param, "context_length_exceeded", `9 MB prompt (${path})`);
  // Refused by its size, before tokenizing (after tokenizing the message counts tokens).
  check(/prompt text is \d+ bytes/.test(r.json?.error?.message ?? ""), `9 MB prompt (${path}): ${r.json?.error?.message}`);
  check(ms < 5000, `9 MB prompt (${path}) took ${ms} ms to refuse`);
}
expectError(await post(urlA, C, { prompt: Array(40000).fill(5), max_tokens: 1 }), 400, "prompt",
            "context_length_exceeded", "40,000 token ids");

// Row 7: more choices than the server ever holds (parallel 4 + queue 4).
expectError(await post(urlA, C, { prompt: "x", n: 9, max_tokens: 1 }), 400, "n", "out_of_range", "n = 9 above capacity 8");
const n8 = await post(urlA, C, { prompt: "x", n: 8, max_tokens: 1 });
check(n8.status === 200 && n8.json?.choices?.length === 8, `n = 8 (the capacity): ${n8.status}`);

// Auth: every endpoint but /health needs the key.
for (const [method, path] of [["POST", C], ["POST", CH], ["GET", "/v1/models"], ["GET", "/metrics"],
                              ["POST", "/tokenize"], ["POST", "/detokenize"], ["GET", "/v1/models/default"]]) {
  const r = await fetch(`${urlA}${path}`, { method, headers: { "Content-Type": "application/json" }, body: method === "POST" ? "{}" : undefined });
  const json = await r.json().catch(() => null);
  expectError({ status: r.status, json }, 401, "Authorization", "invalid_api_key", `no key on ${method} ${path}`);
}
check((await fetch(`${urlA}/health`)).status === 200, "/health without a key");

// Row 12: HTTP framing and methods.
const cl = await raw(urlA, [head(urlA, "POST", C, "Content-Type: application/json\r\nContent-Length: -5\r\n\r\n")]);
check(cl.status === 400 && cl.elapsed < 1000, `Content-Length -5: ${cl.status} after ${cl.elapsed} ms`);
const body = '{"prompt": "x", "max_tokens": 1}';
const twice = await raw(urlA, [head(urlA, "POST", C, `Content-Type: application/json\r\nContent-Length: ${body.length}\r\nContent-Length: ${body.length}\r\n\r\n${body}`)]);
check(twice.status === 400, `two Content-Length headers: ${twice.status}`);
const ranged = await raw(urlA, [head(urlA, "POST", C, `Content-Type: application/json\r\nRange: bytes=0-5\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n${body}`)]);
check(ranged.status === 200 && ranged.text.includes('"choices"'), `a Range header on a POST: ${ranged.status}`);
const chunkedBody = `${body.length.toString(16)}\r\n${body}\r\n0\r\n\r\n`;
const chunked = await raw(urlA, [head(urlA, "POST", C, `Content-Type: application/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n${chunkedBody}`)]);
check(chunked.status === 200 && chunked.text.includes('"choices"'), `a chunked request body: ${chunked.status}`);
// Row 4: the body limit holds however the body is framed: 1 MiB chunks past 64 MiB get a 413
// while the client is still sending (the server keeps at most the limit).
const mib = "x".repeat(1 << 20);
const chunks = [head(urlA, "POST", C, "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n")];
for (let i = 0; i < 80; ++i) chunks.push(`100000\r\n${mib}\r\n`);
const endless = await raw(urlA, chunks, 10000);
check(endless.status === 413 && /at most 64 MiB/.test(endless.text), `an 80 MiB chunked body: ${endless.status} ${endless.text.slice(0, 120)}`);
let flood = "";
for (let i = 0; i < 200; ++i) flood += `X-Flood-${i}: 1\r\n`;
const headers = await raw(urlA, [head(urlA, "GET", "/v1/models", flood + "\r\n")]);
check(headers.status === 431, `200 header fields: ${headers.status}`);
for (const [method, path, allow] of [["GET", C, "POST"], ["GET", CH, "POST"], ["POST", "/v1/models", "GET"],
                                     ["DELETE", "/health", "GET"], ["PUT", "/tokenize", "POST"]]) {
  const r = await fetch(`${urlA}${path}`, { method, headers: auth, body: method === "GET" || method === "DELETE" ? undefined : "{}" });
  const json = await r.json().catch(() => null);
  expectError({ status: r.status, json }, 405, null, "method_not_allowed", `${method} ${path}`);
  check(r.headers.get("allow") === allow, `${method} ${path}: Allow ${r.headers.get("allow")}`);
}
const big = Buffer.alloc((64 << 20) + 1, 0x20);
const tooBig = await post(urlA, C, big);
check(tooBig.status === 413 && /at most 64 MiB/.test(tooBig.json?.error?.message ?? ""),
      `a 64 MiB + 1 body: ${tooBig.status} ${JSON.stringify(tooBig.json)}`);
await stillServing(urlA, "framing");

// Row 9: a non-streaming client that leaves cancels its sequence (the slot and KV return).
{
  const cancelledBefore = await gauge(urlA, "requests_cancelled_total");
  const abort = new AbortController();
  const gone = fetch(`${urlA}${C}`, { method: "POST", headers: auth, signal: abort.signal,
                                      body: JSON.stringify({ prompt: "def f(", max_tokens: 3000, ignore_eos: true }) }).catch(() => null);
  let running = 0;
  for (let i = 0; i < 100 && running < 1; ++i) { await sleep(20); running = await gauge(urlA, "running"); }
  abort.abort();
  await gone;
  const t0 = Date.now();
  let freed = false;
  while (!freed && Date.now() - t0 < 3000) {
    await sleep(20);
    freed = (await gauge(urlA, "running")) === 0 && (await gauge(urlA, "requests_cancelled_total")) === cancelledBefore + 1;
  }
  check(running === 1 && freed, `a non-streaming client that left: running ${running} before, freed ${freed} ${Date.now() - t0} ms after`);
}

// Rows 2 and 3: 300 idle connections and 200 slowloris clients (a header byte every 200 ms) cost
// no thread: a normal request is as fast as on an idle server.
{
  const { hostname, port } = new URL(urlA);
  const timed = async () => {
    const ms = [];
    for (let i = 0; i < 7; ++i) {
      const t0 = performance.now();
      const r = await post(urlA, C, { prompt: "def f(", max_tokens: 2 });
      if (r.status !== 200) return [Infinity];
      ms.push(performance.now() - t0);
    }
    return ms.sort((a, b) => a - b)[3];
  };
  const before = await timed();
  const sockets = [];
  for (let i = 0; i < 300; ++i) sockets.push(net.connect(Number(port), hostname).on("error", () => {}));
  const slowHead = head(urlA, "POST", C, "Content-Type: application/json\r\n");
  const slow = [];
  for (let i = 0; i < 200; ++i) {
    const sock = net.connect(Number(port), hostname).on("error", () => {});
    let at = 0;
    const timer = setInterval(() => { if (at < slowHead.length) sock.write(slowHead[at++]); }, 200);
    slow.push({ sock, timer });
  }
  await sleep(500);
  const during = await timed();
  // Loose enough for a loaded CI machine; a thread per connection made it minutes (issue 20).
  check(during <= before * 2 + 100, `median latency ${during.toFixed(1)} ms with 300 idle + 200 slowloris connections vs ${before.toFixed(1)} ms without`);
  const health = await fetch(`${urlA}/health`);
  check(health.status === 200, `/health with 500 idle or slow connections: ${health.status}`);
  for (const s of sockets) s.destroy();
  for (const { sock, timer } of slow) { clearInterval(timer); sock.destroy(); }
  console.log(`median latency of a 2-token request: ${before.toFixed(1)} ms idle, ${during.toFixed(1)} ms with 300 idle + 200 slowloris connections`);
}

// Row 6: a burst of parallel + max-queue requests on an idle server is admitted in full; one
// more than that is refused with 503 and Retry-After.
const slow = { prompt: "def parse_args(", max_tokens: 100, ignore_eos: true };
const burst = await Promise.all(Array.from({ length: 8 }, () => post(urlA, C, slow)));
check(burst.every((r) => r.status === 200 && r.json.usage.completion_tokens === 100),
      `8 requests at once on capacity 8: ${burst.map((r) => r.status)}`);
const over = await Promise.all(Array.from({ length: 9 }, () => post(urlA, C, slow)));
const refused = over.filter((r) => r.status === 503);
check(refused.length === 1 && refused[0].headers.get("retry-after") === "1" && refused[0].json?.error?.code === "queue_full",
      `9 requests at once on capacity 8: ${over.map((r) => r.status)}`);

// Row 11: one context rule (server B: context 256). prompt + max_tokens may fill it exactly.
const fill = await post(urlB, C, { prompt: [5], max_tokens: 255, ignore_eos: true });
check(fill.status === 200 && fill.json.usage.completion_tokens === 255, `1 + 255 tokens in a context of 256: ${fill.status} ${JSON.stringify(fill.json).slice(0, 200)}`);
const spec = await post(urlB, C, { prompt: [5], max_tokens: 255, ignore_eos: true, spec: "lookup" });
check(spec.status === 200 && spec.json.usage.completion_tokens === 255, `the same with speculation: ${spec.status}`);
const past = await post(urlB, C, { prompt: [5], max_tokens: 256 });
expectError(past, 400, "max_tokens", "context_length_exceeded", "1 + 256 tokens in a context of 256");
check(/at most 255 here/.test(past.json?.error?.message ?? ""), `the message states the limit: ${past.json?.error?.message}`);
expectError(await post(urlB, C, { prompt: Array(256).fill(5) }), 400, "prompt", "context_length_exceeded",
            "a 256-token prompt without max_tokens");
const tight = await post(urlB, C, { prompt: Array(250).fill(5) });
check(tight.status === 200 && tight.json.usage.completion_tokens <= 6, `the default max_tokens shrinks to the room left: ${tight.status}`);

// Row 13 and --max-queue 0 (server B holds 4: one long request runs; three whose 240-token prompts
// need 15 of the pool's 16 blocks, plus one kept free for the running one's growth, wait for
// memory; a fifth is refused).
const long = { prompt: [5, 6, 7], max_tokens: 200, ignore_eos: true };
const filling = { prompt: Array(240).fill(5), max_tokens: 16, ignore_eos: true };
const held = [post(urlB, C, long)];
for (let i = 0; i < 100 && (await gauge(urlB, "running")) !== 1; ++i) await sleep(20);
held.push(...Array.from({ length: 3 }, () => post(urlB, C, filling)));
let depth = NaN, running = NaN;
for (let i = 0; i < 100 && !(depth === 3 && running === 1); ++i) {
  await sleep(20);
  [depth, running] = [await gauge(urlB, "queue_depth"), await gauge(urlB, "running")];
}
check(depth === 3 && running === 1, `queue_depth ${depth}, running ${running} with 3 requests waiting for KV`);
const fifth = await post(urlB, C, filling);
check(fifth.status === 503 && fifth.json?.error?.code === "queue_full", `a fifth request with --max-queue 0: ${fifth.status}`);
const done = await Promise.all(held);
check(done.every((r, i) => r.status === 200 && r.json.usage.completion_tokens === (i ? 16 : 200)),
      `the 4 held requests: ${done.map((r) => r.status)}`);
await stillServing(urlB, "server B", { "Content-Type": "application/json" });

for (const f of failures) console.log(`FAIL ${f}`);
console.log(`server abuse: ${checks - failures.length}/${checks} checks passed`);
process.exit(failures.length ? 1 : 0);
