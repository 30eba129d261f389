// Forced and parsed tool calls in every family's syntax, on the shipped model served with small
// templates that select the family (tests/cli/server_tools.sh writes them: they contain the
// family's markers, as the real Gemma 4, Qwen3-Coder and Mistral templates do, which npm does
// not carry). For each family: a named call decodes under the family's call grammar into one
// valid call, streamed alike; and text the model writes in the family's syntax (forced by a
// response_format grammar) parses back to the calls.
//
//   node tool_families.mjs <openai-cache-dir> <family>=<server-url>...
import { createRequire } from "node:module";
import { resolve } from "node:path";

const [cacheDir, ...servers] = process.argv.slice(2);
const OpenAI = createRequire(resolve(cacheDir, "package.json"))("openai");
const failures = [];
const check = (ok, what) => { if (!ok) failures.push(what); return ok; };

const tools = [{ type: "function", function: { name: "get_weather", parameters: { type: "object",
  properties: { city: { type: "string", maxLength: 12 }, unit: { type: "string", enum: ["c", "f"] },
                days: { type: "integer", minimum: 1, maximum: 7 } }, required: ["city", "unit", "days"], additionalProperties: false } } },
  { type: "function", function: { name: "ping", parameters: { type: "object", properties: {} } } }];
const paris = { name: "get_weather", arguments: '{"city":"Paris","unit":"c","days":2}' };
const ping = { name: "ping", arguments: "{}" };
// Each family's own spelling of [paris, ping], as its template teaches it.
const written = {
  gemma4: '<|tool_call>call:get_weather{city:<|"|>Paris<|"|>,unit:<|"|>c<|"|>,days:2}<tool_call|><|tool_call>call:ping{}<tool_call|>',
  qwen_xml: "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n<parameter=unit>\nc\n</parameter>\n" +
            "<parameter=days>\n2\n</parameter>\n</function>\n</tool_call>\n<tool_call>\n<function=ping>\n</function>\n</tool_call>",
  mistral_args: '[TOOL_CALLS]get_weather[ARGS]{"city": "Paris", "unit": "c", "days": 2}[TOOL_CALLS]ping[ARGS]{}',
  mistral_json: '[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Paris", "unit": "c", "days": 2}}, {"name": "ping", "arguments": {}}]',
};
const calls = (m) => (m.tool_calls ?? []).map((c) => ({ name: c.function.name, arguments: c.function.arguments }));
const same = (x, y) => JSON.stringify(x) === JSON.stringify(y);

async function family(name, url) {
  const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: "unused", maxRetries: 0, timeout: 120000 });
  const ask = (extra) => ({ model: "default", max_tokens: 160, temperature: 0, tools,
    messages: [{ role: "user", content: "Weather in Paris for two days?" }], ...extra });
  const named = { tool_choice: { type: "function", function: { name: "get_weather" } } };
  const whole = (await client.chat.completions.create(ask(named))).choices[0];
  const got = calls(whole.message);
  check(whole.finish_reason === "tool_calls" && whole.message.content === null && got.length === 1 && got[0].name === "get_weather",
        `${name} named: ${JSON.stringify(whole)}`);
  let a = null;
  try { a = JSON.parse(got[0]?.arguments ?? ""); } catch { /* checked below */ }
  check(a && Object.keys(a).join(",") === "city,unit,days" && typeof a.city === "string" && [...a.city].length <= 12 &&
        ["c", "f"].includes(a.unit) && Number.isInteger(a.days) && a.days >= 1 && a.days <= 7, `${name} arguments: ${got[0]?.arguments}`);
  const out = [];
  let content = null;
  for await (const chunk of await client.chat.completions.create({ ...ask(named), stream: true })) {
    const d = chunk.choices[0]?.delta ?? {};
    if (d.content) content = (content ?? "") + d.content;
    for (const t of d.tool_calls ?? []) {
      out[t.index] ??= { name: t.function?.name, arguments: "" };
      out[t.index].arguments += t.function?.arguments ?? "";
    }
  }
  check(same(out, got) && content === null, `${name} stream: ${JSON.stringify(out)} ${JSON.stringify(content)}`);
  const text = written[name];
  const parsed = (await client.chat.completions.create(ask({ response_format: { type: "grammar", grammar: `root ::= ${JSON.stringify(text)}` } }))).choices[0];
  check(same(calls(parsed.message), [paris, ping]) && parsed.message.content === null && parsed.finish_reason === "tool_calls",
        `${name} parse: ${JSON.stringify(parsed.message)}`);
}

await Promise.all(servers.map((s) => { const i = s.indexOf("="); return family(s.slice(0, i), s.slice(i + 1)); }));
for (const f of failures) console.log("FAIL:", f);
console.log(`tool families: ${failures.length} failures`);
process.exit(failures.length ? 1 : 0);
