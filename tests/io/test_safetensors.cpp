// The safetensors reader and writer: exact decoding of every float dtype
// (checked against hand-computed bit patterns), round trips, atomic writes,
// and one hostile file per validation rule, built byte by byte.
#include "support/helpers.hpp"

#include "io/dtypes.hpp"
#include "sanpath/io/safetensors.hpp"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

using namespace sanpath;
using sanpath::test::tmp_path;
namespace fs = std::filesystem;

namespace {

using Bytes = std::string;

/// `v` as `n` little-endian bytes (zero bytes beyond the eighth).
Bytes le(std::uint64_t v, int n) {
  Bytes b;
  for (int i = 0; i < n; ++i) b.push_back(i < 8 ? static_cast<char>((v >> (8 * i)) & 0xffu) : '\0');
  return b;
}

/// A file: 8-byte length (the header's own unless `length` is given), header, data.
std::string raw_file(const std::string& name, const std::string& header, const Bytes& data = "",
                     std::optional<std::uint64_t> length = std::nullopt) {
  const std::string path = tmp_path(name);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << le(length ? *length : header.size(), 8) << header << data;
  REQUIRE(out.good());
  return path;
}

Bytes read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// The message of the std::invalid_argument thrown by f ("" if none).
std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

/// Requires reading `path` to fail with one line "<path>: <field>...", whose
/// text also contains `detail`.
void require_rejected(const std::string& path, const std::string& field, const std::string& detail = "") {
  const std::string msg = error_of([&] { SafetensorsFile::read(path); });
  CAPTURE(path, field, detail, msg);
  REQUIRE(!msg.empty());
  REQUIRE(msg.rfind(path + ": " + field + ":", 0) == 0);
  REQUIRE(msg.find('\n') == std::string::npos);
  REQUIRE(msg.find(detail) != std::string::npos);
}

bool no_temporaries_in(const std::string& dir) {
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().filename().string().find(".tmp-") != std::string::npos) return false;
  return true;
}

std::uint64_t bits_of(double v) {
  std::uint64_t u;
  std::memcpy(&u, &v, 8);
  return u;
}

}  // namespace

TEST_CASE("F16 decodes exactly, including subnormals, infinities and NaN", "[safetensors]") {
  CHECK(decode_f16(0x3C00) == 1.0);
  CHECK(decode_f16(0xC000) == -2.0);
  CHECK(decode_f16(0x3C01) == 1.0 + std::ldexp(1.0, -10));
  CHECK(decode_f16(0x3555) == 0.333251953125);  // 1.0101010101b * 2^-2
  CHECK(decode_f16(0x7BFF) == 65504.0);          // largest finite
  CHECK(decode_f16(0x0400) == std::ldexp(1.0, -14));  // smallest normal
  CHECK(decode_f16(0x0001) == std::ldexp(1.0, -24));  // smallest subnormal
  CHECK(decode_f16(0x03FF) == 1023 * std::ldexp(1.0, -24));  // largest subnormal
  CHECK(decode_f16(0x8001) == -std::ldexp(1.0, -24));
  CHECK(decode_f16(0x0000) == 0.0);
  CHECK(!std::signbit(decode_f16(0x0000)));
  CHECK(decode_f16(0x8000) == 0.0);
  CHECK(std::signbit(decode_f16(0x8000)));
  CHECK(decode_f16(0x7C00) == std::numeric_limits<double>::infinity());
  CHECK(decode_f16(0xFC00) == -std::numeric_limits<double>::infinity());
  CHECK(std::isnan(decode_f16(0x7E00)));
  CHECK(std::isnan(decode_f16(0x7C01)));
  CHECK(std::isnan(decode_f16(0xFFFF)));
}

