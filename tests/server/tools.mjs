// Tool calling through the official OpenAI client, on the shipped model served with Qwen3's and
// Llama 3.1's chat templates. A 16M code model never decides to call a tool by itself, so the
// checks force the calls: tool_choice "required" or a named function constrains the answer to
// the family's call syntax over the tools' schemas (the arguments must satisfy them), and in
// "auto" mode a response_format grammar makes the model write text and two calls, which the
// server must parse back. Streamed calls assemble to the whole response's calls; the same request
// alone and 8 at once gives the same calls; a history with tool calls and tool results renders
// through the template; bad tool fields are 400s naming the field, and the server keeps serving.
// Last, usage.prompt_tokens_details.cached_tokens counts a repeated prompt's prefix-cache hit.
//
//   node tools.mjs <openai-cache-dir> <qwen3-template-server-url> <llama3.1-template-server-url>
import { createRequire } from "node:module";
import { resolve } from "node:path";

const [cacheDir, qwenUrl, llamaUrl] = process.argv.slice(2);
const OpenAI = createRequire(resolve(cacheDir, "package.json"))("openai");
const qwen = new OpenAI({ baseURL: `${qwenUrl}/v1`, apiKey: "unused", maxRetries: 0, timeout: 120000 });
const llama = new OpenAI({ baseURL: `${llamaUrl}/v1`, apiKey: "unused", maxRetries: 0, timeout: 120000 });
const failures = [];
const check = (ok, what) => { if (!ok) failures.push(what); return ok; };

const tools = [
  { type: "function", function: { name: "get_weather", description: "Current weather in a city",
    parameters: { type: "object", properties: { city: { type: "string", maxLength: 16 },
      unit: { enum: ["celsius", "fahrenheit"] } }, required: ["city", "unit"], additionalProperties: false } } },
  { type: "function", function: { name: "add", description: "Adds two integers",
    parameters: { type: "object", properties: { a: { type: "integer", minimum: 0, maximum: 999 },
      b: { type: "integer", minimum: 0, maximum: 999 } }, required: ["a", "b"], additionalProperties: false } } },
];

// A call's arguments satisfy its tool's schema (checked by hand).
function valid(call, label) {
  if (!check(call.type === "function" && typeof call.id === "string" && call.id.length > 0, `${label}: id/type ${JSON.stringify(call)}`)) return false;
  let a;
  try { a = JSON.parse(call.function.arguments); } catch { return check(false, `${label}: arguments not JSON: ${call.function.arguments}`); }
  const keys = Object.keys(a).sort().join(",");
  if (call.function.name === "get_weather")
    return check(keys === "city,unit" && typeof a.city === "string" && [...a.city].length <= 16 &&
                 ["celsius", "fahrenheit"].includes(a.unit), `${label}: bad get_weather arguments ${call.function.arguments}`);
  if (call.function.name === "add")
    return check(keys === "a,b" && [a.a, a.b].every((x) => Number.isInteger(x) && x >= 0 && x <= 999),
                 `${label}: bad add arguments ${call.function.arguments}`);
  return check(false, `${label}: unknown tool ${call.function.name}`);
}
const calls = (m) => (m.tool_calls ?? []).map((c) => ({ name: c.function.name, arguments: c.function.arguments }));
const same = (x, y) => JSON.stringify(x) === JSON.stringify(y);

const ask = (extra) => ({
  model: "default", max_tokens: 160, temperature: 0, tools,
  messages: [{ role: "user", content: "What is the weather in Paris, and what is 2 + 3?" }], ...extra });
const say = async (client, body) => (await client.chat.completions.create(body)).choices[0];

