#pragma once
/// \file emulate.hpp
/// The model evaluated as a low-precision framework would (math.md §9,
/// "Emulated formats"): weights, biases and X^0 rounded to a format F
/// (fp32, bf16 or fp16), every matrix product an fp32 chain of fused
/// multiply-adds rounded once to F, every other operation computed in fp32
/// and rounded once to F. The result is the emulated trace itself; its
/// measures are computed elsewhere, exactly, from these values. The same
/// bits on every CPU, instruction-set level and thread count.
///
/// \code
///   const Matrix<double> X0 = make_input<double>(model, input);
///   const EmulatedTrace t = emulate_forward(model, model.arch().variant, X0, EmulatedFormat::bf16, false);
///   t.X.back();  // X^L, n × d, every entry a bf16 value (or ±inf, NaN after an overflow)
///   if (t.overflow) std::puts(t.overflow->c_str());  // "layer 2, MLP: overflow to inf (...)"
/// \endcode

#include "sanpath/core/scalar.hpp"
#include "sanpath/model/model.hpp"

#include <optional>
#include <string>
#include <vector>

namespace sanpath {

/// IEEE binary32; bfloat16 (binary32's exponent range, 8 significand bits,
/// subnormals kept); IEEE binary16 (largest finite 65504, subnormals kept).
enum class EmulatedFormat { fp32, bf16, fp16 };

/// "fp32", "bf16" or "fp16".
std::string to_string(EmulatedFormat f);
/// Parses "fp32|bf16|fp16"; throws std::invalid_argument
/// "emulate: 'x' is not one of fp32, bf16, fp16".
EmulatedFormat parse_emulated_format(const std::string& text);

/// rnd_F(x): x rounded once to F, to nearest with ties to even, whatever the
/// thread's rounding mode; beyond F's largest finite value (after rounding)
/// ±inf; below its smallest subnormal a zero of x's sign. ±inf stay, NaN
/// stays NaN. The result is exact in double (resp. float).
double round_to_format(double x, EmulatedFormat f);
float round_to_format(float x, EmulatedFormat f);

/// The emulated forward pass. X[0] = rnd_F(X^0), X[l] the output of layer l
/// (n × d_model, l = 1..L): every entry a value of F, or ±inf / NaN once an
/// operation overflowed. P[l-1][h] (n × n, rows over the visible keys,
/// masked entries exactly 0) when recorded, else empty. `overflow` names the
/// first operation whose rounded results include a non-finite value
/// ("layer 2, MLP: overflow to inf (fp16's largest finite value is 65504)";
/// math.md §9 lists the operations and wordings) and `overflow_layer` its
/// layer (0 for the input); the pass goes on with the IEEE values.
struct EmulatedTrace {
  EmulatedFormat format = EmulatedFormat::fp32;
  std::vector<Matrix<double>> X;
  std::vector<std::vector<Matrix<double>>> P;
  std::optional<std::string> overflow;
  int overflow_layer = -1;
  int layers() const { return static_cast<int>(X.size()) - 1; }
};

/// Runs `model` on X0 = make_input<double>(model, input) (n × d_model) with
/// the layer map of `variant` (the same as forward()'s) in format f.
/// Every feature of every family the library loads is emulated (math.md §9
/// lists them with their rounding points). Throws std::invalid_argument like
/// forward() (shapes, a variant the weights cannot run, a sequence longer
/// than an unapplied sliding window), "<source>: emulate: an RMSNorm bias
/// (layer l) is not emulated; …" for nonzero RMSNorm biases, and
/// ResourceError beyond the memory budget.
EmulatedTrace emulate_forward(const Model& model, const Variant& variant, const Matrix<double>& X0, EmulatedFormat f,
                              bool record_attention);

/// C = A·B as the emulation multiplies: A (m × k) and B (k × n) rounded to F,
/// then c_ij = rnd_F(acc), acc ← fmaf(a_ip, b_pj, acc) for p = 0..k−1 from
/// +0.0f. Throws std::invalid_argument when the inner dimensions differ.
Matrix<double> emulated_product(const Matrix<double>& A, const Matrix<double>& B, EmulatedFormat f);

}  // namespace sanpath
