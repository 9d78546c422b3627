// Head roles (Voita et al. 2019 §5): positional, syntactic and rare-word heads, found from where
// each head's maximum attention goes on dependency-annotated sentences.
//
// Everything works on word-level *pointers*: for one head and one sentence, pointer[i] is the word
// that query word i attends to most. Words are aligned to the model's subword tokens as follows:
// a query word uses its first subword's attention row; a key word's weight is the sum of the weights
// on its subwords; special tokens (<s>, </s>, [SEP]) are not words, so the maximum is taken over the
// sentence's words only ("excluding EOS").
//   positional  the most frequent relative position (pointer[i] − i) covers ≥ 90% of the words;
//   syntactic   for nsubj, obj, amod, advmod in both directions (dependent → head word: pointer[dep]
//               is its head; head word → dependent: pointer[head] is the dependent), accuracy over
//               the relation's pairs beats the baseline that always points to the relation's most
//               frequent relative position by ≥ 10 points (for at least one relation and direction);
//   rare        pointer[i] is the sentence's least frequent word (by corpus frequency, ties to the
//               first) for > 50% of the words.
// The classifiers are model-free (tested on hand-made pointers and attention maps);
// head_pointers() runs a model to get the pointers.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "headprune/config.h"
#include "headprune/data/readers.h"
#include "headprune/data/tokenizer.h"
#include "headprune/model/transformer.h"

namespace hp {

using Pointers = std::vector<std::vector<int64_t>>;  // [sentence][query word] -> key word

struct RoleOptions {
  double positional_share = 0.9;
  double syntactic_margin = 0.10;
  double rare_share = 0.5;
  std::vector<std::string> relations = {"nsubj", "obj", "amod", "advmod"};
};

struct PositionalRole {
  int64_t offset = 0;  // the most frequent relative position
  double share = 0;    // of the words whose pointer has that offset
  bool is_role = false;
};

struct RelationScore {
  std::string relation;
  std::string direction;  // "dep->head" or "head->dep"
  int64_t pairs = 0;
  double accuracy = 0;
  double baseline = 0;          // accuracy of always pointing at baseline_offset
  int64_t baseline_offset = 0;  // the relation's most frequent relative position in the data
};

struct RareRole {
  double share = 0;
  bool is_role = false;
};

struct HeadRoles {
  HeadId head;
  PositionalRole positional;
  std::vector<RelationScore> relations;
  bool syntactic = false;
  RareRole rare;
  nlohmann::json to_json() const;
};

// Word-level pointers of every head of one attention layer for one sentence.
// attention [H, T, S] (one sentence, one layer); word_spans[w] = [first, last) token positions of
// word w (as both query and key positions). Returns [H][word].
std::vector<std::vector<int64_t>> word_pointers(const torch::Tensor& attention,
                                                const std::vector<std::pair<int64_t, int64_t>>& word_spans);

PositionalRole classify_positional(const Pointers& p, const RoleOptions& o = {});
// One score per relation and direction (pairs with the root as head are skipped). Labels match
// exactly: UD subtypes such as nsubj:pass (UD v1's nsubjpass) are relations of their own.
std::vector<RelationScore> score_relations(const Pointers& p, const std::vector<UdSentence>& sentences,
                                           const RoleOptions& o = {});
// rarest[s] = index of sentence s's least frequent word.
RareRole classify_rare(const Pointers& p, const std::vector<int64_t>& rarest, const RoleOptions& o = {});
HeadRoles classify_head(const HeadId& head, const Pointers& p, const std::vector<UdSentence>& sentences,
                        const std::vector<int64_t>& rarest, const RoleOptions& o = {});

// Lower-cased word counts over sentences, and each sentence's rarest word under them.
std::unordered_map<std::string, int64_t> word_frequencies(const std::vector<UdSentence>& corpus);
std::vector<int64_t> rarest_words(const std::vector<UdSentence>& sentences,
                                  const std::unordered_map<std::string, int64_t>& freq);

// Runs the model on the sentences (framed as the family's inputs: [bos] words [eos] for the
// classifier, words [eos] for translation sources, [bos] words for a decoder LM) and returns the
// pointers of every head of the input-side self-attention (encoder_self, or decoder_self for a
// decoder LM). Sentences longer than the model's positions are skipped: `sentences` holds the ones
// used, aligned with every head's pointers.
struct ModelPointers {
  AttnType type = AttnType::EncoderSelf;
  std::map<HeadId, Pointers> heads;
  std::vector<UdSentence> sentences;  // the sentences used, in order
};
ModelPointers head_pointers(TransformerImpl& model, const Tokenizer& tok, const std::vector<UdSentence>& sentences,
                            int64_t batch_size = 32,
                            const std::function<void(int64_t, int64_t)>& progress = nullptr);

}  // namespace hp
