// The server under bad input, overload, disconnects and SIGTERM. Every bad request must get a 4xx
// with an OpenAI-style error object naming the field, and the server must keep serving; a full
// queue answers 503 with Retry-After; a client that leaves mid-stream frees its sequence; SIGTERM
// finishes the request in flight.
//
//   node api.mjs <openai-cache-dir> <server-url> <api-key> <server-pid>
// The server runs with --api-key, --parallel 2, --max-queue 2 and --no-prefix-cache (so idle KV
// use is exactly 0 blocks). SIGTERM is the last step: the server is gone afterwards.
import { createRequire } from "node:module";
import { resolve } from "node:path";

const [cacheDir, url, key, pid] = process.argv.slice(2);
const OpenAI = createRequire(resolve(cacheDir, "package.json"))("openai");
const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: key, maxRetries: 0, timeout: 60000 });
const failures = [];
const check = (ok, what) => { if (!ok) failures.push(what); return ok; };
const auth = { Authorization: `Bearer ${key}`, "Content-Type": "application/json" };

async function post(path, body, headers = auth) {
  const r = await fetch(`${url}${path}`, { method: "POST", headers, body: typeof body === "string" ? body : JSON.stringify(body) });
  let json = null;
  try { json = await r.json(); } catch { /* checked below */ }
  return { status: r.status, json, headers: r.headers };
}

async function metrics() {
  const text = await (await fetch(`${url}/metrics`, { headers: auth })).text();
  return (name) => Number((text.match(new RegExp(`^lockstep_${name} (\\S+)`, "m")) ?? [])[1] ?? NaN);
}