// The streamed deltas, assembled as OpenAI clients do (by tool_calls[].index).
async function stream(client, body) {
  let content = null, finish = null;
  const out = [];
  for await (const chunk of await client.chat.completions.create({ ...body, stream: true })) {
    const ch = chunk.choices[0];
    if (!ch) continue;
    const d = ch.delta ?? {};
    if (d.content) content = (content ?? "") + d.content;
    for (const t of d.tool_calls ?? []) {
      if (!out[t.index]) {
        check(typeof t.id === "string" && t.type === "function" && typeof t.function?.name === "string",
              `first fragment of call ${t.index} lacks id/type/name: ${JSON.stringify(t)}`);
        out[t.index] = { name: t.function.name, arguments: "" };
      }
      out[t.index].arguments += t.function?.arguments ?? "";
    }
    finish = ch.finish_reason ?? finish;
  }
  return { content, calls: out, finish };
}

// 1. required with parallel_tool_calls false: one valid call, content null, finish_reason
// tool_calls (the grammar ends after the call, so the answer ends there); every speculation mode
// and the stream give the same call.
const one = { tool_choice: "required", parallel_tool_calls: false };
const req = await say(qwen, ask(one));
check(req.finish_reason === "tool_calls", `required: finish_reason ${req.finish_reason}`);
check(req.message.content === null, `required: content ${JSON.stringify(req.message.content)}`);
check(req.message.tool_calls?.length === 1, `required: ${JSON.stringify(req.message)}`);
(req.message.tool_calls ?? []).forEach((c, i) => valid(c, `required call ${i}`));
for (const spec of ["lookup", "mtp"]) {
  const c = await say(qwen, ask({ ...one, spec }));
  check(same(calls(c.message), calls(req.message)), `required: spec ${spec} differs: ${JSON.stringify(calls(c.message))}`);
}
const reqStream = await stream(qwen, ask(one));
check(same(reqStream.calls, calls(req.message)), `required: streamed calls ${JSON.stringify(reqStream.calls)}`);
check(reqStream.content === null && reqStream.finish === "tool_calls", `required stream: ${JSON.stringify(reqStream)}`);

// 2. required with parallel calls allowed: the grammar admits more calls after each one (this
// small model keeps calling until max_tokens); every complete call is valid, and the stream
// assembles to the same calls and content. A named function: exactly one call of it.
const par = await say(qwen, ask({ tool_choice: "required", max_tokens: 100 }));
check((par.message.tool_calls ?? []).length >= 1, `parallel: ${JSON.stringify(par.message)}`);
(par.message.tool_calls ?? []).forEach((c, i) => valid(c, `parallel call ${i}`));
const parStream = await stream(qwen, ask({ tool_choice: "required", max_tokens: 100 }));
check(same(parStream.calls, calls(par.message)) && parStream.content === par.message.content && parStream.finish === par.finish_reason,
      `parallel: stream ${JSON.stringify(parStream)} vs ${JSON.stringify(par)}`);
const named = await say(qwen, ask({ tool_choice: { type: "function", function: { name: "add" } } }));
check(named.message.tool_calls?.length === 1 && named.message.tool_calls[0].function.name === "add" &&
      named.finish_reason === "tool_calls", `named: ${JSON.stringify(named)}`);
named.message.tool_calls?.forEach((c) => valid(c, "named"));

// 3. auto: the model's own text with two calls in it (forced by a grammar) is parsed back.
const written = 'Let me check.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}\n</tool_call>\n' +
  '<tool_call>\n{"name": "add", "arguments": {"a": 2, "b": 3}}\n</tool_call>';
const gbnf = `root ::= ${JSON.stringify(written)}`;
const auto = await say(qwen, ask({ response_format: { type: "grammar", grammar: gbnf } }));
check(auto.message.content === "Let me check.", `auto: content ${JSON.stringify(auto.message.content)}`);
check(same(calls(auto.message), [{ name: "get_weather", arguments: '{"city":"Paris","unit":"celsius"}' },
                                 { name: "add", arguments: '{"a":2,"b":3}' }]), `auto: calls ${JSON.stringify(calls(auto.message))}`);
check(auto.finish_reason === "tool_calls", `auto: finish_reason ${auto.finish_reason}`);
check(new Set(auto.message.tool_calls?.map((c) => c.id)).size === 2, "auto: call ids are not distinct");
const autoStream = await stream(qwen, ask({ response_format: { type: "grammar", grammar: gbnf } }));
check(autoStream.content === "Let me check." && same(autoStream.calls, calls(auto.message)) && autoStream.finish === "tool_calls",
      `auto stream: ${JSON.stringify(autoStream)}`);
