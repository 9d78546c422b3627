#!/usr/bin/env python3
"""Writes the fuzzers' seed corpus (fuzz/corpus/NAME/) from the project's own fixtures and configs,
plus small hand-made samples of each format. Deterministic; re-run after a format changes:
    python3 fuzz/make_corpus.py
Inputs of harnesses that read several files hold them as parts separated by the line "--8<--"
(fuzz/fuzz_util.h)."""
import gzip
import json
import os
import shutil
import struct

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "fuzz", "corpus")
SEP = b"\n--8<--\n"


def read(*path):
    with open(os.path.join(ROOT, *path), "rb") as f:
        return f.read()


def put(harness, name, data):
    d = os.path.join(OUT, harness)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def pb_varint(v):
    out = b""
    while True:
        out += bytes([(v & 0x7F) | (0x80 if v > 0x7F else 0)])
        v >>= 7
        if not v:
            return out


def pb_field(field, wire, payload):
    tag = pb_varint(field << 3 | wire)
    if wire == 2:
        return tag + pb_varint(len(payload)) + payload
    return tag + payload


def sp_model(model_type, byte_fallback):
    """A small sentencepiece ModelProto (sentencepiece_model.proto): <unk> <s> </s>, a few pieces,
    the 256 byte pieces when byte_fallback."""
    pieces = [("<unk>", 0.0, 2), ("<s>", 0.0, 3), ("</s>", 0.0, 3), ("\u2581", -3.0, 1), ("a", -2.0, 1), ("b", -2.0, 1),
              ("\u2581a", -1.0, 1), ("ab", -1.5, 1), ("\u2581ab", -2.6, 1), ("<sep>", 0.0, 4), ("old", -9.0, 5)]
    if byte_fallback:
        pieces += [("<0x%02X>" % b, 0.0, 6) for b in range(256)]
    out = b""
    for text, score, kind in pieces:
        out += pb_field(1, 2, pb_field(1, 2, text.encode()) + pb_field(2, 5, struct.pack("<f", score)) +
                        pb_field(3, 0, pb_varint(kind)))
    out += pb_field(2, 2, pb_field(3, 0, pb_varint(model_type)) + pb_field(35, 0, pb_varint(int(byte_fallback))))
    out += pb_field(3, 2, pb_field(1, 2, b"identity") + pb_field(3, 0, b"\x01") + pb_field(4, 0, b"\x01"))
    return out


SP_UNIGRAM_JSON = {
    "model": {"type": "Unigram", "unk_id": 0, "vocab": [["<unk>", 0], ["</s>", 0], ["\u2581", -3], ["a", -2], ["b", -2],
                                                        ["\u2581a", -1], ["ab", -1.5]]},
    "added_tokens": [{"id": 1, "content": "</s>", "special": True}],
    "normalizer": {"type": "Sequence", "normalizers": [{"type": "NFKC"}, {"type": "Replace", "pattern": {"String": "  "},
                                                                         "content": " "}]},
    "pre_tokenizer": {"type": "Sequence", "pretokenizers": [{"type": "WhitespaceSplit"},
                                                            {"type": "Metaspace", "replacement": "\u2581",
                                                             "add_prefix_space": True}]},
    "post_processor": {"type": "TemplateProcessing", "single": [{"Sequence": {"id": "A", "type_id": 0}},
                                                                {"SpecialToken": {"id": "</s>", "type_id": 0}}],
                       "special_tokens": {"</s>": {"id": "</s>", "ids": [1], "tokens": ["</s>"]}}},
    "decoder": {"type": "Metaspace", "replacement": "\u2581", "add_prefix_space": True}}

