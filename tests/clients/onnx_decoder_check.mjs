// headprune's ONNX decoder folders (`export --onnx-dir`: optimum's key/value cache inputs and outputs)
// in the real clients: ONNX Runtime (onnxruntime-node 1.30.0) step by step, and transformers.js 4.3.1's
// own generate().
//
//   node onnx_decoder_check.mjs steps DIR IO.safetensors PREFILL
//     IO: `headprune bench --save-io` of the same model (input_ids [B, T], logits [B, T, V] of the whole
//     sequence at once). ONNX Runtime runs DIR/onnx/model.onnx on the first PREFILL tokens with an empty
//     cache, then one token at a time, feeding each call's present.* back as past_key_values.*; prints
//     one JSON line: the largest |logit difference| against headprune's over every position and step,
//     the calls made, each layer's key/value heads as the file declares them, and `left_padded`: the
//     largest difference of row 0's logits when it is run beside a copy of itself with two masked
//     tokens in front (transformers.js's left padding; position ids from the mask, as HF makes them).
//   node onnx_decoder_check.mjs generate DIR IDS MAX_NEW
//     transformers.js: AutoModelForCausalLM.from_pretrained(DIR) (local files only), greedy generate()
//     from the comma-separated prompt ids IDS, at most MAX_NEW new tokens; one JSON line with the ids.
//   node onnx_decoder_check.mjs speed DIR PROMPT NEW REPS THREADS
//     ONNX Runtime's decoding speed with the cache (bench/decode_runtimes.py); one JSON line.
import ort from "onnxruntime-node";
import {readSafetensors} from "./safetensors.mjs";

const modelFile = (dir) => `${dir}/onnx/model.onnx`;

function cacheInputs(sess) {
  const meta = sess.inputMetadata;  // [{name, isTensor, type, shape}] in onnxruntime-node 1.30
  return meta.filter((m) => m.name.startsWith("past_key_values.")).map((m) => ({name: m.name, shape: m.shape}));
}

// One decoder call: ids [B, n] at absolute positions from `posStart` (per row), the mask over past + new.
async function call(sess, ids, B, n, mask, S, positions, past) {
  const feeds = {
    input_ids: new ort.Tensor("int64", ids, [B, n]),
    attention_mask: new ort.Tensor("int64", mask, [B, S]),
    position_ids: new ort.Tensor("int64", positions, [B, n]),
  };
  Object.assign(feeds, past);
  const out = await sess.run(feeds);
  const next = {};
  for (const [name, t] of Object.entries(out))
    if (name.startsWith("present.")) next[name.replace("present.", "past_key_values.")] = t;
  return {logits: out.logits, past: next};
}

function emptyPast(sess, B) {
  const past = {};
  for (const {name, shape} of cacheInputs(sess)) {
    const dims = shape.map((d) => (d === "batch_size" ? B : typeof d === "number" ? d : 0));
    past[name] = new ort.Tensor("float32", new Float32Array(0), dims);
  }
  return past;
}

async function steps(dir, ioPath, prefillArg) {
  const io = readSafetensors(ioPath);
  const [B, T] = io.input_ids.shape, V = io.logits.shape[2], P = Number(prefillArg);
  const sess = await ort.InferenceSession.create(modelFile(dir), {graphOptimizationLevel: "all", intraOpNumThreads: 2});
  let past = emptyPast(sess, B), maxDiff = 0, calls = 0;
  const compare = (logits, t0, n) => {
    for (let b = 0; b < B; ++b)
      for (let i = 0; i < n; ++i)
        for (let v = 0; v < V; ++v) {
          const got = logits.data[(b * n + i) * V + v], want = io.logits.data[(b * T + t0 + i) * V + v];
          maxDiff = Math.max(maxDiff, Math.abs(got - want));
        }
  };
  for (let t0 = 0; t0 < T;) {
    const n = t0 === 0 ? P : 1, S = t0 + n;
    const ids = new BigInt64Array(B * n), pos = new BigInt64Array(B * n);
    for (let b = 0; b < B; ++b)
      for (let i = 0; i < n; ++i) ids[b * n + i] = io.input_ids.data[b * T + t0 + i], pos[b * n + i] = BigInt(t0 + i);
    const r = await call(sess, ids, B, n, new BigInt64Array(B * S).fill(1n), S, pos, past);
    compare(r.logits, t0, n);
    past = r.past;
    t0 += n;
    ++calls;
  }
  // Left padding as transformers.js batches prompts: row A is row 0's first n tokens after two masked
  // ones (position ids from the mask), row B row 0's first n + 2; then one step each with its next
  // token. Both must give headprune's row-0 logits at their positions.
  const pad = 2, n = Math.min(P, T - pad - 1), S = n + pad, tok = (t) => io.input_ids.data[t];
  const ids = new BigInt64Array(2 * S), mask = new BigInt64Array(2 * S).fill(1n), pos = new BigInt64Array(2 * S);
  for (let i = 0; i < S; ++i) {
    ids[i] = i < pad ? 0n : tok(i - pad), mask[i] = i < pad ? 0n : 1n, pos[i] = BigInt(i < pad ? 1 : i - pad);
    ids[S + i] = tok(i), pos[S + i] = BigInt(i);
  }
  let leftDiff = 0;
  const against = (logits, i, t) => {
    for (let v = 0; v < V; ++v) leftDiff = Math.max(leftDiff, Math.abs(logits.data[i * V + v] - io.logits.data[t * V + v]));
  };
  let r = await call(sess, ids, 2, S, mask, S, pos, emptyPast(sess, 2));
  for (let i = 0; i < n; ++i) against(r.logits, pad + i, i);
  for (let i = 0; i < S; ++i) against(r.logits, S + i, i);
  const mask2 = new BigInt64Array(2 * (S + 1)).fill(1n);
  mask2[0] = mask2[1] = 0n;
  r = await call(sess, BigInt64Array.from([tok(n), tok(S)]), 2, 1, mask2, S + 1, BigInt64Array.from([BigInt(n), BigInt(S)]), r.past);
  against(r.logits, 0, n);
  against(r.logits, 1, S);
  console.log(JSON.stringify({batch: B, length: T, prefill: P, calls, max_abs_diff: maxDiff, left_padded: leftDiff,
                              cache_inputs: cacheInputs(sess).map((c) => [c.name, c.shape])}));
}

