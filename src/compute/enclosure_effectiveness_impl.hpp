#pragma once
// Path effectiveness in ball arithmetic (compute/enclosure_effectiveness.hpp).
#include "sanpath/compute/enclosure_effectiveness.hpp"
#include "compute/enclosure_paths_impl.hpp"

#include <mpfr.h>

#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

namespace sanpath {
namespace enclosure_detail {

/// A·Wᵀ with W exact (a torch Linear weight, [out, in]).
template <class S> BallMatrix<S> times_linear(const BallMatrix<S>& A, const MatrixXd& W, long p) {
  return times_weights(A, MatrixXd(W.transpose()), p);
}

/// task_logits on a ball, map by map (model/task_head.hpp): the rows read,
/// the final LayerNorm or RMSNorm (normalize), the pooler's tanh or ReLU
/// (both increasing: the interval from the ends, tanh's rounded outward,
/// ReLU's exact), project_out, the output map and its bias, the soft cap
/// (soft_cap).
template <class S> BallMatrix<S> head_logits(const TaskHead& head, const BallMatrix<S>& X, long p) {
  using std::tanh;
  head.check();
  const Eigen::Index d = head.width();
  if (X.mid.cols() != d)
    throw std::invalid_argument("task head: the input has " + std::to_string(X.mid.cols()) + " columns, the head " +
                                std::to_string(d));
  BallMatrix<S> Z = head.kind == TaskHeadKind::classifier ? BallMatrix<S>{X.mid.topRows(1), X.rad.block(0, 0, 1, d)} : X;
  if (head.norm_g.size() > 0)
    Z = normalize(Z, head.norm_g, head.norm_b, head.norm_eps, head.norm == NormKind::rms, head.norm_unit_offset);
  if (head.pooler_W.size() > 0) {
    BallMatrix<S> z = times_linear(Z, head.pooler_W, p);
    add_bias(z, detail::row_of<S>(head.pooler_b), p);
    const bool relu = head.pooler_activation == PoolerActivation::relu;
    Matrix<S> mid = z.mid;
    for (Eigen::Index i = 0; i < mid.rows(); ++i)
      for (Eigen::Index j = 0; j < mid.cols(); ++j)
        mid(i, j) = relu ? (z.mid(i, j) > 0 ? z.mid(i, j) : S(0)) : S(tanh(z.mid(i, j)));
    Z = ball_around(std::move(mid), [&](Eigen::Index i) {
      std::vector<Iv<S>> y(static_cast<std::size_t>(z.mid.cols()));
      for (Eigen::Index j = 0; j < z.mid.cols(); ++j) {
        const Iv<S> a = iv_of(z.mid(i, j), z.rad.at(i, j));
        Iv<S>& t = y[static_cast<std::size_t>(j)];
        if (relu) {
          t = iv_activate(a, Activation::relu);
          continue;
        }
        mpfr_tanh(ptr(t.lo), ptr(a.lo), MPFR_RNDD);
        mpfr_tanh(ptr(t.hi), ptr(a.hi), MPFR_RNDU);
      }
      return y;
    });
  }
  if (head.project_out.size() > 0) Z = times_linear(Z, head.project_out, p);
  BallMatrix<S> out = times_linear(Z, head.output_W, p);
  if (head.output_b.size() > 0) add_bias(out, detail::row_of<S>(head.output_b), p);
  if (head.softcap) soft_cap(out, *head.softcap);
  return out;
}

/// The indices of row i that may be its argmax: every j whose upper end
/// reaches the largest lower end of the row.
template <class S> std::vector<Eigen::Index> argmax_candidates(const BallMatrix<S>& A, Eigen::Index i) {
  std::vector<Iv<S>> row(static_cast<std::size_t>(A.mid.cols()));
  S best_lo;
  for (Eigen::Index j = 0; j < A.mid.cols(); ++j) {
    row[static_cast<std::size_t>(j)] = iv_of(A.mid(i, j), A.rad.at(i, j));
    if (j == 0 || row[static_cast<std::size_t>(j)].lo > best_lo) best_lo = row[static_cast<std::size_t>(j)].lo;
  }
  std::vector<Eigen::Index> out;
  for (Eigen::Index j = 0; j < A.mid.cols(); ++j)
    if (row[static_cast<std::size_t>(j)].hi >= best_lo) out.push_back(j);
  return out;
}

/// The softmax of row i of a ball of logits on intervals: log p_j = a_j − m − log Σ_i exp(a_i − m) with m
/// the row's largest midpoint (any number gives the same exact value), exp and log rounded outward; with
/// `probabilities` also p_j = exp(a_j − m) / Σ_i exp(a_i − m) from the same exponentials.
template <class S> struct RowSoftmax {
  std::vector<Iv<S>> log_p, p;
};

template <class S> RowSoftmax<S> softmax_row(const BallMatrix<S>& A, Eigen::Index i, bool probabilities) {
  const Eigen::Index c = A.mid.cols();
  S m = A.mid(i, 0);
  for (Eigen::Index j = 1; j < c; ++j)
    if (A.mid(i, j) > m) m = A.mid(i, j);
  RowSoftmax<S> out;
  out.log_p.resize(static_cast<std::size_t>(c));
  if (probabilities) out.p.resize(static_cast<std::size_t>(c));
  Iv<S> total = iv_point(S(0));
  for (Eigen::Index j = 0; j < c; ++j) {
    Iv<S>& x = out.log_p[static_cast<std::size_t>(j)];
    x = iv_sub(iv_of(A.mid(i, j), A.rad.at(i, j)), iv_point(m));
    Iv<S> e;
    mpfr_exp(ptr(e.lo), ptr(x.lo), MPFR_RNDD);
    mpfr_exp(ptr(e.hi), ptr(x.hi), MPFR_RNDU);
    total = iv_add(total, e);
    if (probabilities) out.p[static_cast<std::size_t>(j)] = e;
  }
  // total ≥ the largest midpoint's term exp(−r) > 0, unless the radii have grown past any bound.
  if (!mpfr_number_p(ptr(total.hi)) || mpfr_sgn(ptr(total.lo)) <= 0)
    throw NumericalError("certified effectiveness: the task head's logits are not bounded at " +
                         std::to_string(precision_bits_v<S>) + " bits");
  Iv<S> log_total;
  mpfr_log(ptr(log_total.lo), ptr(total.lo), MPFR_RNDD);
  mpfr_log(ptr(log_total.hi), ptr(total.hi), MPFR_RNDU);
  for (Iv<S>& x : out.log_p) x = iv_sub(x, log_total);
  for (Iv<S>& e : out.p) {  // e ≥ 0 over total > 0
    mpfr_div(ptr(e.lo), ptr(e.lo), ptr(total.hi), MPFR_RNDD);
    mpfr_div(ptr(e.hi), ptr(e.hi), ptr(total.lo), MPFR_RNDU);
  }
  return out;
}

/// The head's predictions on `logits` (X_{≤k}) against `reference` (X^L).
template <class S> EnclosedAgreement agreement(const BallMatrix<S>& reference, const BallMatrix<S>& logits) {
  const Eigen::Index rows = reference.mid.rows();
  std::vector<Iv<S>> kl(static_cast<std::size_t>(rows));
  std::vector<int> verdict(static_cast<std::size_t>(rows));  // 2 proven, 1 possible, 0 excluded
  detail::run_blocks(static_cast<std::size_t>(rows), rows > 1 ? product_threads() : 1, [&](std::size_t iu) {
    check_interrupt();
    const auto i = static_cast<Eigen::Index>(iu);
    const std::vector<Eigen::Index> a = argmax_candidates(reference, i), b = argmax_candidates(logits, i);
    const bool may = std::any_of(a.begin(), a.end(), [&](Eigen::Index j) {
      return std::find(b.begin(), b.end(), j) != b.end();
    });
    verdict[iu] = a.size() == 1 && b.size() == 1 && a.front() == b.front() ? 2 : may ? 1 : 0;
    const RowSoftmax<S> p = softmax_row(reference, i, true), q = softmax_row(logits, i, false);
    Iv<S> sum = iv_point(S(0));
    for (std::size_t j = 0; j < p.p.size(); ++j)
      sum = iv_add(sum, iv_mul(p.p[j], iv_sub(p.log_p[j], q.log_p[j])));
    kl[iu] = sum;
  });
  EnclosedAgreement out;
  out.predictions = static_cast<long>(rows);
  Iv<S> total = iv_point(S(0));
  for (Eigen::Index i = 0; i < rows; ++i) {
    const int v = verdict[static_cast<std::size_t>(i)];
    out.agree_fewest += v == 2;
    out.agree_most += v >= 1;
    total = iv_add(total, kl[static_cast<std::size_t>(i)]);
  }
  total = iv_div_int(total, static_cast<long>(rows));
  if (mpfr_sgn(ptr(total.lo)) < 0) mpfr_set_zero(ptr(total.lo), 1);  // KL ≥ 0
  const int digits = decimal_digits(precision_bits_v<S>) + 2;
  out.mean_kl = {BigReal(0, digits), BigReal(0, digits)};
  mpfr_set(out.mean_kl.lo.backend().data(), ptr(total.lo), MPFR_RNDD);
  mpfr_set(out.mean_kl.hi.backend().data(), ptr(total.hi), MPFR_RNDU);
  return out;
}

}  // namespace enclosure_detail

template <class S>
EnclosedEffectiveness enclose_effectiveness(const Model& model, const EnclosedTrace<S>& t, const TaskHead* head) {
  if constexpr (!is_mpfr_v<S>) {
    enclosure_detail::refuse_double(model, t, head);
  } else {
    namespace E = enclosure_detail;
    const E::LengthSumBalls<S> balls = E::length_sum_balls(model, t);
    const int L = model.arch().layers;
    const long p = precision_bits_v<S>;
    const BallMatrix<S>& XL = t.X.back();
    EnclosedEffectiveness out;
    out.output_frobenius = enclose_residual(XL, Center::mean).norm_frobenius;
    out.points.resize(static_cast<std::size_t>(L) + 1);
    // k < L: ‖Σ_{j>k} S_j‖_F, the tail summed from the longest paths down.
    std::optional<BallMatrix<S>> tail;
    for (int k = L - 1; k >= 0; --k) {
      const auto& next = balls.terms[static_cast<std::size_t>(k) + 1];
      if (next) tail = tail ? E::sum(*tail, *next, p) : *next;
      Interval num{BigReal(0, 20), BigReal(0, 20)};  // no path longer than k: 0 exactly
      if (tail) num = E::norm_interval(tail->mid, 'F', frobenius_up(tail->rad));
      out.points[static_cast<std::size_t>(k)].distance = E::quotient(num, out.output_frobenius, "‖X^L‖_F");
    }
    // k = L: the reconstruction's distance, 0 exactly, as the balls bound it.
    BallMatrix<S> truncated = balls.bias_rows();
    std::optional<BallMatrix<S>> reference;
    if (head) reference = E::head_logits(*head, XL, p);
    for (int k = 0; k <= L; ++k) {
      check_interrupt();
      EnclosedEffectivenessPoint& point = out.points[static_cast<std::size_t>(k)];
      point.length = k;
      if (const auto& Sk = balls.terms[static_cast<std::size_t>(k)]) truncated = E::sum(truncated, *Sk, p);
      if (k == L) {
        BallMatrix<S> D{truncated.mid - XL.mid, truncated.rad + XL.rad};
        E::add_rounding(D, p);
        point.distance =
            E::quotient(E::norm_interval(D.mid, 'F', frobenius_up(D.rad)), out.output_frobenius, "‖X^L‖_F");
      }
      if (reference) point.head = E::agreement(*reference, E::head_logits(*head, truncated, p));
    }
    return out;
  }
}

}  // namespace sanpath

#define SANPATH_INSTANTIATE_ENCLOSED_EFFECTIVENESS(S)                                                            \
  template sanpath::EnclosedEffectiveness sanpath::enclose_effectiveness<S>(                                    \
      const sanpath::Model&, const sanpath::EnclosedTrace<S>&, const sanpath::TaskHead*);