TEST_CASE("BF16 decodes exactly, including subnormals, infinities and NaN", "[safetensors]") {
  CHECK(decode_bf16(0x3F80) == 1.0);
  CHECK(decode_bf16(0x4049) == 3.140625);  // 1.1001001b * 2
  CHECK(decode_bf16(0xC000) == -2.0);
  CHECK(decode_bf16(0x3F81) == 1.0 + std::ldexp(1.0, -7));
  CHECK(decode_bf16(0x7F7F) == (2.0 - std::ldexp(1.0, -7)) * std::ldexp(1.0, 127));  // largest finite
  CHECK(decode_bf16(0x0080) == std::ldexp(1.0, -126));                                // smallest normal
  CHECK(decode_bf16(0x0001) == std::ldexp(1.0, -133));                                // smallest subnormal
  CHECK(decode_bf16(0x007F) == 127 * std::ldexp(1.0, -133));
  CHECK(std::signbit(decode_bf16(0x8000)));
  CHECK(decode_bf16(0x7F80) == std::numeric_limits<double>::infinity());
  CHECK(decode_bf16(0xFF80) == -std::numeric_limits<double>::infinity());
  CHECK(std::isnan(decode_bf16(0x7FC0)));
  CHECK(std::isnan(decode_bf16(0x7F81)));
}

TEST_CASE("decode_all: every F16 and BF16 bit pattern as the bit-level decoders give it", "[safetensors]") {
  // All 65,536 patterns of each (the host-order fast paths: BF16 shifted into
  // an F32, F16 re-biased into a double's bits) against decode_bf16 and
  // decode_f16, which assemble sign, exponent and fraction arithmetically.
  struct Case {
    const char* dtype;
    std::uint16_t exponent;  // the all-ones exponent: NaN or Inf
    std::function<double(std::uint16_t)> reference;
  };
  for (const Case& c : {Case{"BF16", 0x7f80, [](std::uint16_t b) { return decode_bf16(b); }},
                        Case{"F16", 0x7c00, [](std::uint16_t b) { return decode_f16(b); }}}) {
    CAPTURE(c.dtype);
    std::vector<unsigned char> bytes;
    std::vector<std::uint16_t> finite;
    for (std::uint32_t b = 0; b < 0x10000; ++b)
      if ((b & c.exponent) != c.exponent) finite.push_back(static_cast<std::uint16_t>(b));
    for (const std::uint16_t b : finite) {
      bytes.push_back(static_cast<unsigned char>(b & 0xff));
      bytes.push_back(static_cast<unsigned char>(b >> 8));
    }
    std::vector<double> out(finite.size());
    REQUIRE(io::decode_all(c.dtype, bytes.data(), finite.size(), out.data()));
    for (std::size_t i = 0; i < finite.size(); ++i) {
      CAPTURE(finite[i]);
      const double want = c.reference(finite[i]);
      REQUIRE(std::memcmp(&out[i], &want, sizeof want) == 0);  // bit for bit, signed zeros included
    }
    // The non-finite patterns decode as Inf (with its sign) or NaN, and say so.
    for (std::uint32_t b = 0; b < 0x10000; ++b) {
      if ((b & c.exponent) != c.exponent) continue;
      CAPTURE(b);
      const unsigned char one[2] = {static_cast<unsigned char>(b & 0xff), static_cast<unsigned char>(b >> 8)};
      double got = 0;
      CHECK_FALSE(io::decode_all(c.dtype, one, 1, &got));
      const double want = c.reference(static_cast<std::uint16_t>(b));
      if (std::isnan(want))
        CHECK(std::isnan(got));
      else
        CHECK(got == want);
    }
    // One NaN or Inf anywhere (here the last element) makes the whole call false.
    for (const std::uint16_t bad : {c.exponent, static_cast<std::uint16_t>(c.exponent | 0x8000),
                                    static_cast<std::uint16_t>(c.exponent | 1)}) {
      CAPTURE(bad);
      std::vector<unsigned char> b2(bytes.begin(), bytes.begin() + 2 * 1000);
      b2[2 * 999] = static_cast<unsigned char>(bad & 0xff);
      b2[2 * 999 + 1] = static_cast<unsigned char>(bad >> 8);
      std::vector<double> o2(1000);
      CHECK_FALSE(io::decode_all(c.dtype, b2.data(), 1000, o2.data()));
    }
  }
}

