// The server's generation gate: 32 concurrent requests through the official OpenAI client (mixed
// prompt lengths, streaming and not, greedy and seeded sampling, every speculation mode, chat and
// completions, a group sharing a long prefix so the prefix cache hits), then each request alone
// through `lockstep generate` with the same flags. Every response's text must be identical.
//
//   node gate.mjs <openai-cache-dir> <server-url> <lockstep-binary> <source-dir>
// Prints one line per divergence and a summary; exits 1 on any difference or failure.
import { execFile } from "node:child_process";
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { resolve } from "node:path";
import { promisify } from "node:util";

const [cacheDir, url, bin, srcDir] = process.argv.slice(2);
const OpenAI = createRequire(resolve(cacheDir, "package.json"))("openai");
const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: "unused", maxRetries: 0, timeout: 120000 });
const run = promisify(execFile);

const prompts = readFileSync(`${srcDir}/tests/gate/prompts.jsonl`, "utf8")
  .split("\n").filter((l) => l.trim()).map((l) => JSON.parse(l));
const specs = ["none", "lookup", "mtp", "draft"];

// The cases. The first one carries the long shared prefix; the other 31 start once it has
// streamed its first token (its prefill is done and the engine keeps a prompt-end fork), while
// it is still decoding, so all 32 are in flight together. The shared-prefix group is sent first
// so that it is admitted before two dozen other prompts push that fork out of the cache.
const cases = [];
const longPrefix = prompts[23] + "\n\n" + prompts[5] + "\n\n" + prompts[18] + "\n";
cases.push({ kind: "completion", prompt: longPrefix, max_tokens: 48, temperature: 0, stream: true, spec: "lookup" });
const suffixes = ["def main():\n", "def test_matrix():\n", "    def transpose(self):\n",
                  "# Usage:\n", "import sys\n", "class Vector:\n", "def helper(x):\n"];
for (let k = 0; k < 7; ++k)
  cases.push({ kind: "completion", prompt: longPrefix + suffixes[k], max_tokens: 20 + 4 * k,
               stream: k % 2 === 0, temperature: k % 3 === 2 ? 0.8 : 0, seed: 50 + k,
               spec: specs[k % 4] === "mtp" ? "none" : specs[k % 4] });
for (let i = 0; i < 22; ++i) {
  const c = { kind: "completion", prompt: prompts[i], max_tokens: 16 + (i * 7) % 33, stream: i % 2 === 1 };
  if (i % 4 >= 2) Object.assign(c, { temperature: 0.8, seed: 1000 + i });
  else c.temperature = 0;
  if (i % 5 === 3) c.top_p = 0.95;
  if (i % 6 === 4) c.top_k = 40;
  if (i % 7 === 2) c.stop = ["\n\n"];  // streaming must hold back a possible stop string
  if (i % 3 !== 2) c.spec = specs[i % 4];  // else: the server's default (--spec none)
  if (i % 4 === 1) c.include_usage = true;
  cases.push(c);
}
cases.push({ kind: "chat", content: prompts[24], max_tokens: 32, temperature: 0, stream: true, spec: "mtp" });
cases.push({ kind: "chat", content: prompts[25], max_tokens: 32, temperature: 0.8, seed: 7, stream: false });
if (cases.length !== 32) throw new Error(`expected 32 cases, built ${cases.length}`);

function body(c) {
  const b = { model: "default", max_tokens: c.max_tokens, temperature: c.temperature };
  for (const k of ["seed", "top_p", "top_k", "stop", "spec"]) if (c[k] !== undefined) b[k] = c[k];
  if (c.kind === "chat") b.messages = [{ role: "user", content: c.content }];
  else b.prompt = c.prompt;
  if (c.stream) {
    b.stream = true;
    if (c.include_usage) b.stream_options = { include_usage: true };
  }
  return b;
}

let firstToken;
const firstTokenSeen = new Promise((resolve) => { firstToken = resolve; });

async function ask(c) {
  const api = c.kind === "chat" ? client.chat.completions : client.completions;
  const res = await api.create(body(c));
  if (!c.stream) {
    const ch = res.choices[0];
    return { text: c.kind === "chat" ? ch.message.content : ch.text, finish: ch.finish_reason,
             tokens: res.usage.completion_tokens, prompt_tokens: res.usage.prompt_tokens };
  }
  let text = "", finish = null, usage = null;
  for await (const chunk of res) {
    if (chunk.usage) usage = chunk.usage;
    const ch = chunk.choices[0];
    if (!ch) continue;
    text += (c.kind === "chat" ? ch.delta?.content : ch.text) ?? "";
    if (text) firstToken();
    if (ch.finish_reason) finish = ch.finish_reason;
  }
  if (c.include_usage && !usage) throw new Error("include_usage: no usage chunk");
  return { text, finish, tokens: usage?.completion_tokens, prompt_tokens: usage?.prompt_tokens };
}

