// The reasoning budget through the official OpenAI client, on the shipped model served with a
// template that opens "<think>" (its code model never closes the block by itself, so the budget is
// what ends it). With a budget of N: the answer's first N tokens are the reasoning, the next are
// exactly the tokens of "\n</think>\n\n", content follows; reasoning_content is those N tokens'
// text (at most N tokens by the tokenizer); identical under every spec mode, 4 at once, streamed,
// under each accepted field name and through /v1/responses; a JSON schema still governs content;
// a second server's --reasoning-budget is the default a request overrides; bad budgets are 400s
// naming the field.
//
//   node reasoning_budget.mjs <openai-cache-dir> <thinking-server-url> <thinking-server-with-default-url>
import { createRequire } from "node:module";
import { resolve } from "node:path";

const [cacheDir, url, defaultUrl] = process.argv.slice(2);
const OpenAI = createRequire(resolve(cacheDir, "package.json"))("openai");
const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: "unused", maxRetries: 0, timeout: 120000 });
const failures = [];
const check = (ok, what) => { if (!ok) failures.push(what); return ok; };
const CLOSE = "\n</think>\n\n";

const post = async (base, path, body) =>
  (await fetch(`${base}${path}`, { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) })).json();
const countTokens = async (text) => (await post(url, "/tokenize", { content: text, add_special: false })).tokens.length;
const closeTokens = await countTokens(CLOSE);

const chat = (extra) => ({
  model: "default", max_tokens: 40, temperature: 0, logprobs: true,
  messages: [{ role: "user", content: "Write a function that reverses a list." }], ...extra });
const say = async (body, c = client) => (await c.chat.completions.create(body)).choices[0];
const pieces = (choice) => choice.logprobs.content.map((t) => Buffer.from(t.bytes).toString("utf8"));

// The answer's shape under a budget of n: n reasoning tokens, the forced close, then content.
function budgeted(choice, n, label) {
  const p = pieces(choice);
  const reasoning = p.slice(0, n).join("");
  check(p.length >= n + closeTokens, `${label}: ${p.length} tokens, fewer than the budget and the close`);
  check(p.slice(n, n + closeTokens).join("") === CLOSE, `${label}: tokens ${n}.. are ${JSON.stringify(p.slice(n, n + closeTokens))}, not the close`);
  check(choice.message.reasoning_content === reasoning + "\n",
        `${label}: reasoning_content ${JSON.stringify(choice.message.reasoning_content)}, the first ${n} tokens ${JSON.stringify(reasoning)}`);
  // What follows the close, less the layout whitespace the split drops and the end-of-turn
  // token (a special token: in the logprobs, not in the text).
  const after = p.slice(n + closeTokens).join("").trimStart();
  const end = after.slice(choice.message.content.length);
  check(after.startsWith(choice.message.content) && (end === "" || (choice.finish_reason === "stop" && /^<\|[a-z_]+\|>$/.test(end))),
        `${label}: content ${JSON.stringify(choice.message.content)} is not what follows the close, ${JSON.stringify(after)}`);
  return reasoning;
}

// 1. The budget's shape, for 0 and 9, greedy and seeded; the tokenizer agrees on the count.
for (const n of [0, 9]) {
  for (const sampling of [{}, { temperature: 0.9, seed: 3 }]) {
    const c = await say(chat({ reasoning_budget: n, ...sampling }));
    const reasoning = budgeted(c, n, `budget ${n} ${JSON.stringify(sampling)}`);
    check(await countTokens(reasoning) <= n, `budget ${n}: reasoning ${JSON.stringify(reasoning)} is more than ${n} tokens`);
    check(c.message.content.length > 0, `budget ${n}: no content after the block`);
  }
}
// Without a budget (or -1) the same request reasons on to max_tokens.
const free = await say(chat({}));
check(free.finish_reason === "length" && free.message.content === "" && free.message.reasoning_content.length > 0,
      `no budget: ${JSON.stringify(free.message)} (${free.finish_reason})`);
check((await say(chat({ reasoning_budget: -1 }))).message.reasoning_content === free.message.reasoning_content, "-1 is not unlimited");
check(pieces(free).slice(0, 9).join("") === budgeted(await say(chat({ reasoning_budget: 9 })), 9, "budget 9"),
      "the first 9 tokens differ with a budget");

// 2. The same answer under every spec mode, 4 at once, streamed, and with the other field names.
const base = await say(chat({ reasoning_budget: 6 }));
budgeted(base, 6, "budget 6");
const same = (c, label) => check(c.message.reasoning_content === base.message.reasoning_content && c.message.content === base.message.content,
                                 `${label} differs: ${JSON.stringify(c.message)}`);
// Width 3 here, the modes' defaults in the concurrent run: the budget ends inside drafted blocks.
for (const spec of ["lookup", "draft", "mtp"]) same(await say(chat({ reasoning_budget: 6, spec, draft_width: 3 })), `spec ${spec}/3`);
const bodies = ["none", "lookup", "draft", "mtp"].map((spec) => chat({ reasoning_budget: 6, spec }));
(await Promise.all(bodies.map((b) => say(b)))).forEach((c, i) => same(c, `concurrent ${i}`));
same(await say(chat({ thinking_budget_tokens: 6 })), "thinking_budget_tokens");
same(await say(chat({ thinking_token_budget: 6, reasoning_budget: 6 })), "thinking_token_budget beside reasoning_budget");
for (const spec of ["none", "mtp"]) {
  let r = "", t = "";
  for await (const chunk of await client.chat.completions.create({ ...chat({ reasoning_budget: 6, spec }), stream: true })) {
    r += chunk.choices[0]?.delta?.reasoning_content ?? "";
    t += chunk.choices[0]?.delta?.content ?? "";
  }
  check(r === base.message.reasoning_content && t === base.message.content, `streamed (${spec}): ${JSON.stringify([r, t])}`);
}
const resp = await client.responses.create({ model: "default", input: chat({}).messages[0].content, max_output_tokens: 40,
                                             temperature: 0, reasoning_budget: 6 });
