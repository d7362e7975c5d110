// The official OpenAI SDK against the router's HTTP API. Run by openai_http_checks.sh from a
// folder holding node_modules/openai:
//   node openai_sdk_check.mjs BASE_URL MODEL WORK_DIR
// WORK_DIR holds what the gRPC API answered for the same requests (want_*.txt) and the
// pre-cached document (doc.txt, doc_cached_tokens.txt). Prints ok/FAIL lines; exits 1 on a
// failure.
import fs from "node:fs";
import OpenAI from "openai";
import Ajv from "ajv";

const [baseURL, model, work] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey: "unused", maxRetries: 0, timeout: 60000 });
let failures = 0;
function check(name, ok, detail) {
  console.log(`${ok ? "ok  " : "FAIL"} sdk-${name}${ok ? "" : ": " + detail}`);
  if (!ok) failures++;
}
// yoco-cli prints the text and one newline.
const want = (name) => fs.readFileSync(`${work}/${name}`, "utf8").replace(/\n$/, "");

const prompt = "The quick brown fox";
const sampling = { temperature: 0.8, top_p: 0.95, seed: 7, max_tokens: 24 };

const whole = await client.completions.create({ model, prompt, ...sampling });
check("completion-equals-grpc", whole.choices[0].text === want("want_sampled.txt"),
      JSON.stringify([whole.choices[0].text, want("want_sampled.txt")]));
check("completion-shape", whole.object === "text_completion" && whole.model === model &&
      whole.id.startsWith("cmpl-") && ["stop", "length"].includes(whole.choices[0].finish_reason),
      JSON.stringify(whole));
check("completion-usage", whole.usage.prompt_tokens === prompt.length + 1 &&
      whole.usage.total_tokens === whole.usage.prompt_tokens + whole.usage.completion_tokens &&
      whole.usage.prompt_tokens_details.cached_tokens === 0, JSON.stringify(whole.usage));

let streamed = "", usage = null, finish = null;
const stream = await client.completions.create({
  model, prompt, ...sampling, stream: true, stream_options: { include_usage: true } });
for await (const chunk of stream) {
  if (chunk.usage) usage = chunk.usage;
  for (const c of chunk.choices) {
    streamed += c.text;
    if (c.finish_reason) finish = c.finish_reason;
  }
}
check("completion-stream-equals-grpc", streamed === want("want_sampled.txt"),
      JSON.stringify([streamed, want("want_sampled.txt")]));
check("completion-stream-usage", usage !== null && finish === whole.choices[0].finish_reason &&
      usage.completion_tokens === whole.usage.completion_tokens, JSON.stringify([usage, finish]));

// Chat: ChatML over the byte tokenizer, counted independently: BOS, then per message
// <|im_start|> role\ncontent <|im_end|> \n, then <|im_start|> assistant\n.
const messages = [{ role: "system", content: "Answer briefly." }, { role: "user", content: "Hi!" }];
const rendered = 1 + messages.reduce((n, m) => n + 1 + (m.role + "\n" + m.content).length + 2, 0) +
                 1 + "assistant\n".length;
const chat = await client.chat.completions.create({ model, messages, ...sampling });
check("chat-shape", chat.object === "chat.completion" && chat.id.startsWith("chatcmpl-") &&
      chat.choices[0].message.role === "assistant" &&
      typeof chat.choices[0].message.content === "string", JSON.stringify(chat));
check("chat-prompt-is-chatml", chat.usage.prompt_tokens === rendered,
      `${chat.usage.prompt_tokens} != ${rendered}`);
let chatStreamed = "", role = null;
const chatStream = await client.chat.completions.create({ model, messages, ...sampling, stream: true });
for await (const chunk of chatStream) {
  for (const c of chunk.choices) {
    if (c.delta.role) role = c.delta.role;
    chatStreamed += c.delta.content ?? "";
  }
}
check("chat-stream-equals-whole", chatStreamed === chat.choices[0].message.content && role === "assistant",
      JSON.stringify([chatStreamed, chat.choices[0].message.content]));

// Logprobs, chat shape: asking for them changes no token; one entry per token of the answer (the
// end-of-message token is not shown); the alternatives most likely first; streamed = whole.
const chatLp = await client.chat.completions.create(
  { model, messages, ...sampling, logprobs: true, top_logprobs: 3 });
const entries = chatLp.choices[0].logprobs?.content ?? [];
// (An answer that ends at its end of message has one token more than entries; at EOS, not.)
const tokensOut = chatLp.usage.completion_tokens;
check("chat-logprobs", chatLp.choices[0].message.content === chat.choices[0].message.content &&
      (entries.length === tokensOut ||
       (chatLp.choices[0].finish_reason === "stop" && entries.length === tokensOut - 1)) &&
      entries.every((e) => e.logprob <= 0 && e.top_logprobs.length === 3 &&
                    e.top_logprobs.every((t, i) => i === 0 || t.logprob <= e.top_logprobs[i - 1].logprob)),
      JSON.stringify(chatLp.choices[0]));
