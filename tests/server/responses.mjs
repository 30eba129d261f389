// POST /v1/responses through the official OpenAI client's responses.create, on the server with
// Qwen3's template: plain text (output_text equals the chat answer to the same conversation),
// instructions, text.format json_schema, a forced function call and its output sent back as
// input items, and streaming events that assemble to the whole Response. Errors name the
// Responses fields.
//
//   node responses.mjs <openai-cache-dir> <server-url>
import { createRequire } from "node:module";
import { resolve } from "node:path";

const [cacheDir, url] = process.argv.slice(2);
const OpenAI = createRequire(resolve(cacheDir, "package.json"))("openai");
const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: "unused", maxRetries: 0, timeout: 120000 });
const failures = [];
const check = (ok, what) => { if (!ok) failures.push(what); return ok; };

// 1. Text: the same tokens as the chat answer to the same messages.
const r = await client.responses.create({ model: "default", input: "Write a function.", instructions: "Be brief.",
                                          max_output_tokens: 24, temperature: 0 });
const c = await client.chat.completions.create({ model: "default", max_tokens: 24, temperature: 0,
  messages: [{ role: "system", content: "Be brief." }, { role: "user", content: "Write a function." }] });
check(r.object === "response" && r.id.startsWith("resp_"), `shape: ${JSON.stringify(r).slice(0, 200)}`);
check(r.output_text === c.choices[0].message.content, `output_text ${JSON.stringify(r.output_text)} vs chat ${JSON.stringify(c.choices[0].message.content)}`);
check(r.status === (c.choices[0].finish_reason === "length" ? "incomplete" : "completed"), `status ${r.status}`);
check(r.usage.input_tokens === c.usage.prompt_tokens && r.usage.output_tokens === c.usage.completion_tokens, `usage ${JSON.stringify(r.usage)}`);

// 2. text.format json_schema: the output parses and satisfies the schema.
const schema = { type: "object", properties: { name: { type: "string", maxLength: 8 }, n: { type: "integer", minimum: 0, maximum: 9 } },
                 required: ["name", "n"], additionalProperties: false };
const j = await client.responses.create({ model: "default", input: "JSON please", max_output_tokens: 64, temperature: 0,
  text: { format: { type: "json_schema", name: "thing", schema, strict: true } } });
let v = null;
try { v = JSON.parse(j.output_text); } catch { /* checked below */ }
check(v && typeof v.name === "string" && Number.isInteger(v.n) && Object.keys(v).length === 2, `json_schema: ${j.output_text}`);

// 3. A forced function call, then its output in the next request's input.
const tools = [{ type: "function", name: "add", description: "Adds", parameters: { type: "object",
  properties: { a: { type: "integer", minimum: 0, maximum: 9 }, b: { type: "integer", minimum: 0, maximum: 9 } },
  required: ["a", "b"], additionalProperties: false } }];
const fc = await client.responses.create({ model: "default", input: "Add 2 and 3.", tools, tool_choice: "required",
                                           parallel_tool_calls: false, max_output_tokens: 64, temperature: 0 });
const call = fc.output.find((o) => o.type === "function_call");
check(call && call.name === "add" && typeof call.call_id === "string", `function_call: ${JSON.stringify(fc.output)}`);
let args = null;
try { args = JSON.parse(call?.arguments ?? ""); } catch { /* checked below */ }
check(args && Number.isInteger(args.a) && Number.isInteger(args.b), `arguments: ${call?.arguments}`);
const named = await client.responses.create({ model: "default", input: "Add.", tools, max_output_tokens: 64, temperature: 0,
                                              tool_choice: { type: "function", name: "add" } });
check(named.output.filter((o) => o.type === "function_call").length === 1, `named: ${JSON.stringify(named.output)}`);
const back = await client.responses.create({ model: "default", max_output_tokens: 8, temperature: 0, tools, input: [
  { role: "user", content: "Add 2 and 3." },
  { type: "function_call", call_id: call?.call_id ?? "c1", name: "add", arguments: call?.arguments ?? "{}" },
  { type: "function_call_output", call_id: call?.call_id ?? "c1", output: "5" }] });
check(back.status !== "failed" && typeof back.output_text === "string", `round trip: ${JSON.stringify(back).slice(0, 200)}`);

// 4. Streaming: the events assemble to the whole Response (text and calls).
async function streamed(body) {
  let text = "", args = "", done = null;
  const types = [];
  for await (const e of await client.responses.create({ ...body, stream: true })) {
    types.push(e.type);
    if (e.type === "response.output_text.delta") text += e.delta;
    if (e.type === "response.function_call_arguments.delta") args += e.delta;
    if (e.type === "response.completed" || e.type === "response.incomplete") done = e.response;
  }
  return { text, args, done, types };
}
const st = await streamed({ model: "default", input: "Write a function.", instructions: "Be brief.", max_output_tokens: 24, temperature: 0 });
check(st.text === r.output_text, `streamed text ${JSON.stringify(st.text)}`);
check(st.types[0] === "response.created" && st.types.includes("response.output_item.added") && st.done?.output?.[0]?.content?.[0]?.text === r.output_text,
      `stream events: ${st.types.join(",")}`);
const sc = await streamed({ model: "default", input: "Add 2 and 3.", tools, tool_choice: "required", parallel_tool_calls: false,
                            max_output_tokens: 64, temperature: 0 });
check(sc.args === call?.arguments && sc.done?.output?.some((o) => o.type === "function_call" && o.arguments === call?.arguments),
      `streamed call: ${sc.args} / ${JSON.stringify(sc.done?.output)}`);

// 5. Errors name the Responses fields.
async function refused(body, param) {
  try {
    await client.responses.create({ model: "default", input: "x", ...body });
    check(false, `accepted: ${param}`);
  } catch (e) {
    check(e.status === 400 && e.param === param, `${param}: ${e.status} ${e.param} ${e.message}`);
  }
}
await refused({ tools: [{ type: "function", parameters: {} }] }, "tools[0].name");
await refused({ input: [{ type: "function_call_output", output: "5" }] }, "input[0].call_id");
await refused({ input: [{ type: "image", url: "x" }] }, "input[0].type");
await refused({ max_output_tokens: 0 }, "max_output_tokens");
await refused({ text: { format: { type: "json_schema", name: "x", schema: { not: {} } } } }, "text.format.schema");
await refused({ previous_response_id: "resp_1" }, "previous_response_id");

for (const f of failures) console.log("FAIL:", f);
console.log(`responses: ${failures.length} failures`);
process.exit(failures.length ? 1 : 0);
