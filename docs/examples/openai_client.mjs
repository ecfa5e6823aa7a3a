// openai_client.mjs — talk to a running `vt serve` with OpenAI's official
// Node.js client (the `openai` npm package), and check that every answer has
// the shape the client expects: chat completions whole and streamed (with
// stream_options.include_usage), completions whole and streamed, logprobs and
// n choices (chat whole and streamed, completions' legacy logprobs), the model
// list, and structured output (response_format json_schema: the answer
// parses and has the schema's shape), and a tool round trip (a forced call,
// its result, the final answer; whole and streamed). It is the check that vt serve works with a real client library,
// not only with curl; it needs Node.js and `npm install openai`, so it is not
// part of the CUnit suite.
//
//   vt serve -m MODEL --api-key KEY --port 8080 &     (a model whose template has tools, e.g. Qwen3)
//   mkdir -p /tmp/oa && cd /tmp/oa && npm init -y && npm install openai
//   cp PATH/TO/vt/docs/examples/openai_client.mjs . && node openai_client.mjs http://127.0.0.1:8080/v1 KEY
//
// (Node resolves `openai` next to the script, hence the copy into the npm
// project.)
//
// Exit status 0 when every check holds; otherwise the first broken one is
// printed and the status is 1.
import OpenAI from "openai";

const baseURL = process.argv[2] ?? "http://127.0.0.1:8080/v1";
const apiKey = process.argv[3] ?? process.env.VT_API_KEY ?? "none";
const client = new OpenAI({ baseURL, apiKey });

function check(cond, what, value) {
  if (!cond) {
    console.error(`openai_client: ${what}: ${JSON.stringify(value)}`);
    process.exit(1);
  }
}

function checkUsage(u, what) {
  check(u && Number.isInteger(u.prompt_tokens) && Number.isInteger(u.completion_tokens) &&
        u.total_tokens === u.prompt_tokens + u.completion_tokens, `${what}: usage`, u);
}

// The model list: the one model, under its alias.
const models = [];
for await (const m of client.models.list()) models.push(m);
check(models.length === 1 && typeof models[0].id === "string" && models[0].object === "model",
      "models.list", models);
const model = models[0].id;
console.log(`models.list: ${model}`);

const messages = [
  { role: "system", content: "Be brief." },
  { role: "user", content: "Say hello." },
];

// Chat, whole.
const chat = await client.chat.completions.create({ model, messages, max_tokens: 16, temperature: 0 });
check(chat.object === "chat.completion" && chat.id.startsWith("chatcmpl-"), "chat: object/id", chat);
check(chat.choices.length === 1 && chat.choices[0].message.role === "assistant" &&
      typeof chat.choices[0].message.content === "string", "chat: choices[0].message", chat.choices);
check(["stop", "length"].includes(chat.choices[0].finish_reason), "chat: finish_reason", chat.choices[0]);
checkUsage(chat.usage, "chat");
console.log(`chat.completions.create: ${JSON.stringify(chat.choices[0].message.content)} ` +
            `(${chat.choices[0].finish_reason}, ${chat.usage.completion_tokens} tokens)`);

// Chat, streamed, with the usage chunk: the same text as the whole answer (greedy).
const stream = await client.chat.completions.create({
  model, messages, max_tokens: 16, temperature: 0, stream: true, stream_options: { include_usage: true },
});
let text = "", finish = null, usage = null, chunks = 0;
for await (const chunk of stream) {
  chunks++;
  check(chunk.object === "chat.completion.chunk", "chat stream: object", chunk);
  if (chunk.usage) usage = chunk.usage;
  for (const c of chunk.choices) {
    text += c.delta?.content ?? "";
    if (c.finish_reason) finish = c.finish_reason;
  }
}
check(text === chat.choices[0].message.content, "chat stream: text differs from the whole answer", text);
check(finish === chat.choices[0].finish_reason, "chat stream: finish_reason", finish);
checkUsage(usage, "chat stream");
console.log(`chat.completions.create (stream): ${chunks} chunks, same text, usage ${usage.completion_tokens} tokens`);

