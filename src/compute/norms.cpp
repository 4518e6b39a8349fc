// Non-template parts of sanpath/norms.hpp: the Center spellings and the
// double-precision centre search behind optimal_residual (norms_impl.hpp).
#include "compute/norms_impl.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

namespace sanpath {

std::string to_string(Center c) {
  switch (c) {
    case Center::mean: return "mean";
    case Center::median: return "median";
    case Center::optimal: return "optimal";
  }
  return "?";
}

Center parse_center(const std::string& text) {
  if (text == "mean") return Center::mean;
  if (text == "median") return Center::median;
  if (text == "optimal") return Center::optimal;
  throw std::invalid_argument("center: '" + text + "' is not one of mean, median, optimal");
}

namespace norms_detail {
namespace {

// Iteration bounds of the search. A "round" is one pass over D for the
// weighted medians plus one for the absolute sums (2 n d visits); a
// coordinate-descent "sweep" costs 2 to 12 such passes.
//   R = clamp(2^24 / (n d), 160, 1024) rounds on the ∞-norm LP (small
//   matrices get more rounds, large ones 160), then <= 4 sweeps of exact
//   coordinate descent on its best centre; 2 scalarised composite games of
//   R/2 rounds each, then <= 4 coordinate-descent sweeps on the composite.
constexpr int kMinRounds = 160;
constexpr int kMaxRounds = 1024;
constexpr double kRoundBudget = 16777216.0;  // 2^24 entry visits
constexpr int kCompositeGames = 2;
constexpr int kSweeps = 4;
constexpr int kGoldenSteps = 6;  // golden-section steps per coordinate (composite sweeps)
constexpr double kStep = 1.0;    // Hedge step, in units of the first round's loss range

using Eigen::Index;
using Eigen::RowVectorXd;
using Eigen::VectorXd;

int rounds_for(Index n, Index d) {
  const double r = kRoundBudget / (static_cast<double>(n) * static_cast<double>(d));
  if (!(r < kMaxRounds)) return kMaxRounds;
  return std::max(kMinRounds, static_cast<int>(r));
}

/// Shared scratch for the passes over D.
struct Passes {
  const Eigen::MatrixXd& D;
  const std::vector<std::int32_t>& order;
  Index n, d;
  VectorXd r;     // row abs-sums of D − 1cᵀ
  RowVectorXd a;  // column abs-sums of D − 1cᵀ

  Passes(const Eigen::MatrixXd& D_, const std::vector<std::int32_t>& order_)
      : D(D_), order(order_), n(D_.rows()), d(D_.cols()), r(D_.rows()), a(D_.cols()) {}

  /// r, a for centre c; returns (A, B) = (max a, max r).
  void sums(const RowVectorXd& c, double& A, double& B) {
    r.setZero();
    for (Index j = 0; j < d; ++j) {
      const double cj = c(j);
      const double* col = D.col(j).data();
      double s = 0;
      for (Index i = 0; i < n; ++i) {
        const double t = std::abs(col[i] - cj);
        s += t;
        r(i) += t;
      }
      a(j) = s;
    }
    A = a.maxCoeff();
    B = r.maxCoeff();
  }

  double column_sum(Index j, double x) const {
    const double* col = D.col(j).data();
    double s = 0;
    for (Index i = 0; i < n; ++i) s += std::abs(col[i] - x);
    return s;
  }

  /// For column j with the other columns fixed (s_i = r_i − |D_ij − c_j|):
  /// max_i (s_i + |D_ij − x|) = max(P − x, Q + x), P = max_i s_i + D_ij,
  /// Q = max_i s_i − D_ij.
  void cone(Index j, double cj, double& P, double& Q) const {
    const double* col = D.col(j).data();
    P = Q = -std::numeric_limits<double>::infinity();
    for (Index i = 0; i < n; ++i) {
      const double s = r(i) - std::abs(col[i] - cj);
      P = std::max(P, s + col[i]);
      Q = std::max(Q, s - col[i]);
    }
  }

