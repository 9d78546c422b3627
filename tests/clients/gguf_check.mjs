// llama.cpp (node-llama-cpp's prebuilt CPU build) against headprune on a GGUF file headprune wrote.
//
//   node gguf_check.mjs logprobs MODEL.gguf IO.safetensors
//     IO: `headprune bench --save-io` of the same model (input_ids [1, T], logits [1, T, V]). llama.cpp
//     evaluates the same ids (F32 KV cache, flash attention off, 2 threads) and returns the next-token
//     probabilities over the whole vocabulary at every position; prints one JSON line with the largest
//     |log p_llama.cpp - log_softmax(headprune's logits)| over every position and token whose
//     probability is above 1e-30 (float32 log-probabilities of smaller ones are not compared), the
//     positions, the largest |p_llama.cpp - p_headprune| over the same tokens, and whether the arg-max
//     agrees everywhere.
//   node gguf_check.mjs speed MODEL.gguf THREADS PROMPT_LENGTHS NEW_TOKENS REPS [DECODE_AFTER [KV_TYPE]]
//     Prompt processing (tokens/s of one evaluation of a prompt of each length, e.g. "128,512") and
//     decoding (tokens/s of NEW_TOKENS greedy tokens after a DECODE_AFTER-token prompt, 128 by default,
//     one evaluation each), the median of REPS runs each after one untimed run, on a fresh sequence each
//     time (KV cache KV_TYPE, F32 by default, e.g. F16; flash attention off). One JSON line.
//   node gguf_check.mjs nll MODEL.gguf IDS.json
//     IDS: {"sequences": [[id, ...], ...]} (llama2c_reference.py sample writes it). llama.cpp evaluates
//     each sequence on a fresh context (F32 KV cache) and takes -log p(next token) at every position but
//     the last; prints one JSON line: the per-token losses of every sequence (in order), their mean and
//     the perplexity exp(mean).
//   node gguf_check.mjs tokenize MODEL.gguf TEXTS_FILE [special]
//     One JSON line per line of TEXTS_FILE: llama.cpp's token ids for it (no special tokens added;
//     with `special`, special tokens written in the text are read as such, as HF's tokenizers do).
import fs from "node:fs";
import {getLlama, LlamaLogLevel} from "node-llama-cpp";
import {readSafetensors} from "./safetensors.mjs";

async function open(modelPath, contextSize, threads = 2, kvType = "F32") {
  const llama = await getLlama({gpu: false, build: "never", logLevel: LlamaLogLevel.error, maxThreads: threads});
  const model = await llama.loadModel({modelPath, gpuLayers: 0});
  const context = contextSize ? await model.createContext({
    contextSize, threads, batchSize: 512, flashAttention: false,
    experimentalKvCacheKeyType: kvType, experimentalKvCacheValueType: kvType,
  }) : null;
  return {llama, model, context};
}

async function logprobs(modelPath, ioPath) {
  const io = readSafetensors(ioPath);
  const [B, T, V] = io.logits.shape;
  if (B !== 1) throw new Error(`${ioPath}: batch ${B}; save the io at batch 1`);
  const ids = Array.from(io.input_ids.data.slice(0, T), Number);
  const {model, context} = await open(modelPath, Math.max(256, T));
  const seq = context.getSequence();
  const opts = {probabilities: true, options: {temperature: 1, topK: 0, topP: 1, minP: 0}};
  const res = await seq.controlledEvaluate(ids.map((t) => [t, {generateNext: opts}]));
  let maxDiff = 0, maxProbDiff = 0, argmaxAgree = true, compared = 0, worst = null;
  for (let t = 0; t < T; ++t) {
    const probs = res[t]?.next?.probabilities;
    if (!probs) throw new Error(`no probabilities at position ${t}`);
    const row = io.logits.data.subarray(t * V, (t + 1) * V);
    let m = -Infinity, arg = 0;
    for (let v = 0; v < V; ++v) if (row[v] > m) m = row[v], arg = v;
    let z = 0;
    for (let v = 0; v < V; ++v) z += Math.exp(row[v] - m);
    const lse = m + Math.log(z);
    const top = probs.entries().next().value[0];
    if (top !== arg) argmaxAgree = false;
    for (const [tok, p] of probs) {
      if (!(p > 1e-30)) continue;
      const d = Math.abs(Math.log(p) - (row[tok] - lse));
      maxProbDiff = Math.max(maxProbDiff, Math.abs(p - Math.exp(row[tok] - lse)));
      ++compared;
      if (d > maxDiff) maxDiff = d, worst = {position: t, token: tok};
    }
  }
  console.log(JSON.stringify({positions: T, vocabulary: V, compared, max_abs_logprob_diff: maxDiff, worst,
                              max_abs_prob_diff: maxProbDiff,
                              argmax_agree: argmaxAgree}));
}