const rItem = resp.output.find((o) => o.type === "reasoning");
check(rItem?.content?.[0]?.text === base.message.reasoning_content && resp.output_text === base.message.content,
      `responses.create: ${JSON.stringify(resp.output)}`);

// 2b. usage.completion_tokens_details.reasoning_tokens: the tokens up to and including the one
// that completes "</think>" (every token when the block never closes), whole, streamed and in
// /v1/responses' output_tokens_details.
const throughClose = (choice) => {
  const p = pieces(choice);
  let text = "";
  for (let i = 0; i < p.length; ++i) if ((text += p[i]).includes("</think>")) return i + 1;
  return p.length;
};
const whole = await client.chat.completions.create(chat({ reasoning_budget: 6 }));
const expectR = throughClose(whole.choices[0]);
check(expectR > 6 && whole.usage?.completion_tokens_details?.reasoning_tokens === expectR,
      `reasoning_tokens ${JSON.stringify(whole.usage)}, expected ${expectR}`);
const freeWhole = await client.chat.completions.create(chat({}));
check(freeWhole.usage?.completion_tokens_details?.reasoning_tokens === freeWhole.usage?.completion_tokens,
      `an unclosed block's reasoning_tokens ${JSON.stringify(freeWhole.usage)}`);
let streamedUsage = null;
for await (const chunk of await client.chat.completions.create({ ...chat({ reasoning_budget: 6 }), stream: true,
                                                                  stream_options: { include_usage: true } }))
  if (chunk.usage) streamedUsage = chunk.usage;
check(streamedUsage?.completion_tokens_details?.reasoning_tokens === expectR, `streamed usage ${JSON.stringify(streamedUsage)}`);
check(resp.usage?.output_tokens_details?.reasoning_tokens === expectR, `responses usage ${JSON.stringify(resp.usage)}`);
const plain = await client.completions.create({ model: "default", prompt: "x", max_tokens: 3 });
check(plain.usage?.completion_tokens_details?.reasoning_tokens === 0, `completions usage ${JSON.stringify(plain.usage)}`);

// 3. With a JSON schema the block still closes at the budget, and content satisfies the schema.
const schema = { type: "object", properties: { name: { type: "string", maxLength: 8 }, ok: { type: "boolean" } },
                 required: ["name", "ok"], additionalProperties: false };
const format = { type: "json_schema", json_schema: { name: "r", schema } };
const js = await say(chat({ reasoning_budget: 4, max_tokens: 80, response_format: format }));
budgeted(js, 4, "budget 4 + json_schema");
check(js.finish_reason === "stop", `json_schema after the budget finished with ${js.finish_reason}`);
try {
  const v = JSON.parse(js.message.content);
  check(typeof v.name === "string" && typeof v.ok === "boolean" && Object.keys(v).length === 2, `schema violated: ${js.message.content}`);
} catch { check(false, `content is not JSON: ${JSON.stringify(js.message.content)}`); }
for (const spec of ["lookup", "mtp"]) {
  const c = await say(chat({ reasoning_budget: 4, max_tokens: 80, response_format: format, spec }));
  check(c.message.content === js.message.content && c.message.reasoning_content === js.message.reasoning_content,
        `json_schema + budget, spec ${spec} differs`);
}

// 4. --reasoning-budget 3 on the second server: the default, which a request's own value overrides.
const other = new OpenAI({ baseURL: `${defaultUrl}/v1`, apiKey: "unused", maxRetries: 0, timeout: 120000 });
budgeted(await say(chat({}), other), 3, "server default 3");
budgeted(await say(chat({ reasoning_budget: 6 }), other), 6, "request 6 over default 3");
check((await say(chat({ reasoning_budget: -1 }), other)).message.reasoning_content === free.message.reasoning_content,
      "request -1 over the default is not unlimited");

// 5. Bad budgets: a 400 naming the field; the server keeps serving.
async function refused(extra, param, code, endpoint = "chat") {
  try {
    if (endpoint === "chat") await say(chat(extra));
    else await client.completions.create({ model: "default", prompt: "x", max_tokens: 2, ...extra });
    check(false, `accepted ${JSON.stringify(extra)}`);
  } catch (e) {
    check(e.status === 400 && e.param === param && e.code === code,
          `${JSON.stringify(extra)}: ${e.status} param ${e.param} code ${e.code}, expected ${param} ${code}: ${e.message}`);
  }
}
await refused({ reasoning_budget: -2 }, "reasoning_budget", "out_of_range");
await refused({ reasoning_budget: "ten" }, "reasoning_budget", "invalid_type");
await refused({ reasoning_budget: 2.5 }, "reasoning_budget", "invalid_type");
await refused({ thinking_token_budget: -5 }, "thinking_token_budget", "out_of_range");
await refused({ thinking_budget_tokens: [3] }, "thinking_budget_tokens", "invalid_type");
await refused({ reasoning_budget: 3, thinking_budget_tokens: 4 }, "thinking_budget_tokens", "invalid_value");
await refused({ reasoning_budget: 5 }, "reasoning_budget", "unsupported_parameter", "completions");
same(await say(chat({ reasoning_budget: 6 })), "after the refusals");

for (const f of failures) console.log("FAIL:", f);
console.log(`reasoning_budget: ${failures.length} failures (close = ${closeTokens} tokens)`);
process.exit(failures.length ? 1 : 0);
