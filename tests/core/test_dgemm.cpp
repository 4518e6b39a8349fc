// sanpath's double kernel (core/dgemm.hpp behind gemm<double>, gemm_nt and
// gemm_weights): every entry of C is the chain c ← fma(a_ip, b_pj, c) over
// p = 0, 1, …, k−1 from +0. The reference here is that chain written out
// with std::fma, one entry at a time; every instruction-set level this CPU
// runs, every thread count and every rounding mode must give it bit for bit.
// (test_linalg.cpp measures the same products against exact ones.)
#include "support/helpers.hpp"

#include "sanpath/core/linalg.hpp"

#include <cfenv>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

using namespace sanpath;
using Eigen::MatrixXd;

namespace {

/// Random signs and mantissas, exponents over ±`spread` binades; every
/// second row `row_scale` binades away (magnitudes that cross).
MatrixXd random_matrix(Eigen::Index rows, Eigen::Index cols, std::uint64_t seed, int spread = 0,
                       int row_scale = 0) {
  std::mt19937_64 g(seed);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  std::uniform_int_distribution<int> e(-spread, spread);
  MatrixXd m(rows, cols);
  for (Eigen::Index j = 0; j < cols; ++j)
    for (Eigen::Index i = 0; i < rows; ++i) m(i, j) = std::ldexp(u(g), e(g) + (i % 2 == 1 ? row_scale : 0));
  return m;
}

/// The chain of FMAs, entry by entry, in the calling thread's rounding mode.
MatrixXd fma_chain(const MatrixXd& A, const MatrixXd& B) {
  MatrixXd C(A.rows(), B.cols());
  for (Eigen::Index j = 0; j < B.cols(); ++j)
    for (Eigen::Index i = 0; i < A.rows(); ++i) {
      double c = 0.0;
      for (Eigen::Index p = 0; p < A.cols(); ++p) c = std::fma(A(i, p), B(p, j), c);
      C(i, j) = c;
    }
  return C;
}

/// Same bits (NaN compared as NaN: its payload is not part of the contract).
bool same_bits(const MatrixXd& a, const MatrixXd& b) {
  if (a.rows() != b.rows() || a.cols() != b.cols()) return false;
  for (Eigen::Index j = 0; j < a.cols(); ++j)
    for (Eigen::Index i = 0; i < a.rows(); ++i) {
      if (std::isnan(a(i, j)) || std::isnan(b(i, j))) {
        if (std::isnan(a(i, j)) != std::isnan(b(i, j))) return false;
        continue;
      }
      if (std::memcmp(&a(i, j), &b(i, j), sizeof(double)) != 0) return false;
    }
  return true;
}

using sanpath::test::Restore;

struct Shape {
  Eigen::Index m, k, n;
};

/// gemm, gemm_nt and gemm_weights of A (m×k) and B (k×n) at every level this
/// CPU runs and in every rounding mode, against the chain.
void check_everywhere(const MatrixXd& A, const MatrixXd& B) {
  Restore restore;
  const MatrixXd Bt = B.transpose();
  for (const int mode : {FE_TONEAREST, FE_UPWARD, FE_DOWNWARD, FE_TOWARDZERO}) {
    std::fesetround(mode);
    const MatrixXd want = fma_chain(A, B);
    for (const std::string& level : supported_double_products_isas()) {
      CAPTURE(level, mode, A.rows(), A.cols(), B.cols());
      set_double_products_isa(level);
      MatrixXd C, Cnt, Cw;
      gemm(A, B, C);
      gemm_nt(A, Bt, Cnt);
      gemm_weights(A, B, Cw);
      REQUIRE(same_bits(C, want));
      REQUIRE(same_bits(Cnt, want));
      REQUIRE(same_bits(Cw, want));
    }
  }
}

}  // namespace

TEST_CASE("the double kernel is the chain of FMAs on every level and in every rounding mode", "[dgemm]") {
  REQUIRE(!supported_double_products_isas().empty());
  REQUIRE(supported_double_products_isas().front() == "generic");
  // Odd shapes around every level's tile (4×4, 8×6, 24×8) and block (k 256,
  // m 96, n 1536) edges, and one product past each block size.
  const std::vector<Shape> shapes = {{1, 1, 1},   {3, 5, 2},    {7, 13, 9},   {25, 3, 17}, {24, 256, 8},
                                     {23, 257, 7}, {97, 300, 13}, {5, 11, 1537}, {49, 513, 50}};
  std::uint64_t seed = 3;
  for (const Shape& s : shapes) {
    seed += 2;
    check_everywhere(random_matrix(s.m, s.k, seed), random_matrix(s.k, s.n, seed + 1));
  }
  // Exponents over ±300 binades, and rows 2^600 apart: cancellation and
  // absorption happen in the chain as the reference has them.
  check_everywhere(random_matrix(30, 40, 41, 300), random_matrix(40, 11, 42, 300));
  check_everywhere(random_matrix(12, 70, 43, 4, 600), random_matrix(70, 9, 44, 4));
}

