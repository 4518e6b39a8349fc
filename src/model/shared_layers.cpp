#include "sanpath/model/shared_layers.hpp"

#include <algorithm>
#include <stdexcept>

namespace sanpath {

namespace {
thread_local SharedLayers::Member* current_member = nullptr;
}

SharedLayers::SharedLayers(const Model& model, int passes)
    : model_(model), next_(static_cast<std::size_t>(std::max(passes, 0)), 0),
      running_(static_cast<std::size_t>(std::max(passes, 0)), true) {
  if (passes < 1) throw std::invalid_argument("SharedLayers: needs at least one pass");
}

SharedLayers::Member::Member(SharedLayers& shared, int index)
    : shared_(shared), index_(index), previous_(current_member) {
  if (index < 0 || index >= static_cast<int>(shared.next_.size()))
    throw std::invalid_argument("SharedLayers::Member: no pass " + std::to_string(index));
  current_member = this;
}

SharedLayers::Member::~Member() {
  current_member = previous_;
  shared_.leave(index_);
}

SharedLayers::Member* SharedLayers::current(const Model& model) {
  Member* m = current_member;
  return m != nullptr && &m->shared_.model_ == &model ? m : nullptr;
}

int SharedLayers::reads() const {
  std::lock_guard<std::mutex> lock(mu_);
  return reads_;
}

void SharedLayers::drop_taken() {
  int least = -1;  // the least layer a running pass has yet to take
  for (std::size_t i = 0; i < next_.size(); ++i)
    if (running_[i]) least = least < 0 ? next_[i] : std::min(least, next_[i]);
  for (auto it = layers_.begin(); it != layers_.end() && (least < 0 || it->first < least);)
    it = it->second.reading ? std::next(it) : layers_.erase(it);
}

void SharedLayers::leave(int index) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    running_[static_cast<std::size_t>(index)] = false;
    drop_taken();
  }
  cv_.notify_all();
}

std::shared_ptr<const LayerWeights> SharedLayers::take(int index, int l, LayerForm form) {
  const auto self = static_cast<std::size_t>(index);
  std::unique_lock<std::mutex> lock(mu_);
  // In step: wait while a running pass has not yet taken layer l − 1.
  cv_.wait(lock, [&] {
    for (std::size_t i = 0; i < next_.size(); ++i)
      if (i != self && running_[i] && next_[i] < l) return false;
    return true;
  });
  auto it = layers_.find(l);
  if (it == layers_.end()) {
    it = layers_.emplace(l, Entry{}).first;
    it->second.form = form;
    ++reads_;
    lock.unlock();
    std::shared_ptr<const LayerWeights> read;
    std::exception_ptr error;
    try {
      read = model_.read_for_pass(l, form);
    } catch (...) {
      error = std::current_exception();
    }
    lock.lock();
    it = layers_.find(l);  // still there: entries being read are never dropped
    it->second.layer = std::move(read);
    it->second.error = error;
    it->second.reading = false;
    cv_.notify_all();
  } else {
    cv_.wait(lock, [&] { return !layers_.at(l).reading; });
    it = layers_.find(l);
  }
  const Entry& e = it->second;
  if (e.error) std::rethrow_exception(e.error);
  if (e.form == LayerForm::mapped && form == LayerForm::decoded && e.layer && e.layer->mapped)
    throw std::logic_error("SharedLayers: a pass asks for layer " + std::to_string(l) +
                           " decoded, another pass read it mapped");
  std::shared_ptr<const LayerWeights> out = e.layer;
  next_[self] = std::max(next_[self], l + 1);
  drop_taken();
  lock.unlock();
  cv_.notify_all();
  return out;
}

}  // namespace sanpath
