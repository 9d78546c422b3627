// Golden outputs of the HF encoder-decoder fixtures (make_marian_fixtures.py, make_t5_fixtures.py),
// shared by marian_test.cc and t5_test.cc: the batch, the logits compared on real target positions,
// the heads the golden masks switch off, and cached greedy decoding checked against the full pass.
#pragma once

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "headprune/decode/search.h"
#include "headprune/io/hf.h"
#include "headprune/io/safetensors.h"
#include "headprune/model/remove_heads.h"
#include "headprune/model/state.h"
#include "test_util.h"

namespace hp::test {

struct Seq2SeqGolden {
  TensorMap t;
  Batch batch;
  explicit Seq2SeqGolden(const std::string& dir) : t(read_safetensors(dir + "/golden.safetensors").tensors) {
    batch.input_ids = t.at("input_ids");
    batch.attention_mask = t.at("attention_mask");
    batch.decoder_input_ids = t.at("decoder_input_ids");
    batch.decoder_attention_mask = t.at("decoder_attention_mask");
  }
  // Largest difference over the real (not padded) target positions.
  double diff(const torch::Tensor& logits, const torch::Tensor& want) const {
    const auto keep = batch.decoder_attention_mask.to(torch::kBool).unsqueeze(-1).expand_as(logits);
    return max_abs_diff(logits.masked_select(keep), want.masked_select(keep));
  }
  double diff(const torch::Tensor& logits, const std::string& key) const { return diff(logits, t.at(key)); }
  // The heads the golden masks set to 0, all three attention types.
  std::vector<HeadId> masked() const {
    std::vector<HeadId> out;
    for (const auto& [key, type] : {std::pair<const char*, AttnType>{"mask_enc", AttnType::EncoderSelf},
                                    {"mask_dec", AttnType::DecoderSelf},
                                    {"mask_cross", AttnType::Cross}}) {
      const auto& m = t.at(key);
      for (int64_t l = 0; l < m.size(0); ++l)
        for (int64_t h = 0; h < m.size(1); ++h)
          if (m[l][h].item<double>() == 0.0) out.push_back({type, l, h});
    }
    return out;
  }
  // The model matches the golden logits with every head, with the golden masks' four heads masked, and
  // with them removed; returns the pruned model.
  Transformer expect_matches_masked_and_removed(TransformerImpl& model) const {
    EXPECT_LT(diff(logits(model, batch), "logits"), 1e-4);
    const auto heads = masked();
    EXPECT_EQ(heads.size(), 4u);
    model.mask_heads(heads);
    EXPECT_LT(diff(logits(model, batch), "logits_masked"), 1e-4);
    model.unmask_all();
    auto pruned = remove_heads(model, heads);
    EXPECT_LT(diff(logits(*pruned, batch), "logits_masked"), 1e-4);
    return pruned;
  }
  // Greedy translation of the golden sources with the KV cache gives, at every step, the token the
  // full forward pass over the same prefix ranks first.
  void expect_cached_greedy_matches_full(TransformerImpl& model, int64_t start, int64_t eos, int64_t max_len) const {
    Batch src;
    src.input_ids = batch.input_ids;
    src.attention_mask = batch.attention_mask;
    DecodeOptions o;
    o.bos_id = start;
    o.eos_id = eos;
    o.max_len = max_len;
    const auto hyps = translate(model, src, o);
    ASSERT_EQ(static_cast<int64_t>(hyps.size()), src.size());
    for (size_t b = 0; b < hyps.size(); ++b) {
      SCOPED_TRACE(b);
      ASSERT_FALSE(hyps[b].empty());
      std::vector<int64_t> prefix = {start};
      prefix.insert(prefix.end(), hyps[b].begin(), hyps[b].end());
      Batch one;
      const auto row = static_cast<int64_t>(b);
      one.input_ids = src.input_ids.slice(0, row, row + 1);
      one.attention_mask = src.attention_mask.slice(0, row, row + 1);
      one.decoder_input_ids = torch::tensor(prefix).unsqueeze(0);
      one.decoder_attention_mask = torch::ones_like(one.decoder_input_ids);
      const auto best = logits(model, one).argmax(-1)[0];
      for (size_t i = 0; i < hyps[b].size(); ++i) EXPECT_EQ(best[static_cast<int64_t>(i)].item<int64_t>(), hyps[b][i]) << i;
    }
  }
};

// Importing this config and these tensors fails with a message containing `needle`.
inline void expect_import_refused(const nlohmann::json& config, const TensorMap& tensors, const std::string& needle) {
  try {
    import_hf(config, tensors, "model.safetensors", "config.json");
    ADD_FAILURE() << "accepted; expected: " << needle;
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

// An HF file written again holds exactly the original's tensors, bit for bit.
inline void expect_same_tensors(const std::string& original_file, const std::string& written_file) {
  const auto original = read_safetensors(original_file).tensors;
  const auto written = read_safetensors(written_file).tensors;
  EXPECT_EQ(written.size(), original.size());
  for (const auto& [name, t] : original) {
    SCOPED_TRACE(name);
    ASSERT_TRUE(written.count(name));
    EXPECT_TRUE(torch::equal(written.at(name), t));
  }
}

// The model with one token table per stack (share_embeddings off), the decoder's a copy of the
// shared one with `bump` added to row 5 (0: equal tables); in eval mode.
inline Transformer with_two_tables(TransformerImpl& shared, double bump) {
  auto cfg = shared.config();
  cfg.share_embeddings = false;
  Transformer two(cfg);
  auto s = state_dict(shared);
  s["decoder.embed_tokens.weight"] = s.at("encoder.embed_tokens.weight").clone();
  s["decoder.embed_tokens.weight"][5].add_(bump);
  load_state_strict(*two, s, "two tables");
  two->eval();
  return two;
}

}  // namespace hp::test
