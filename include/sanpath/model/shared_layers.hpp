#pragma once
/// \file shared_layers.hpp
/// Forward passes that run at once over one streamed model (model.hpp) and
/// read each of its layers once between them: the three passes of the
/// rounding check (analysis/double_check.hpp) decode a checkpoint's layers
/// once instead of three times.
///
/// Each pass runs on a thread of its own and holds a Member for as long as
/// it runs; on that thread Model::layer_for_pass(l) takes layer l from here.
/// The first pass to ask for a layer reads it; the others get the same
/// copy. Passes keep in step: a pass asking for layer l waits until every
/// pass still running has taken layer l − 1, so at most three layers are
/// held at a time, as for one streamed pass. A pass that ends (also by an
/// exception) leaves, and the others no longer wait for it. An error
/// reading a layer is rethrown to every pass that asks for that layer.
///
/// The passes must really run at once (each started on its own thread
/// before any waits): a pass run after another has left would wait for
/// nothing, but passes run one after the other while Members of later
/// passes exist would wait for ever. Use it with run_at_once
/// (core/linalg.hpp), which says whether it could start the threads.

#include "sanpath/model/model.hpp"

#include <condition_variable>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

namespace sanpath {

class SharedLayers {
 public:
  /// For `passes` passes of `model` (streamed or not: a resident model's
  /// layers are simply handed out) run at once.
  SharedLayers(const Model& model, int passes);
  SharedLayers(const SharedLayers&) = delete;
  SharedLayers& operator=(const SharedLayers&) = delete;

  /// Pass `index` (0 ≤ index < passes) on the calling thread while alive.
  class Member {
   public:
    Member(SharedLayers& shared, int index);
    ~Member();
    Member(const Member&) = delete;
    Member& operator=(const Member&) = delete;

   private:
    friend class Model;
    friend class SharedLayers;
    SharedLayers& shared_;
    int index_;
    Member* previous_;
  };

  /// How many times a layer was read from the model's source (for tests).
  int reads() const;

 private:
  friend class Model;
  /// The Member of the calling thread for `model`, or null.
  static Member* current(const Model& model);
  /// Layer l in `form` (the first pass to ask reads it so; a mapped layer
  /// asked for decoded by another pass is a logic_error: the passes that
  /// share layers ask for the same form).
  std::shared_ptr<const LayerWeights> take(int index, int l, LayerForm form);
  void leave(int index);
  void drop_taken();  // with mu_ held

  struct Entry {
    std::shared_ptr<const LayerWeights> layer;
    std::exception_ptr error;
    bool reading = true;
    LayerForm form = LayerForm::decoded;
  };
  const Model& model_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<int> next_;       ///< per pass: the next layer it will take
  std::vector<bool> running_;   ///< per pass: not yet left
  std::map<int, Entry> layers_; ///< read, not yet taken by every running pass
  int reads_ = 0;
};

}  // namespace sanpath
