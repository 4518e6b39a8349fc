#include "sanpath/core/distributed.hpp"

#include "sanpath/core/bytes.hpp"
#include "sanpath/core/errors.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <new>
#include <optional>
#include <stdexcept>
#include <utility>

#ifdef SANPATH_HAVE_MPI
#define OMPI_SKIP_MPICXX 1  // the C API only
#include <mpi.h>
#endif

namespace sanpath {

/// ItemError's encoding (found by argument-dependent lookup, so in sanpath).
template <class A> void fields(A& a, ItemError& e) { a(e.kind, e.message); }

namespace {

std::atomic<bool> started_here{false};
std::atomic<bool> error_is_shared{false};
std::mutex notes_lock;
std::vector<std::string> notes;

/// What one rank sends: its seconds of work and, per owned item, its bytes
/// or its error. Items after a local failure are skipped (only the lowest
/// failing item counts).
struct RankShare {
  double seconds = 0;
  std::vector<std::size_t> items;
  std::vector<std::string> bytes;            ///< per item: the encoding, empty on error
  std::vector<std::optional<ItemError>> errors;
};

template <class A> void fields(A& a, RankShare& s) { a(s.seconds, s.items, s.bytes, s.errors); }

#ifdef SANPATH_HAVE_MPI
std::string seconds_text(double s) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f s", s);
  return b;
}
#endif

bool mpi_running() {
#ifdef SANPATH_HAVE_MPI
  int initialised = 0, finalised = 0;
  MPI_Initialized(&initialised);
  MPI_Finalized(&finalised);
  return initialised && !finalised;
#else
  return false;
#endif
}

/// This thread shares work in place of MPI's main thread (SharingThreadScope).
thread_local bool sharing_thread = false;

/// True when this thread may call MPI: the thread that initialised it, or a
/// SharingThreadScope's when MPI allows calls from other threads.
bool mpi_thread() {
#ifdef SANPATH_HAVE_MPI
  int main_thread = 0;
  MPI_Is_thread_main(&main_thread);
  if (main_thread != 0) return true;
  if (!sharing_thread) return false;
  int level = MPI_THREAD_SINGLE;
  MPI_Query_thread(&level);
  return level == MPI_THREAD_SERIALIZED || level == MPI_THREAD_MULTIPLE;
#else
  return false;
#endif
}

#ifdef SANPATH_HAVE_MPI
/// Every rank's bytes, in rank order.
std::vector<std::string> all_gather(const std::string& mine, int size) {
  const auto n = static_cast<unsigned long long>(mine.size());
  std::vector<unsigned long long> sizes(static_cast<std::size_t>(size));
  MPI_Allgather(&n, 1, MPI_UNSIGNED_LONG_LONG, sizes.data(), 1, MPI_UNSIGNED_LONG_LONG, MPI_COMM_WORLD);
  unsigned long long total = 0;
  for (const unsigned long long s : sizes) total += s;
  if (total > static_cast<unsigned long long>(INT_MAX))
    throw ResourceError("mpi: the results of one batch take " + std::to_string(total) +
                        " bytes, more than one exchange carries (2 GiB); split the batch");
  std::vector<int> counts(sizes.size()), displs(sizes.size());
  int at = 0;
  for (std::size_t r = 0; r < sizes.size(); ++r) {
    counts[r] = static_cast<int>(sizes[r]);
    displs[r] = at;
    at += counts[r];
  }
  std::string all(static_cast<std::size_t>(total), '\0');
  MPI_Allgatherv(mine.data(), static_cast<int>(mine.size()), MPI_BYTE, all.data(), counts.data(), displs.data(),
                 MPI_BYTE, MPI_COMM_WORLD);
  std::vector<std::string> out;
  for (std::size_t r = 0; r < sizes.size(); ++r)
    out.push_back(all.substr(static_cast<std::size_t>(displs[r]), sizes[r]));
  return out;
}
#endif

}  // namespace

World world() {
  World w;
#ifdef SANPATH_HAVE_MPI
  if (mpi_running()) {
    MPI_Comm_rank(MPI_COMM_WORLD, &w.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &w.size);
  }
#endif
  return w;
}

int local_processes() {
  if (!mpi_running()) return 1;
  static const int local = [] {
    const char* s = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
    const long v = s ? std::strtol(s, nullptr, 10) : 1;
    return v >= 1 && v <= 1 << 20 ? static_cast<int>(v) : 1;
  }();
  return local;
}

