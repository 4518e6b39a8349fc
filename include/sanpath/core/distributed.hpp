#pragma once
/// \file distributed.hpp
/// Several processes sharing one job through MPI (Open MPI, `mpirun -np K`):
/// the same program runs on every rank, each rank computes its share of the
/// independent items of a job (the inputs of a batch), and share_items gives
/// every rank every item's bytes, so that every rank goes on with the whole
/// result and rank 0 writes exactly what one process writes. Without MPI
/// (a build without it, or a process not started by mpirun and not
/// initialised by mpi4py) the world is one process and nothing changes.
///
/// MPI is called only from the thread that initialised it, or from the
/// thread of a SharingThreadScope; work shared from any other thread runs
/// in this process alone.
///
/// \code
///   start_distributed(&argc, &argv);        // the CLI: MPI_Init under mpirun
///   const World w = world();                // {rank, size}
///   ...                                      // map_inputs shares batches
///   finish_distributed();
/// \endcode

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

namespace sanpath {

struct World {
  int rank = 0;  ///< this process, 0..size−1
  int size = 1;  ///< the processes of the job
};

/// The job this process belongs to: MPI_COMM_WORLD once MPI is initialised
/// (by start_distributed or by mpi4py) and not finalised; else {0, 1}.
World world();

/// The processes of the job on this machine (they share its cores; the
/// default thread count divides them): Open MPI's local size under MPI,
/// else 1. Callable from any thread.
int local_processes();

/// "Open MPI v4.1.4" (the MPI library this build links), or "" for a build
/// without MPI.
std::string mpi_library();

/// Initialises MPI (threads funnelled through the calling thread) when the
/// process was started by mpirun (its environment names a rank) and the
/// build has MPI; otherwise does nothing. Returns world().
World start_distributed(int* argc, char*** argv);

/// Finalises MPI when start_distributed initialised it (every rank must
/// call it, after its last shared step).
void finish_distributed();

/// Ends every process of the job at once with exit code `code` (MPI_Abort),
/// for an error that other ranks may not share. Returns only without MPI.
void abort_distributed(int code);

/// Makes the calling thread the one that shares work (share_items,
/// SharedJob) while the scope lives, in place of the thread that initialised
/// MPI. For a program that runs its work on a thread of its own while the
/// initialising thread waits (Python's bindings, under mpi4py): MPI must
/// then allow it (MPI_THREAD_SERIALIZED or MPI_THREAD_MULTIPLE, mpi4py's
/// default), else the scope changes nothing. Scopes do not nest across
/// threads: one thread at a time.
class SharingThreadScope {
 public:
  SharingThreadScope();
  ~SharingThreadScope();
  SharingThreadScope(const SharingThreadScope&) = delete;
  SharingThreadScope& operator=(const SharingThreadScope&) = delete;

 private:
  bool previous_;
};

/// The rank that computes item i of `count` (round robin: i mod size).
int owner_of(std::size_t i, int size);

/// The error of one item, as it travels between ranks: its category (the
/// exception type, which the CLI maps to an exit code) and its message.
struct ItemError {
  enum class Kind { input, resource, numerical, interrupted, length, memory, internal } kind = Kind::internal;
  std::string message;
};
/// The category and message of the exception being handled (call in a
/// catch block).
ItemError current_item_error();
/// Throws the exception that ItemError describes (std::invalid_argument for
/// input, ResourceError, NumericalError, Interrupted, std::length_error,
/// std::bad_alloc, std::runtime_error for internal).
[[noreturn]] void rethrow_item_error(const ItemError& e);

/// Runs `task(k)` for k = 0..n−1, possibly on several threads, rethrowing
/// the exception of the lowest failing k (batch.hpp's for_each_input).
using ParallelFor = std::function<void(std::size_t n, const std::function<void(std::size_t k)>& task)>;

/// Computes items 0..count−1 over the ranks of world(). One process (size
/// 1): parallel_for over every item calling compute(i), exceptions as they
/// come. Several: this rank computes the items it owns (owner_of) with
/// compute(i), which stores its result, and encode(i), which returns its
/// bytes; then receive(i, bytes) is called, in item order, for every item
/// another rank computed. When items fail, every rank throws the error of
/// the lowest failing item (as one process would) and shared_error() is
/// then true. Records a line for distribution_notes(). A call made while
/// another shared step computes its items (a batch's input running a path
/// enumeration) runs in this process alone: the ranks are then busy with
/// different items.
void share_items(std::size_t count, const ParallelFor& parallel_for, const std::function<void(std::size_t)>& compute,
                 const std::function<std::string(std::size_t)>& encode,
                 const std::function<void(std::size_t, const std::string&)>& receive);

/// One job shared over the ranks in rounds (path shards: the records of a
/// round are consumed before the next round computes, which bounds the
/// memory and lets a round use what the earlier ones found). Items are
/// numbered over the whole job and item i belongs to owner_of(i); each
/// round shares a range of them as share_items shares a batch. The job's
/// note (one line, its rounds added up) is recorded when it ends.
class SharedJob {
 public:
  /// `item` and `items`: the noun of the note ("path subtree", "path subtrees").
  SharedJob(std::string item, std::string items);
  ~SharedJob();
  SharedJob(const SharedJob&) = delete;
  SharedJob& operator=(const SharedJob&) = delete;

  /// Whether the rounds are split over several ranks (MPI running, this
  /// thread MPI's, no other shared step computing); false: every round
  /// runs parallel_for over its items in this process.
  bool distributed() const { return size_ > 1; }
  int ranks() const { return size_; }

  /// Items first..first+count−1, as share_items shares items 0..count−1.
  void round(std::size_t first, std::size_t count, const ParallelFor& parallel_for,
             const std::function<void(std::size_t)>& compute, const std::function<std::string(std::size_t)>& encode,
             const std::function<void(std::size_t, const std::string&)>& receive);

 private:
  std::string item_, items_;
  int rank_ = 0, size_ = 1;
  std::size_t count_ = 0, rounds_ = 0, exchanged_ = 0;
  std::vector<std::size_t> per_rank_;
  std::vector<double> seconds_;
};

/// True while the exception in flight was thrown by share_items on every
/// rank alike (the CLI then prints it once, on rank 0, and ends normally).
bool shared_error();

/// One line per shared job so far, e.g. "mpi: 2 ranks, 5 inputs round
/// robin (rank 0: 3 in 4.1 s, rank 1: 2 in 3.9 s)"; the CLI prints them to
/// stderr on rank 0.
std::vector<std::string> distribution_notes();

}  // namespace sanpath
