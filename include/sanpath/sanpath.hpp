#pragma once
/// \file sanpath.hpp
/// Everything the library offers, in the order data flows through it:
/// core (scalars, precision tiers, kernels, quantities, errors, resources) →
/// model (architecture, weights, variants, inputs) → io (checkpoints) →
/// compute (forward passes, norms, paths, bounds) → analysis (precision
/// choice and confirmation, structured results) → report (text, JSON, CSV,
/// HTML). Include a single header instead to keep compile times short.

#include "sanpath/core/ball.hpp"
#include "sanpath/core/bytes.hpp"
#include "sanpath/core/distributed.hpp"
#include "sanpath/core/errors.hpp"
#include "sanpath/core/linalg.hpp"
#include "sanpath/core/quantity.hpp"
#include "sanpath/core/resources.hpp"
#include "sanpath/core/scalar.hpp"
#include "sanpath/model/input.hpp"
#include "sanpath/model/layer_source.hpp"
#include "sanpath/model/model.hpp"
#include "sanpath/model/random.hpp"
#include "sanpath/io/atomic_file.hpp"
#include "sanpath/io/checkpoint.hpp"
#include "sanpath/io/inputs.hpp"
#include "sanpath/io/safetensors.hpp"
#include "sanpath/compute/bounds.hpp"
#include "sanpath/compute/embed.hpp"
#include "sanpath/compute/emulate.hpp"
#include "sanpath/compute/enclosure.hpp"
#include "sanpath/compute/forward.hpp"
#include "sanpath/compute/forward_centred.hpp"
#include "sanpath/compute/measures.hpp"
#include "sanpath/compute/norms.hpp"
#include "sanpath/compute/path_graph.hpp"
#include "sanpath/compute/paths.hpp"
#include "sanpath/compute/rerun.hpp"
#include "sanpath/analysis/batch.hpp"
#include "sanpath/analysis/bounds.hpp"
#include "sanpath/analysis/collapse.hpp"
#include "sanpath/analysis/certified.hpp"
#include "sanpath/analysis/confirmation.hpp"
#include "sanpath/analysis/forward.hpp"
#include "sanpath/analysis/paths.hpp"
#include "sanpath/analysis/provenance.hpp"
#include "sanpath/analysis/search.hpp"
#include "sanpath/analysis/serialize.hpp"
#include "sanpath/report/format.hpp"
#include "sanpath/report/html_report.hpp"
#include "sanpath/report/svg_plot.hpp"