let streamedEntries = [];
const chatLpStream = await client.chat.completions.create(
  { model, messages, ...sampling, logprobs: true, top_logprobs: 3, stream: true });
for await (const chunk of chatLpStream) {
  for (const c of chunk.choices) streamedEntries.push(...(c.logprobs?.content ?? []));
}
check("chat-logprobs-stream-equals-whole", JSON.stringify(streamedEntries) === JSON.stringify(entries),
      JSON.stringify([streamedEntries.length, entries.length]));

// Legacy completions shape: the chosen token among at most logprobs + 1 alternatives.
const lp = await client.completions.create({ model, prompt, ...sampling, logprobs: 2 });
const legacy = lp.choices[0].logprobs;
check("completion-logprobs", lp.choices[0].text === want("want_sampled.txt") &&
      legacy.tokens.length === lp.usage.completion_tokens &&
      legacy.token_logprobs.every((x, i) => x <= 0 && legacy.top_logprobs[i][legacy.tokens[i]] === x &&
                                  Object.keys(legacy.top_logprobs[i]).length <= 3) &&
      legacy.text_offset.every((x, i) => i === 0 ? x === 0 : x >= legacy.text_offset[i - 1]),
      JSON.stringify(legacy));
// Logit adjustments: a bias of +100 on one byte's id makes every greedy token that byte;
// penalties are accepted and, seeded, reproducible.
const forced = await client.completions.create(
  { model, prompt, max_tokens: 5, temperature: 0, logit_bias: { [String("a".charCodeAt(0) + 4)]: 100 } });
check("logit-bias", forced.choices[0].text === "aaaaa", JSON.stringify(forced.choices[0]));
const penalized = { model, prompt, ...sampling, presence_penalty: 0.8, frequency_penalty: 0.5,
                    repetition_penalty: 1.2, min_p: 0.05, min_tokens: 3 };
const p1 = await client.completions.create(penalized);
const p2 = await client.completions.create(penalized);
check("penalties-reproducible", p1.choices[0].text === p2.choices[0].text &&
      p1.usage.completion_tokens >= 3, JSON.stringify([p1.choices[0], p2.choices[0]]));

// Scoring a prompt as lm-evaluation-harness does (echo, max_tokens 0, logprobs): the prompt's
// own text back, a logprob for every token but the first (the numbers are checked against
// `yoco logits` in ClusterServingTest).
const scoredPrompt = [0, ...Buffer.from(prompt).map((b) => b + 4)];  // BOS, then byte ids
const echo = await client.completions.create(
  { model, prompt: scoredPrompt, echo: true, max_tokens: 0, logprobs: 1, temperature: 0 });
const el = echo.choices[0].logprobs;
check("echo-scores-the-prompt", echo.choices[0].text === prompt &&
      el.tokens.length === scoredPrompt.length && el.token_logprobs[0] === null &&
      el.token_logprobs.slice(1).every((x) => x < 0) && echo.usage.completion_tokens === 0 &&
      el.tokens.slice(1).join("") === prompt, JSON.stringify(echo));
try {
  await client.chat.completions.create({ model, messages, top_logprobs: 2 });
  check("top-logprobs-needs-logprobs", false, "no error");
} catch (e) {
  check("top-logprobs-needs-logprobs", e instanceof OpenAI.BadRequestError && e.param === "top_logprobs",
        String(e));
}

// A pre-cached document: the answer's usage shows the tokens it did not prefill.
const doc = fs.readFileSync(`${work}/doc.txt`, "utf8");
const cached = Number(fs.readFileSync(`${work}/doc_cached_tokens.txt`, "utf8"));
const hit = await client.completions.create({ model, prompt: doc + " Q: who?", ...sampling });
check("cached-tokens", hit.usage.prompt_tokens_details.cached_tokens === cached,
      `${hit.usage.prompt_tokens_details.cached_tokens} != ${cached}`);
const miss = await client.completions.create(
  { model, prompt: doc + " Q: who?", ...sampling, cache_salt: "another-salt" });
check("hit-equals-miss", miss.usage.prompt_tokens_details.cached_tokens === 0 &&
      miss.choices[0].text === hit.choices[0].text, JSON.stringify([hit, miss]));

const models = await client.models.list();
check("models", models.data.length === 1 && models.data[0].id === model, JSON.stringify(models.data));

// n choices of one prompt: choice 0 draws with the request's seed (the gRPC answer's), the
// others with seeds derived from it; streamed chunks name their choice.
const three = await client.completions.create({ model, prompt, ...sampling, n: 3 });
check("n-choices", three.choices.length === 3 &&
      three.choices.every((c, i) => c.index === i && ["stop", "length"].includes(c.finish_reason)) &&
      three.choices[0].text === want("want_sampled.txt") &&
      new Set(three.choices.map((c) => c.text)).size > 1, JSON.stringify(three.choices));
