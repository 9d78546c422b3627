// A safetensors file's tensors (the 8-byte header length, the JSON header, the data) as typed arrays:
// F32 as Float32Array, I64 as BigInt64Array, each with its shape. For the clients that compare with
// headprune's `bench --save-io` output (gguf_check.mjs, onnx_check.mjs).
import fs from "node:fs";

export function readSafetensors(file) {
  const buf = fs.readFileSync(file);
  const n = Number(buf.readBigUInt64LE(0));
  const header = JSON.parse(buf.subarray(8, 8 + n).toString("utf8"));
  const out = {};
  for (const [name, t] of Object.entries(header)) {
    if (name === "__metadata__") continue;
    const [a, b] = t.data_offsets;
    const copy = new Uint8Array(buf.subarray(8 + n + a, 8 + n + b)).buffer;  // aligned
    if (t.dtype === "F32") out[name] = {shape: t.shape, data: new Float32Array(copy)};
    else if (t.dtype === "I64") out[name] = {shape: t.shape, data: new BigInt64Array(copy)};
    else throw new Error(`${file}: tensor ${name} has dtype ${t.dtype} (F32 or I64 read)`);
  }
  return out;
}