// Only the first call with parallel_tool_calls false.
const autoOne = await say(qwen, ask({ response_format: { type: "grammar", grammar: gbnf }, parallel_tool_calls: false }));
check(same(calls(autoOne.message), calls(auto.message).slice(0, 1)), `auto, one call: ${JSON.stringify(calls(autoOne.message))}`);
// Malformed call text stays content.
const broken = 'Trying. <tool_call>{"name": "get_weather", "arguments": oops}</tool_call>';
const bad = await say(qwen, ask({ response_format: { type: "grammar", grammar: `root ::= ${JSON.stringify(broken)}` } }));
check(bad.message.content === broken && !bad.message.tool_calls && bad.finish_reason === "stop", `malformed call: ${JSON.stringify(bad)}`);
// Unforced, the code model writes text: no calls, and streaming gives the same content.
const plain = await say(qwen, ask({ max_tokens: 40 }));
check(typeof plain.message.content === "string" && !plain.message.tool_calls, `auto plain: ${JSON.stringify(plain.message)}`);
const plainStream = await stream(qwen, ask({ max_tokens: 40 }));
check((plainStream.content ?? "") === plain.message.content && plainStream.calls.length === 0, "auto plain: stream differs");
// "none": the same prompt (tools rendered), but the text is never parsed.
const none = await say(qwen, ask({ tool_choice: "none", response_format: { type: "grammar", grammar: gbnf } }));
check(none.message.content === written && !none.message.tool_calls && none.finish_reason === "stop", `none: ${JSON.stringify(none.message)}`);

// 4. Alone vs 8 at once (one batch), streams and whole responses mixed.
const together = await Promise.all(Array.from({ length: 8 }, (_, i) => i % 2
  ? stream(qwen, ask(one)).then((s) => s.calls)
  : say(qwen, ask(one)).then((c) => calls(c.message))));
together.forEach((c, i) => check(same(c, calls(req.message)), `concurrent ${i} differs: ${JSON.stringify(c)}`));

// 5. The round trip: the call and its result in the history, rendered by Qwen3's template.
const history = [
  { role: "user", content: "What is the weather in Paris?" },
  { role: "assistant", content: null, tool_calls: [{ id: "call_1", type: "function",
    function: { name: "get_weather", arguments: '{"city": "Paris", "unit": "celsius"}' } }] },
  { role: "tool", tool_call_id: "call_1", content: '{"temperature": 21}' },
];
const ids = (await (await fetch(`${qwenUrl}/tokenize`, { method: "POST", headers: { "Content-Type": "application/json" },
  body: JSON.stringify({ messages: history, tools }) })).json()).tokens;
const prompt = (await (await fetch(`${qwenUrl}/detokenize`, { method: "POST", headers: { "Content-Type": "application/json" },
  body: JSON.stringify({ tokens: ids }) })).json()).content;
check(prompt.includes('<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}\n</tool_call>'),
      `history: the call is not rendered: ${JSON.stringify(prompt)}`);
check(prompt.includes('<tool_response>\n{"temperature": 21}\n</tool_response>'), `history: no tool response: ${JSON.stringify(prompt)}`);
check(prompt.includes('"name": "get_weather"') && prompt.includes("<tools>"), "history: tools not rendered");
const next = await say(qwen, { ...ask({}), messages: history, max_tokens: 16 });
check(typeof next.message.content === "string", "history: no answer");