std::string mpi_library() {
#ifdef SANPATH_HAVE_MPI
  char version[MPI_MAX_LIBRARY_VERSION_STRING];
  int length = 0;
  MPI_Get_library_version(version, &length);
  std::string s(version, static_cast<std::size_t>(length));
  const std::size_t cut = s.find_first_of(",\n");  // "Open MPI v4.1.4, package: ..."
  return cut == std::string::npos ? s : s.substr(0, cut);
#else
  return "";
#endif
}

World start_distributed(int* argc, char*** argv) {
#ifdef SANPATH_HAVE_MPI
  // Open MPI's mpirun names the rank (OMPI_COMM_WORLD_RANK); PMIx launchers too.
  const bool launched = std::getenv("OMPI_COMM_WORLD_RANK") || std::getenv("PMIX_RANK") || std::getenv("PMI_RANK");
  if (launched && !mpi_running()) {
    int provided = 0;
    if (MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS)
      throw std::runtime_error("mpi: MPI_Init_thread failed");
    started_here = true;
  }
#else
  (void)argc;
  (void)argv;
#endif
  return world();
}

void finish_distributed() {
#ifdef SANPATH_HAVE_MPI
  if (started_here.exchange(false) && mpi_running()) MPI_Finalize();
#endif
}

void abort_distributed(int code) {
#ifdef SANPATH_HAVE_MPI
  if (mpi_running()) MPI_Abort(MPI_COMM_WORLD, code);
#else
  (void)code;
#endif
}

SharingThreadScope::SharingThreadScope() : previous_(sharing_thread) { sharing_thread = true; }
SharingThreadScope::~SharingThreadScope() { sharing_thread = previous_; }

int owner_of(std::size_t i, int size) { return size <= 1 ? 0 : static_cast<int>(i % static_cast<std::size_t>(size)); }

ItemError current_item_error() {
  using K = ItemError::Kind;
  try {
    throw;
  } catch (const Interrupted& e) {
    return {K::interrupted, e.what()};
  } catch (const ResourceError& e) {
    return {K::resource, e.what()};
  } catch (const NumericalError& e) {
    return {K::numerical, e.what()};
  } catch (const std::length_error& e) {
    return {K::length, e.what()};
  } catch (const std::bad_alloc& e) {
    return {K::memory, e.what()};
  } catch (const std::invalid_argument& e) {
    return {K::input, e.what()};
  } catch (const std::exception& e) {
    return {K::internal, e.what()};
  } catch (...) {
    return {K::internal, "an exception of unknown type"};
  }
}

void rethrow_item_error(const ItemError& e) {
  using K = ItemError::Kind;
  switch (e.kind) {
    case K::input: throw std::invalid_argument(e.message);
    case K::resource: throw ResourceError(e.message);
    case K::numerical: throw NumericalError(e.message);
    case K::interrupted: throw Interrupted();
    case K::length: throw std::length_error(e.message);
    case K::memory: throw std::bad_alloc();
    case K::internal: break;
  }
  throw std::runtime_error(e.message);
}

bool shared_error() { return error_is_shared.load(); }

std::vector<std::string> distribution_notes() {
  std::lock_guard<std::mutex> guard(notes_lock);
  return notes;
}

namespace {
/// Shared rounds computing their items now (on MPI's thread): a shared step
/// started meanwhile runs in its process alone.
std::atomic<int> rounds_computing{0};
}  // namespace

SharedJob::SharedJob(std::string item, std::string items) : item_(std::move(item)), items_(std::move(items)) {
  if (mpi_running() && mpi_thread() && rounds_computing.load() == 0) {
    const World w = world();
    rank_ = w.rank;
    size_ = w.size;
  }
  per_rank_.assign(static_cast<std::size_t>(size_), 0);
  seconds_.assign(static_cast<std::size_t>(size_), 0.0);
}

SharedJob::~SharedJob() {
#ifdef SANPATH_HAVE_MPI
  if (size_ <= 1 || rounds_ == 0) return;
  try {
    std::string note = "mpi: " + std::to_string(size_) + " ranks, " + std::to_string(count_) + " " +
                       (count_ == 1 ? item_ : items_) + " round robin" +
                       (rounds_ > 1 ? " in " + std::to_string(rounds_) + " rounds" : std::string()) + " (";
    for (std::size_t r = 0; r < per_rank_.size(); ++r)
      note += (r ? ", rank " : "rank ") + std::to_string(r) + ": " + std::to_string(per_rank_[r]) + " in " +
              seconds_text(seconds_[r]);
    note += "), " + std::to_string((exchanged_ + 1023) / 1024) + " KiB of results exchanged";
    std::lock_guard<std::mutex> guard(notes_lock);
    notes.push_back(note);
  } catch (...) {  // a note lost to a failed allocation is not worth a termination
  }
#endif
}