SP_BPE_JSON = {
    "model": {"type": "BPE", "byte_fallback": True, "fuse_unk": True, "unk_token": "<unk>",
              "vocab": {"<unk>": 0, "\u2581": 1, "a": 2, "b": 3, "\u2581a": 4, "ab": 5, "<0xC3>": 6, "<0xA9>": 7},
              "merges": ["a b", "\u2581 a"]},
    "pre_tokenizer": {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first", "split": False},
    "decoder": {"type": "Sequence", "decoders": [{"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
                                                 {"type": "ByteFallback"}, {"type": "Fuse"},
                                                 {"type": "Strip", "content": " ", "start": 1, "stop": 0}]}}


LLAMA3_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|"
                r"\s+(?!\S)|\s+")


def byte_level_json(pre_tokenizer):
    """A byte-level BPE tokenizer.json: every byte a token (GPT-2's printable symbols), a few merges."""
    symbols, n = [], 256
    for b in range(256):
        if 33 <= b <= 126 or 161 <= b <= 172 or 174 <= b <= 255:
            symbols.append(chr(b))
        else:
            symbols.append(chr(n))
            n += 1
    vocab = {s: i for i, s in enumerate(symbols)}
    for t in ("ab", "cd", "abcd", "abc"):
        vocab[t] = len(vocab)
    return {"model": {"type": "BPE", "vocab": vocab, "merges": ["a b", "c d", "ab cd", "ab c"]},
            "added_tokens": [{"id": len(vocab), "content": "<|endoftext|>", "special": True}],
            "pre_tokenizer": pre_tokenizer, "decoder": {"type": "ByteLevel"}}


def split_regex(pattern):
    """A Split (Isolated) by `pattern`, then ByteLevel without GPT-2's pattern (as Llama 3's file)."""
    return {"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": pattern, "behavior": "Isolated", "invert": False},
        {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}]}


def strip_comments(raw):
    """Drops // line comments (run configs allow them; they never occur inside these strings)."""
    return "\n".join(l.split("//")[0] if l.lstrip().startswith("//") else l for l in raw.decode().splitlines())


def safetensors(tensors, metadata=None):
    """tensors: name -> (dtype, shape, bytes)"""
    header, blobs, off = {}, b"", 0
    if metadata:
        header["__metadata__"] = metadata
    for name, (dtype, shape, data) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [off, off + len(data)]}
        blobs += data
        off += len(data)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + blobs


