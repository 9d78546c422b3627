#!/usr/bin/python3
"""Reference client: Google's SentencePiece (Debian python3-sentencepiece) on a .model / .spm file.

  /usr/bin/python3 tests/clients/spm_encode.py MODEL TEXTS_FILE MODE [--vocab VOCAB_JSON]

MODEL       a SentencePiece model file (.model / .spm).
TEXTS_FILE  UTF-8, lines separated by "\\n"; one trailing "\\n" at the end of the file is not a line.
MODE        plain    one JSON array of ids per line
            special  the same with the model's special tokens added (see below)
            pieces   one JSON array of piece strings per line (before any special token is added)
            decode   each line is a JSON array of ids; prints the decoded text as one JSON string per line

Without --vocab (Llama / Mistral style, ids are SentencePiece ids):
  plain    sp.encode(text): raw SentencePiece. A literal "<s>" or "</s>" in the text is encoded as text
           (HF's tokenizers would match it as the special token instead).
  special  [bos_id] + sp.encode(text): HF LlamaTokenizer with add_bos_token=true, add_eos_token=false.
  pieces   sp.encode(text, out_type=str).
  decode   ids of unk/bos/eos/pad (and any other control symbol) are dropped (skip_special_tokens=True),
           the rest go through sp.decode.

With --vocab VOCAB_JSON (Marian / HF MarianTokenizer; ids are vocab.json ids, NOT SentencePiece ids):
  The text is first split on the tokenizer's special tokens "</s>", "<unk>", "<pad>" (HF's slow tokenizer
  matches added tokens in the text; MarianTokenizer's are not stripped of surrounding spaces); each such
  token becomes its own vocab id. Every other chunk: a leading language code ">>xx<<" is kept as one token
  (as current HF MarianTokenizer.remove_language_code does), the rest is sp.encode(chunk, out_type=str),
  and each piece is mapped through vocab.json; a piece missing from vocab.json gets the id of "<unk>"
  (transformers 4.x semantics; transformers 5 falls back to the raw SentencePiece id, which is not
  aligned with vocab.json).
  special  appends the id of "</s>" (Marian adds eos only, no bos).
  decode   modelled on MarianTokenizer.decode(ids, skip_special_tokens=True): ids of "</s>", "<unk>",
           "<pad>" are dropped; the others are mapped to pieces through the inverse vocab.json; the pieces
           go through MODEL's sp.decode_pieces (HF decodes with the source spm for a shared vocab, so pass
           source.spm; a piece unknown to MODEL comes out as " ⁇ "); then every "▁" becomes " " and the
           result is stripped at both ends. No clean_up_tokenization (its default is off in current HF and
           the Marian tokenizer_config.json does not set it).
"""
import argparse
import json
import re
import sys

import sentencepiece as spm

MARIAN_SPECIALS = ("</s>", "<unk>", "<pad>")
MARIAN_SPLIT_RE = re.compile("(" + "|".join(re.escape(t) for t in MARIAN_SPECIALS) + ")")


def read_lines(path):
    with open(path, "r", encoding="utf-8", newline="") as f:
        data = f.read()
    lines = data.split("\n")
    if lines and lines[-1] == "":
        lines.pop()  # the file's final newline
    return lines


def parse_ids(line, where):
    try:
        ids = json.loads(line)
    except json.JSONDecodeError as e:
        sys.exit(f"spm_encode.py: {where}: not a JSON array of ids: {e}")
    if not isinstance(ids, list) or not all(isinstance(i, int) for i in ids):
        sys.exit(f"spm_encode.py: {where}: not a JSON array of ids")
    return ids


class Plain:
    """SentencePiece ids are the model's ids (Llama, Mistral)."""

    def __init__(self, sp):
        self.sp = sp
        n = sp.get_piece_size()
        # unk, bos, eos, pad and user-declared control symbols: what skip_special_tokens drops
        self.skip = {i for i in range(n) if sp.is_control(i) or sp.is_unknown(i)}

    def pieces(self, text):
        return self.sp.encode(text, out_type=str)

    def plain(self, text):
        return self.sp.encode(text)

    def special(self, text):
        if self.sp.bos_id() < 0:
            sys.exit("spm_encode.py: the model has no bos piece")
        return [self.sp.bos_id()] + self.sp.encode(text)

    def decode(self, ids):
        n = self.sp.get_piece_size()
        for i in ids:
            if not 0 <= i < n:
                sys.exit(f"spm_encode.py: id {i} out of range [0, {n})")
        return self.sp.decode([i for i in ids if i not in self.skip])


class Marian:
    """ids are vocab.json ids; SentencePiece only cuts the text into pieces."""

    def __init__(self, sp, vocab_path):
        self.sp = sp
        with open(vocab_path, "r", encoding="utf-8") as f:
            self.vocab = json.load(f)
        for t in ("</s>", "<unk>"):
            if t not in self.vocab:
                sys.exit(f"spm_encode.py: {vocab_path} has no {t}")
        self.unk = self.vocab["<unk>"]
        self.eos = self.vocab["</s>"]
        self.inverse = {v: k for k, v in self.vocab.items()}
        self.skip = {self.vocab[t] for t in MARIAN_SPECIALS if t in self.vocab}

    def _chunk_pieces(self, chunk):
        code = []
        if chunk.startswith(">>"):
            end = chunk.find("<<")
            if end != -1:
                code, chunk = [chunk[: end + 2]], chunk[end + 2:]
        return code + self.sp.encode(chunk, out_type=str)

    def pieces(self, text):
        out = []
        for chunk in MARIAN_SPLIT_RE.split(text):
            if not chunk:
                continue
            if chunk in MARIAN_SPECIALS:
                out.append(chunk)
            else:
                out.extend(self._chunk_pieces(chunk))
        return out

    def plain(self, text):
        return [self.vocab.get(p, self.unk) for p in self.pieces(text)]

    def special(self, text):
        return self.plain(text) + [self.eos]

    def decode(self, ids):
        pieces = []
        for i in ids:
            if i not in self.inverse:
                sys.exit(f"spm_encode.py: id {i} is not in the vocab")
            if i not in self.skip:
                pieces.append(self.inverse[i])
        return self.sp.decode_pieces(pieces).replace("\u2581", " ").strip()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model")
    ap.add_argument("texts")
    ap.add_argument("mode", choices=["plain", "special", "pieces", "decode"])
    ap.add_argument("--vocab", help="Marian vocab.json: ids are looked up there (HF MarianTokenizer)")
    args = ap.parse_args()

    sp = spm.SentencePieceProcessor(model_file=args.model)
    tok = Marian(sp, args.vocab) if args.vocab else Plain(sp)

    out = []
    for n, line in enumerate(read_lines(args.texts), 1):
        if args.mode == "decode":
            ids = parse_ids(line, f"{args.texts}:{n}")
            out.append(json.dumps(tok.decode(ids), ensure_ascii=False))
        else:
            res = getattr(tok, args.mode)(line)
            out.append(json.dumps(res, ensure_ascii=False, separators=(",", ":")))
    sys.stdout.write("".join(s + "\n" for s in out))


if __name__ == "__main__":
    main()
