#pragma once
// Theorem 2.1's length sums in ball arithmetic (compute/enclosure_paths.hpp).
#include "sanpath/compute/enclosure_paths.hpp"
#include "sanpath/compute/paths.hpp"  // require_attention_only
#include "compute/enclosure_impl.hpp"

#include <mpfr.h>

#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace sanpath {
namespace enclosure_detail {

template <class S> BallMatrix<S> zero_ball(Eigen::Index rows, Eigen::Index cols) {
  return {Matrix<S>::Constant(rows, cols, S(0)), RadiusMatrix::zero(rows, cols)};
}

/// A row vector given as numbers (a bias), exactly.
template <class S> BallMatrix<S> exact_row(const VectorXd& v) {
  return {convert<S>(MatrixXd(v.transpose())), RadiusMatrix::zero(1, v.size())};
}

/// Σ_h Y W_V^h W_O^h, each head's P_h applied first when `P` is given.
template <class S>
BallMatrix<S> heads_map(const LayerWeights& w, const std::vector<BallMatrix<S>>* P, const BallMatrix<S>& Y, long p) {
  std::optional<BallMatrix<S>> M;
  for (std::size_t h = 0; h < w.heads.size(); ++h) {
    BallMatrix<S> T = times_weights(times_weights(Y, w.heads[h].W_V, p), w.heads[h].W_O, p);
    if (P) T = times((*P)[h], T, false, p);
    M = M ? sum(*M, T, p) : std::move(T);
  }
  return *M;
}

/// a / b for a ≥ 0 and b > 0, rounded outward; NumericalError when b's enclosure reaches 0.
inline Interval quotient(const Interval& a, const Interval& b, const std::string& what) {
  if (mpfr_sgn(b.lo.backend().data()) <= 0)
    throw NumericalError("certified length sums: " + what + " is not bounded away from 0 at this precision");
  Interval q{BigReal(0, 20), BigReal(0, 20)};
  const mpfr_prec_t prec = std::max(mpfr_get_prec(a.hi.backend().data()), mpfr_get_prec(b.lo.backend().data()));
  mpfr_set_prec(q.lo.backend().data(), prec);
  mpfr_set_prec(q.hi.backend().data(), prec);
  mpfr_div(q.lo.backend().data(), a.lo.backend().data(), b.hi.backend().data(), MPFR_RNDD);
  mpfr_div(q.hi.backend().data(), a.hi.backend().data(), b.lo.backend().data(), MPFR_RNDU);
  return q;
}

/// Throws std::invalid_argument unless `t` is an attention-only trace of `model` with its attention matrices.
template <class S> void require_recorded(const Model& model, const EnclosedTrace<S>& t) {
  require_attention_only(t.variant);
  const auto L = static_cast<std::size_t>(model.arch().layers);
  if (t.X.size() != L + 1 || t.P.size() != L)
    throw std::invalid_argument("path decomposition: the enclosed trace is not of this model or has no attention "
                                "matrices (EnclosureOptions::record_attention)");
}

/// The length sums S_k (k = 0..L; nullopt where no path has length k: 0
/// exactly) and the bias row b of Theorem 2.1 as balls.
template <class S> struct LengthSumBalls {
  std::vector<std::optional<BallMatrix<S>>> terms;
  BallMatrix<S> bias;  ///< 1 × d
  Eigen::Index rows = 0;  ///< n
  /// 1bᵀ, an n × d ball: where the truncations Σ_{j≤k} S_j + 1bᵀ start.
  BallMatrix<S> bias_rows() const {
    return {bias.mid.replicate(rows, 1), RadiusMatrix{bias.rad.m.replicate(rows, 1), bias.rad.exp}};
  }
};

/// The balls of an attention-only trace with its attention matrices (require_recorded):
/// S_k^l = [skip] S_k^{l−1} + Σ_h P_h^l S_{k−1}^{l−1} W_V^h W_O^h, layer by layer.
template <class S> LengthSumBalls<S> length_sum_balls(const Model& model, const EnclosedTrace<S>& t) {
  require_recorded(model, t);
  const Architecture& a = model.arch();
  const int L = a.layers;
  const long p = precision_bits_v<S>;
  const bool skip = t.variant.skip;
  const auto Lz = static_cast<std::size_t>(L);
  std::vector<std::optional<BallMatrix<S>>> Sk(Lz + 1);  // nullopt: 0 exactly
  Sk[0] = t.X[0];
  BallMatrix<S> bias = zero_ball<S>(1, a.d_model);
  for (int l = 0; l < L; ++l) {
    check_interrupt();
    const std::shared_ptr<const LayerWeights> held = model.layer_for_pass(l);
    const LayerWeights& w = *held;
    const std::vector<BallMatrix<S>>& P = t.P[static_cast<std::size_t>(l)];
    std::vector<std::optional<BallMatrix<S>>> next(Lz + 1);
    for (std::size_t k = 1; k <= static_cast<std::size_t>(l) + 1; ++k)
      if (Sk[k - 1]) next[k] = heads_map(w, &P, *Sk[k - 1], p);
    if (skip)
      for (std::size_t k = 0; k <= static_cast<std::size_t>(l); ++k)
        if (Sk[k]) next[k] = next[k] ? sum(*Sk[k], *next[k], p) : *Sk[k];
    Sk = std::move(next);
    // P_h's rows sum to 1 exactly, so a constant row passes every head's P_h unchanged.
    BallMatrix<S> b = heads_map<S>(w, nullptr, bias, p);
    if (skip) b = sum(bias, b, p);
    BallMatrix<S> c = exact_row<S>(w.b_O);
    for (const HeadWeights& hw : w.heads) c = sum(c, times_weights(exact_row<S>(hw.b_V), hw.W_O, p), p);
    bias = sum(b, c, p);
  }
  return {std::move(Sk), std::move(bias), t.X[0].mid.rows()};
}

}  // namespace enclosure_detail

