#pragma once
/// \file serialize.hpp
/// Analysis results as bytes, for results that travel between MPI ranks
/// (core/distributed.hpp): the result of one input of a batch, computed on
/// one rank, is encoded there, sent, and decoded on every other, so that any
/// rank formats it byte for byte as the one process that computed it would.
/// The encoding is exact, bit for bit (core/bytes.hpp): every BigReal with
/// its precision and its exact significand, doubles by their bits, every
/// member of every struct (src/analysis/serialize.cpp names them all), so
/// to_bytes(decoded) == to_bytes(original). It is meant for ranks of one
/// build on one kind of machine, not for files: it has no version.
///
/// \code
///   const ForwardAnalysis a = analyze_forward(model, variant, input, request);
///   const std::string bytes = to_bytes(a);  // send to the other ranks
///   ForwardAnalysis back;
///   from_bytes(bytes, back);                // format_forward(back, …) == format_forward(a, …)
/// \endcode
///
/// from_bytes throws std::runtime_error when the bytes end early, hold
/// bytes after the value, or hold an impossible value or another type's
/// encoding (each encoding begins with the name of its type); `out` is then
/// unchanged.

#include <string>
#include <string_view>

namespace sanpath {

// Declared, not included: batch.hpp includes this header (map_inputs), and
// rerun.hpp, which defines RerunReport, includes batch.hpp.
struct ForwardAnalysis;
struct CollapseResult;
struct LengthSumsReport;
struct BoundsAnalysis;
struct EffectivenessReport;
struct RerunReport;

std::string to_bytes(const ForwardAnalysis& x);
std::string to_bytes(const CollapseResult& x);
std::string to_bytes(const LengthSumsReport& x);
std::string to_bytes(const BoundsAnalysis& x);
std::string to_bytes(const EffectivenessReport& x);
std::string to_bytes(const RerunReport& x);

void from_bytes(std::string_view bytes, ForwardAnalysis& out);
void from_bytes(std::string_view bytes, CollapseResult& out);
void from_bytes(std::string_view bytes, LengthSumsReport& out);
void from_bytes(std::string_view bytes, BoundsAnalysis& out);
void from_bytes(std::string_view bytes, EffectivenessReport& out);
void from_bytes(std::string_view bytes, RerunReport& out);

}  // namespace sanpath