// Completions, whole and streamed.
const done = await client.completions.create({ model, prompt: "Once upon a time", max_tokens: 16, temperature: 0 });
check(done.object === "text_completion" && done.choices.length === 1 && typeof done.choices[0].text === "string",
      "completions", done);
checkUsage(done.usage, "completions");
console.log(`completions.create: ${JSON.stringify(done.choices[0].text)} (${done.choices[0].finish_reason})`);
const cstream = await client.completions.create({
  model, prompt: "Once upon a time", max_tokens: 16, temperature: 0, stream: true,
  stream_options: { include_usage: true },
});
let ctext = "", cusage = null;
for await (const chunk of cstream) {
  if (chunk.usage) cusage = chunk.usage;
  for (const c of chunk.choices) ctext += c.text ?? "";
}
check(ctext === done.choices[0].text, "completions stream: text differs from the whole answer", ctext);
checkUsage(cusage, "completions stream");
console.log("completions.create (stream): same text");

// Logprobs and n choices: each choice's tokens with their logprobs, the
// alternatives most likely first, the tokens' bytes spelling the text.
function checkChatLogprobs(c, top, what) {
  const content = c.logprobs?.content;
  check(Array.isArray(content) && content.length > 0, `${what}: logprobs.content`, c.logprobs);
  for (const t of content) {
    check(typeof t.token === "string" && t.logprob <= 0 && Array.isArray(t.bytes) && t.top_logprobs.length === top &&
          t.top_logprobs.every((x, k, a) => k === 0 || x.logprob <= a[k - 1].logprob), `${what}: a token`, t);
  }
  const text = Buffer.from(content.flatMap((t) => t.bytes)).toString("utf8");
  check(text === (c.message?.content ?? c.text), `${what}: the bytes differ from the text`, text);
}
const lp = await client.chat.completions.create({
  model, messages, max_tokens: 12, temperature: 1, seed: 5, n: 2, logprobs: true, top_logprobs: 3,
});
check(lp.choices.length === 2 && lp.choices.every((c, i) => c.index === i), "chat n: 2: choices", lp.choices);
lp.choices.forEach((c, i) => checkChatLogprobs(c, 3, `chat n: 2, choice ${i}`));
checkUsage(lp.usage, "chat n: 2");
const lpStream = await client.chat.completions.create({
  model, messages, max_tokens: 12, temperature: 1, seed: 5, n: 2, logprobs: true, top_logprobs: 3, stream: true,
});
const streamed = [{ text: "", content: [] }, { text: "", content: [] }];
for await (const chunk of lpStream) {
  for (const c of chunk.choices) {
    streamed[c.index].text += c.delta?.content ?? "";
    streamed[c.index].content.push(...(c.logprobs?.content ?? []));
  }
}
streamed.forEach((s, i) => {
  check(s.text === lp.choices[i].message.content, `chat n: 2 stream, choice ${i}: text`, s.text);
  check(JSON.stringify(s.content) === JSON.stringify(lp.choices[i].logprobs.content),
        `chat n: 2 stream, choice ${i}: logprobs differ from the whole answer`, s.content);
});
console.log(`chat logprobs, n: 2 (whole and stream): ${lp.choices.map((c) => JSON.stringify(c.message.content))}`);
const legacy = await client.completions.create({ model, prompt: "Once upon a time", max_tokens: 8, logprobs: 2 });
const l = legacy.choices[0].logprobs;
check(l && l.tokens.length > 0 && l.token_logprobs.length === l.tokens.length &&
      l.top_logprobs.length === l.tokens.length && l.text_offset.length === l.tokens.length &&
      l.top_logprobs.every((d) => Object.keys(d).length >= 1 && Object.keys(d).length <= 3),
      "completions logprobs: 2", l);