template <class S> EnclosedLengthSums enclose_length_sums(const Model& model, const EnclosedTrace<S>& t) {
  if constexpr (!is_mpfr_v<S>) {
    enclosure_detail::refuse_double(model, t);
  } else {
    namespace E = enclosure_detail;
    const E::LengthSumBalls<S> balls = E::length_sum_balls(model, t);
    const std::vector<std::optional<BallMatrix<S>>>& Sk = balls.terms;
    const long p = precision_bits_v<S>;
    const Eigen::Index n = t.X[0].mid.rows(), d = model.arch().d_model;
    const auto Lz = static_cast<std::size_t>(model.arch().layers);
    EnclosedLengthSums out;
    const BallMatrix<S>& XL = t.X.back();
    out.output_frobenius = enclose_residual(XL, Center::mean).norm_frobenius;
    BallMatrix<S> rebuilt = balls.bias_rows();
    for (std::size_t k = 0; k <= Lz; ++k) {
      if (!Sk[k]) {
        out.terms.emplace_back();
        out.share.push_back({BigReal(0, 20), BigReal(0, 20)});
        continue;
      }
      const ResidualEnclosure e = enclose_residual(*Sk[k], Center::mean);
      out.share.push_back(E::quotient(e.norm_frobenius, out.output_frobenius, "‖X^L‖_F"));
      out.terms.push_back(e);
      rebuilt = E::sum(rebuilt, *Sk[k], p);
    }
    // The error's numerator from above: |m̃ − x̃| (rounded away from 0) + r_m + r_x; the denominator
    // max|X^L| from below: |x̃| − r_x rounded down.
    mpfr_t t1, num, den;
    mpfr_inits2(p + 8, t1, num, den, static_cast<mpfr_ptr>(nullptr));
    mpfr_set_zero(num, 1);
    mpfr_set_zero(den, 1);
    for (Eigen::Index j = 0; j < d; ++j)
      for (Eigen::Index i = 0; i < n; ++i) {
        const BigReal rm = rebuilt.rad.at(i, j).to_big(), rx = XL.rad.at(i, j).to_big();
        mpfr_sub(t1, rebuilt.mid(i, j).backend().data(), XL.mid(i, j).backend().data(), MPFR_RNDA);
        mpfr_abs(t1, t1, MPFR_RNDU);
        mpfr_add(t1, t1, rm.backend().data(), MPFR_RNDU);
        mpfr_add(t1, t1, rx.backend().data(), MPFR_RNDU);
        if (mpfr_cmp(t1, num) > 0) mpfr_set(num, t1, MPFR_RNDU);
        mpfr_abs(t1, XL.mid(i, j).backend().data(), MPFR_RNDD);
        mpfr_sub(t1, t1, rx.backend().data(), MPFR_RNDD);
        if (mpfr_cmp(t1, den) > 0) mpfr_set(den, t1, MPFR_RNDD);
      }
    Interval numerator{BigReal(0, 20), BigReal(0, 20)}, denominator{BigReal(0, 20), BigReal(0, 20)};
    mpfr_set_prec(numerator.hi.backend().data(), p + 8);
    mpfr_set(numerator.hi.backend().data(), num, MPFR_RNDU);
    mpfr_set_prec(denominator.lo.backend().data(), p + 8);
    mpfr_set_prec(denominator.hi.backend().data(), p + 8);
    mpfr_set(denominator.lo.backend().data(), den, MPFR_RNDD);
    mpfr_set(denominator.hi.backend().data(), den, MPFR_RNDD);  // unused by the quotient's ends
    mpfr_clears(t1, num, den, static_cast<mpfr_ptr>(nullptr));
    out.error = E::quotient(numerator, denominator, "max|X^L|");
    return out;
  }
}