async function nll(modelPath, idsPath) {
  const sequences = JSON.parse(fs.readFileSync(idsPath, "utf8")).sequences;
  const longest = Math.max(...sequences.map((s) => s.length));
  const {model, context} = await open(modelPath, Math.max(256, longest));
  const seq = context.getSequence();
  const opts = {probabilities: true, options: {temperature: 1, topK: 0, topP: 1, minP: 0}};
  const losses = [];
  for (const ids of sequences) {
    await seq.clearHistory();
    const res = await seq.controlledEvaluate(ids.map((t) => [t, {generateNext: opts}]));
    for (let t = 0; t + 1 < ids.length; ++t) {
      const p = res[t]?.next?.probabilities?.get(ids[t + 1]);
      if (!(p > 0)) throw new Error(`no probability for token ${ids[t + 1]} after position ${t}`);
      losses.push(-Math.log(p));
    }
  }
  const mean = losses.reduce((a, b) => a + b, 0) / losses.length;
  console.log(JSON.stringify({sequences: sequences.length, tokens: losses.length, mean_nll: mean,
                              perplexity: Math.exp(mean), per_token: losses}));
  void model;
}

async function tokenize(modelPath, textsPath, special) {
  const {model} = await open(modelPath, 0);
  const lines = fs.readFileSync(textsPath, "utf8").split("\n");
  if (lines.length && lines[lines.length - 1] === "") lines.pop();
  for (const line of lines) console.log(JSON.stringify(Array.from(model.tokenize(line, special === "special"))));
}

function median(xs) {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)];
}

async function speed(modelPath, threadsArg, lengthsArg, newArg, repsArg, afterArg = "128", kvType = "F32") {
  const threads = Number(threadsArg), lengths = lengthsArg.split(",").map(Number);
  const newTokens = Number(newArg), reps = Number(repsArg), after = Number(afterArg);
  const {model, context} = await open(modelPath, Math.max(...lengths, after + newTokens) + 8, threads, kvType);
  const prompt = (n) => Array.from({length: n}, (_, i) => 300 + ((i * 7919) % 1000));  // ordinary ids
  const seq = context.getSequence();
  const out = {threads, kv_type: kvType, prompt: {}, decode: {}};
  for (const n of lengths) {
    const times = [];
    for (let r = 0; r <= reps; ++r) {
      await seq.clearHistory();
      const t0 = performance.now();
      await seq.controlledEvaluate(prompt(n));
      const dt = (performance.now() - t0) / 1000;
      if (r > 0) times.push(dt);
    }
    out.prompt[n] = {seconds: median(times), tokens_per_s: n / median(times)};
  }
  // Decoding token by token, each next token the arg-max of the last (an end-of-generation token does
  // not stop it: every run decodes exactly newTokens).
  const times = [];
  for (let r = 0; r <= reps; ++r) {
    await seq.clearHistory();
    await seq.controlledEvaluate(prompt(after));
    const t0 = performance.now();
    let tok = prompt(1)[0];
    for (let k = 0; k < newTokens; ++k) {
      const res = await seq.controlledEvaluate([[tok, {generateNext: {token: true, options: {temperature: 0}}}]]);
      tok = res[0].next.token;
    }
    const dt = (performance.now() - t0) / 1000;
    if (r > 0) times.push(dt);
  }
  out.decode = {new_tokens: newTokens, after_prompt: after, seconds: median(times), tokens_per_s: newTokens / median(times)};
  console.log(JSON.stringify(out));
}

const [mode, ...args] = process.argv.slice(2);
if (mode === "logprobs") await logprobs(...args);
else if (mode === "speed") await speed(...args);
else if (mode === "tokenize") await tokenize(...args);
else if (mode === "nll") await nll(...args);
else {
  console.error("usage: gguf_check.mjs logprobs MODEL.gguf IO.safetensors | nll MODEL.gguf IDS.json | tokenize MODEL.gguf TEXTS");
  process.exit(2);
}
// Exit once stdout is flushed (a pipe is written asynchronously: exiting at once cuts a long line).
process.stdout.write("", () => process.exit(0));
