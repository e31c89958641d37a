#pragma once
/// \file
/// Loading a transformers checkpoint into a module by parameter name: PyTorch's strict
/// `load_state_dict` over `model.safetensors` or a sharded `model.safetensors.index.json`.
///
/// \code
/// auto report = tracetorch::checkpoint::load(*model, "path/to/checkpoint");   // folder or file
/// auto report = tracetorch::checkpoint::load(*model, dir, {.dtype = tracetorch::checkpoint::DtypePolicy::convert,
///                                                          .tied = {{"lm_head.weight", "model.embed_tokens.weight"}}});
/// for (const auto& c : report.converted) std::cout << c.name << "\n";
/// \endcode
///
/// - The path is a folder (its `model.safetensors`, else its `model.safetensors.index.json`, the
///   order transformers' `from_pretrained` looks in), a `.safetensors` file, or an index file
///   (a name ending in `.json`).
/// - An index is transformers' `{"metadata": {...}, "weight_map": {"tensor": "shard file"}}`. Each
///   shard must be a relative path that stays in the index's folder, also after symbolic links are
///   followed (unless Options::shard_links_may_leave_folder, for Hugging Face's cache); each shard
///   must hold exactly the tensors the index puts in it. Only the index's entries are checked so:
///   a `model.safetensors` or index given (or found in the folder) may itself be a link.
/// - The targets are `tracetorch::nn::state_dict(module)`: parameters and persistent buffers, so a
///   non-persistent buffer (`{.persistent = false}`) is neither expected nor accepted.
/// - DtypePolicy::keep (the default) refuses a tensor whose dtype differs from its target's: build
///   the module in the checkpoint's dtype (`model->to(torch::kBFloat16)`) first. DtypePolicy::convert
///   converts to the target's dtype and lists every conversion in Report::converted. Never silent.
/// - Strict (the default): a missing or unexpected name is an error listing them. Non-strict: they
///   are returned in the Report and the rest is loaded. A shape that differs is an error in both.
/// - A Tie `{name, source}` (a tied `lm_head.weight` and `embed_tokens.weight`): `name` absent from
///   the checkpoint is not missing but takes `source`'s checkpoint tensor. Present, it loads as itself.
/// - Nothing is half-loaded: every file, name, shape and dtype is checked, then every tensor is
///   read into memory, and only then copied into the module. A refusal throws tracetorch::Error
///   ("tracetorch: <file>: <cause>", naming the tensor) and leaves the module as it was. The cost
///   is memory: the checkpoint is held once in full (in its own dtype) besides the module.
///
/// The types (Options, Tie, DtypePolicy, Report, Conversion) are in checkpoint/options.hpp;
/// the steps in detail/checkpoint/: shard_path.hpp (where a shard may lie), open.hpp (a folder, a
/// file or an index, opened and matched), load.hpp (ties, plan, checks, reads, copies).

#include <torch/torch.h>

#include <filesystem>

#include "tracetorch/detail/checkpoint/load.hpp"
#include "tracetorch/detail/checkpoint/open.hpp"
#include "tracetorch/checkpoint/options.hpp"
#include "tracetorch/error.hpp"
#include "tracetorch/nn/state_dict.hpp"
#include "tracetorch/safetensors.hpp"

namespace tracetorch::checkpoint {

/// Loads the checkpoint at `path` (a folder, a `.safetensors` file or an index `.json`) into
/// `module` by name, as the file comment says; throws tracetorch::Error and changes nothing on any
/// refusal.
inline Report load(torch::nn::Module& module, const std::filesystem::path& path, const Options& options = {}) {
  const auto checkpoint = detail::open_checkpoint(path, options);
  return detail::load_checkpoint(nn::state_dict(module), checkpoint, options);
}

}  // namespace tracetorch::checkpoint