void SharedJob::round(std::size_t first, std::size_t count, const ParallelFor& parallel_for,
                      const std::function<void(std::size_t)>& compute,
                      const std::function<std::string(std::size_t)>& encode,
                      const std::function<void(std::size_t, const std::string&)>& receive) {
  if (size_ <= 1) {
    parallel_for(count, [&](std::size_t k) { compute(first + k); });
    return;
  }
#ifdef SANPATH_HAVE_MPI
  error_is_shared = false;
  RankShare mine;
  for (std::size_t i = first; i < first + count; ++i)
    if (owner_of(i, size_) == rank_) mine.items.push_back(i);
  mine.bytes.resize(mine.items.size());
  mine.errors.resize(mine.items.size());
  std::atomic<std::size_t> first_failure{mine.items.size()};
  const auto start = std::chrono::steady_clock::now();
  {
    struct Computing {
      Computing() { ++rounds_computing; }
      ~Computing() { --rounds_computing; }
    } computing;
    parallel_for(mine.items.size(), [&](std::size_t k) {
      if (k > first_failure.load()) return;  // a lower item failed here: this one cannot be the first failure
      try {
        compute(mine.items[k]);
        mine.bytes[k] = encode(mine.items[k]);
      } catch (...) {
        mine.errors[k] = current_item_error();
        std::size_t seen = first_failure.load();
        while (k < seen && !first_failure.compare_exchange_weak(seen, k)) {
        }
      }
    });
  }
  mine.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  // Items skipped after a failure travel as neither bytes nor error: drop them.
  const std::size_t keep = std::min(mine.items.size(), first_failure.load() + 1);
  mine.items.resize(keep);
  mine.bytes.resize(keep);
  mine.errors.resize(keep);

  ByteWriter writer;
  writer(mine);
  std::vector<std::string> blobs;
  try {
    blobs = all_gather(writer.bytes(), size_);
  } catch (...) {
    error_is_shared = true;  // every rank saw the same sizes
    throw;
  }
  std::vector<RankShare> shares(blobs.size());
  try {
    for (std::size_t r = 0; r < blobs.size(); ++r) {
      ByteReader reader(blobs[r]);
      reader(shares[r]);
      reader.finish();
      exchanged_ += blobs[r].size();
    }
  } catch (...) {
    error_is_shared = true;  // every rank decodes the same bytes
    throw;
  }
  ++rounds_;
  count_ += count;
  for (std::size_t r = 0; r < shares.size() && r < per_rank_.size(); ++r) {
    per_rank_[r] += shares[r].items.size();
    seconds_[r] += shares[r].seconds;
  }
  // The lowest failing item of the round, as one process would report it.
  std::optional<std::pair<std::size_t, ItemError>> failure;
  for (const RankShare& s : shares)
    for (std::size_t k = 0; k < s.items.size(); ++k)
      if (s.errors[k] && (!failure || s.items[k] < failure->first)) failure = std::make_pair(s.items[k], *s.errors[k]);
  if (failure) {
    error_is_shared = true;
    rethrow_item_error(failure->second);
  }
  std::vector<const std::string*> received(count, nullptr);
  for (std::size_t r = 0; r < shares.size(); ++r)
    if (static_cast<int>(r) != rank_)
      for (std::size_t k = 0; k < shares[r].items.size(); ++k) {
        const std::size_t i = shares[r].items[k];
        if (i >= first && i < first + count) received[i - first] = &shares[r].bytes[k];
      }
  for (std::size_t i = first; i < first + count; ++i)
    if (owner_of(i, size_) != rank_) {
      if (!received[i - first]) throw std::runtime_error("mpi: item " + std::to_string(i) + " came back from no rank");
      receive(i, *received[i - first]);
    }
#else
  (void)encode;
  (void)receive;
#endif
}

void share_items(std::size_t count, const ParallelFor& parallel_for, const std::function<void(std::size_t)>& compute,
                 const std::function<std::string(std::size_t)>& encode,
                 const std::function<void(std::size_t, const std::string&)>& receive) {
  SharedJob job("input", "inputs");
  job.round(0, count, parallel_for, compute, encode, receive);
}

}  // namespace sanpath
