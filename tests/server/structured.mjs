// Structured output and reasoning through the official OpenAI client. response_format answers
// parse and satisfy their schema (required keys, enum, integer bounds checked by hand); the same
// request under every speculation mode, streamed, and 8 at once gives the same text; a schema
// the compiler refuses is a 400 naming the field and the keyword, and the server keeps serving.
// With a second server whose template opens <think>, the answer lands in reasoning_content.
//
// A completion under a schema equals `lockstep generate --json-schema` on the same prompt.
//
//   node structured.mjs <openai-cache-dir> <server-url> <thinking-server-url> <lockstep-binary>
import { execFile } from "node:child_process";
import { createRequire } from "node:module";
import { resolve } from "node:path";
import { promisify } from "node:util";

const [cacheDir, url, thinkUrl, bin] = process.argv.slice(2);
const OpenAI = createRequire(resolve(cacheDir, "package.json"))("openai");
const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: "unused", maxRetries: 0, timeout: 120000 });
const failures = [];
const check = (ok, what) => { if (!ok) failures.push(what); return ok; };

const schema = {
  type: "object",
  properties: {
    name: { type: "string", maxLength: 12 },
    kind: { enum: ["function", "class", "module"] },
    lines: { type: "integer", minimum: 1, maximum: 500 },
  },
  required: ["name", "kind", "lines"],
  additionalProperties: false,
};
const schemaFormat = { type: "json_schema", json_schema: { name: "symbol", strict: true, schema } };

function satisfies(text, label) {
  let v;
  try { v = JSON.parse(text); } catch (e) { return check(false, `${label}: not JSON: ${JSON.stringify(text)}`); }
  const ok = v !== null && typeof v === "object" && !Array.isArray(v) &&
    Object.keys(v).sort().join(",") === "kind,lines,name" &&
    typeof v.name === "string" && [...v.name].length <= 12 &&
    ["function", "class", "module"].includes(v.kind) &&
    Number.isInteger(v.lines) && v.lines >= 1 && v.lines <= 500;
  return check(ok, `${label}: violates the schema: ${text}`);
}

const chat = (extra) => ({
  model: "default", max_tokens: 96, temperature: 0,
  messages: [{ role: "user", content: "Describe the function parse_args as JSON." }], ...extra });
const say = async (body) => (await client.chat.completions.create(body)).choices[0];

// 1. json_schema: valid, ends by itself, identical under every speculation mode and sampled.
const base = await say(chat({ response_format: schemaFormat }));
satisfies(base.message.content, "chat json_schema");
check(base.finish_reason === "stop", `chat json_schema finished with ${base.finish_reason}`);
check(base.message.reasoning_content === undefined, "reasoning_content on a model without think tags");
for (const spec of ["lookup", "mtp"]) {
  const c = await say(chat({ response_format: schemaFormat, spec }));
  check(c.message.content === base.message.content, `spec ${spec} differs: ${c.message.content}`);
}
const sampled = await say(chat({ response_format: schemaFormat, temperature: 0.9, seed: 11 }));
satisfies(sampled.message.content, "sampled json_schema");
const sampledMtp = await say(chat({ response_format: schemaFormat, temperature: 0.9, seed: 11, spec: "mtp" }));
check(sampledMtp.message.content === sampled.message.content, "sampled: spec mtp differs");

// 2. Alone vs 8 at once (one batch), greedy and sampled mixed.
const bodies = Array.from({ length: 8 }, (_, i) =>
  chat({ response_format: schemaFormat, ...(i % 2 ? { temperature: 0.9, seed: 11 } : {}), spec: ["none", "lookup"][i % 4 >> 1] }));
const together = await Promise.all(bodies.map(say));
together.forEach((c, i) => check(c.message.content === (i % 2 ? sampled : base).message.content,
                                 `concurrent ${i} differs: ${c.message.content}`));

// 3. Streaming: the deltas concatenate to the whole answer.
let streamed = "", finish = null;
for await (const chunk of await client.chat.completions.create(chat({ response_format: schemaFormat, stream: true }))) {
  streamed += chunk.choices[0]?.delta?.content ?? "";
  finish = chunk.choices[0]?.finish_reason ?? finish;
}
check(streamed === base.message.content, `stream differs: ${streamed}`);
check(finish === "stop", `stream finished with ${finish}`);

// 4. json_object, completions with a schema, and the regex / grammar extensions.
const obj = await say(chat({ response_format: { type: "json_object" } }));
try {
  const v = JSON.parse(obj.message.content);
  check(v !== null && typeof v === "object" && !Array.isArray(v), `json_object not an object: ${obj.message.content}`);
} catch { check(false, `json_object not JSON: ${obj.message.content}`); }
const comp = await client.completions.create({ model: "default", prompt: "def parse_args(", max_tokens: 96,
                                               temperature: 0, response_format: schemaFormat });
satisfies(comp.choices[0].text, "completion json_schema");
const cli = JSON.parse((await promisify(execFile)(bin, ["generate", "-p", "def parse_args(", "-n", "96", "--threads", "1",
                                                        "--json", "--json-schema", JSON.stringify(schema)])).stdout);
