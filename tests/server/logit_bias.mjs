// logit_bias through the official OpenAI client: a -100 bias bans a token the model would have
// chosen, a +100 bias forces one, and the biased answer is the same alone, 8 at once (one batch)
// and under every speculation mode, streamed or not (the bias is applied where the token is
// chosen, as a pure function of the logits).
//
//   node logit_bias.mjs <openai-cache-dir> <server-url>
import { createRequire } from "node:module";
import { resolve } from "node:path";

const [cacheDir, url] = process.argv.slice(2);
const OpenAI = createRequire(resolve(cacheDir, "package.json"))("openai");
const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: "unused", maxRetries: 0, timeout: 120000 });
const failures = [];
const check = (ok, what) => { if (!ok) failures.push(what); return ok; };

const post = async (path, body) => (await fetch(`${url}${path}`, { method: "POST",
  headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) })).json();
const body = (extra) => ({ model: "default", prompt: "def parse_args(argv):\n", max_tokens: 24, temperature: 0, ...extra });
const text = async (extra) => (await client.completions.create(body(extra))).choices[0].text;
const tokens = async (s) => (await post("/tokenize", { content: s, add_special: false })).tokens;

const plain = await text({});
const plainIds = await tokens(plain);
// Ban the first token the model chose: the answer must start differently.
const first = plainIds[0];
const banned = await text({ logit_bias: { [first]: -100 } });
check((await tokens(banned))[0] !== first, `banned token ${first} still first: ${JSON.stringify(banned)}`);
check(banned !== plain, "a -100 bias changed nothing");
// Force a token: greedy then picks it at every position.
const forced = (await post("/tokenize", { content: " x", add_special: false })).tokens[0];
const forcedText = await text({ logit_bias: { [forced]: 100 }, max_tokens: 6 });
const pieceText = (await post("/detokenize", { tokens: [forced] })).content;
check(forcedText === pieceText.repeat(6), `a +100 bias did not force ${JSON.stringify(pieceText)}: ${JSON.stringify(forcedText)}`);

// The same biased answers sampled, alone, batched, speculated and streamed.
const bias = { [first]: -100, [plainIds[1] ?? first]: 5, [forced]: -3 };
const want = await text({ logit_bias: bias });
const sampled = await text({ logit_bias: bias, temperature: 0.8, seed: 3 });
for (const spec of ["lookup", "mtp"]) {
  check(await text({ logit_bias: bias, spec }) === want, `spec ${spec} differs`);
  check(await text({ logit_bias: bias, spec, temperature: 0.8, seed: 3 }) === sampled, `sampled spec ${spec} differs`);
}
const together = await Promise.all(Array.from({ length: 8 }, (_, i) =>
  text(i % 2 ? { logit_bias: bias, temperature: 0.8, seed: 3 } : { logit_bias: bias })));
together.forEach((t, i) => check(t === (i % 2 ? sampled : want), `concurrent ${i} differs: ${JSON.stringify(t)}`));
let streamed = "";
for await (const c of await client.completions.create({ ...body({ logit_bias: bias }), stream: true })) streamed += c.choices[0]?.text ?? "";
check(streamed === want, "stream differs");
// Chat takes it too.
const chat = await client.chat.completions.create({ model: "default", max_tokens: 4, temperature: 0,
  messages: [{ role: "user", content: "hi" }], logit_bias: { [forced]: 100 } });
check(chat.choices[0].message.content === pieceText.repeat(4), `chat: ${JSON.stringify(chat.choices[0].message.content)}`);

for (const f of failures) console.log("FAIL:", f);
console.log(`logit_bias: ${failures.length} failures`);
process.exit(failures.length ? 1 : 0);
