// The ∞-norm centre LP behind the optimal-centre enclosure (norms_impl.hpp),
// solved in double with GLPK's simplex on the scaled matrix D:
//
//   minimise t  over c ∈ R^d, t, u ∈ R^{n×d}
//   subject to  u_ij ≥ D_ij − c_j,  u_ij ≥ c_j − D_ij,  t ≥ Σ_j u_ij  (each row i).
//
// Its optimum is min_c ‖D − 1cᵀ‖_∞. The duals q_i ≥ 0 of the n row
// constraints (Σ q = 1 at the optimum) are the weak-duality weights that
// norms_impl.hpp turns into a certified lower bound in the working precision;
// the primal c is a candidate centre. Nothing here is reported directly: a
// failed or abandoned solve only makes the enclosure wider, never wrong.
#include "compute/norms_impl.hpp"

#include <glpk.h>

#include <algorithm>
#include <memory>
#include <vector>

namespace sanpath {
namespace norms_detail {
namespace {

// GLPK keeps one environment per thread and frees it only on glp_free_env();
// a worker thread that solved an LP would otherwise leak it when it exits
// (batched bounds run the LP on pool threads). Freed at thread exit, not after
// each solve, so a caller's own GLPK objects on the same thread stay valid
// for as long as the thread runs.
struct GlpkThreadEnvironment {
  GlpkThreadEnvironment() = default;
  GlpkThreadEnvironment(const GlpkThreadEnvironment&) = delete;
  GlpkThreadEnvironment& operator=(const GlpkThreadEnvironment&) = delete;
  ~GlpkThreadEnvironment() { glp_free_env(); }
};

void free_glpk_environment_at_thread_exit() { thread_local GlpkThreadEnvironment environment; }

}  // namespace

bool solve_centre_lp(const Eigen::MatrixXd& D, Eigen::RowVectorXd& centre, Eigen::VectorXd& weights) {
  const Eigen::Index n = D.rows(), d = D.cols();
  if (n == 0 || d == 0 || n * d > kCentreLpMaxEntries) return false;
  free_glpk_environment_at_thread_exit();
  std::unique_ptr<glp_prob, void (*)(glp_prob*)> lp(glp_create_prob(), glp_delete_prob);
  glp_prob* P = lp.get();
  glp_set_obj_dir(P, GLP_MIN);
  const int nd = static_cast<int>(n * d), ni = static_cast<int>(n), di = static_cast<int>(d);
  // Columns: c_1..c_d, t, then u_ij at d + 2 + i·d + j.
  glp_add_cols(P, di + 1 + nd);
  for (int j = 0; j < di; ++j) {
    // The optimum never needs c_j outside the column's range.
    const double lo = D.col(j).minCoeff(), hi = D.col(j).maxCoeff();
    glp_set_col_bnds(P, j + 1, lo < hi ? GLP_DB : GLP_FX, lo, hi);
  }
  const int t_col = di + 1;
  glp_set_col_bnds(P, t_col, GLP_LO, 0.0, 0.0);
  glp_set_obj_coef(P, t_col, 1.0);
  for (int k = 0; k < nd; ++k) glp_set_col_bnds(P, t_col + 1 + k, GLP_LO, 0.0, 0.0);
  // Rows: 2 per entry, then one per row of D (their duals are q).
  glp_add_rows(P, 2 * nd + ni);
  std::vector<int> ia(1), ja(1);
  std::vector<double> ar(1);
  ia.reserve(static_cast<std::size_t>(5 * nd + ni + 1));
  ja.reserve(ia.capacity());
  ar.reserve(ia.capacity());
  auto put = [&](int row, int col, double v) {
    ia.push_back(row);
    ja.push_back(col);
    ar.push_back(v);
  };
  for (int i = 0; i < ni; ++i)
    for (int j = 0; j < di; ++j) {
      const int k = i * di + j, u = t_col + 1 + k;
      const double x = D(i, j);
      glp_set_row_bnds(P, 2 * k + 1, GLP_LO, x, 0.0);  // u + c ≥ D
      put(2 * k + 1, u, 1.0);
      put(2 * k + 1, j + 1, 1.0);
      glp_set_row_bnds(P, 2 * k + 2, GLP_LO, -x, 0.0);  // u − c ≥ −D
      put(2 * k + 2, u, 1.0);
      put(2 * k + 2, j + 1, -1.0);
    }
  for (int i = 0; i < ni; ++i) {
    const int row = 2 * nd + i + 1;
    glp_set_row_bnds(P, row, GLP_LO, 0.0, 0.0);  // t − Σ_j u_ij ≥ 0
    put(row, t_col, 1.0);
    for (int j = 0; j < di; ++j) put(row, t_col + 1 + i * di + j, -1.0);
  }
  glp_load_matrix(P, static_cast<int>(ia.size()) - 1, ia.data(), ja.data(), ar.data());
  glp_smcp parm;
  glp_init_smcp(&parm);
  parm.msg_lev = GLP_MSG_OFF;
  parm.meth = GLP_DUALP;
  parm.it_lim = kCentreLpIterations;
  if (glp_simplex(P, &parm) != 0 || glp_get_status(P) != GLP_OPT) return false;
  centre.resize(d);
  for (int j = 0; j < di; ++j) centre(j) = glp_get_col_prim(P, j + 1);
  weights.resize(n);
  for (int i = 0; i < ni; ++i) weights(i) = std::max(0.0, glp_get_row_dual(P, 2 * nd + i + 1));
  return weights.sum() > 0;
}

}  // namespace norms_detail
}  // namespace sanpath
