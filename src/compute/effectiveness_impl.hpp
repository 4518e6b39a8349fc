#pragma once
#include "sanpath/compute/effectiveness.hpp"
#include "sanpath/compute/paths.hpp"
#include "sanpath/core/linalg.hpp"
#include "sanpath/compute/norms.hpp"

#include <cmath>
#include <stdexcept>
#include <string>

namespace sanpath {

template <class S> Matrix<S> task_logits(const TaskHead& head, const Matrix<S>& X) {
  using std::tanh;
  head.check();
  const Eigen::Index d = head.width();
  if (X.cols() != d || X.rows() < 1)
    throw std::invalid_argument("task head: the input has " + std::to_string(X.cols()) + " columns, the head " +
                                std::to_string(d));
  // The rows read: the first (a classifier on BERT's first token or ViT's CLS) or every position.
  Matrix<S> Z = head.kind == TaskHeadKind::classifier ? Matrix<S>(X.topRows(1)) : X;
  if (head.norm_g.size() > 0)
    Z = head.norm == NormKind::rms ? rms_norm<S>(Z, head.norm_g, head.norm_b, head.norm_eps, head.norm_unit_offset)
                                   : layer_norm<S>(Z, head.norm_g, head.norm_b, head.norm_eps);
  Matrix<S> T;
  if (head.pooler_W.size() > 0) {  // a(W_p z + b_p), a = tanh or ReLU
    gemm_weights_nt(Z, head.pooler_W, T);
    const bool relu = head.pooler_activation == PoolerActivation::relu;
    for (Eigen::Index i = 0; i < T.rows(); ++i)
      for (Eigen::Index j = 0; j < T.cols(); ++j) {
        const S v = T(i, j) + S(head.pooler_b(j));
        T(i, j) = relu ? (v > 0 ? v : S(0)) : S(tanh(v));
      }
    Z = std::move(T);
  }
  if (head.project_out.size() > 0) {
    gemm_weights_nt(Z, head.project_out, T);
    Z = std::move(T);
  }
  Matrix<S> out;
  gemm_weights_nt(Z, head.output_W, out);
  if (head.output_b.size() > 0)
    for (Eigen::Index i = 0; i < out.rows(); ++i)
      for (Eigen::Index j = 0; j < out.cols(); ++j) out(i, j) += S(head.output_b(j));
  if (head.softcap) {  // c·tanh(z/c)
    const S c = decimal_constant<S>(*head.softcap);
    for (Eigen::Index i = 0; i < out.rows(); ++i)
      for (Eigen::Index j = 0; j < out.cols(); ++j) out(i, j) = c * S(tanh(S(out(i, j) / c)));
  }
  return out;
}

namespace detail {
/// log softmax of row i of A (row maximum subtracted), into `out`.
template <class S> void log_softmax_row(const Matrix<S>& A, Eigen::Index i, std::vector<S>& out) {
  using std::exp;
  using std::log;
  const Eigen::Index c = A.cols();
  S m = A(i, 0);
  for (Eigen::Index j = 1; j < c; ++j)
    if (A(i, j) > m) m = A(i, j);
  S sum(0);
  out.resize(static_cast<std::size_t>(c));
  for (Eigen::Index j = 0; j < c; ++j) {
    out[static_cast<std::size_t>(j)] = A(i, j) - m;
    sum += exp(out[static_cast<std::size_t>(j)]);
  }
  const S ls = log(sum);
  for (auto& v : out) v -= ls;
}

template <class S> Eigen::Index row_argmax(const Matrix<S>& A, Eigen::Index i) {
  Eigen::Index best = 0;
  for (Eigen::Index j = 1; j < A.cols(); ++j)
    if (A(i, j) > A(i, best)) best = j;
  return best;
}
}  // namespace detail

template <class S> HeadAgreement<S> compare_logits(const Matrix<S>& reference, const Matrix<S>& logits) {
  using std::exp;
  if (reference.rows() != logits.rows() || reference.cols() != logits.cols() || reference.rows() < 1 ||
      reference.cols() < 1)
    throw std::invalid_argument("compare_logits: shapes " + std::to_string(reference.rows()) + "×" +
                                std::to_string(reference.cols()) + " and " + std::to_string(logits.rows()) + "×" +
                                std::to_string(logits.cols()) + " differ or are empty");
  HeadAgreement<S> r;
  r.predictions = static_cast<long>(reference.rows());
  std::vector<S> lp, lq;
  S total(0);
  for (Eigen::Index i = 0; i < reference.rows(); ++i) {
    if (detail::row_argmax(reference, i) == detail::row_argmax(logits, i)) ++r.agree;
    detail::log_softmax_row(reference, i, lp);
    detail::log_softmax_row(logits, i, lq);
    S kl(0);
    for (std::size_t j = 0; j < lp.size(); ++j) kl += exp(lp[j]) * S(lp[j] - lq[j]);
    total += kl;
  }
  r.mean_kl = total / S(static_cast<double>(r.predictions));
  return r;
}

template <class S>
Effectiveness<S> exact_effectiveness(const Model& model, const ForwardTrace<S>& trace, const TaskHead* head,
                                     int threads, std::vector<Matrix<S>>* truncations) {
  const LengthSums<S> ls = length_sums<S>(model, trace, threads);
  const Matrix<S>& XL = trace.X.back();
  Effectiveness<S> out;
  out.output_frobenius = ls.output_frobenius;
  std::optional<Matrix<S>> reference;
  if (head != nullptr) reference = task_logits<S>(*head, XL);
  if (truncations) truncations->clear();
  Matrix<S> Xk = XL;
  Xk.setConstant(S(0));
  Xk.rowwise() += ls.bias;
  for (const LengthSum<S>& t : ls.terms) {
    Xk += t.sum;
    EffectivenessPoint<S> p;
    p.length = t.length;
    const S dist = norm_frobenius(Matrix<S>(Xk - XL));
    p.distance = out.output_frobenius != 0 ? S(dist / out.output_frobenius) : dist;
    if (reference) p.head = compare_logits<S>(*reference, task_logits<S>(*head, Xk));
    out.points.push_back(std::move(p));
    if (truncations) truncations->push_back(Xk);
  }
  return out;
}

}  // namespace sanpath

#define SANPATH_INSTANTIATE_EFFECTIVENESS(S)                                                                        \
  template sanpath::Matrix<S> sanpath::task_logits<S>(const sanpath::TaskHead&, const sanpath::Matrix<S>&);         \
  template sanpath::HeadAgreement<S> sanpath::compare_logits<S>(const sanpath::Matrix<S>&, const sanpath::Matrix<S>&); \
  template sanpath::Effectiveness<S> sanpath::exact_effectiveness<S>(                                               \
      const sanpath::Model&, const sanpath::ForwardTrace<S>&, const sanpath::TaskHead*, int,                        \
      std::vector<sanpath::Matrix<S>>*);
