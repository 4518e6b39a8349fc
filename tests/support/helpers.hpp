#pragma once
// Shared test helpers: comparisons in units of the type's epsilon, matrix
// comparisons that CAPTURE the failing indices, and paths to fixtures.
#include <catch2/catch.hpp>

#include "sanpath/core/linalg.hpp"
#include "sanpath/core/scalar.hpp"

#include <cfenv>

#include <cstdlib>
#include <filesystem>
#include <limits>
#include <string>

namespace sanpath::test {

/// Machine epsilon of a working scalar, as a BigReal.
template <class S> BigReal epsilon_of() { return to_big(std::numeric_limits<S>::epsilon()); }

/// |a - b| / max(|b|, floor) in units of S's epsilon (a BigReal, never
/// rounded through double).
template <class S> BigReal error_in_eps(const S& a, const S& b, const S& floor = S(0)) {
  using std::abs;
  S scale = abs(b) > floor ? S(abs(b)) : floor;
  if (scale == 0) scale = S(1);
  return to_big(S(abs(a - b) / scale)) / epsilon_of<S>();
}

/// Requires every entry of `a` to be within `eps_units` epsilons of `b`,
/// relative to the largest |entry| of `b` (or 1 if b is zero).
template <class S, class DA, class DB>
void require_matrix_near(const Eigen::MatrixBase<DA>& a, const Eigen::MatrixBase<DB>& b, double eps_units) {
  REQUIRE(a.rows() == b.rows());
  REQUIRE(a.cols() == b.cols());
  using std::abs;
  S scale(0);
  for (Eigen::Index j = 0; j < b.cols(); ++j)
    for (Eigen::Index i = 0; i < b.rows(); ++i)
      if (abs(b(i, j)) > scale) scale = abs(b(i, j));
  if (scale == 0) scale = S(1);
  for (Eigen::Index j = 0; j < b.cols(); ++j)
    for (Eigen::Index i = 0; i < b.rows(); ++i) {
      const BigReal err = to_big(S(abs(a(i, j) - b(i, j)) / scale)) / epsilon_of<S>();
      if (err > eps_units) {
        CAPTURE(i, j, to_sci(to_big(S(a(i, j)))), to_sci(to_big(S(b(i, j)))), to_sci(err), eps_units);
        REQUIRE(err <= eps_units);
      }
    }
}

/// The shared folder with real checkpoints. When it is absent: with the
/// environment variable CI set the calling test FAILS (CI must not pass by
/// losing these cases); otherwise it WARNs and returns "" (callers return).
inline std::string real_models_dir() {
  const std::string dir = std::string(SANPATH_SHARED_DIR) + "/data/real-models";
  if (std::filesystem::is_directory(dir)) return dir;
  if (std::getenv("CI") != nullptr) FAIL(dir << " is missing and CI is set: the real-checkpoint cases cannot be skipped");
  WARN(dir << " is absent: the real-checkpoint cases are skipped (outside CI only)");
  return std::string();
}

/// A fresh scratch path under the build tree's test tmp folder.
inline std::string tmp_path(const std::string& name) { return std::string(SANPATH_TEST_TMP) + "/" + name; }

/// Restores the double products' level, their thread count and the rounding
/// mode a test case changed (tests of the kernels and of the emulation).
struct Restore {
  std::string isa = double_products_isa();
  int mode = std::fegetround();
  ~Restore() {
    set_double_products_isa(isa);
    set_product_threads(0);
    std::fesetround(mode);
  }
};

}  // namespace sanpath::test