TEST_CASE("every dtype decodes from a hand-built file", "[safetensors]") {
  // F16 [2,2], BF16 [2], F32 [2], F64 [1], F8 x2, integers, BOOL; entries
  // listed out of data order on purpose.
  Bytes data;
  data += le(0x3C00, 2) + le(0xC000, 2) + le(0x0001, 2) + le(0x7C00, 2);  // F16   0..8
  data += le(0x3F80, 2) + le(0x4049, 2);                                  // BF16  8..12
  data += le(0x3F800000, 4) + le(0x7FC00000, 4);                          // F32   12..20 (1, NaN)
  data += le(0x400921FB54442D18ull, 8);                                   // F64   20..28 (pi)
  data += le(0x3C, 1) + le(0x7E, 1);                                      // E5M2 1, E4M3 448: 28..29, 29..30
  data += le(0xFFFFFFFFFFFFFFFFull, 8);                                   // I64 -1: 30..38
  data += le(0x80, 1) + le(0xFF, 1) + le(0x02, 1);                        // I8 -128, U8 255, BOOL: 38..41
  const std::string header =
      R"({"bf":{"dtype":"BF16","shape":[2],"data_offsets":[8,12]},)"
      R"("h":{"dtype":"F16","shape":[2,2],"data_offsets":[0,8]},)"
      R"("f":{"dtype":"F32","shape":[2],"data_offsets":[12,20]},)"
      R"("d":{"dtype":"F64","shape":[],"data_offsets":[20,28]},)"
      R"("e5":{"dtype":"F8_E5M2","shape":[1],"data_offsets":[28,29]},)"
      R"("e4":{"dtype":"F8_E4M3","shape":[1],"data_offsets":[29,30]},)"
      R"("i64":{"dtype":"I64","shape":[1],"data_offsets":[30,38]},)"
      R"("i8":{"dtype":"I8","shape":[1],"data_offsets":[38,39]},)"
      R"("u8":{"dtype":"U8","shape":[1],"data_offsets":[39,40]},)"
      R"("b":{"dtype":"BOOL","shape":[1],"data_offsets":[40,41]},)"
      R"("__metadata__":{"format":"pt"}})";
  const auto f = SafetensorsFile::read(raw_file("dtypes.safetensors", header, data));
  CHECK(f.names() == std::vector<std::string>{"h", "bf", "f", "d", "e5", "e4", "i64", "i8", "u8", "b"});
  CHECK(f.metadata().at("format") == "pt");
  const Tensor& h = f.at("h");
  CHECK(h.dtype == "F16");
  CHECK(h.shape == std::vector<std::int64_t>{2, 2});
  CHECK(h.values == std::vector<double>{1.0, -2.0, std::ldexp(1.0, -24), std::numeric_limits<double>::infinity()});
  CHECK(f.at("bf").values == std::vector<double>{1.0, 3.140625});
  CHECK(f.at("f").values[0] == 1.0);
  CHECK(std::isnan(f.at("f").values[1]));  // decoded; the Model rejects it
  CHECK(f.at("d").shape.empty());
  CHECK(f.at("d").numel() == 1);
  CHECK(bits_of(f.at("d").values.at(0)) == 0x400921FB54442D18ull);
  CHECK(f.at("e5").values[0] == 1.0);
  CHECK(f.at("e4").values[0] == 448.0);
  CHECK(f.at("i64").values[0] == -1.0);
  CHECK(f.at("i8").values[0] == -128.0);
  CHECK(f.at("u8").values[0] == 255.0);
  CHECK(f.at("b").values[0] == 1.0);
  CHECK(f.find("nope") == nullptr);
  const std::string msg = error_of([&] { f.at("nope"); });
  CHECK(msg.find("dtypes.safetensors: nope:") != std::string::npos);
}