TEST_CASE("the double kernel: signed zeros, subnormals, infinities and NaN as the chain has them", "[dgemm]") {
  MatrixXd A = random_matrix(9, 10, 51), B = random_matrix(10, 7, 52);
  A(0, 3) = -0.0;
  A(1, 0) = std::numeric_limits<double>::denorm_min();
  A(2, 4) = std::numeric_limits<double>::infinity();
  B(5, 1) = -std::numeric_limits<double>::infinity();
  B(6, 2) = std::numeric_limits<double>::quiet_NaN();
  B.col(3).setZero();
  A.row(4) *= std::ldexp(1.0, -1070);  // subnormal products
  B(4, 2) = std::ldexp(1.0, 1000);
  A(5, 4) = std::ldexp(1.0, 1000);  // an overflow to infinity
  check_everywhere(A, B);
  // −0·x over a whole chain: +0 in round-to-nearest (the chain starts at +0).
  const MatrixXd negz = MatrixXd::Constant(2, 3, -0.0), ones = MatrixXd::Ones(3, 2);
  MatrixXd C;
  gemm(negz, ones, C);
  CHECK(!std::signbit(C(0, 0)));
}

TEST_CASE("the double kernel gives the same bits on 1, 2 and 3 threads", "[dgemm]") {
  Restore restore;
  // Above the split threshold (2^21 multiply-adds), by columns and by rows.
  for (const Shape& s : std::vector<Shape>{{128, 768, 300}, {700, 64, 90}}) {
    const MatrixXd A = random_matrix(s.m, s.k, 61, 3), B = random_matrix(s.k, s.n, 62, 3);
    std::vector<MatrixXd> got;
    for (const int threads : {1, 2, 3}) {
      set_product_threads(threads);
      MatrixXd C;
      gemm(A, B, C);
      got.push_back(C);
    }
    CAPTURE(s.m, s.k, s.n);
    REQUIRE(same_bits(got[0], got[1]));
    REQUIRE(same_bits(got[0], got[2]));
    set_product_threads(1);
    REQUIRE(same_bits(got[0], fma_chain(A, B)));
  }
}

TEST_CASE("the double kernel's level: named, and refused when unknown", "[dgemm]") {
  Restore restore;
  const std::vector<std::string> levels = supported_double_products_isas();
  for (const std::string& level : levels) {
    set_double_products_isa(level);
    CHECK(double_products_isa() == level);
  }
  CHECK_THROWS_WITH(set_double_products_isa("sse9"), Catch::Contains("unknown level 'sse9'"));
  if (levels.size() < 3) CHECK_THROWS_WITH(set_double_products_isa("avx512"), Catch::Contains("cannot run"));
}

