#pragma once
/// \file resources.hpp
/// Resource limits and interruption. Large allocations (the trace of every
/// attention matrix at high precision, enumeration buffers) are estimated
/// before any work and refused with a ResourceError when the estimate is
/// above a settable memory budget (default: 75% of the physical memory, or
/// of the container's memory limit when that is lower). A long computation
/// polls check_interrupt() between units of work (layers, heads); a SIGINT
/// handler calls request_interrupt(), which is async-signal-safe.

#include "sanpath/core/errors.hpp"

#include <cstdint>
#include <optional>
#include <string>

namespace sanpath {

// ---- memory budget -----------------------------------------------------------

/// Physical memory in bytes, lowered to the cgroup memory limit when one is
/// set; 0 when unknown.
std::uint64_t physical_memory_bytes();

/// 75% of physical_memory_bytes() (4 GiB when that is unknown).
std::uint64_t default_memory_budget();

/// Sets the process-wide budget in bytes; nullopt restores the default.
/// Thread-safe.
void set_memory_budget(std::optional<std::uint64_t> bytes);

/// The budget in force.
std::uint64_t memory_budget();

/// Parses a size: an integer or decimal number of bytes with an optional
/// unit (K, M, G, T = powers of 1024, also KiB, MiB, GiB, TiB; KB, MB, GB,
/// TB = powers of 1000; case-insensitive), or a percentage of the physical
/// memory ("50%"). Throws std::invalid_argument naming `what` for anything
/// else, for 0 and for sizes above 2^64 - 1 bytes.
std::uint64_t parse_byte_size(const std::string& text, const std::string& what = "memory budget");

/// A count or seed written in decimal (the CLI's `--seed 7`, a Python int
/// written out): its value, or std::invalid_argument "'-1' is not an integer
/// in [0, 2^64)" for anything else, for the caller to name the option.
std::uint64_t parse_uint64(const std::string& text);

/// "1.50 GiB (1610612736 bytes)"; plain "N bytes" below 1 KiB.
std::string format_bytes(std::uint64_t bytes);

/// Throws ResourceError "<what>: needs an estimated <estimate> of memory
/// (<detail>), above the memory budget of <budget> (...)" when
/// `estimate_bytes` exceeds memory_budget(). `detail` may be empty.
void require_memory(std::uint64_t estimate_bytes, const std::string& what, const std::string& detail = "");

// ---- estimates ---------------------------------------------------------------

/// Bytes held by one working scalar: 8 for native double; for an MPFR tier
/// of `bits` bits, the mpfr_t (32 bytes), its limbs with MPFR's size limb
/// and the allocator's header.
std::uint64_t scalar_bytes(bool is_mpfr, long bits);

/// a·b and a+b, saturating at 2^64 - 1 (estimates never wrap around).
std::uint64_t mul_sat(std::uint64_t a, std::uint64_t b);
std::uint64_t add_sat(std::uint64_t a, std::uint64_t b);

// ---- interruption ------------------------------------------------------------

/// Marks the computation as interrupted. Async-signal-safe (a lock-free
/// atomic store): call it from a SIGINT handler.
void request_interrupt() noexcept;
/// Clears the mark (tests; a new computation in a long-lived process).
void clear_interrupt() noexcept;
/// Whether request_interrupt() was called since the last clear_interrupt().
bool interrupt_requested() noexcept;
/// Throws sanpath::Interrupted when an interrupt was requested. Long
/// computations call it between units of work (forward: every layer and head).
void check_interrupt();

}  // namespace sanpath