async function alone(c) {
  const args = ["generate", "--json", "--threads", "1", "-n", String(c.max_tokens),
                "--temp", String(c.temperature)];
  if (c.seed !== undefined) args.push("--seed", String(c.seed));
  if (c.top_p !== undefined) args.push("--top-p", String(c.top_p));
  if (c.top_k !== undefined) args.push("--top-k", String(c.top_k));
  for (const s of c.stop ?? []) args.push("--stop", s);
  if (c.spec) args.push("--spec", c.spec);
  if (c.kind === "chat") {
    // The server's own rendering of the conversation (chat template), as token ids.
    const r = await fetch(`${url}/tokenize`, { method: "POST", headers: { "Content-Type": "application/json" },
                                               body: JSON.stringify({ messages: [{ role: "user", content: c.content }] }) });
    args.push("--prompt-ids", (await r.json()).tokens.join(","));
  } else {
    args.push("-p", c.prompt);
  }
  const { stdout } = await run(bin, args, { maxBuffer: 1 << 24 });
  return JSON.parse(stdout);
}

const t0 = Date.now();
const head = ask(cases[0]);
await Promise.race([firstTokenSeen, head.catch(() => {})]);
const served = await Promise.allSettled([head, ...cases.slice(1).map(ask)]);
const serveSeconds = (Date.now() - t0) / 1000;

let identical = 0;
const failures = [];
const expected = new Array(cases.length);
for (let start = 0; start < cases.length; start += 2)  // two at a time: CI machines have 2 cores
  await Promise.all(cases.slice(start, start + 2).map(async (c, j) => { expected[start + j] = await alone(c); }));
cases.forEach((c, i) => {
  const s = served[i], e = expected[i];
  const label = `#${i} ${c.kind}${c.stream ? " stream" : ""} temp ${c.temperature} spec ${c.spec ?? "(default)"}`;
  if (s.status !== "fulfilled") return failures.push(`${label}: request failed: ${s.reason}`);
  const v = s.value;
  if (v.text !== e.text) return failures.push(`${label}: text differs\n  server:   ${JSON.stringify(v.text)}\n  generate: ${JSON.stringify(e.text)}`);
  if (v.finish !== e.finish_reason) return failures.push(`${label}: finish_reason ${v.finish} vs generate ${e.finish_reason}`);
  if (v.tokens !== undefined && v.tokens !== e.ids.length) return failures.push(`${label}: ${v.tokens} completion tokens vs generate ${e.ids.length}`);
  if (v.prompt_tokens !== undefined && v.prompt_tokens !== e.prompt_tokens) return failures.push(`${label}: ${v.prompt_tokens} prompt tokens vs generate ${e.prompt_tokens}`);
  ++identical;
});

const chars = served.reduce((n, s) => n + (s.status === "fulfilled" ? s.value.text.length : 0), 0);
if (chars < 32 * 20) failures.push(`only ${chars} characters of text in all responses: nothing real was compared`);
const metrics = await (await fetch(`${url}/metrics`)).text();
const metric = (name) => Number((metrics.match(new RegExp(`^lockstep_${name} (\\S+)`, "m")) ?? [])[1] ?? NaN);
const count = (f) => cases.filter(f).length;
for (const f of failures) console.log(`DIVERGED ${f}`);
console.log(`server gate: ${identical}/${cases.length} identical to lockstep generate alone ` +
  `(completions ${count((c) => c.kind === "completion")}, chat ${count((c) => c.kind === "chat")}; ` +
  `streamed ${count((c) => c.stream)}; greedy ${count((c) => c.temperature === 0)}, seeded 0.8 ${count((c) => c.temperature > 0)}; ` +
  `spec ${specs.map((m) => `${m} ${count((c) => (c.spec ?? "none") === m)}`).join(", ")}; ` +
  `stop strings ${count((c) => c.stop)}; ${chars} characters); served in ${serveSeconds.toFixed(1)} s; ` +
  `prefix cache hits ${metric("prefix_cache_hits_total")} (${metric("prefix_tokens_reused_total")} tokens), ` +
  `mean batch ${(metric("batch_rows_total") / metric("forward_calls_total")).toFixed(2)} rows/forward, ` +
  `drafted ${metric("spec_drafted_total")} accepted ${metric("spec_accepted_total")}`);
if (failures.length || identical !== cases.length) process.exit(1);
if (!(metric("prefix_cache_hits_total") > 0)) {
  console.log("FAIL: the shared-prefix requests never hit the prefix cache");
  process.exit(1);
}