async function generate(dir, idsArg, maxNew) {
  const {AutoModelForCausalLM, Tensor, env} = await import("@huggingface/transformers");
  env.allowRemoteModels = false;
  env.allowLocalModels = true;
  env.useFSCache = false;
  env.useBrowserCache = false;
  const model = await AutoModelForCausalLM.from_pretrained(dir, {local_files_only: true, dtype: "fp32", device: "cpu"});
  const prompt = idsArg.split(",").map((x) => BigInt(x));
  const input_ids = new Tensor("int64", BigInt64Array.from(prompt), [1, prompt.length]);
  const attention_mask = new Tensor("int64", new BigInt64Array(prompt.length).fill(1n), [1, prompt.length]);
  const out = await model.generate({input_ids, attention_mask, max_new_tokens: Number(maxNew), do_sample: false});
  const all = Array.from(out.data, Number);
  console.log(JSON.stringify({prompt: prompt.map(Number), new_ids: all.slice(prompt.length)}));
}

// Decoding speed with the cache: a PROMPT-token prompt (ids 5..), then NEW greedy tokens one call each;
// the median over REPS runs (after one untimed) of the prompt's seconds and of the decoding tokens/s.
async function speed(dir, promptArg, newArg, repsArg, threadsArg) {
  const P = Number(promptArg), N = Number(newArg), R = Number(repsArg);
  const sess = await ort.InferenceSession.create(modelFile(dir), {graphOptimizationLevel: "all",
                                                                  intraOpNumThreads: Number(threadsArg), interOpNumThreads: 1});
  const once = async () => {
    const ids = BigInt64Array.from({length: P}, (_, i) => BigInt(5 + ((i * 7919) % 200)));
    const t0 = performance.now();
    let r = await call(sess, ids, 1, P, new BigInt64Array(P).fill(1n), P, BigInt64Array.from({length: P}, (_, i) => BigInt(i)),
                       emptyPast(sess, 1));
    const t1 = performance.now();
    for (let k = 0; k < N; ++k) {
      const V = r.logits.dims[2], last = r.logits.data.subarray((r.logits.dims[1] - 1) * V);
      let best = 0;
      for (let v = 1; v < V; ++v) if (last[v] > last[best]) best = v;
      const S = P + k + 1;
      r = await call(sess, BigInt64Array.from([BigInt(best)]), 1, 1, new BigInt64Array(S).fill(1n), S,
                     BigInt64Array.from([BigInt(S - 1)]), r.past);
    }
    return {prompt_s: (t1 - t0) / 1000, decode_tokens_per_s: N / ((performance.now() - t1) / 1000)};
  };
  await once();
  const runs = [];
  for (let i = 0; i < R; ++i) runs.push(await once());
  const median = (xs) => xs.sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  console.log(JSON.stringify({prompt: P, new_tokens: N, reps: R, threads: Number(threadsArg),
                              prompt_s: median(runs.map((x) => x.prompt_s)),
                              decode_tokens_per_s: median(runs.map((x) => x.decode_tokens_per_s))}));
}

const [mode, ...args] = process.argv.slice(2);
if (mode === "steps") await steps(...args);
else if (mode === "generate") await generate(...args);
else if (mode === "speed") await speed(...args);
else {
  console.error("usage: onnx_decoder_check.mjs steps DIR IO.safetensors PREFILL | generate DIR IDS MAX_NEW | " +
                "speed DIR PROMPT NEW REPS THREADS");
  process.exit(2);
}
