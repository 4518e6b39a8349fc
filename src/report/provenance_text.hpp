#pragma once
// The one formatter of a Provenance (analysis/provenance.hpp): the
// "precision: …" line of the text reports, the HTML report's precision
// cells, the bounds report's precision sentence, and the JSON fields
// (precision_bits, check_precision_bits, …). Each command prints the subset
// and wording its output has always had; the clauses are written here once.
// Internal (not installed).
#include "sanpath/analysis/provenance.hpp"

#include <nlohmann/json.hpp>

#include <string>

namespace sanpath::provenance_text {

/// Which command's fields and wording.
///  forward: `forward`, `collapse`, batch inputs (method, check method, ceiling).
///  paths:   `paths` (the direct pass; the pass that chose the precision).
///  bounds:  `bounds` (method, ceiling_bits).
enum class View { forward, paths, bounds };

/// A precision in bits as the reports print it (53 for native double).
long bits_of(const Precision& p);

/// JSON fields, in order: method (forward, bounds), precision_bits,
/// precision, check_precision_bits (null: no check run), check_method
/// (forward; null without a check run), tried_bits, precision_chosen_by
/// (paths), ceiling_reached, ceiling_bits (bounds; null when not recorded).
nlohmann::ordered_json json(const Provenance& p, View view);

/// The text reports' line: forward "precision: 257 bits (centred pass),
/// digits confirmed by a run at 513 bits; auto tried 257 513 bits", paths
/// "precision: 257 bits, digits confirmed by …"; bounds: the sentence
/// "measured with the direct forward pass at 257 bits, confirmed by a run at
/// 513 bits (auto tried 128, 257 bits)." (without the "precision: " label).
std::string line(const Provenance& p, View view);

/// The HTML report's cell: "centred pass at 257 bits, digits confirmed by a
/// run at 513 bits; auto tried 257 513 bits" (forward and bounds; forward
/// adds the ceiling), "257 bits, digits confirmed by …" (paths).
std::string cell(const Provenance& p, View view);

}  // namespace sanpath::provenance_text