console.log(`completions logprobs: ${l.tokens.length} tokens, ${JSON.stringify(l.top_logprobs[0])}`);
// Structured output: a JSON schema in response_format; a finished answer is
// JSON that follows it (whatever the model, even a random one).
const verdict = {
  type: "object",
  properties: {
    answer: { enum: ["yes", "no"] },
    confidence: { type: "integer", minimum: 0, maximum: 100 },
    reasons: { type: "array", items: { type: "string", maxLength: 8 }, maxItems: 2 },
  },
  required: ["answer", "confidence"],
  additionalProperties: false,
};
let finished = 0;
for (const seed of [1, 2, 3]) {
  const s = await client.chat.completions.create({
    model, messages, max_tokens: 300, temperature: 0.8, seed,
    response_format: { type: "json_schema", json_schema: { name: "verdict", strict: true, schema: verdict } },
  });
  const c = s.choices[0];
  check(["stop", "length"].includes(c.finish_reason), "json_schema: finish_reason", c);
  if (c.finish_reason !== "stop") continue;
  const v = JSON.parse(c.message.content);
  check(["yes", "no"].includes(v.answer) && Number.isInteger(v.confidence) && v.confidence >= 0 &&
        v.confidence <= 100 && Object.keys(v).every((k) => k in verdict.properties) &&
        (v.reasons === undefined || (Array.isArray(v.reasons) && v.reasons.length <= 2 &&
                                     v.reasons.every((r) => typeof r === "string" && [...r].length <= 8))),
        "json_schema: the answer does not follow the schema", v);
  finished++;
  console.log(`response_format json_schema: ${c.message.content.replace(/\s+/g, " ")}`);
}
check(finished > 0, "json_schema: no answer finished within max_tokens", finished);
// A keyword vt cannot enforce is refused, naming where it is.
try {
  await client.chat.completions.create({
    model, messages, response_format: { type: "json_schema", json_schema: { name: "n", schema: { type: "integer", multipleOf: 3 } } },
  });
  check(false, "multipleOf was accepted", null);
} catch (e) {
  check(e instanceof OpenAI.BadRequestError && e.param === "response_format.json_schema.schema" &&
        e.message.includes("multipleOf"), "multipleOf: the error", e.error);
  console.log(`unsupported schema keyword -> ${e.status} ${e.constructor.name}, param ${e.param}`);
}

// Tool calls: a call forced by tool_choice, its result sent back as a `tool`
// message, the final answer; whole and streamed. The server's chat template
// must show a tool-call syntax vt knows (docs/TOOL_CALLS.md), e.g. Qwen3's.
const tools = [{
  type: "function",
  function: {
    name: "get_weather", description: "The weather in a city",
    parameters: {
      type: "object",
      properties: { city: { type: "string", enum: ["Paris", "Oslo"] }, days: { type: "integer", minimum: 1, maximum: 7 } },
      required: ["city", "days"],
    },
  },
}];
const ask = [{ role: "user", content: "What is the weather in Paris?" }];
const forced = { type: "function", function: { name: "get_weather" } };
function checkWeatherCall(call, what) {
  check(call && call.id.startsWith("call_") && call.type === "function" && call.function.name === "get_weather" &&
        typeof call.function.arguments === "string", `${what}: the call`, call);
  const a = JSON.parse(call.function.arguments);
  check(["Paris", "Oslo"].includes(a.city) && Number.isInteger(a.days) && a.days >= 1 && a.days <= 7 &&
        Object.keys(a).length === 2, `${what}: the arguments do not follow the schema`, a);
}
const called = await client.chat.completions.create({
  model, messages: ask, tools, tool_choice: forced, max_tokens: 200, seed: 7,
});
const cm = called.choices[0];
check(cm.finish_reason === "tool_calls" && cm.message.content === null && cm.message.tool_calls.length === 1,
      "tool call: the message", cm);