TEST_CASE("dtypes the format has and sanpath cannot decode are read past, refused when decoded",
          "[safetensors]") {
  // F8_E8M0 [2] (2 bytes), F4 [4] (2 bytes), C64 [1] (8 bytes), then F32 [1].
  const Bytes data = le(0x7F80, 2) + le(0x1234, 2) + le(0, 8) + le(0x3F800000, 4);
  const std::string header =
      R"({"scales":{"dtype":"F8_E8M0","shape":[2],"data_offsets":[0,2]},)"
      R"("packed":{"dtype":"F4","shape":[4],"data_offsets":[2,4]},)"
      R"("z":{"dtype":"C64","shape":[1],"data_offsets":[4,12]},)"
      R"("w":{"dtype":"F32","shape":[1],"data_offsets":[12,16]}})";
  const std::string path = raw_file("undecoded.safetensors", header, data);
  const SafetensorsMap map = SafetensorsMap::open(path);
  REQUIRE(map.tensors().size() == 4);
  double w = 0;
  map.decode(*map.find("w"), 0, 1, &w);
  CHECK(w == 1.0);
  for (const char* name : {"scales", "packed", "z"}) {
    CAPTURE(name);
    std::vector<double> out(4);
    const TensorInfo& t = *map.find(name);
    const std::string msg = error_of([&] { map.decode(t, 0, 1, out.data()); });
    CHECK(msg.rfind(path + ": " + name + ": dtype " + t.dtype + " cannot be decoded", 0) == 0);
    CHECK(error_of([&] { map.decode_finite(t, 0, 1, out.data()); }) == msg);
  }
  // Reading every tensor decodes them: refused, naming the tensor.
  require_rejected(path, "scales", "dtype F8_E8M0 cannot be decoded");
  // Their byte ranges are checked as any other's.
  require_rejected(raw_file("e8m0_bytes.safetensors", R"({"s":{"dtype":"F8_E8M0","shape":[3],"data_offsets":[0,2]}})",
                            le(0, 2)),
                   "s.data_offsets", "needs 3");
  require_rejected(raw_file("f4_odd.safetensors", R"({"s":{"dtype":"F4","shape":[3],"data_offsets":[0,2]}})", le(0, 2)),
                   "s.shape", "12 bits, not whole bytes");
}

TEST_CASE("write then read is an exact round trip", "[safetensors]") {
  std::vector<Tensor> ts(5);
  ts[0] = {"layer.w", "F64", {2, 3}, {1.0 / 3, -0.0, 1e-310, -7e300, M_PI, std::nextafter(1.0, 2.0)}};
  ts[1] = {"layer.b", "", {3}, {0.1, 0.2, 0.3}};  // "" = F64
  ts[2] = {"f32", "F32", {2}, {0.5, 1.0 / 3}};   // 1/3 rounds to nearest float
  ts[3] = {"scalar", "F64", {}, {42.0}};
  ts[4] = {"empty", "F32", {0, 3}, {}};
  const std::map<std::string, std::string> meta{{"format", "pt"}, {"note", "ünïcode \"quoted\""}};
  const std::string path = tmp_path("roundtrip.safetensors");
  write_safetensors(path, ts, meta);
  CHECK(no_temporaries_in(tmp_path("")));

  const Bytes bytes = read_bytes(path);
  std::uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= static_cast<std::uint64_t>(static_cast<unsigned char>(bytes[i])) << (8 * i);
  CHECK(n % 8 == 0);
  CHECK(bytes[8] == '{');
  CHECK(bytes.size() == 8 + n + (6 + 3 + 1) * 8 + 2 * 4);

  const auto f = SafetensorsFile::read(path);
  CHECK(f.names() == std::vector<std::string>{"layer.w", "layer.b", "f32", "scalar", "empty"});
  CHECK(f.metadata() == meta);
  for (std::size_t i : {0u, 1u, 3u}) {
    CAPTURE(ts[i].name);
    const Tensor& t = f.at(ts[i].name);
    CHECK(t.dtype == "F64");
    CHECK(t.shape == ts[i].shape);
    REQUIRE(t.values.size() == ts[i].values.size());
    for (std::size_t k = 0; k < t.values.size(); ++k) CHECK(bits_of(t.values[k]) == bits_of(ts[i].values[k]));
  }
  CHECK(f.at("f32").dtype == "F32");
  CHECK(f.at("f32").values == std::vector<double>{0.5, static_cast<double>(1.0f / 3.0f)});
  CHECK(f.at("empty").shape == std::vector<std::int64_t>{0, 3});
  CHECK(f.at("empty").values.empty());

  // No tensors, no metadata: still a valid file.
  write_safetensors(tmp_path("nothing.safetensors"), {}, {});
  CHECK(SafetensorsFile::read(tmp_path("nothing.safetensors")).tensors().empty());
}