check(cli.text === comp.choices[0].text && cli.constraint === "complete",
      `generate --json-schema gave ${cli.text} (${cli.constraint}), the server ${comp.choices[0].text}`);
const rx = await client.completions.create({ model: "default", prompt: "version = ", max_tokens: 16,
                                             response_format: { type: "regex", regex: "[0-9]{1,2}\\.[0-9]{1,2}" } });
check(/^[0-9]{1,2}\.[0-9]{1,2}$/.test(rx.choices[0].text), `regex: ${rx.choices[0].text}`);
const gr = await say(chat({ response_format: { type: "grammar", grammar: 'root ::= "yes" | "no"' } }));
check(["yes", "no"].includes(gr.message.content), `grammar: ${gr.message.content}`);

// 5. Refusals name the field; the server keeps serving.
async function refused(format, param, needle) {
  try {
    await say(chat({ response_format: format }));
    check(false, `accepted ${JSON.stringify(format)}`);
  } catch (e) {
    check(e.status === 400, `${param}: status ${e.status}`);
    check(e.param === param, `${JSON.stringify(format)}: param ${e.param}, expected ${param}`);
    check(e.type === "invalid_request_error", `${param}: type ${e.type}`);
    check(String(e.message).includes(needle), `${param}: message lacks ${needle}: ${e.message}`);
  }
}
await refused({ type: "json_schema", json_schema: { name: "x", schema: { not: { type: "string" } } } },
              "response_format.json_schema.schema", "'not'");
await refused({ type: "json_schema", json_schema: { name: "x" } }, "response_format.json_schema.schema", "required");
await refused({ type: "xml" }, "response_format.type", "xml");
await refused({ type: "regex", regex: "(ab" }, "response_format.regex", "regex");
await refused({ type: "grammar", grammar: "root ::= \"a\" missing" }, "response_format.grammar", "grammar");
const after = await say(chat({ response_format: schemaFormat }));
check(after.message.content === base.message.content, "the answer after the refusals differs");

// 6. Reasoning: the thinking server's template ends with "<think>\n", so the output starts inside
// the block. Its text is the same completion run as raw tokens; the chat splits it.
const think = new OpenAI({ baseURL: `${thinkUrl}/v1`, apiKey: "unused", maxRetries: 0, timeout: 120000 });
const tmsg = chat({ max_tokens: 24 });
const ids = (await (await fetch(`${thinkUrl}/tokenize`, { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(tmsg) })).json()).tokens;
const raw = (await think.completions.create({ model: "default", prompt: ids, max_tokens: 24, temperature: 0 })).choices[0].text;
const end = raw.indexOf("</think>");
const wantReasoning = end < 0 ? raw : raw.slice(0, end);
const wantContent = end < 0 ? "" : raw.slice(end + 8).trimStart();
const tc = (await think.chat.completions.create(tmsg)).choices[0];
check(tc.message.reasoning_content === wantReasoning, `reasoning_content ${JSON.stringify(tc.message.reasoning_content)}, raw ${JSON.stringify(raw)}`);
check(tc.message.content === wantContent, `content beside reasoning: ${JSON.stringify(tc.message.content)}`);
let sr = "", sc = "";
for await (const chunk of await think.chat.completions.create({ ...tmsg, stream: true })) {
  sr += chunk.choices[0]?.delta?.reasoning_content ?? "";
  sc += chunk.choices[0]?.delta?.content ?? "";
}
check(sr === wantReasoning && sc === wantContent, `streamed reasoning ${JSON.stringify(sr)} / content ${JSON.stringify(sc)}`);
// With a constraint the reasoning block stays free text (reasoning_content) and the constraint
// governs what follows "</think>": content satisfies the schema, or, when the block has not closed
// within max_tokens, is empty. Streamed alike.
const cmsg = chat({ response_format: schemaFormat, max_tokens: 160 });
const tj = (await think.chat.completions.create(cmsg)).choices[0];
check(typeof tj.message.reasoning_content === "string", `reasoning_content beside a constraint: ${JSON.stringify(tj.message)}`);
if (tj.finish_reason === "stop") satisfies(tj.message.content, "thinking server json_schema after the block");
else check(!tj.message.content, `content before the block closed: ${JSON.stringify(tj.message.content)}`);
check(!(tj.message.content ?? "").includes("think>") && !(tj.message.reasoning_content ?? "").includes("</think>"),
      `a think tag leaked: ${JSON.stringify(tj.message)}`);
console.log(`thinking + json_schema: ${tj.finish_reason}, ${(tj.message.reasoning_content ?? "").length} reasoning chars, content ${JSON.stringify(tj.message.content)}`);
let cr = "", cc = "";
for await (const chunk of await think.chat.completions.create({ ...cmsg, stream: true })) {
  cr += chunk.choices[0]?.delta?.reasoning_content ?? "";
  cc += chunk.choices[0]?.delta?.content ?? "";
}
check(cr === tj.message.reasoning_content && cc === (tj.message.content ?? ""), "streamed constrained reasoning / content differ");

for (const f of failures) console.log("FAIL:", f);
console.log(`structured: ${failures.length} failures`);
process.exit(failures.length ? 1 : 0);
