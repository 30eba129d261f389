// Load client for `lockstep serve`: N concurrent streaming clients, each sending one request after
// another (a code prompt from tests/gate/prompts.jsonl, max_tokens fixed with ignore_eos so every
// complete response has a known length). Reports aggregate generated tokens/s, time to first
// token, failures (non-200, error events) and truncations (no [DONE], wrong length), and the
// server's resident memory over time.
//
//   node load.mjs <server-url> <server-pid> <source-dir> <levels e.g. 1,4,16,64> <seconds per level>
//                 <soak clients> <soak seconds> <max_tokens>
// Prints a JSON summary on stdout (progress on stderr); exits 1 when any response failed or was
// truncated, or memory grew more than 10% over the soak.
import { readFileSync } from "node:fs";

const [url, pid, src, levelsArg, levelSecs, soakClients, soakSecs, maxTokensArg] = process.argv.slice(2);
const maxTokens = Number(maxTokensArg);
const prompts = readFileSync(`${src}/tests/gate/prompts.jsonl`, "utf8")
  .split("\n").filter((l) => l.trim()).map((l) => JSON.parse(l));

const rssMiB = () => {
  const m = readFileSync(`/proc/${pid}/status`, "utf8").match(/VmRSS:\s+(\d+) kB/);
  return m ? Number(m[1]) / 1024 : NaN;
};
const pct = (xs, q) => {
  if (!xs.length) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))];
};

// One streamed request; resolves to {ok, truncated, tokens, ttft_ms, error}.
async function one(i) {
  const t0 = performance.now();
  let ttft = NaN, text = "", usage = null, done = false, finish = null;
  try {
    const r = await fetch(`${url}/v1/completions`, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ model: "default", prompt: prompts[i % prompts.length], max_tokens: maxTokens,
                             ignore_eos: true, stream: true, stream_options: { include_usage: true } }),
    });
    if (r.status !== 200) return { ok: false, error: `HTTP ${r.status}: ${await r.text()}` };
    const decoder = new TextDecoder();
    let buf = "";
    for await (const part of r.body) {
      buf += decoder.decode(part, { stream: true });
      let cut;
      while ((cut = buf.indexOf("\n\n")) >= 0) {
        const event = buf.slice(0, cut);
        buf = buf.slice(cut + 2);
        if (!event.startsWith("data: ")) continue;
        const data = event.slice(6);
        if (data === "[DONE]") { done = true; continue; }
        const j = JSON.parse(data);
        if (j.error) return { ok: false, error: JSON.stringify(j.error) };
        if (j.usage) usage = j.usage;
        const c = j.choices?.[0];
        if (c?.text) {
          if (Number.isNaN(ttft)) ttft = performance.now() - t0;
          text += c.text;
        }
        if (c?.finish_reason) finish = c.finish_reason;
      }
    }
  } catch (e) {
    return { ok: false, error: String(e) };
  }
  const complete = done && finish === "length" && usage?.completion_tokens === maxTokens;
  return { ok: true, truncated: !complete, tokens: usage?.completion_tokens ?? 0, ttft_ms: ttft,
           ms: performance.now() - t0, chars: text.length };
}

// `clients` loops for `seconds`; in-flight requests finish (and count) after the deadline.
async function level(clients, seconds, onTick) {
  const stats = { clients, requests: 0, failed: 0, truncated: 0, tokens: 0, ttft: [], errors: [] };
  const t0 = performance.now(), deadline = t0 + seconds * 1000;
  let next = 0;
  const timer = onTick ? setInterval(onTick, 2000) : null;
  await Promise.all(Array.from({ length: clients }, async () => {
    while (performance.now() < deadline) {
      const r = await one(next++);
      ++stats.requests;
      if (!r.ok) { ++stats.failed; if (stats.errors.length < 5) stats.errors.push(r.error); continue; }
      if (r.truncated) ++stats.truncated;
      stats.tokens += r.tokens;
      stats.ttft.push(r.ttft_ms);
    }
  }));
  if (timer) clearInterval(timer);
  const secs = (performance.now() - t0) / 1000;
  return { clients, seconds: +secs.toFixed(1), requests: stats.requests, failed: stats.failed,
           truncated: stats.truncated, tokens: stats.tokens, tok_s: +(stats.tokens / secs).toFixed(1),
           ttft_p50_ms: +pct(stats.ttft, 0.5).toFixed(1), ttft_p95_ms: +pct(stats.ttft, 0.95).toFixed(1),
           errors: stats.errors };
}

const out = { max_tokens: maxTokens, levels: [], soak: null };
for (const n of levelsArg.split(",").map(Number)) {
  const r = await level(n, Number(levelSecs));
  console.error(`load: ${n} clients: ${r.tok_s} tok/s, TTFT p50 ${r.ttft_p50_ms} ms p95 ${r.ttft_p95_ms} ms, ` +
                `${r.requests} requests, ${r.failed} failed, ${r.truncated} truncated`);
  out.levels.push(r);
}
const rss = [];
const soak = await level(Number(soakClients), Number(soakSecs), () => rss.push(+rssMiB().toFixed(1)));
rss.push(+rssMiB().toFixed(1));
// Flat: after the first fifth (allocator warm-up), the last sample is within 10% of the first.
const warm = rss[Math.floor(rss.length / 5)];
soak.rss_mib = { samples: rss.length, first: rss[0], after_warmup: warm, last: rss[rss.length - 1], max: Math.max(...rss) };
soak.rss_flat = rss[rss.length - 1] <= warm * 1.1;
out.soak = soak;
console.error(`load: soak ${soak.clients} clients ${soak.seconds} s: ${soak.tok_s} tok/s, ${soak.requests} requests, ` +
              `${soak.failed} failed, ${soak.truncated} truncated, RSS ${JSON.stringify(soak.rss_mib)}`);
console.log(JSON.stringify(out, null, 1));
const bad = [...out.levels, soak].some((r) => r.failed || r.truncated) || !soak.rss_flat;
process.exit(bad ? 1 : 0);
