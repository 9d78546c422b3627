#!/usr/bin/env node
// Reference client: Hugging Face transformers.js (pinned in package.json) on a local tokenizer folder.
//
//   node tests/clients/hf_encode.mjs TOKENIZER_DIR TEXTS_FILE MODE
//
// TOKENIZER_DIR  folder with tokenizer.json AND tokenizer_config.json (transformers.js 4.x reads both;
//                without tokenizer_config.json it finds no tokenizer files at all).
// TEXTS_FILE     UTF-8, lines separated by "\n"; one trailing "\n" at the end of the file is not a line.
// MODE           special  encode, adding special tokens as the tokenizer's post-processor does
//                plain    encode with add_special_tokens = false
//                decode   each line is a JSON array of ids; print the decoded text (skip_special_tokens true,
//                         clean_up_tokenization_spaces false: transformers 5's default; transformers.js's is true)
//                         as one JSON string per line
// Output (stdout): one line per input line; a JSON array of ids for the encode modes.
//
// Nothing is fetched: remote models are disabled and the folder is loaded by its absolute path (an
// absolute path is not a valid hub model id, so transformers.js reads <dir>/<file> directly instead of
// <env.localModelPath>/<id>/<file>).

import fs from 'node:fs';
import path from 'node:path';
import { AutoTokenizer, env } from '@huggingface/transformers';

function usage(msg) {
  process.stderr.write(`hf_encode.mjs: ${msg}\nusage: node hf_encode.mjs TOKENIZER_DIR TEXTS_FILE special|plain|decode\n`);
  process.exit(2);
}

const [dirArg, textsFile, mode] = process.argv.slice(2);
if (process.argv.length !== 5) usage('expected 3 arguments');
if (!['special', 'plain', 'decode'].includes(mode)) usage(`unknown mode "${mode}"`);

const dir = path.resolve(dirArg);
for (const f of ['tokenizer.json', 'tokenizer_config.json']) {
  if (!fs.existsSync(path.join(dir, f))) usage(`${path.join(dir, f)} does not exist`);
}

env.allowRemoteModels = false;
env.allowLocalModels = true;
env.useFSCache = false;      // never write a copy of the tokenizer into node_modules/.cache
env.useBrowserCache = false;

const tokenizer = await AutoTokenizer.from_pretrained(dir, { local_files_only: true });

let lines = fs.readFileSync(textsFile, 'utf8').split('\n');
if (lines.length > 0 && lines[lines.length - 1] === '') lines.pop(); // the file's final newline

const out = [];
for (let i = 0; i < lines.length; ++i) {
  const line = lines[i];
  if (mode === 'decode') {
    let ids;
    try {
      ids = JSON.parse(line);
    } catch (e) {
      throw new Error(`${textsFile}:${i + 1}: not a JSON array of ids: ${e.message}`);
    }
    if (!Array.isArray(ids)) throw new Error(`${textsFile}:${i + 1}: not a JSON array of ids`);
    // transformers.js throws on an empty id list; an empty list decodes to "".
    const text = ids.length === 0 ? '' : tokenizer.decode(ids, { skip_special_tokens: true, clean_up_tokenization_spaces: false });
    out.push(JSON.stringify(text));
  } else {
    const ids = tokenizer.encode(line, { add_special_tokens: mode === 'special' });
    out.push(JSON.stringify(ids));
  }
}
process.stdout.write(out.length ? out.join('\n') + '\n' : '');
