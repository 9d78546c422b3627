// ONNX Runtime (onnxruntime-node 1.30.0, CPU) against headprune on an ONNX file headprune wrote.
//
//   node onnx_check.mjs logits MODEL.onnx IO.safetensors
//     IO: `headprune bench --save-io` of the same model (input_ids, attention_mask, logits). Runs the
//     model (all graph optimizations, 2 threads) and prints one JSON line: the largest |logit difference|
//     against headprune's; `padding`: the largest difference between a row and the same row with
//     masked padding appended (its first positions' logits must not move: the mask is honoured); and
//     the op types of the graph ONNX Runtime optimized (e.g. how many fused Attention nodes remain).
//   node onnx_check.mjs ops MODEL.onnx
//     The op types of the file's graph and of the graph ONNX Runtime makes of it; one JSON line.
//   node onnx_check.mjs speed MODEL.onnx BATCH LENGTH REPS THREADS
//     Median seconds of REPS runs (after two untimed) on random ids; one JSON line.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import ort from "onnxruntime-node";
import {readSafetensors} from "./safetensors.mjs";

// The op types of an ONNX file's graph (ModelProto.graph = 7, GraphProto.node = 1, NodeProto.op_type = 4).
function opTypes(file) {
  const b = fs.readFileSync(file);
  const varint = (s) => {
    let v = 0, shift = 0, x;
    do { x = b[s.p++]; v += (x & 0x7f) * 2 ** shift; shift += 7; } while (x & 0x80);
    return v;
  };
  const fields = (start, end, want, visit) => {
    const s = {p: start};
    while (s.p < end) {
      const tag = varint(s), field = Math.floor(tag / 8), wire = tag & 7;
      if (wire === 0) varint(s);
      else if (wire === 1) s.p += 8;
      else if (wire === 5) s.p += 4;
      else if (wire === 2) {
        const len = varint(s);
        if (field === want) visit(s.p, s.p + len);
        s.p += len;
      } else throw new Error(`${file}: wire type ${wire}`);
    }
  };
  const counts = {};
  fields(0, b.length, 7, (gs, ge) => fields(gs, ge, 1, (ns, ne) => fields(ns, ne, 4, (os_, oe) => {
    const op = b.subarray(os_, oe).toString("utf8");
    counts[op] = (counts[op] || 0) + 1;
  })));
  return counts;
}

async function session(modelPath, threads, optimizedPath) {
  const opts = {graphOptimizationLevel: "all", intraOpNumThreads: threads, interOpNumThreads: 1, executionProviders: ["cpu"]};
  if (optimizedPath) opts.optimizedModelFilePath = optimizedPath;
  return ort.InferenceSession.create(modelPath, opts);
}

function feeds(sess, ids, mask, B, T) {
  const f = {input_ids: new ort.Tensor("int64", ids, [B, T]), attention_mask: new ort.Tensor("int64", mask, [B, T])};
  if (sess.inputNames.includes("token_type_ids")) f.token_type_ids = new ort.Tensor("int64", new BigInt64Array(B * T), [B, T]);
  return f;
}

async function logits(modelPath, ioPath) {
  const io = readSafetensors(ioPath);
  const [B, T] = io.input_ids.shape;
  const scratch = fs.mkdtempSync(path.join(os.tmpdir(), "onnx-check-"));
  const optimized = path.join(scratch, "optimized.onnx");
  const sess = await session(modelPath, 2, optimized);
  const out = (await sess.run(feeds(sess, io.input_ids.data, io.attention_mask.data, B, T))).logits;
  if (out.data.length !== io.logits.data.length) throw new Error(`logits of ${out.dims} against ${io.logits.shape}`);
  let maxDiff = 0;
  for (let i = 0; i < out.data.length; ++i) maxDiff = Math.max(maxDiff, Math.abs(out.data[i] - io.logits.data[i]));
  // Row 0 alone, and row 0 with 5 masked tokens appended: the first T positions must not change.
  const P = T + 5;
  const ids = new BigInt64Array(2 * P), mask = new BigInt64Array(2 * P);
  for (let t = 0; t < P; ++t) {
    ids[t] = t < T ? io.input_ids.data[t] : 0n;
    ids[P + t] = t < T ? io.input_ids.data[t] : BigInt(3 + t);
    mask[t] = t < T ? 1n : 0n;
    mask[P + t] = t < T ? 1n : 0n;
  }
  const single = (await sess.run(feeds(sess, io.input_ids.data.slice(0, T), io.attention_mask.data.slice(0, T), 1, T))).logits;
  const padded = (await sess.run(feeds(sess, ids, mask, 2, P))).logits;
  const perRow = padded.data.length / 2;
  const lm = padded.dims.length === 3;
  const V = lm ? padded.dims[2] : padded.dims[1];
  let padDiff = 0;
  for (let t = 0; t < (lm ? T : 1); ++t)
    for (let v = 0; v < V; ++v) {
      const a = single.data[t * V + v];
      padDiff = Math.max(padDiff, Math.abs(padded.data[t * V + v] - a), Math.abs(padded.data[perRow + t * V + v] - a));
    }
  const optimizedOps = opTypes(optimized);
  fs.rmSync(scratch, {recursive: true, force: true});  // nothing left in the temporary directory
  console.log(JSON.stringify({shape: io.logits.shape, max_abs_diff: maxDiff, padding: padDiff, optimized_ops: optimizedOps,
                              ops: opTypes(modelPath)}));
}

async function speed(modelPath, batch, length, reps, threads) {
  const B = Number(batch), T = Number(length), R = Number(reps);
  const sess = await session(modelPath, Number(threads));
  const ids = new BigInt64Array(B * T).map((_, i) => BigInt(5 + ((i * 7919) % 1000)));
  const f = feeds(sess, ids, new BigInt64Array(B * T).fill(1n), B, T);
  const times = [];
  for (let r = 0; r < R + 2; ++r) {
    const t0 = performance.now();
    await sess.run(f);
    if (r >= 2) times.push((performance.now() - t0) / 1000);
  }
  times.sort((a, b) => a - b);
  console.log(JSON.stringify({batch: B, length: T, threads: Number(threads), seconds: times[Math.floor(times.length / 2)]}));
}

async function ops(modelPath) {
  const scratch = fs.mkdtempSync(path.join(os.tmpdir(), "onnx-ops-"));
  const optimized = path.join(scratch, "optimized.onnx");
  await session(modelPath, 2, optimized);
  const optimizedOps = opTypes(optimized);
  fs.rmSync(scratch, {recursive: true, force: true});
  console.log(JSON.stringify({ops: opTypes(modelPath), optimized_ops: optimizedOps}));
}

const [mode, ...args] = process.argv.slice(2);
if (mode === "logits") await logits(...args);
else if (mode === "ops") await ops(...args);
else if (mode === "speed") await speed(...args);
else {
  console.error("usage: onnx_check.mjs logits MODEL.onnx IO.safetensors | speed MODEL.onnx BATCH LENGTH REPS THREADS");
  process.exit(2);
}