  void move(Index j, double& cj, double x) {
    const double* col = D.col(j).data();
    for (Index i = 0; i < n; ++i) r(i) += std::abs(col[i] - x) - std::abs(col[i] - cj);
    cj = x;
  }

  /// c_j = a weighted median of column j under row weights w_i + extra_j
  /// (extra == nullptr: w_i). Total row weight W = Σ w.
  void weighted_medians(const VectorXd& w, double W, const RowVectorXd* extra, RowVectorXd& c) const {
    c.resize(d);
    for (Index j = 0; j < d; ++j) {
      const std::int32_t* p = order.data() + j * n;
      const double e = extra ? (*extra)(j) : 0.0;
      const double half = 0.5 * (W + static_cast<double>(n) * e);
      double cum = 0;
      Index k = 0;
      for (; k < n - 1; ++k) {
        cum += w(p[k]) + e;
        if (cum >= half) break;
      }
      c(j) = D(p[k], j);
    }
  }
};

struct Best {
  double value = std::numeric_limits<double>::infinity();
  RowVectorXd centre;
  void offer(double v, const RowVectorXd& c) {
    if (v < value) {
      value = v;
      centre = c;
    }
  }
};

double composite_of(double A, double B) { return std::sqrt(A) * std::sqrt(B); }

/// Hedge weights update: x_i ← x_i · exp(η (gain_i − max)), renormalised.
template <class V> void hedge(V& x, const V& gain, double max_gain, double eta) {
  for (Index i = 0; i < x.size(); ++i) x(i) *= std::exp(eta * (gain(i) - max_gain));
  x /= x.sum();
}

double positive_range(double hi, double lo) {
  const double r = hi - lo;
  if (r > 1e-12 * hi) return r;
  return hi > 0 ? hi : 1.0;
}

/// One game min_c max_{w,u} Σ_i w_i Σ_j |D_ij − c_j| + κ Σ_j u_j Σ_i |D_ij − c_j|
/// (w, u probability vectors; κ = 0: the ∞-norm LP). The c-player answers
/// with weighted medians, w and u play Hedge: a constant step for the first
/// half of the rounds, then decaying as 1/√t. Offers every centre it meets
/// to `primal` (value κA + B) and `composite` (√(AB)); for κ = 0 returns the
/// row weights of the best dual value Σ_i w_i r_i.
struct GameResult {
  double best_dual = -1;
  VectorXd dual_weights;
};

GameResult play(Passes& P, double kappa, int rounds, Best& primal, Best& composite) {
  const Index n = P.n, d = P.d;
  VectorXd w = VectorXd::Constant(n, 1.0 / static_cast<double>(n)), wsum = VectorXd::Zero(n);
  RowVectorXd u = RowVectorXd::Constant(d, 1.0 / static_cast<double>(d)), extra, c, csum = RowVectorXd::Zero(d);
  GameResult g;
  auto offer_dual = [&](double value, const VectorXd& weights) {
    // Ties within rounding keep the earlier (e.g. uniform) weights.
    if (value > g.best_dual + 1e-13 * std::abs(g.best_dual)) {
      g.best_dual = value;
      g.dual_weights = weights;
    }
  };
  double rho_w = 1, rho_u = 1, A = 0, B = 0;
  const int half = rounds / 2;
  for (int t = 0; t < rounds; ++t) {
    if (kappa > 0) extra = kappa * u;
    P.weighted_medians(w, w.sum(), kappa > 0 ? &extra : nullptr, c);
    P.sums(c, A, B);
    primal.offer(kappa * A + B, c);
    composite.offer(composite_of(A, B), c);
    if (kappa == 0) offer_dual(w.dot(P.r) / w.sum(), w);
    csum += c;
    wsum += w;
    if (t == 0) {
      rho_w = positive_range(B, P.r.minCoeff());
      rho_u = positive_range(A, P.a.minCoeff());
    }
    const double decay = t < half ? 1.0 : std::sqrt(8.0 / (t - half + 8.0));
    hedge(w, P.r, B, kStep * decay / rho_w);
    if (kappa > 0) hedge(u, P.a, A, kStep * decay / rho_u);
  }
  // Averaged play: the mean centre is near-optimal for the convex primal,
  // the mean weights at least as good as the average dual value (concavity).
  c = csum / static_cast<double>(rounds);
  P.sums(c, A, B);
  primal.offer(kappa * A + B, c);
  composite.offer(composite_of(A, B), c);
  if (kappa == 0) {
    const VectorXd wbar = wsum / wsum.sum();
    P.weighted_medians(wbar, wbar.sum(), nullptr, c);
    P.sums(c, A, B);
    primal.offer(B, c);
    composite.offer(composite_of(A, B), c);
    offer_dual(wbar.dot(P.r), wbar);
  }
  return g;
}

/// Exact coordinate descent on f(c) = max_i Σ_j |D_ij − c_j|: each
/// coordinate moves to the minimiser (P − Q)/2 of max(P − x, Q + x) when
/// that lowers f. At most kSweeps sweeps; stops when a sweep gains nothing.
void descend_inf(Passes& P, RowVectorXd c, Best& primal, Best& composite) {
  double A = 0, B = 0;
  P.sums(c, A, B);
  for (int sweep = 0; sweep < kSweeps; ++sweep) {
    const double before = B;
    for (Index j = 0; j < P.d; ++j) {
      double cp = 0, cq = 0;
      P.cone(j, c(j), cp, cq);
      if (0.5 * (cp + cq) < B) {
        P.move(j, c(j), 0.5 * (cp - cq));
        B = P.r.maxCoeff();
      }
    }
    P.sums(c, A, B);  // fresh sums (no drift)
    primal.offer(B, c);
    composite.offer(composite_of(A, B), c);
    if (!(B < before)) break;
  }
}

/// Coordinate descent on the composite A·B: coordinate j is searched on the
/// segment from the column median (0 in D's units, least column sum) to the
/// ∞-optimal point (P − Q)/2 of that coordinate, by kGoldenSteps
/// golden-section steps plus both ends; it moves when the product drops.
void descend_composite(Passes& P, RowVectorXd c, Best& composite) {
  const Index d = P.d;
  double A = 0, B = 0;
  P.sums(c, A, B);
  double h = A * B;
  RowVectorXd a = P.a;
  for (int sweep = 0; sweep < kSweeps; ++sweep) {
    const double before = h;
    for (Index j = 0; j < d; ++j) {
      double others = 0;
      for (Index k = 0; k < d; ++k)
        if (k != j && a(k) > others) others = a(k);
      double cp = 0, cq = 0;
      P.cone(j, c(j), cp, cq);
      double best_x = c(j), best_a = a(j), best = h;
      auto value = [&](double x) {
        const double aj = P.column_sum(j, x);
        const double v = std::max(others, aj) * std::max(cp - x, cq + x);
        if (v < best) {
          best = v;
          best_x = x;
          best_a = aj;
        }
        return v;
      };
      double lo = 0.0, hi = 0.5 * (cp - cq);
      value(lo);
      value(hi);
      const double g = 0.6180339887498949;
      double x1 = hi - g * (hi - lo), x2 = lo + g * (hi - lo);
      double f1 = value(x1), f2 = value(x2);
      for (int it = 0; it < kGoldenSteps; ++it) {
        if (f1 < f2) {
          hi = x2;
          x2 = x1;
          f2 = f1;
          x1 = hi - g * (hi - lo);
          f1 = value(x1);
        } else {
          lo = x1;
          x1 = x2;
          f1 = f2;
          x2 = lo + g * (hi - lo);
          f2 = value(x2);
        }
      }
      if (best < h) {
        P.move(j, c(j), best_x);
        a(j) = best_a;
        h = best;
      }
    }
    P.sums(c, A, B);
    a = P.a;
    h = A * B;
    composite.offer(composite_of(A, B), c);
    if (!(h < before)) break;
  }
}

/// Nonnegative integer weights proportional to w (rounded down), the largest
/// 2^b with b = 52 − bit_width(n): every partial sum over the n rows stays
/// below 2^52, so sums are exact in uint64 and convert exactly to S.
std::vector<std::uint64_t> quantise(const VectorXd& w) {
  const Index n = w.size();
  int bits = 52;
  for (Index m = n; m > 0; m >>= 1) --bits;
  bits = std::max(0, bits);
  const double top = std::ldexp(1.0, bits);
  const double wmax = w.size() ? w.maxCoeff() : 0.0;
  std::vector<std::uint64_t> q(static_cast<std::size_t>(n), 0);
  if (!(wmax > 0)) {
    std::fill(q.begin(), q.end(), 1);
    return q;
  }
  for (Index i = 0; i < n; ++i) {
    const double v = std::floor(w(i) / wmax * top);
    q[static_cast<std::size_t>(i)] = v > 0 ? static_cast<std::uint64_t>(v) : 0;
  }
  return q;
}

/// Weights 1 on the two rows of D farthest apart in ‖·‖_1, 0 elsewhere: the
/// dual bound max_ik ‖x_i − x_k‖_1 / 2 (exact in the caller's precision).
std::vector<std::uint64_t> farthest_pair(const Eigen::MatrixXd& D) {
  const Index n = D.rows();
  std::vector<std::uint64_t> q(static_cast<std::size_t>(n), 0);
  Index bi = 0, bk = 0;
  double best = -1;
  for (Index i = 0; i < n; ++i)
    for (Index k = i + 1; k < n; ++k) {
      const double v = (D.row(i) - D.row(k)).cwiseAbs().sum();
      if (v > best) {
        best = v;
        bi = i;
        bk = k;
      }
    }
  q[static_cast<std::size_t>(bi)] += 1;
  q[static_cast<std::size_t>(bk)] += 1;
  return q;
}

}  // namespace

CentreSearch search_centres(const Eigen::MatrixXd& D, const std::vector<std::int32_t>& order) {
  const Index n = D.rows(), d = D.cols();
  if (static_cast<Index>(order.size()) != n * d) throw std::logic_error("search_centres: order has the wrong size");
  CentreSearch out;
  if (n == 0 || d == 0) {
    out.inf_centre = out.composite_centre = RowVectorXd::Zero(d);
    out.dual_weights.assign(1, std::vector<std::uint64_t>(static_cast<std::size_t>(n), 1));
    return out;
  }
  const int rounds = rounds_for(n, d);
  Passes P(D, order);
  Best inf, composite;
  double A = 0, B = 0;
  // The median (0 in D's units) and the mean as starting candidates.
  const RowVectorXd zero = RowVectorXd::Zero(d);
  P.sums(zero, A, B);
  inf.offer(B, zero);
  composite.offer(composite_of(A, B), zero);
  const RowVectorXd mean = D.colwise().mean();
  P.sums(mean, A, B);
  inf.offer(B, mean);
  composite.offer(composite_of(A, B), mean);

  const GameResult lp = play(P, 0.0, rounds, inf, composite);
  descend_inf(P, inf.centre, inf, composite);

  // The LP itself, when small enough: its duals certify the optimum (to
  // double rounding) and its centre is the ∞-optimal candidate.
  RowVectorXd lp_centre;
  VectorXd lp_weights;
  if (solve_centre_lp(D, lp_centre, lp_weights)) {
    P.sums(lp_centre, A, B);
    inf.offer(B, lp_centre);
    composite.offer(composite_of(A, B), lp_centre);
    out.dual_weights.push_back(quantise(lp_weights));
  }
  out.dual_weights.push_back(quantise(lp.dual_weights));
  out.dual_weights.push_back(farthest_pair(D));

  // Composite: min_c √(A B) = min_λ ½ min_c (λA + B/λ), and at the optimum
  // λ² = B/A; play the scalarised game at κ = B/A of the best centre so far.
  for (int k = 0; k < kCompositeGames; ++k) {
    P.sums(composite.centre, A, B);
    if (!(A > 0) || !(B > 0)) break;
    Best scalarised;
    play(P, B / A, rounds / 2, scalarised, composite);
  }
  descend_composite(P, composite.centre, composite);
  out.inf_centre = inf.centre;
  out.composite_centre = composite.centre;
  return out;
}

}  // namespace norms_detail
}  // namespace sanpath
