// The common model tests on the BERT-style decoder with cross-attention (examples/bert): its
// inputs include the encoder's states, so every cross-attention block is called.

#include <doctest/doctest.h>
#include <tracetorch/testing.hpp>

#include "bert/bert.hpp"

namespace {

struct BertDecoderModelTester {
  static constexpr const char* model_name = "BertDecoderModel";
  // Runs every common test: it has input_ids and inputs_embeds, self- and cross-attention.

  bert::BertConfig config{};  // vocab 99, hidden 32, 2 layers, 4 heads
  static constexpr std::int64_t batch_size = 2, seq_length = 7, encoder_seq_length = 5;

  bert::BertDecoderModel make_model() const { return bert::BertDecoderModel(config); }
  tracetorch::testing::Inputs make_inputs() const {
    return {{"input_ids", torch::randint(config.vocab_size, {batch_size, seq_length})},
            {"encoder_hidden_states", torch::randn({batch_size, encoder_seq_length, config.hidden_size})}};
  }
  tracetorch::testing::ExpectedSizes sizes() const {
    return {.batch_size = batch_size,
            .seq_length = seq_length,
            .hidden_size = config.hidden_size,
            .num_hidden_layers = config.num_hidden_layers,
            .num_attention_heads = config.num_attention_heads,
            .encoder_seq_length = encoder_seq_length};
  }
  bert::BaseModelOutputWithCrossAttentions forward(bert::BertDecoderModel& model, const tracetorch::testing::Inputs& inputs,
                                                   const tracetorch::OutputOptions& options) const {
    using tracetorch::testing::input_or_none;
    return model->forward(input_or_none(inputs, "input_ids"), input_or_none(inputs, "encoder_hidden_states"), options,
                          input_or_none(inputs, "inputs_embeds"));
  }
};

}  // namespace

TRACETORCH_COMMON_MODEL_TESTS(BertDecoderModelTester);