// 1. Bad input: [path, body, expected status, expected param (null: none), label].
const long = "x = 1\n".repeat(3000);  // ~15k tokens, over the 4096 context
const C = "/v1/completions", CH = "/v1/chat/completions";
const p = (extra) => ({ model: "default", prompt: "def f(", max_tokens: 4, ...extra });
const m = (extra) => ({ model: "default", messages: [{ role: "user", content: "hi" }], max_tokens: 4, ...extra });
const cases = [
  [C, '{"prompt": "def f(", "max_tokens": ', 400, null, "malformed JSON"],
  [C, "[1, 2, 3]", 400, null, "body not an object"],
  [C, { max_tokens: 4 }, 400, "prompt", "missing prompt"],
  [C, p({ prompt: 42 }), 400, "prompt", "prompt of the wrong type"],
  [C, p({ prompt: [1, "two"] }), 400, "prompt", "token list with a string"],
  [C, p({ prompt: [99999999] }), 400, "prompt", "token id outside the vocabulary"],
  [C, p({ max_tokens: "ten" }), 400, "max_tokens", "max_tokens of the wrong type"],
  [C, p({ max_tokens: -5 }), 400, "max_tokens", "negative max_tokens"],
  [C, p({ max_tokens: 0 }), 400, "max_tokens", "zero max_tokens"],
  [C, p({ max_tokens: 1e12 }), 400, "max_tokens", "huge max_tokens"],
  [CH, m({ max_completion_tokens: 100000 }), 400, "max_completion_tokens", "huge max_completion_tokens"],
  [C, p({ temperature: 2.5 }), 400, "temperature", "temperature above 2"],
  [C, p({ temperature: -1 }), 400, "temperature", "negative temperature"],
  [C, p({ temperature: "hot" }), 400, "temperature", "temperature of the wrong type"],
  [C, p({ top_p: 1.5 }), 400, "top_p", "top_p above 1"],
  [C, p({ top_p: 0 }), 400, "top_p", "top_p 0"],
  [C, p({ top_k: -7 }), 400, "top_k", "negative top_k"],
  [C, p({ min_p: 2 }), 400, "min_p", "min_p above 1"],
  [C, p({ presence_penalty: 3 }), 400, "presence_penalty", "presence_penalty above 2"],
  [C, p({ frequency_penalty: -2.5 }), 400, "frequency_penalty", "frequency_penalty below -2"],
  [C, p({ repetition_penalty: 0 }), 400, "repetition_penalty", "repetition_penalty 0"],
  [C, p({ seed: "abc" }), 400, "seed", "seed of the wrong type"],
  [C, p({ stop: 5 }), 400, "stop", "stop of the wrong type"],
  [C, p({ stop: ["a", 1] }), 400, "stop", "stop list with a number"],
  [C, p({ n: 0 }), 400, "n", "n = 0"],
  [C, p({ n: 1000 }), 400, "n", "n too large"],
  [C, p({ logprobs: 50 }), 400, "logprobs", "logprobs above 20"],
  [CH, m({ top_logprobs: 3 }), 400, "top_logprobs", "top_logprobs without logprobs"],
  [CH, m({ logprobs: "yes" }), 400, "logprobs", "chat logprobs of the wrong type"],
  [C, p({ stream: "yes" }), 400, "stream", "stream of the wrong type"],
  [C, p({ stream_options: { include_usage: true } }), 400, "stream_options", "stream_options without stream"],
  [C, p({ spec: "warp" }), 400, "spec", "unknown spec mode"],
  [C, p({ echo: true }), 400, "echo", "echo (unsupported)"],
  [C, p({ logit_bias: { "5": 101 } }), 400, "logit_bias.5", "logit_bias above 100"],
  [C, p({ logit_bias: { "x": 1 } }), 400, "logit_bias.x", "logit_bias key not a token id"],
  [C, p({ logit_bias: { "99999999": 1 } }), 400, "logit_bias.99999999", "logit_bias id outside the vocabulary"],
  [C, p({ logit_bias: [5] }), 400, "logit_bias", "logit_bias not an object"],
  [C, p({ prompt: long }), 400, "prompt", "prompt over the context"],
  [CH, m({ messages: [{ role: "user", content: long }] }), 400, "messages", "chat over the context"],
  [CH, m({ messages: "hi" }), 400, "messages", "messages not a list"],
  [CH, m({ messages: [] }), 400, "messages", "no messages"],
  [CH, m({ messages: [{ content: "hi" }] }), 400, "messages[0].role", "message without a role"],
  [CH, m({ messages: [{ role: "user", content: [{ type: "image_url", image_url: { url: "x" } }] }] }), 400,
   "messages[0].content", "image content"],
  [C, p({ model: "gpt-4o" }), 404, "model", "unknown model"],
  [CH, m({ model: "gpt-4o" }), 404, "model", "unknown model (chat)"],
  ["/tokenize", {}, 400, "content", "tokenize without content"],
  ["/detokenize", { tokens: [1, -3] }, 400, "tokens", "detokenize with a negative id"],
];
let badOk = 0;
for (const [path, body, status, param, label] of cases) {
  const r = await post(path, body);
  const e = r.json?.error;
  const ok = check(r.status === status && e && typeof e.message === "string" && e.message.length > 0 &&
                   e.type === "invalid_request_error" && (e.param ?? null) === param,
                   `${label}: got ${r.status} ${JSON.stringify(r.json)}; expected ${status} naming ${param}`);
  if (ok) ++badOk;
}

// Auth: missing and wrong keys are 401 on every /v1 endpoint; /health stays open.
const noKey = { "Content-Type": "application/json" };
for (const [path, headers, label] of [[C, noKey, "missing key"],
                                      [C, { ...noKey, Authorization: "Bearer wrong" }, "wrong key"],
                                      [CH, noKey, "missing key (chat)"]]) {
  const r = await post(path, p({}), headers);
  if (check(r.status === 401 && r.json?.error?.code === "invalid_api_key" && r.json.error.param === "Authorization",
            `${label}: got ${r.status} ${JSON.stringify(r.json)}`)) ++badOk;
}
const models = await fetch(`${url}/v1/models`);
if (check(models.status === 401, `GET /v1/models without a key: ${models.status}`)) ++badOk;
check((await fetch(`${url}/health`)).status === 200, "/health needs no key");
const total = cases.length + 4;

// The real client sees these as APIError with the field.
try {
  await client.completions.create({ model: "gpt-4o", prompt: "x", max_tokens: 2 });
  check(false, "openai client: unknown model accepted");
} catch (e) {
  check(e.status === 404 && e.param === "model", `openai client: unknown model gave ${e.status} ${e.param}`);
}
try {
  await client.chat.completions.create({ model: "default", messages: [{ role: "user", content: "x" }], temperature: 9 });
  check(false, "openai client: temperature 9 accepted");
} catch (e) {
  check(e.status === 400 && e.param === "temperature", `openai client: temperature 9 gave ${e.status} ${e.param}`);
}

