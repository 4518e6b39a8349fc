// sanpath: the command-line tool. Parses arguments, calls the library,
// formats; maps every exception to one documented exit code here.
#include "common.hpp"

#include "sanpath/errors.hpp"

#include <iostream>

namespace {

const char* kExitCodes =
    "Exit codes: 0 success; 1 internal error; 2 usage (bad command line); 3 input (missing or malformed file, "
    "bad shapes, NaN/Inf, out-of-range token); 4 numerical (a result could not be obtained or certified); 5 "
    "resource (path count, memory or size limit); 130 interrupted.";

int fail(int code, const std::string& what) {
  std::cerr << "sanpath: error: " << what << "\n";
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace sanpath::cli;
  CLI::App app{
      "sanpath: rank collapse of self-attention networks, exactly. Forward passes in any precision, the head-path "
      "decomposition and the bounds of Dong, Cordonnier & Loukas (ICML 2021) on concrete weights.",
      "sanpath"};
  app.footer(std::string("\n") + kExitCodes +
             "\n\nExamples:\n  sanpath collapse\n  sanpath forward --model ../shared/data/real-models/gpt2-capp "
             "--tokens 1,2,3,4 --skip off --mlp none --layernorm none\n");
  app.set_version_flag("--version", std::string("sanpath ") + SANPATH_VERSION);
  app.require_subcommand(1);
  register_collapse(app);
  register_forward(app);
  register_init(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    return fail(usage, std::string(e.what()) + " (see sanpath --help)");
  } catch (const UsageError& e) {
    return fail(usage, e.what());
  } catch (const sanpath::Interrupted& e) {
    return fail(interrupted, e.what());
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