const byIndex = ["", "", ""];
const threeStream = await client.completions.create(
  { model, prompt, ...sampling, n: 3, stream: true });
for await (const chunk of threeStream) {
  for (const c of chunk.choices) byIndex[c.index] += c.text;
}
check("n-stream-equals-whole", byIndex.every((t, i) => t === three.choices[i].text),
      JSON.stringify([byIndex, three.choices.map((c) => c.text)]));
const chatTwo = await client.chat.completions.create({ model, messages, ...sampling, n: 2 });
check("chat-n", chatTwo.choices.length === 2 && chatTwo.choices[1].index === 1 &&
      chatTwo.choices[1].message.role === "assistant", JSON.stringify(chatTwo.choices));
// best_of: of the same three candidates, the one with the highest sum of token logprobs.
const scored = await client.completions.create({ model, prompt, ...sampling, n: 3, logprobs: 0 });
const sums = scored.choices.map((c) => c.logprobs.token_logprobs.reduce((a, b) => a + b, 0));
const bestIndex = sums.indexOf(Math.max(...sums));
const best = await client.completions.create({ model, prompt, ...sampling, best_of: 3 });
check("best-of", best.choices.length === 1 && best.choices[0].logprobs === null &&
      best.choices[0].text === scored.choices[bestIndex].text,
      JSON.stringify([best.choices, sums]));
// Structured output: 1008 sampled answers of the random-weight model under a schema, each parsed
// and validated by ajv (an independent validator, its patterns JavaScript's own RegExp with the
// u flag); json_object gives objects; a keyword we do not support is refused by name.
const schema = {
  type: "object", additionalProperties: false, required: ["name", "year", "kind", "code"],
  properties: {
    name: { type: "string", maxLength: 12 }, year: { type: "integer" },
    tags: { type: "array", items: { type: "string", maxLength: 6 }, maxItems: 3 },
    kind: { enum: ["book", "film", "paper", 7, null], maxLength: 4 },
    score: { anyOf: [{ type: "number" }, { type: "boolean" }] },
    code: { type: "string", pattern: "^[A-Z]{2}-\\d{2,4}$" },
    label: { type: "string", pattern: "é|ü", maxLength: 5 },
  },
};
const validate = new Ajv().compile(schema);
let structuredOk = 0, structuredBad = [];
// STRUCTURED_REQUESTS (default 63: 1008 answers) is smaller under the sanitizers.
const structuredRequests = Number(process.env.STRUCTURED_REQUESTS ?? 63);
for (let seed = 0; seed < structuredRequests; seed++) {
  const r = await client.completions.create({
    model, prompt: "Record:", temperature: 1, seed, max_tokens: 300, n: 16,
    response_format: { type: "json_schema", json_schema: { name: "record", schema, strict: true } } });
  for (const c of r.choices) {
    let doc = null;
    try { doc = JSON.parse(c.text); } catch { /* counted below */ }
    if (doc !== null && validate(doc)) structuredOk++; else structuredBad.push(c.text);
  }
}
check(`json-schema-${16 * structuredRequests}-validate`,
      structuredRequests > 0 && structuredOk === 16 * structuredRequests && structuredBad.length === 0,
      JSON.stringify(structuredBad.slice(0, 3)));
const anyObject = await client.chat.completions.create(
  { model, messages, ...sampling, max_tokens: 200, n: 4, response_format: { type: "json_object" } });
check("json-object", anyObject.choices.every((c) => {
  try { const v = JSON.parse(c.message.content); return typeof v === "object" && !Array.isArray(v); }
  catch { return c.finish_reason === "length"; }
}), JSON.stringify(anyObject.choices.map((c) => c.message.content)));
try {
  await client.chat.completions.create({ model, messages, response_format: { type: "json_schema",
    json_schema: { name: "x", schema: { type: "string", format: "date" } } } });
  check("json-schema-unsupported", false, "no error");
} catch (e) {
  check("json-schema-unsupported", e instanceof OpenAI.BadRequestError &&
        e.param === "response_format" && String(e.message).includes("format: is not supported"), String(e));
}
try {
  await client.completions.create({ model, prompt, n: 17 });
  check("n-bounded", false, "no error");
} catch (e) {
  check("n-bounded", e instanceof OpenAI.BadRequestError && e.param === "n", String(e));
}
try {
  await client.completions.create({ model: "no-such-model", prompt });
  check("unknown-model", false, "no error");
} catch (e) {
  check("unknown-model", e instanceof OpenAI.NotFoundError, String(e));
}
process.exit(failures ? 1 : 0);