// 6. Refusals name the field; the server keeps serving.
async function refused(body, param, needle) {
  try {
    await say(qwen, body);
    check(false, `accepted: ${param}`);
  } catch (e) {
    check(e.status === 400, `${param}: status ${e.status}`);
    check(e.param === param, `${param}: param ${e.param}`);
    check(String(e.message).includes(needle), `${param}: message lacks ${needle}: ${e.message}`);
  }
}
const fn = (f) => ask({ tools: [{ type: "function", function: f }] });
await refused(fn({ parameters: {} }), "tools[0].function.name", "required");
await refused(fn({ name: "f", parameters: [1] }), "tools[0].function.parameters", "object");
await refused(ask({ tools: [{ type: "retrieval" }] }), "tools[0].type", "retrieval");
await refused(ask({ tool_choice: { type: "function", function: { name: "missing" } } }), "tool_choice.function.name", "missing");
await refused(ask({ tool_choice: "sometimes" }), "tool_choice", "sometimes");
await refused({ ...ask({}), messages: [...history.slice(0, 2), { role: "tool", content: "21" }] }, "messages[2].tool_call_id", "required");
await refused({ ...ask({}), messages: [history[0], { role: "assistant", content: null, tool_calls: [{ id: "c", type: "function",
  function: { name: "get_weather", arguments: { city: "Paris" } } }] }, history[2]] }, "messages[1].tool_calls[0].function.arguments", "string");
await refused(ask({ tool_choice: "required", response_format: { type: "json_object" } }), "response_format", "tool_choice");
await refused({ ...fn({ name: "f", parameters: { type: "object", properties: { x: { not: {} } } } }), tool_choice: "required" },
              "tools", "'not'");
const again = await say(qwen, ask(one));
check(same(calls(again.message), calls(req.message)), "the answer after the refusals differs");

// 7. Llama 3.1's template: the whole answer is one JSON call with "parameters".
const ll = await say(llama, ask({ tool_choice: { type: "function", function: { name: "get_weather" } } }));
check(ll.finish_reason === "tool_calls" && ll.message.content === null && ll.message.tool_calls?.length === 1 &&
      ll.message.tool_calls[0].function.name === "get_weather", `llama named: ${JSON.stringify(ll)}`);
ll.message.tool_calls?.forEach((c) => valid(c, "llama named"));
const llStream = await stream(llama, ask({ tool_choice: { type: "function", function: { name: "get_weather" } } }));
check(same(llStream.calls, calls(ll.message)) && llStream.finish === "tool_calls", `llama stream: ${JSON.stringify(llStream)}`);
const llReq = await say(llama, ask({ tool_choice: "required" }));
check(llReq.message.tool_calls?.length === 1, `llama required: ${JSON.stringify(llReq.message)}`);
llReq.message.tool_calls?.forEach((c) => valid(c, "llama required"));

// 8. usage.prompt_tokens_details.cached_tokens: the next turn of a conversation starts with the
// previous prompt, whose KV the prefix cache holds (streamed usage says the same).
const turn1 = [{ role: "user", content: "A prompt only this check sends." }];
const turn2 = [...turn1, { role: "assistant", content: "ok" }, { role: "user", content: "Again." }];
const cacheAsk = (messages) => ({ model: "default", max_tokens: 4, temperature: 0, tools, messages });
const firstUse = (await qwen.chat.completions.create(cacheAsk(turn1))).usage;
const secondUse = (await qwen.chat.completions.create(cacheAsk(turn2))).usage;
check(Number.isInteger(firstUse.prompt_tokens_details?.cached_tokens), `usage: ${JSON.stringify(firstUse)}`);
const hit = secondUse.prompt_tokens_details?.cached_tokens;
check(hit > 0 && hit <= firstUse.prompt_tokens && hit < secondUse.prompt_tokens, `cached_tokens: ${JSON.stringify([firstUse, secondUse])}`);
let streamUse = null;
for await (const c of await qwen.chat.completions.create({ ...cacheAsk(turn2), stream: true, stream_options: { include_usage: true } }))
  if (c.usage) streamUse = c.usage;
check(streamUse?.prompt_tokens_details?.cached_tokens > 0, `streamed cached_tokens: ${JSON.stringify(streamUse)}`);

for (const f of failures) console.log("FAIL:", f);
console.log(`tools: ${failures.length} failures`);
process.exit(failures.length ? 1 : 0);
