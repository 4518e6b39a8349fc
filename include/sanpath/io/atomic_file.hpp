#pragma once
/// \file atomic_file.hpp
/// Writes a file completely or not at all: the content goes to a temporary
/// file in the same directory, which is renamed over the target on success.

#include <string>

namespace sanpath {

/// Writes `content` to `path` atomically. Throws std::invalid_argument
/// naming the path when the directory is missing or not writable; on any
/// failure no file (partial or temporary) is left behind. Under MPI only
/// rank 0 writes (distributed.hpp); the other ranks return at once.
void write_file_atomic(const std::string& path, const std::string& content);

}  // namespace sanpath
