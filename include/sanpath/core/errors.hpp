#pragma once
/// \file errors.hpp
/// Error categories. Library functions throw std::invalid_argument for bad
/// input (files, shapes, values, options); the classes below mark the other
/// categories so that the CLI maps each to its documented exit code.

#include <stdexcept>
#include <string>

namespace sanpath {

/// A request exceeds a resource limit (path count, memory budget, sizes).
struct ResourceError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// A numerical failure: a result could not be obtained or certified.
struct NumericalError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// `s` with control characters escaped as \xNN (\x0a for a newline), so that
/// an error message naming a file's tensors or strings stays on one line.
std::string printable(const std::string& s);

/// The computation was interrupted (SIGINT).
struct Interrupted : std::runtime_error {
  Interrupted() : std::runtime_error("interrupted") {}
};

}  // namespace sanpath