def main():
    shutil.rmtree(OUT, ignore_errors=True)
    fx = ("tests", "fixtures")
    # safetensors
    put("safetensors", "bert_golden", read(*fx, "hf", "bert", "golden.safetensors"))
    put("safetensors", "gpt2_golden", read(*fx, "hf", "gpt2", "golden.safetensors"))
    put("safetensors", "small", safetensors({
        "a": ("F32", [2, 2], struct.pack("<4f", 1, 2, 3, 4)),
        "b": ("I64", [3], struct.pack("<3q", 7, 8, 9)),
        "c": ("BF16", [1], b"\x80\x3f"),
        "e": ("U8", [0, 4], b""),
    }, {"format": "pt"}))
    # model configs
    tiny = json.loads(strip_comments(read(*fx, "tiny_model.json")))
    put("model_config", "tiny", json.dumps(tiny))
    for name in sorted(os.listdir(os.path.join(ROOT, "configs"))):
        if name.endswith(".json"):
            raw = read("configs", name)
            put("run_config", name[:-5], raw)
            try:
                model = json.loads(strip_comments(raw)).get("model")
            except ValueError:
                model = None
            if isinstance(model, dict):
                put("model_config", name[:-5], json.dumps(model))
    # Issue 78: one unused key nested far deeper than the 256 levels parse_json takes (300,000 levels
    # crashed every reader of config.json, which copied the tree recursively); and one just inside the bound.
    put("model_config", "nested-deep", json.dumps(tiny)[:-1] + ', "unused": ' + "[" * 5000 + "]" * 5000 + "}")
    put("model_config", "nested-255", json.dumps(tiny)[:-1] + ', "unused": ' + "[" * 254 + "]" * 254 + "}")
    put("model_config", "grouped", json.dumps({
        "arch": "decoder_lm", "vocab_size": 40, "d_model": 16, "d_ff": 32, "n_heads": 4, "n_kv_heads": 2,
        "qkv_bias": False, "o_bias": False, "n_decoder_layers": 2, "max_positions": 16,
        "heads": {"decoder_self": [[0, 1, 3], [2]]}}))
    put("model_config", "encdec", json.dumps({
        "arch": "encoder_decoder", "vocab_size": 30, "tgt_vocab_size": 20, "d_model": 8, "d_ff": 16, "n_heads": 2,
        "n_encoder_layers": 1, "n_decoder_layers": 1, "max_positions": 12, "positional": "sinusoidal",
        "norm": "pre", "activation": "relu", "tie_embeddings": False}))
    put("run_config", "synthetic", json.dumps({
        "model": tiny, "data": {"kind": "synthetic"},
        "train": {"max_steps": 10, "batch_tokens": 256, "lr": 0.001, "eval_every": 5}}))
    # plans
    put("plan", "given", json.dumps({"format": "headprune-plan/1", "strategy": "manual", "n_heads": 3,
                                     "heads": ["encoder_self:0:1", "decoder_self:1:0", "cross:0:3"], "info": {}}))
    put("plan", "bare", json.dumps({"heads": ["encoder_self:1:2"]}))
    # importance maps
    heads = [{"attn_type": "encoder_self", "layer": l, "head": h, "score": 0.1 * (l * 4 + h), "p_value": 0.5}
             for l in range(2) for h in range(4)]
    one = {"method": "gradient", "higher_is_important": True, "normalization": "layer",
           "info": {"metric": "accuracy"}, "heads": heads}
    put("importance", "maps", json.dumps({"maps": [one, dict(one, method="entropy", higher_is_important=False,
                                                             normalization="none")]}))
    put("importance", "single", json.dumps(one))
    # HF checkpoints: config.json, then model.safetensors
    for model in ("bert", "gpt2", "bert_pruned", "gpt2_pruned"):
        put("hf_model", model, read(*fx, "hf", model, "config.json") + SEP + read(*fx, "hf", model, "model.safetensors"))
    # headprune tokenizer.json: specials, characters, then one piece per merge
    put("tokenizer_json", "small", json.dumps({
        "type": "headprune-bpe", "version": 1,
        "vocab": ["<pad>", "<s>", "</s>", "<unk>", "a", "b", "c", "\u2581", "\u2581a", "\u2581ab"],
        "merges": [["\u2581", "a"], ["\u2581a", "b"]]}, ensure_ascii=False))
    # GPT-2 byte-level BPE: vocab.json, merges.txt, text
    vocab = {"!": 0, "a": 1, "b": 2, "c": 3, "\u0120": 4, "ab": 5, "\u0120a": 6, "\u0120ab": 7, "<|endoftext|>": 8}
    put("gpt2_bpe", "small", json.dumps(vocab, ensure_ascii=False).encode() + SEP +
        "#version: 0.2\na b\n\u0120 a\n\u0120a b\n".encode() + SEP + b"ab ab! c's 12 ")
    # WordPiece vocab.txt, then text
    put("wordpiece", "small", b"[PAD]\n[UNK]\n[CLS]\n[SEP]\nthe\ncat\n##s\nsat\n.\n,\n" + SEP +
        "The cats sat, ca\u0301t \u4e2d\u6587.".encode())
    # sentencepiece: a ModelProto (BPE, then Unigram with byte pieces), then HF's tokenizer.json of a
    # Unigram and of a BPE with byte fallback, then text
    put("sentencepiece", "bpe", sp_model(2, False) + SEP + json.dumps(SP_UNIGRAM_JSON, ensure_ascii=False).encode() + SEP +
        "ab  c é".encode())
    put("sentencepiece", "unigram_bytes", sp_model(1, True) + SEP + json.dumps(SP_BPE_JSON, ensure_ascii=False).encode() +
        SEP + " éabé ".encode())
    # An HF tokenizer directory (hf_tokenizer): tokenizer.json, source.spm, vocab.json, text. Byte-level
    # tokenizer.json files split by Llama 3's regex, by one that backtracks catastrophically (it must
    # stop with an error: ICU's time limit) and by a String pattern holding \\E (matched literally);
    # Marian vocabularies, one with an id far past its entry count (refused before allocating)
    put("hf_tokenizer", "llama3_regex", json.dumps(byte_level_json(split_regex({"Regex": LLAMA3_REGEX})),
                                                   ensure_ascii=False).encode() + SEP + SEP + SEP +
        "Hello world's 12345 \n\n  ok".encode())
    put("hf_tokenizer", "catastrophic_regex", json.dumps(byte_level_json(split_regex({"Regex": "(a+)+$"})),
                                                         ensure_ascii=False).encode() + SEP + SEP + SEP +
        b"a" * 40 + b"b")
    put("hf_tokenizer", "string_pattern", json.dumps(byte_level_json(split_regex({"String": "\\E.*"})),
                                                     ensure_ascii=False).encode() + SEP + SEP + SEP +
        b"ab\\E.*cd\\Ex")
    marian_vocab = {"<unk>": 0, "</s>": 1, "<pad>": 2, "\u2581a": 3, "\u2581ab": 4, "b": 5}
    put("hf_tokenizer", "marian", SEP + sp_model(1, False) + SEP + json.dumps(marian_vocab, ensure_ascii=False).encode() +
        SEP + "ab a b</s> c".encode())
    put("hf_tokenizer", "marian_huge_id", SEP + sp_model(2, False) + SEP +
        json.dumps(dict(marian_vocab, b=100000000), ensure_ascii=False).encode() + SEP + b"ab")
    # TSV (SST-2 style), parallel text, CoNLL-U
    put("tsv", "sst2", "sentence\tlabel\nit 's a charming journey . \t1\na \"bad\" film\t0\n")
    put("tsv", "pair", "sentence\tlabel\tother\nx\t1\ty\n")
    put("parallel", "small", b"ein Hund .\nzwei Katzen .\n" + SEP + b"a dog .\ntwo cats .\n")
    put("conllu", "small", "# sent_id = s1\n# text = The cat sat.\n"
        "1\tThe\tthe\tDET\tDT\t_\t2\tdet\t_\t_\n2\tcat\tcat\tNOUN\tNN\t_\t3\tnsubj\t_\t_\n"
        "3-4\tsat.\t_\t_\t_\t_\t_\t_\t_\t_\n3\tsat\tsit\tVERB\tVBD\t_\t0\troot\t_\t_\n"
        "4\t.\t.\tPUNCT\t.\t_\t3\tpunct\t_\t_\n4.1\tx\t_\t_\t_\t_\t_\t_\t_\t_\n\n")
    # gzip streams
    put("gzip", "lines", gzip.compress(b"first line\nsecond line\r\n\xef\xbb\xbfthird\n", mtime=0))
    put("gzip", "empty", gzip.compress(b"", mtime=0))
    # figure writers: the label, and two strings for the other text fields (method, type, model, ...)
    put("figures", "plain", b"SST-2" + SEP + b"gradient" + SEP + b"encoder_self")
    put("figures", "paths", b"runs/sst2/p50" + SEP + b"runs/sst2/best" + SEP + b"runs/sst2-p50/model")
    put("figures", "datablock_escape", b'x"\nEOD\nsystem("touch /tmp/hp-marker")\n$junk << EOD\n' + SEP +
        b"runs/base\"\nEOD\nsystem(\"id\")\n" + SEP + b"encoder_self\nEOD")
    put("figures", "quotes", b"it's ''quoted'' '" + SEP + b"'a''" + SEP + b"''")
    put("figures", "comment_escape", b"x'\nsystem('id')\n# \\" + SEP + b"`id` @m \\" + SEP + b"a;b!c")
    put("figures", "markup", b"]]> <script>alert(1)</script> & <b>" + SEP + b"a]]]>b" + SEP + b"\"<'>&")
    put("figures", "bytes", b"\xff\xfe\x00\x01\x1b[31m" + SEP + b"\xc3\x28\xed\xa0\x80" + SEP + b"\xef\xbf\xbf\xc2\x85")
    put("figures", "unicode", "naïve Ünïcödé 日本語 ✓".encode() + SEP + "métode".encode() + SEP + "typ:é".encode())
    put("figures", "pipe", b"|touch x" + SEP + b"<touch y" + SEP + b"../../escaped")
    # Inputs that were findings, kept as seeds so every smoke run tries them again
    put("tokenizer_json", "finding-number-overflow", b"91e999223372033720355")
    put("importance", "finding-float-layer", json.dumps(
        {"method": "gradient", "heads": [{"attn_type": "encoder_self", "layer": 1.18447e20, "head": 0, "score": 1}]}).encode())


if __name__ == "__main__":
    main()
