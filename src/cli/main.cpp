// sanpath: the command-line tool. Parses arguments, calls the library,
// formats; maps every exception to one documented exit code here.
#include "common.hpp"

#include "sanpath/core/distributed.hpp"
#include "sanpath/core/errors.hpp"
#include "sanpath/core/linalg.hpp"

#include <chrono>
#include <iostream>
#include <thread>

namespace {

const char* kExitCodes =
    "Exit codes: 0 success; 1 internal error; 2 usage (bad command line); 3 input (missing or malformed file, "
    "bad shapes, NaN/Inf, out-of-range token); 4 numerical (a result could not be obtained or certified); 5 "
    "resource (path count, memory or size limit); 130 interrupted.";

/// One line, whatever the message holds: control characters are escaped.
/// Under MPI an error every rank shares (share_items) is printed by rank 0
/// and the ranks end normally; any other error may be this rank's alone:
/// it is printed (by a rank other than 0 after a moment, so that an error
/// every rank meets is printed once, by rank 0) and ends the whole job.
int fail(int code, const std::string& what) {
  const sanpath::World w = sanpath::world();
  const bool shared = w.size > 1 && sanpath::shared_error();
  if (shared && w.rank != 0) return code;  // rank 0 prints it
  const bool maybe_alone = w.size > 1 && !shared;
  if (maybe_alone && w.rank != 0) std::this_thread::sleep_for(std::chrono::seconds(2));
  const std::string where = maybe_alone && w.rank != 0 ? "rank " + std::to_string(w.rank) + ": " : "";
  std::cerr << "sanpath: error: " << where << sanpath::printable(what) << std::endl;
  if (maybe_alone) sanpath::abort_distributed(code);
  return code;
}

/// A command-line error as "<what>: <why> (see sanpath [command] --help)";
/// an unknown command is named with the list of commands.
std::string parse_error_message(const CLI::App& app, const CLI::ParseError& e, int argc, char** argv) {
  const auto parsed = app.get_subcommands();
  if (parsed.empty() && argc > 1 && argv[1][0] != '-') {
    std::string names;
    for (const CLI::App* sub : app.get_subcommands([](const CLI::App* a) { return !a->get_name().empty(); }))
      names += (names.empty() ? "" : ", ") + sub->get_name();
    return std::string(argv[1]) + ": not a sanpath command (commands: " + names + "; see sanpath --help)";
  }
  const std::string help = parsed.empty() ? "sanpath --help" : "sanpath " + parsed.front()->get_name() + " --help";
  return std::string(e.what()) + " (see " + help + ")";
}

int run(int argc, char** argv) {
  using namespace sanpath::cli;
  std::string isa;  // SANPATH_ISA is checked before anything runs
  try {
    isa = sanpath::double_products_isa();
  } catch (const std::invalid_argument& e) {
    return fail(usage, e.what());
  }
  CLI::App app{
      "sanpath: rank collapse of self-attention networks, exactly. Forward passes in any precision, the head-path "
      "decomposition and the bounds of Dong, Cordonnier & Loukas (ICML 2021) on concrete weights.",
      "sanpath"};
  app.footer(std::string("\n") + kExitCodes +
             "\n\nExamples:\n  sanpath collapse\n  sanpath forward --model ../shared/data/real-models/gpt2-capp "
             "--tokens 1,2,3,4 --skip off --mlp none --layernorm none\n");
  app.set_version_flag("--version", std::string("sanpath ") + SANPATH_VERSION + "\ndouble products: sanpath's kernel, " +
                                        isa + " (the same bits on every level; SANPATH_ISA chooses one)" +
                                        "\nmultiprecision tiers: " + sanpath::Precision::ladder_description() +
                                        "\nmultiprecision products up to 1025 bits: " +
                                        (sanpath::ifma_products_active() ? "AVX-512 IFMA kernel" : "GMP kernel") +
                                        "\nMPI: " +
                                        (sanpath::mpi_library().empty()
                                             ? std::string("not in this build (one process)")
                                             : sanpath::mpi_library() + " (mpirun -np K shares batches over K ranks)"));
  app.require_subcommand(1);
  register_collapse(app);
  register_forward(app);
  register_init(app);
  register_graph(app);
  register_paths(app);
  register_report(app);
  register_bounds(app);
  add_memory_budget_option(app);  // after every register_*: adds --memory-budget to each subcommand
  add_threads_option(app);        // and --threads
  install_interrupt_handler();
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    return fail(usage, parse_error_message(app, e, argc, argv));
  } catch (const UsageError& e) {
    return fail(usage, e.what());
  } catch (const sanpath::Interrupted& e) {
    return fail(interrupted, std::string(e.what()) + ": SIGINT received; no output was written");
  } catch (const sanpath::ResourceError& e) {
    return fail(resource, e.what());
  } catch (const std::length_error& e) {
    return fail(resource, e.what());
  } catch (const std::bad_alloc&) {
    return fail(resource, "memory: allocation failed");
  } catch (const sanpath::NumericalError& e) {
    return fail(numerical, e.what());
  } catch (const std::invalid_argument& e) {
    return fail(input, e.what());
  } catch (const std::exception& e) {
    return fail(internal, std::string("internal: ") + e.what());
  }
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  sanpath::World w;
  try {
    w = sanpath::start_distributed(&argc, &argv);
  } catch (const std::exception& e) {
    return fail(sanpath::cli::internal, e.what());
  }
  if (w.rank != 0) std::cout.rdbuf(nullptr);  // rank 0 prints what one process prints
  const int code = run(argc, argv);
  if (w.size > 1 && w.rank == 0) {
    const std::vector<std::string> notes = sanpath::distribution_notes();
    for (const std::string& note : notes) std::cerr << note << "\n";
    if (notes.empty())
      std::cerr << "mpi: " << w.size << " ranks, nothing shared: each rank ran the whole command (mpirun shares the "
                << "inputs of a batch and the path shards of paths --enumerate, --top and --sample)\n";
  }
  sanpath::finish_distributed();
  return code;
}