// Still serving after all that.
const after = await client.completions.create({ model: "default", prompt: "def parse_args(", max_tokens: 8 });
check(after.choices[0].text.length > 0 && after.usage.completion_tokens === 8, "normal request after bad input");
const chat = await client.chat.completions.create({ model: "default", messages: [{ role: "user", content: "hello" }], max_tokens: 8 });
check(chat.choices[0].message.role === "assistant" && chat.usage.completion_tokens > 0, "normal chat after bad input");

// 2. Queue full: 2 running + 2 queued; more concurrent requests get 503 with Retry-After.
const slow = { model: "default", prompt: "def parse_args(", max_tokens: 400, ignore_eos: true };
const burst = await Promise.all(Array.from({ length: 10 }, () => post(C, slow)));
const ok200 = burst.filter((r) => r.status === 200).length;
const full = burst.filter((r) => r.status === 503);
check(full.length > 0 && full.every((r) => r.headers.get("retry-after") && r.json?.error?.code === "queue_full"),
      `queue full: ${full.length} of 10 got 503 (with Retry-After: ${full.map((r) => r.headers.get("retry-after"))})`);
check(ok200 >= 2 && burst.every((r) => r.status === 200 || r.status === 503), `queue full: statuses ${burst.map((r) => r.status)}`);
check(burst.filter((r) => r.status === 200).every((r) => r.json.usage.completion_tokens === 400), "queued requests ran to the end");

// 3. Disconnect mid-stream: the sequence is cancelled and its KV blocks return (idle: 0 blocks).
// The engine retires a sequence at the end of the step that emitted its last token: poll.
let g = await metrics();
for (let i = 0; i < 100 && !(g("running") === 0 && g("kv_blocks_used") === 0); ++i) {
  await new Promise((r) => setTimeout(r, 50));
  g = await metrics();
}
const cancelledBefore = g("requests_cancelled_total");
check(g("running") === 0 && g("kv_blocks_used") === 0, `idle before disconnect: running ${g("running")}, KV ${g("kv_blocks_used")}`);
check(g("spec_paused_steps_total") === 0, `spec_paused_steps_total ${g("spec_paused_steps_total")} without --spec-max-batch`);
const abort = new AbortController();
const stream = await client.completions.create({ ...slow, max_tokens: 3000, stream: true }, { signal: abort.signal });
let chunks = 0;
try {
  for await (const _ of stream) if (++chunks === 5) { abort.abort(); }
} catch { /* the abort */ }
let freed = false;
for (let i = 0; i < 100 && !freed; ++i) {
  await new Promise((r) => setTimeout(r, 50));
  g = await metrics();
  freed = g("running") === 0 && g("kv_blocks_used") === 0 && g("requests_cancelled_total") === cancelledBefore + 1;
}
check(chunks >= 5, `disconnect: only ${chunks} chunks before abort`);
check(freed, `disconnect: not freed (running ${g("running")}, KV ${g("kv_blocks_used")}, cancelled ${g("requests_cancelled_total")} vs ${cancelledBefore})`);

// 4. SIGTERM while a stream is in flight: it completes; the server then refuses and exits.
const drainStream = await client.completions.create({ ...slow, max_tokens: 1500, stream: true });
let drained = "", finish = null, signalled = false, chunkCount = 0;
for await (const chunk of drainStream) {
  drained += chunk.choices[0]?.text ?? "";
  if (chunk.choices[0]?.finish_reason) finish = chunk.choices[0].finish_reason;
  if (++chunkCount === 3 && !signalled) {
    process.kill(Number(pid), "SIGTERM");
    signalled = true;
    await new Promise((r) => setTimeout(r, 100));
    const late = await post(C, p({})).catch(() => ({ status: "refused" }));
    check(late.status === 503 || late.status === "refused", `request after SIGTERM: ${late.status}`);
  }
}
check(signalled && finish === "length" && drained.length > 1000, `SIGTERM drain: finish ${finish}, ${drained.length} chars`);

for (const f of failures) console.log(`FAIL ${f}`);
console.log(`server api: bad input ${badOk}/${total} answered 4xx naming the field; queue full ${full.length}/10 got 503 ` +
  `with Retry-After (${ok200} served); disconnect freed the sequence: ${freed}; SIGTERM drained the in-flight stream: ` +
  `${finish === "length"}`);
process.exit(failures.length ? 1 : 0);
