// SharedLayers: passes run at once over one streamed model read each layer
// once between them, stay in step (no pass takes layer l before every
// running pass has taken l − 1), give the passes of the model read pass by
// pass, and neither hang nor lose an error when a pass stops or a read fails.
#include "support/counting_source.hpp"

#include "sanpath/compute/forward.hpp"
#include "sanpath/model/random.hpp"
#include "sanpath/model/shared_layers.hpp"

#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>

using namespace sanpath;
using sanpath::test::CountingSource;
using sanpath::test::streamed_copy;

namespace {

Model small_model(int layers) {
  RandomModelSpec s;
  s.arch = {layers, 2, 16, 8, 8, 32, Variant{true, MlpKind::residual, LayerNormKind::post, MaskKind::none},
            Activation::gelu, 1e-12, false};
  s.seed = 3;
  return random_model(s);
}

Matrix<double> input_for(const Model& m, std::uint64_t seed) {
  RandomInputSpec r;
  r.n = 5;
  r.d = m.arch().d_model;
  r.seed = seed;
  return random_input(r);
}

}  // namespace

TEST_CASE("passes at once read each layer once, in step, with the passes' own results") {
  const int L = 9, passes = 3;
  const Model whole = small_model(L);
  const auto source = std::make_shared<CountingSource>(whole);
  const Model streamed = streamed_copy(whole, source);
  const Variant v = whole.arch().variant;
  SharedLayers shared(streamed, passes);
  std::vector<ForwardTrace<double>> traces(passes);
  std::vector<std::atomic<int>> taken(passes);  // per pass: layers it has taken
  for (auto& t : taken) t = 0;
  std::atomic<int> out_of_step{0};
  std::vector<std::thread> threads;
  for (int p = 0; p < passes; ++p)
    threads.emplace_back([&, p] {
      SharedLayers::Member member(shared, p);
      ForwardOptions o;
      o.on_layer = [&](int l, int) {
        // Layer l − 1 (0-based) was taken: no pass may be two layers behind it.
        taken[static_cast<std::size_t>(p)] = l;
        for (int q = 0; q < passes; ++q)
          if (taken[static_cast<std::size_t>(q)] < l - 2) ++out_of_step;
        // The last pass is slow: the others must wait for it, not run ahead.
        if (p == passes - 1) std::this_thread::sleep_for(std::chrono::milliseconds(15));
      };
      traces[static_cast<std::size_t>(p)] = forward<double>(streamed, v, input_for(whole, 10 + p), o);
    });
  for (std::thread& t : threads) t.join();
  CHECK(source->reads == L);
  CHECK(shared.reads() == L);
  CHECK(out_of_step == 0);
  for (int p = 0; p < passes; ++p) {
    const ForwardTrace<double> alone = forward<double>(whole, v, input_for(whole, 10 + p));
    for (std::size_t l = 0; l < alone.X.size(); ++l) CHECK(traces[static_cast<std::size_t>(p)].X[l] == alone.X[l]);
  }
  // Outside a Member the model reads its layers as before.
  source->reads = 0;
  (void)forward<double>(streamed, v, input_for(whole, 1));
  CHECK(source->reads == L);
}

TEST_CASE("a pass that stops early lets the others finish") {
  const int L = 8;
  const Model whole = small_model(L);
  const auto source = std::make_shared<CountingSource>(whole);
  const Model streamed = streamed_copy(whole, source);
  const Variant v = whole.arch().variant;
  SharedLayers shared(streamed, 3);
  std::atomic<int> finished{0};
  std::vector<std::thread> threads;
  for (int p = 0; p < 3; ++p)
    threads.emplace_back([&, p] {
      SharedLayers::Member member(shared, p);
      ForwardOptions o;
      if (p == 1)
        o.on_layer = [](int l, int) {
          if (l == 2) throw std::runtime_error("stopped");
        };
      try {
        (void)forward<double>(streamed, v, input_for(whole, 1), o);
        ++finished;
      } catch (const std::runtime_error&) {
      }
    });
  for (std::thread& t : threads) t.join();  // would hang if the others waited for pass 1
  CHECK(finished == 2);
  CHECK(shared.reads() == L);
}

TEST_CASE("a layer that cannot be read fails every pass that asks for it, with its message") {
  const Model whole = small_model(4);
  const auto source = std::make_shared<CountingSource>(whole, 2);
  const Model streamed = streamed_copy(whole, source);
  SharedLayers shared(streamed, 3);
  std::mutex mu;
  std::vector<std::string> errors;
  std::vector<std::thread> threads;
  for (int p = 0; p < 3; ++p)
    threads.emplace_back([&, p] {
      SharedLayers::Member member(shared, p);
      try {
        (void)forward<double>(streamed, whole.arch().variant, input_for(whole, 1));
      } catch (const std::invalid_argument& e) {
        std::lock_guard<std::mutex> lock(mu);
        errors.emplace_back(e.what());
      }
    });
  for (std::thread& t : threads) t.join();
  REQUIRE(errors.size() == 3);
  for (const std::string& e : errors) CHECK(e == "layers.2: bad data");
  CHECK(source->reads == 3);  // layers 0, 1 and the failing 2, each once
}

TEST_CASE("SharedLayers refuses nonsense") {
  const Model whole = small_model(2);
  CHECK_THROWS_AS(SharedLayers(whole, 0), std::invalid_argument);
  SharedLayers shared(whole, 2);
  CHECK_THROWS_AS(SharedLayers::Member(shared, 2), std::invalid_argument);
}