template <class S>
std::vector<EnclosedPathTerm> enclose_path_terms(const Model& model, const EnclosedTrace<S>& t,
                                                 const std::vector<std::vector<int>>& paths, double radius_scale) {
  if constexpr (!is_mpfr_v<S>) {
    enclosure_detail::refuse_double(model, t, paths, radius_scale);
  } else {
    namespace E = enclosure_detail;
    E::require_recorded(model, t);
    const int L = model.arch().layers, H = model.arch().heads;
    const auto Lz = static_cast<std::size_t>(L);
    const long p = precision_bits_v<S>;
    const Eigen::Index n = t.X[0].mid.rows();
    const UpperBound scale = UpperBound::of(radius_scale);
    // Level l: the term and the stochastic factor after layers 1..l of the
    // current path (factor nullopt: I so far, exactly).
    std::vector<BallMatrix<S>> T(Lz + 1);
    std::vector<std::optional<BallMatrix<S>>> factor(Lz + 1);
    T[0] = t.X[0];
    std::vector<std::shared_ptr<const LayerWeights>> held(Lz);
    const std::vector<int>* previous = nullptr;
    std::optional<Interval> identity_residual;  // ‖res(I)‖_{1,∞}, exact input
    std::vector<EnclosedPathTerm> out;
    out.reserve(paths.size());
    for (const std::vector<int>& heads : paths) {
      check_interrupt();
      if (heads.size() != Lz)
        throw std::invalid_argument("path terms: a head sequence has " + std::to_string(heads.size()) +
                                    " entries for " + std::to_string(L) + " layers");
      std::size_t from = 0;  // levels 1..from are the previous path's and still valid
      if (previous)
        while (from < Lz && (*previous)[from] == heads[from]) ++from;
      for (std::size_t l = from; l < Lz; ++l) {
        const int h = heads[l];
        if (h < -1 || h >= H || (h == -1 && !t.variant.skip))
          throw std::invalid_argument("path terms: layer " + std::to_string(l + 1) + ": choice " + std::to_string(h) +
                                      (h == -1 ? " (skip) without a skip connection" : " is not a head 0.." +
                                                                                           std::to_string(H - 1)));
        if (h < 0) {
          T[l + 1] = T[l];
          factor[l + 1] = factor[l];
          continue;
        }
        if (!held[l]) held[l] = model.layer_for_pass(static_cast<int>(l));
        const HeadWeights& w = held[l]->heads[static_cast<std::size_t>(h)];
        const BallMatrix<S>& P = t.P[l][static_cast<std::size_t>(h)];
        T[l + 1] = E::times(P, E::times_weights(E::times_weights(T[l], w.W_V, p), w.W_O, p), false, p);
        factor[l + 1] = factor[l] ? E::times(P, *factor[l], false, p) : P;
        T[l + 1].rad = T[l + 1].rad * scale;
        factor[l + 1]->rad = factor[l + 1]->rad * scale;
      }
      previous = &heads;
      const ResidualEnclosure e = enclose_residual(T[Lz], Center::mean);
      EnclosedPathTerm r{e.norm_composite, e.norm_frobenius, e.res_composite, {}};
      if (factor[Lz]) {
        r.stochastic_residual = enclose_residual(*factor[Lz], Center::mean).res_composite;
      } else {
        if (!identity_residual) {
          const BallMatrix<S> I{Matrix<S>::Identity(n, n), RadiusMatrix::zero(n, n)};
          identity_residual = enclose_residual(I, Center::mean).res_composite;
        }
        r.stochastic_residual = *identity_residual;
      }
      out.push_back(std::move(r));
    }
    return out;
  }
}

}  // namespace sanpath

#define SANPATH_INSTANTIATE_ENCLOSED_PATHS(S)                                                                 \
  template sanpath::EnclosedLengthSums sanpath::enclose_length_sums<S>(const sanpath::Model&,                 \
                                                                       const sanpath::EnclosedTrace<S>&);     \
  template std::vector<sanpath::EnclosedPathTerm> sanpath::enclose_path_terms<S>(                            \
      const sanpath::Model&, const sanpath::EnclosedTrace<S>&, const std::vector<std::vector<int>>&, double);
