#pragma once
/// \file inputs.hpp
/// Input files: a token file (one sequence of comma-separated ids per line),
/// images (a safetensors file with `pixel_values`, ViT) and a safetensors file holding a tensor `X` of shape [n, d] (one input) or
/// [b, n, d] (a batch of b inputs of n tokens each).

#include "sanpath/model/input.hpp"

#include <string>
#include <vector>

namespace sanpath {

/// One InputSpec per sequence of `path`: each line is a comma-separated list
/// of token ids (spaces allowed); blank lines and lines whose first
/// non-blank character is '#' are skipped. Sequences may differ in length.
/// Throws std::invalid_argument "<path>: line <k>: <why>" for a bad line, and
/// "<path>: ..." for an unreadable file or one without any sequence.
std::vector<InputSpec> read_token_file(const std::string& path);

/// The tensor `X` of a safetensors file: [n, d] gives one input, [b, n, d]
/// gives b inputs (source "<path>[i]"). Throws std::invalid_argument naming
/// the file and the field X for any other shape.
std::vector<InputSpec> read_input_tensor(const std::string& path);
/// The tensor `pixel_values` of a safetensors file (F32, F64, F16 or BF16),
/// already normalised by the model's image processor: [C, H, W] gives one
/// image, [b, C, H, W] gives b images (source "<path>[i]"). Throws
/// std::invalid_argument naming the file and pixel_values for a missing
/// tensor, another rank, an empty axis or NaN/Inf.
std::vector<InputSpec> read_pixels(const std::string& path);

}  // namespace sanpath