namespace {

/// Stored bytes of one format and the doubles they hold, decoded here
/// independently of the library (sign, exponent and fraction by ldexp).
struct Stored {
  StoredFloat type;
  std::vector<unsigned char> bytes;
  std::vector<double> values;
};

double decode_half(std::uint16_t h) {
  const int e = (h >> 10) & 31, m = h & 0x3ff;
  const double v = e == 0 ? std::ldexp(m, -24) : std::ldexp(1024 + m, e - 25);
  return (h & 0x8000) ? -v : v;
}

/// `count` random finite elements of `type`: every sign, exponents across
/// the format's range (F16: subnormals and zeros too; F32/BF16: F32's
/// normal range narrowed to ±60 binades; F64 ±300).
Stored random_stored(StoredFloat type, std::size_t count, std::uint64_t seed) {
  std::mt19937_64 g(seed);
  Stored s{type, std::vector<unsigned char>(count * stored_size(type)), std::vector<double>(count)};
  for (std::size_t x = 0; x < count; ++x) {
    unsigned char* p = s.bytes.data() + x * stored_size(type);
    const std::uint64_t r = g();
    switch (type) {
      case StoredFloat::f16: {
        std::uint16_t h = static_cast<std::uint16_t>(r);
        if (((h >> 10) & 31) == 31) h &= 0xbfff;  // no Inf/NaN
        std::memcpy(p, &h, 2);
        s.values[x] = decode_half(h);
        break;
      }
      case StoredFloat::bf16: {
        const float f = std::ldexp(static_cast<float>(static_cast<int>(r % 255) - 127), static_cast<int>(r >> 60) - 8 -
                                                                                           static_cast<int>((r >> 40) % 50));
        std::uint32_t u;
        std::memcpy(&u, &f, 4);
        const auto h = static_cast<std::uint16_t>(u >> 16);  // f has 8 significant bits: exact in BF16
        std::memcpy(p, &h, 2);
        s.values[x] = static_cast<double>(f);
        break;
      }
      case StoredFloat::f32: {
        const float f = std::ldexp(static_cast<float>(static_cast<std::int32_t>(r) >> 8), static_cast<int>((r >> 32) % 120) - 84);
        std::memcpy(p, &f, 4);
        s.values[x] = static_cast<double>(f);
        break;
      }
      case StoredFloat::f64: {
        const double d = std::ldexp(static_cast<double>(static_cast<std::int64_t>(r) >> 11), static_cast<int>((r >> 53) % 600) - 353);
        std::memcpy(p, &d, 8);
        s.values[x] = d;
        break;
      }
    }
  }
  return s;
}

/// A view of `s` as a k×n matrix laid out as `kind` says, and the same
/// matrix decoded: "linear" (a torch Linear weight [n, k], W = Tᵀ),
/// "conv1d" ([k, n], W = T), "gather" (columns of the middle third of a
/// fused [k, 3n] tensor, scattered (stride 7) and each pair of them taken
/// twice, as the key/value heads a group of query heads shares).
struct Laid {
  std::vector<std::int64_t> rows, cols;
  MatrixXd dense;
  WeightView view(const Stored& s) const {
    return {s.bytes.data(), s.type, rows.data(), cols.data(), static_cast<Eigen::Index>(rows.size()),
            static_cast<Eigen::Index>(cols.size())};
  }
};

Laid lay_out(const Stored& s, const std::string& kind, Eigen::Index k, Eigen::Index n) {
  const auto e = static_cast<std::int64_t>(stored_size(s.type));
  Laid out;
  out.dense.resize(k, n);
  for (Eigen::Index i = 0; i < k; ++i) out.rows.push_back(kind == "linear" ? i * e : i * e * (kind == "gather" ? 3 * n : n));
  for (Eigen::Index j = 0; j < n; ++j) {
    if (kind == "linear") out.cols.push_back(j * k * e);
    else if (kind == "conv1d") out.cols.push_back(j * e);
    else out.cols.push_back((n + ((j / 4 * 2 + j % 2) * 7) % n) * e);
  }
  for (Eigen::Index j = 0; j < n; ++j)
    for (Eigen::Index i = 0; i < k; ++i)
      out.dense(i, j) = s.values[static_cast<std::size_t>((out.rows[static_cast<std::size_t>(i)] +
                                                           out.cols[static_cast<std::size_t>(j)]) / e)];
  return out;
}

}  // namespace

TEST_CASE("views of stored F64, F32, F16 and BF16 weights give the bits of their decoded matrices", "[dgemm][view]") {
  Restore restore;
  const std::vector<Shape> shapes = {{1, 1, 2}, {7, 13, 10}, {25, 257, 18}, {97, 300, 130}, {128, 96, 300}};
  std::uint64_t seed = 71;
  for (const StoredFloat type : {StoredFloat::f64, StoredFloat::f32, StoredFloat::f16, StoredFloat::bf16})
    for (const Shape& sh : shapes)
      for (const std::string kind : {"linear", "conv1d", "gather"}) {
        seed += 3;
        const Stored s = random_stored(type, static_cast<std::size_t>(sh.k * sh.n * 3), seed);
        const Laid w = lay_out(s, kind, sh.k, sh.n);
        const MatrixXd A = random_matrix(sh.m, sh.k, seed + 1, 2);
        CAPTURE(static_cast<int>(type), kind, sh.m, sh.k, sh.n);
        REQUIRE(same_bits(w.view(s).decode(), w.dense));  // the view reads what the independent decoder reads
        for (const int mode : {FE_TONEAREST, FE_UPWARD}) {
          std::fesetround(mode);
          const MatrixXd want = fma_chain(A, w.dense);
          for (const std::string& level : supported_double_products_isas())
            for (const int threads : {1, 3}) {
              CAPTURE(level, mode, threads);
              set_double_products_isa(level);
              set_product_threads(threads);
              MatrixXd C;
              gemm_weights(A, w.view(s), C);
              REQUIRE(same_bits(C, want));
            }
        }
        std::fesetround(FE_TONEAREST);
        // A multiprecision tier reads the view as the decoded matrix.
        using R = mpfr_real<19>;
        const Matrix<R> AR = convert<R>(MatrixXd(A.topRows(std::min<Eigen::Index>(A.rows(), 5))));
        Matrix<R> CR, DR;
        gemm_weights(AR, w.view(s), CR);
        gemm_weights(AR, w.dense, DR);
        REQUIRE(CR == DR);
      }
}