TEST_CASE("the writer is atomic and rejects bad input, naming the file", "[safetensors]") {
  const std::string path = tmp_path("atomic.safetensors");
  write_safetensors(path, {{"a", "F64", {1}, {1.0}}});
  const Bytes before = read_bytes(path);

  const auto rejected = [&](const std::vector<Tensor>& ts, const std::string& field) {
    const std::string msg = error_of([&] { write_safetensors(path, ts); });
    CAPTURE(msg, field);
    CHECK(msg.rfind(path + ": " + field + ":", 0) == 0);
  };
  rejected({{"a", "F64", {2}, {1.0}}}, "a.shape");
  rejected({{"a", "F64", {1}, {1.0}}, {"a", "F64", {1}, {2.0}}}, "a");
  rejected({{"__metadata__", "F64", {1}, {1.0}}}, "__metadata__");
  rejected({{"", "F64", {1}, {1.0}}}, "tensor name");
  rejected({{"a", "F16", {1}, {1.0}}}, "a.dtype");
  rejected({{"a", "F64", {-1}, {}}}, "a.shape");
  CHECK(read_bytes(path) == before);  // the old file is untouched
  CHECK(no_temporaries_in(tmp_path("")));

  const std::string nowhere = tmp_path("no-such-dir/x.safetensors");
  const std::string msg = error_of([&] { write_safetensors(nowhere, {{"a", "F64", {1}, {1.0}}}); });
  CAPTURE(msg);
  CHECK(msg.rfind(nowhere + ": ", 0) == 0);
  CHECK(!fs::exists(tmp_path("no-such-dir")));
}

TEST_CASE("the file itself: missing, a directory, too short, bad header length", "[safetensors][errors]") {
  require_rejected(tmp_path("does-not-exist.safetensors"), "file", "does not exist");
  require_rejected(tmp_path(""), "file", "directory");
  {
    const std::string path = tmp_path("short.safetensors");
    std::ofstream(path, std::ios::binary) << "\x02\0\0\0";
    require_rejected(path, "header length", "fewer than the 8-byte");
  }
  require_rejected(raw_file("len_past_end.safetensors", "{}", "", 1000), "header length", "exceeds");
  require_rejected(raw_file("len_huge.safetensors", "{}", "", 200'000'000ull), "header length", "100 MB");
  require_rejected(raw_file("len_max.safetensors", "{}", "", ~0ull), "header length", "100 MB");
}

TEST_CASE("the header: JSON, object, metadata", "[safetensors][errors]") {
  require_rejected(raw_file("h_empty.safetensors", ""), "header", "not a JSON object");
  require_rejected(raw_file("h_array.safetensors", "[1, 2]"), "header", "not a JSON object");
  require_rejected(raw_file("h_broken.safetensors", R"({"a": )"), "header", "not valid JSON");
  require_rejected(raw_file("h_trailing.safetensors", R"({} x)"), "header", "not valid JSON");
  require_rejected(raw_file("h_nul.safetensors", std::string("{\0}", 3)), "header", "not valid JSON");
  require_rejected(raw_file("m_number.safetensors", R"({"__metadata__": 3})"), "__metadata__", "object of strings");
  require_rejected(raw_file("m_list.safetensors", R"({"__metadata__": ["a"]})"), "__metadata__", "object of strings");
  require_rejected(raw_file("m_value.safetensors", R"({"__metadata__": {"ok": "x", "bad": 1}})"), "__metadata__.bad",
                   "must be a string");
  require_rejected(raw_file("m_twice.safetensors", R"({"__metadata__": {}, "__metadata__": {}})"), "__metadata__",
                   "more than once");
  // Padding with spaces is allowed; an empty header object is a valid file.
  CHECK(SafetensorsFile::read(raw_file("h_padded.safetensors", "{}      ")).tensors().empty());
}