checkWeatherCall(cm.message.tool_calls[0], "tool call");
console.log(`tool call: ${cm.message.tool_calls[0].function.name}(${cm.message.tool_calls[0].function.arguments})`);
// The same request streamed: the deltas reassemble into the same call.
const tcStream = await client.chat.completions.create({
  model, messages: ask, tools, tool_choice: forced, max_tokens: 200, seed: 7, stream: true,
});
const acc = [];
let tcFinish = null;
for await (const chunk of tcStream) {
  const c = chunk.choices[0];
  if (!c) continue;
  for (const d of c.delta.tool_calls ?? []) {
    if (d.id) acc[d.index] = { id: d.id, type: d.type, function: { name: d.function.name, arguments: "" } };
    acc[d.index].function.arguments += d.function.arguments ?? "";
  }
  if (c.finish_reason) tcFinish = c.finish_reason;
}
check(tcFinish === "tool_calls" && acc.length === 1, "streamed tool call: finish_reason and count", { tcFinish, acc });
checkWeatherCall(acc[0], "streamed tool call");
check(acc[0].function.arguments === cm.message.tool_calls[0].function.arguments,
      "streamed tool call: not the non-streamed call", acc[0]);
console.log(`tool call streamed: ${acc[0].function.name}(${acc[0].function.arguments})`);
// The result goes back; the model answers in text (tool_choice none, then auto).
const roundTrip = [...ask, cm.message, { role: "tool", tool_call_id: cm.message.tool_calls[0].id, content: "sunny, 21 C" }];
for (const tool_choice of ["none", "auto"]) {
  const fin = await client.chat.completions.create({ model, messages: roundTrip, tools, tool_choice, max_tokens: 24, seed: 7 });
  const f = fin.choices[0];
  check(typeof f.message.content === "string" && ["stop", "length", "tool_calls"].includes(f.finish_reason) &&
        (tool_choice === "auto" || (f.finish_reason !== "tool_calls" && f.message.tool_calls === undefined)),
        `tool result, tool_choice ${tool_choice}: the final answer`, f);
  console.log(`final answer (tool_choice ${tool_choice}): ${JSON.stringify(f.message.content)} (${f.finish_reason})`);
  const fs = await client.chat.completions.create({
    model, messages: roundTrip, tools, tool_choice, max_tokens: 24, seed: 7, stream: true,
  });
  let text = "";
  for await (const chunk of fs) text += chunk.choices[0]?.delta?.content ?? "";
  check(f.finish_reason === "tool_calls" || text === f.message.content,
        `tool result, tool_choice ${tool_choice}: the streamed answer differs`, { text, whole: f.message.content });
}
try {
  await client.chat.completions.create({ model, messages: ask, tools, tool_choice: { type: "function", function: { name: "nope" } } });
  check(false, "a tool_choice naming no tool was accepted", null);
} catch (e) {
  check(e instanceof OpenAI.BadRequestError && e.param === "tool_choice.function.name", "tool_choice nope: the error", e.error);
  console.log(`tool_choice naming no tool -> ${e.status} ${e.constructor.name}, param ${e.param}`);
}

// A refusal arrives as the client's own error type, with the field named.
try {
  await client.chat.completions.create({ model, messages, n: 9 });
  check(false, "n: 9 was accepted", null);
} catch (e) {
  check(e instanceof OpenAI.BadRequestError && e.status === 400 && e.param === "n", "n: 9: the error", e.error);
  console.log(`n: 9 -> ${e.status} ${e.constructor.name}, param ${e.param}`);
}
// A wrong key is the client's authentication error.
try {
  await new OpenAI({ baseURL, apiKey: apiKey + "-wrong" }).models.list();
  check(apiKey === "none", "a wrong API key was accepted", null);
} catch (e) {
  check(e instanceof OpenAI.AuthenticationError && e.status === 401, "wrong key: the error", e.error);
  console.log(`wrong API key -> ${e.status} ${e.constructor.name}`);
}
console.log("openai_client: every check passed");