TEST_CASE("tensor entries: object, dtype, shape", "[safetensors][errors]") {
  const auto one = [](const std::string& name, const std::string& entry, const Bytes& data = le(0, 4)) {
    return raw_file(name, R"({"t": )" + entry + "}", data);
  };
  require_rejected(one("e_number.safetensors", "5"), "t", "must be an object");
  require_rejected(one("e_list.safetensors", R"(["F32", [1], [0, 4]])"), "t", "must be an object");
  require_rejected(raw_file("e_noname.safetensors", R"({"": {"dtype":"F32","shape":[1],"data_offsets":[0,4]}})",
                            le(0, 4)),
                   "tensor name", "empty");
  require_rejected(one("d_missing.safetensors", R"({"shape":[1],"data_offsets":[0,4]})"), "t.dtype", "missing");
  require_rejected(one("d_number.safetensors", R"({"dtype":32,"shape":[1],"data_offsets":[0,4]})"), "t.dtype",
                   "must be a string");
  require_rejected(one("d_unknown.safetensors", R"({"dtype":"F65","shape":[1],"data_offsets":[0,4]})"), "t.dtype",
                   "unknown dtype 'F65'");
  require_rejected(one("d_lower.safetensors", R"({"dtype":"f32","shape":[1],"data_offsets":[0,4]})"), "t.dtype",
                   "unknown dtype");
  require_rejected(one("s_missing.safetensors", R"({"dtype":"F32","data_offsets":[0,4]})"), "t.shape", "missing");
  require_rejected(one("s_number.safetensors", R"({"dtype":"F32","shape":1,"data_offsets":[0,4]})"), "t.shape",
                   "list of non-negative integers");
  require_rejected(one("s_negative.safetensors", R"({"dtype":"F32","shape":[-1],"data_offsets":[0,4]})"), "t.shape",
                   "list of non-negative integers");
  require_rejected(one("s_float.safetensors", R"({"dtype":"F32","shape":[1.0],"data_offsets":[0,4]})"), "t.shape",
                   "list of non-negative integers");
  require_rejected(one("s_string.safetensors", R"({"dtype":"F32","shape":["1"],"data_offsets":[0,4]})"), "t.shape",
                   "list of non-negative integers");
  require_rejected(one("s_nested.safetensors", R"({"dtype":"F32","shape":[[1]],"data_offsets":[0,4]})"), "t.shape",
                   "list of non-negative integers");
  require_rejected(one("s_toobig.safetensors", R"({"dtype":"F32","shape":[18446744073709551615],"data_offsets":[0,4]})"),
                   "t.shape", "too large");
  require_rejected(one("s_overflow.safetensors",
                       R"({"dtype":"F32","shape":[4294967296,4294967296,4],"data_offsets":[0,4]})"),
                   "t.shape", "element count overflows");
  require_rejected(one("s_bytes.safetensors", R"({"dtype":"F64","shape":[4611686018427387904],"data_offsets":[0,4]})"),
                   "t.shape", "byte size overflows");
  // A zero dimension makes the count 0 even beside huge ones.
  const auto f = SafetensorsFile::read(
      raw_file("s_zero.safetensors", R"({"t":{"dtype":"F64","shape":[4294967296,0,4294967296],"data_offsets":[0,0]}})"));
  CHECK(f.at("t").values.empty());
}

TEST_CASE("data_offsets: form, size, bounds, coverage", "[safetensors][errors]") {
  const auto one = [](const std::string& name, const std::string& offsets, const Bytes& data = le(0, 8)) {
    return raw_file(name, R"({"t": {"dtype":"F32","shape":[2],"data_offsets":)" + offsets + "}}", data);
  };
  require_rejected(raw_file("o_missing.safetensors", R"({"t": {"dtype":"F32","shape":[2]}})", le(0, 8)),
                   "t.data_offsets", "missing");
  require_rejected(one("o_number.safetensors", "8"), "t.data_offsets", "[begin, end]");
  require_rejected(one("o_one.safetensors", "[0]"), "t.data_offsets", "[begin, end]");
  require_rejected(one("o_three.safetensors", "[0, 4, 8]"), "t.data_offsets", "[begin, end]");
  require_rejected(one("o_reversed.safetensors", "[8, 0]"), "t.data_offsets", "[begin, end]");
  require_rejected(one("o_negative.safetensors", "[-8, 0]"), "t.data_offsets", "[begin, end]");
  require_rejected(one("o_float.safetensors", "[0, 8.0]"), "t.data_offsets", "[begin, end]");
  require_rejected(one("o_size.safetensors", "[0, 12]", le(0, 12)), "t.data_offsets", "needs 8");
  require_rejected(one("o_beyond.safetensors", "[8, 16]"), "t.data_offsets", "beyond the data section");
  require_rejected(one("o_gap_start.safetensors", "[4, 12]", le(0, 12)), "t.data_offsets", "covered by no tensor");
  require_rejected(one("o_tail.safetensors", "[0, 8]", le(0, 12)), "data section", "4 trailing bytes");

  const std::string two = R"({"a": {"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                          R"( "b": {"dtype":"F32","shape":[2],"data_offsets":)";
  require_rejected(raw_file("o_overlap.safetensors", two + "[4,12]}}", le(0, 12)), "b.data_offsets", "overlaps a");
  require_rejected(raw_file("o_same.safetensors", two + "[0,8]}}", le(0, 8)), "b.data_offsets", "overlaps a");
  require_rejected(raw_file("o_gap.safetensors", two + "[12,20]}}", le(0, 20)), "b.data_offsets",
                   "bytes [8, 12)");
  // Zero-size tensors may sit at a boundary, not inside another tensor.
  CHECK_NOTHROW(SafetensorsFile::read(raw_file(
      "o_zero_ok.safetensors",
      R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"z":{"dtype":"F32","shape":[0],"data_offsets":[8,8]}})",
      le(0, 8))));
  require_rejected(raw_file("o_zero_inside.safetensors",
                            R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                            R"("z":{"dtype":"F32","shape":[0],"data_offsets":[4,4]}})",
                            le(0, 8)),
                   "z.data_offsets", "overlaps a");
}

TEST_CASE("duplicates are detected although nlohmann keeps only one", "[safetensors][errors]") {
  const std::string entry = R"({"dtype":"F32","shape":[1],"data_offsets":[0,4]})";
  require_rejected(raw_file("dup_tensor.safetensors", R"({"t": )" + entry + R"(, "t": )" + entry + "}", le(0, 4)), "t",
                   "duplicate tensor name");
  require_rejected(raw_file("dup_key.safetensors",
                            R"({"t": {"dtype":"F32","dtype":"F64","shape":[1],"data_offsets":[0,4]}})", le(0, 4)),
                   "t.dtype", "duplicate key");
  require_rejected(raw_file("dup_meta.safetensors", R"({"__metadata__": {"k":"a","k":"b"}})"), "__metadata__.k",
                   "duplicate key");
}

TEST_CASE("a truncated data section is reported with the tensor that needs it", "[safetensors][errors]") {
  const std::string path = tmp_path("truncated.safetensors");
  write_safetensors(path, {{"a", "F64", {2}, {1.0, 2.0}}, {"b", "F64", {3}, {3.0, 4.0, 5.0}}});
  Bytes bytes = read_bytes(path);
  bytes.resize(bytes.size() - 3);
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
  require_rejected(path, "b.data_offsets", "truncated");
}

TEST_CASE("messages stay on one line whatever the names contain", "[safetensors][errors]") {
  const std::string path =
      raw_file("newline_name.safetensors", "{\"bad\\nname\": {\"dtype\":\"X\",\"shape\":[1],\"data_offsets\":[0,4]}}",
               le(0, 4));
  require_rejected(path, "bad\\x0aname.dtype", "unknown dtype");
}
