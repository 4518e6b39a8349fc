// Images for a ViT model (io/image.hpp): decoding with libpng and libjpeg,
// PIL's convert("RGB") and Image.resize, HuggingFace's rescale and
// normalize. The decoders report errors by longjmp: each runs in a function
// whose locals are plain C data, and hands its pixels to C++ afterwards.
// Compiled outside the unity batches (CMakeLists.txt): setjmp and the C
// libraries' headers stay in this translation unit.
#include "sanpath/io/image.hpp"

#include "hf_config.hpp"

#include <algorithm>
#include <cmath>
#include <csetjmp>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <stdexcept>

#include <jpeglib.h>
#include <png.h>

namespace sanpath {

namespace image_io {  // this file's pieces

[[noreturn]] void fail_image(const std::string& path, const std::string& why) {
  io::fail(path, "image", why);
}

/// Decoded 8-bit samples: height rows of width × channels bytes (1 grey,
/// 2 grey + alpha, 3 RGB, 4 RGBA), owned by malloc.
struct RawPixels {
  unsigned width = 0, height = 0;
  int channels = 0;
  unsigned char* data = nullptr;
  bool unsupported = false;  ///< a readable file of a kind not supported (`message` says which)
  char message[JMSG_LENGTH_MAX > 256 ? JMSG_LENGTH_MAX : 256] = {};
};

void png_fail(png_structp png, png_const_charp message) {
  auto* raw = static_cast<RawPixels*>(png_get_error_ptr(png));
  std::snprintf(raw->message, sizeof raw->message, "%s", message);
  png_longjmp(png, 1);
}
void png_quiet(png_structp, png_const_charp) {}

/// libpng with the transformations that give PIL's 8-bit samples: palettes
/// expanded (transparency becomes an alpha channel, dropped later), grey of
/// 1, 2 or 4 bits scaled to 8 (bit replication, as PIL's L;2 and L;4
/// unpackers), 16-bit samples cut to their high byte (as PIL's ;16B
/// unpackers), no gamma. Returns false with raw->message on error.
bool decode_png(std::FILE* file, RawPixels* raw) {
  png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, raw, png_fail, png_quiet);
  if (!png) {
    std::snprintf(raw->message, sizeof raw->message, "out of memory");
    return false;
  }
  png_infop info = png_create_info_struct(png);
  png_bytep* volatile rows = nullptr;
  if (!info || setjmp(png_jmpbuf(png))) {
    png_destroy_read_struct(&png, info ? &info : nullptr, nullptr);
    std::free(rows);
    std::free(raw->data);
    raw->data = nullptr;
    if (!raw->message[0]) std::snprintf(raw->message, sizeof raw->message, "out of memory");
    return false;
  }
  png_init_io(png, file);
  png_read_info(png, info);
  const int depth = png_get_bit_depth(png, info);
  const int color = png_get_color_type(png, info);
  if (color == PNG_COLOR_TYPE_GRAY && depth == 16) {
    raw->unsupported = true;
    png_error(png, "16-bit grey PNG: PIL reads it as mode I and clips it to 255 in convert(\"RGB\"); not supported");
  }
  if (color == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png);
  if (color == PNG_COLOR_TYPE_GRAY && depth < 8) png_set_expand_gray_1_2_4_to_8(png);
  if (depth == 16) png_set_strip_16(png);
  png_set_interlace_handling(png);
  png_read_update_info(png, info);
  raw->width = png_get_image_width(png, info);
  raw->height = png_get_image_height(png, info);
  raw->channels = png_get_channels(png, info);
  const std::size_t stride = png_get_rowbytes(png, info);
  if (stride != static_cast<std::size_t>(raw->width) * static_cast<std::size_t>(raw->channels))
    png_error(png, "unexpected row layout after conversion to 8 bits");
  raw->data = static_cast<unsigned char*>(std::malloc(stride * raw->height));
  rows = static_cast<png_bytep*>(std::malloc(sizeof(png_bytep) * raw->height));
  if (!raw->data || !rows) png_error(png, "out of memory");
  for (unsigned y = 0; y < raw->height; ++y) rows[y] = raw->data + stride * y;
  png_read_image(png, rows);
  png_read_end(png, nullptr);
  png_destroy_read_struct(&png, &info, nullptr);
  std::free(rows);
  return true;
}

struct JpegError {
  jpeg_error_mgr manager;
  std::jmp_buf jump;
  RawPixels* raw;
};

void jpeg_fail(j_common_ptr info) {
  auto* e = reinterpret_cast<JpegError*>(info->err);
  (*info->err->format_message)(info, e->raw->message);
  std::longjmp(e->jump, 1);
}
void jpeg_quiet(j_common_ptr) {}

/// libjpeg's RGB output with its defaults (the integer DCT, fancy
/// upsampling), as PIL decodes a JPEG; grey files come out replicated, as
/// PIL's L image converted to RGB. CMYK and YCCK files are refused.
bool decode_jpeg(std::FILE* file, RawPixels* raw) {
  jpeg_decompress_struct info;
  JpegError error;
  error.raw = raw;
  info.err = jpeg_std_error(&error.manager);
  error.manager.error_exit = jpeg_fail;
  error.manager.output_message = jpeg_quiet;
  if (setjmp(error.jump)) {
    jpeg_destroy_decompress(&info);
    std::free(raw->data);
    raw->data = nullptr;
    return false;
  }
  jpeg_create_decompress(&info);
  jpeg_stdio_src(&info, file);
  jpeg_read_header(&info, TRUE);
  if (info.jpeg_color_space == JCS_CMYK || info.jpeg_color_space == JCS_YCCK) {
    raw->unsupported = true;
    std::snprintf(raw->message, sizeof raw->message, "CMYK JPEG: not supported (RGB or grey only)");
    jpeg_destroy_decompress(&info);
    return false;
  }
  info.out_color_space = JCS_RGB;
  jpeg_start_decompress(&info);
  raw->width = info.output_width;
  raw->height = info.output_height;
  raw->channels = info.output_components;
  const std::size_t stride = static_cast<std::size_t>(raw->width) * static_cast<std::size_t>(raw->channels);
  raw->data = static_cast<unsigned char*>(std::malloc(stride * raw->height));
  if (!raw->data) {
    std::snprintf(raw->message, sizeof raw->message, "out of memory");
    jpeg_destroy_decompress(&info);
    return false;
  }
  while (info.output_scanline < info.output_height) {
    JSAMPROW row = raw->data + stride * info.output_scanline;
    jpeg_read_scanlines(&info, &row, 1);
  }
  jpeg_finish_decompress(&info);
  jpeg_destroy_decompress(&info);
  return true;
}

// ---- PIL's resampling (Image.resize, 8 bits per channel)

constexpr int kPrecisionBits = 32 - 8 - 2;  // the weights' fixed point: 22 fractional bits

double box(double x) { return x > -0.5 && x <= 0.5 ? 1.0 : 0.0; }
double bilinear(double x) {
  x = std::fabs(x);
  return x < 1.0 ? 1.0 - x : 0.0;
}
double hamming(double x) {
  x = std::fabs(x);
  if (x == 0.0) return 1.0;
  if (x >= 1.0) return 0.0;
  x = x * M_PI;
  // PIL writes the window's constants as floats.
  return std::sin(x) / x * (static_cast<double>(0.54f) + static_cast<double>(0.46f) * std::cos(x));
}
double bicubic(double x) {  // Keys' cubic with a = -0.5
  constexpr double a = -0.5;
  x = std::fabs(x);
  if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1;
  if (x < 2.0) return (((x - 5) * x + 8) * x - 4) * a;
  return 0.0;
}
double sinc(double x) {
  if (x == 0.0) return 1.0;
  x = x * M_PI;
  return std::sin(x) / x;
}
double lanczos(double x) { return -3.0 <= x && x < 3.0 ? sinc(x) * sinc(x / 3) : 0.0; }

struct Filter {
  double (*weight)(double);
  double support;
};

Filter filter_of(Resample r) {
  switch (r) {
    case Resample::box: return {box, 0.5};
    case Resample::bilinear: return {bilinear, 1.0};
    case Resample::hamming: return {hamming, 1.0};
    case Resample::bicubic: return {bicubic, 2.0};
    case Resample::lanczos: return {lanczos, 3.0};
  }
  throw std::invalid_argument("resample: unknown filter");
}

/// One axis: output sample i reads inputs [first[i], first[i] + count[i])
/// with the fixed-point weights weights[i·ksize + j].
struct Weights {
  int ksize = 0;
  std::vector<int> first, count, weights;
};

Weights axis_weights(long in_size, long out_size, const Filter& f) {
  // PIL's box is (0, 0, in width, in height) in float: the scale is in/out.
  const double scale = static_cast<double>(static_cast<float>(in_size)) / static_cast<double>(out_size);
  const double filterscale = std::max(scale, 1.0);
  const double support = f.support * filterscale;
  Weights w;
  w.ksize = static_cast<int>(std::ceil(support)) * 2 + 1;
  w.first.resize(static_cast<std::size_t>(out_size));
  w.count.resize(static_cast<std::size_t>(out_size));
  w.weights.assign(static_cast<std::size_t>(out_size) * static_cast<std::size_t>(w.ksize), 0);
  std::vector<double> k(static_cast<std::size_t>(w.ksize));
  for (long i = 0; i < out_size; ++i) {
    const double center = (static_cast<double>(i) + 0.5) * scale;
    const double ss = 1.0 / filterscale;
    const int lo = std::max(0, static_cast<int>(center - support + 0.5));
    const int hi = std::min(static_cast<int>(in_size), static_cast<int>(center + support + 0.5));
    const int n = hi - lo;
    double total = 0.0;
    for (int j = 0; j < n; ++j) {
      k[static_cast<std::size_t>(j)] = f.weight((static_cast<double>(j + lo) - center + 0.5) * ss);
      total += k[static_cast<std::size_t>(j)];
    }
    int* out = &w.weights[static_cast<std::size_t>(i) * static_cast<std::size_t>(w.ksize)];
    for (int j = 0; j < n; ++j) {
      const double v = total != 0.0 ? k[static_cast<std::size_t>(j)] / total : k[static_cast<std::size_t>(j)];
      out[j] = v < 0 ? static_cast<int>(-0.5 + v * (1 << kPrecisionBits))
                     : static_cast<int>(0.5 + v * (1 << kPrecisionBits));
    }
    w.first[static_cast<std::size_t>(i)] = lo;
    w.count[static_cast<std::size_t>(i)] = n;
  }
  return w;
}

std::uint8_t clip8(int sum) {
  if (sum < 0) return 0;
  return static_cast<std::uint8_t>(std::min(sum >> kPrecisionBits, 255));
}

/// One pass along an axis: `along` is the axis resized (0: x, 1: y).
RgbImage resample_axis(const RgbImage& in, long out_size, const Filter& f, int along) {
  RgbImage out;
  out.width = along == 0 ? out_size : in.width;
  out.height = along == 0 ? in.height : out_size;
  out.rgb.resize(static_cast<std::size_t>(out.width * out.height * 3));
  const Weights w = axis_weights(along == 0 ? in.width : in.height, out_size, f);
  const auto at = [&in](long x, long y, int c) {
    return static_cast<int>(in.rgb[static_cast<std::size_t>((y * in.width + x) * 3 + c)]);
  };
  for (long y = 0; y < out.height; ++y)
    for (long x = 0; x < out.width; ++x) {
      const long i = along == 0 ? x : y;
      const int* k = &w.weights[static_cast<std::size_t>(i) * static_cast<std::size_t>(w.ksize)];
      const int lo = w.first[static_cast<std::size_t>(i)], n = w.count[static_cast<std::size_t>(i)];
      for (int c = 0; c < 3; ++c) {
        int sum = 1 << (kPrecisionBits - 1);
        for (int j = 0; j < n; ++j) sum += (along == 0 ? at(lo + j, y, c) : at(x, lo + j, c)) * k[j];
        out.rgb[static_cast<std::size_t>((y * out.width + x) * 3 + c)] = clip8(sum);
      }
    }
  return out;
}

// ---- preprocessor_config.json

using io::json;

bool flag(const json& j, const std::string& path, const std::string& key) {
  if (!j.contains(key)) io::fail(path, key, "missing (needed to compute pixel_values as ViTImageProcessor does)");
  if (!j.at(key).is_boolean()) io::fail(path, key, "must be true or false, got " + io::brief(j.at(key)));
  return j.at(key).get<bool>();
}

const json& needed(const json& j, const std::string& path, const std::string& key, const std::string& because) {
  if (!j.contains(key)) io::fail(path, key, "missing (needed by " + because + ")");
  return j.at(key);
}

long positive_size(const json& v, const std::string& path, const std::string& key) {
  if (!v.is_number_integer() || v.get<std::int64_t>() < 1 || v.get<std::int64_t>() > (1 << 16))
    io::fail(path, key, "must be an integer in [1, 65536], got " + io::brief(v));
  return static_cast<long>(v.get<std::int64_t>());
}

double finite_number(const json& v, const std::string& path, const std::string& key) {
  if (!v.is_number() || !std::isfinite(v.get<double>()))
    io::fail(path, key, "must be a finite number, got " + io::brief(v));
  return v.get<double>();
}

/// image_mean or image_std: three numbers (or one, for every channel).
std::array<double, 3> per_channel(const json& v, const std::string& path, const std::string& key) {
  if (v.is_number()) {
    const double x = finite_number(v, path, key);
    return {x, x, x};
  }
  if (!v.is_array() || v.size() != 3) io::fail(path, key, "must be a list of 3 numbers (R, G, B), got " + io::brief(v));
  return {finite_number(v[0], path, key), finite_number(v[1], path, key), finite_number(v[2], path, key)};
}

std::string extension_of(const std::filesystem::path& p) {
  std::string e = p.extension().string();
  std::transform(e.begin(), e.end(), e.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return e;
}

}  // namespace image_io

ImageProcessor read_image_processor(const std::string& model_path) {
  namespace fs = std::filesystem;
  using namespace image_io;
  std::error_code ec;
  const fs::path model(model_path);
  const fs::path folder = fs::is_directory(model, ec) ? model : model.parent_path();
  ImageProcessor p;
  p.source = (folder / "preprocessor_config.json").string();
  const std::string& path = p.source;
  const json j = io::read_json_file(path);
  for (const auto& [key, accepted] : {std::pair<std::string, std::string>{"image_processor_type", "ViTImageProcessor"},
                                      {"feature_extractor_type", "ViTFeatureExtractor"}})
    if (j.contains(key) && j.at(key) != accepted)
      io::fail(path, key, io::brief(j.at(key)) + ": only " + accepted + "'s preprocessing is computed");
  if (j.contains("do_center_crop") && j.at("do_center_crop") != false)
    io::fail(path, "do_center_crop", "a centre crop is not computed (ViTImageProcessor has none)");
  p.do_resize = flag(j, path, "do_resize");
  if (p.do_resize) {
    const json& size = needed(j, path, "size", "do_resize");
    if (size.is_object()) {
      for (const char* side : {"height", "width"})
        if (!size.contains(side)) io::fail(path, std::string("size.") + side, "missing (needed by do_resize)");
      p.height = positive_size(size.at("height"), path, "size.height");
      p.width = positive_size(size.at("width"), path, "size.width");
    } else if (size.is_number_integer()) {
      p.height = p.width = positive_size(size, path, "size");
    } else {
      io::fail(path, "size", "must be {\"height\": H, \"width\": W}, got " + io::brief(size));
    }
    const json& r = needed(j, path, "resample", "do_resize");
    if (!r.is_number_integer() || r.get<std::int64_t>() < 1 || r.get<std::int64_t>() > 5)
      io::fail(path, "resample",
               io::brief(r) + " is not a PIL filter computed here (1 LANCZOS, 2 BILINEAR, 3 BICUBIC, 4 BOX, "
                              "5 HAMMING; 0 NEAREST is not)");
    p.resample = static_cast<Resample>(r.get<int>());
  }
  p.do_rescale = flag(j, path, "do_rescale");
  if (p.do_rescale)
    p.rescale_factor = finite_number(needed(j, path, "rescale_factor", "do_rescale"), path, "rescale_factor");
  p.do_normalize = flag(j, path, "do_normalize");
  if (p.do_normalize) {
    p.mean = per_channel(needed(j, path, "image_mean", "do_normalize"), path, "image_mean");
    p.std = per_channel(needed(j, path, "image_std", "do_normalize"), path, "image_std");
    for (double s : p.std)
      if (static_cast<float>(s) == 0.0f) io::fail(path, "image_std", "a channel's deviation is 0");
  }
  return p;
}

RgbImage read_rgb_image(const std::string& path) {
  using namespace image_io;
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> file(std::fopen(path.c_str(), "rb"), std::fclose);
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) fail_image(path, "is a folder, not an image file");
  if (!file)
    fail_image(path, std::filesystem::exists(path, ec) ? "cannot be opened for reading" : "does not exist");
  unsigned char magic[8] = {};
  const std::size_t got = std::fread(magic, 1, sizeof magic, file.get());
  std::rewind(file.get());
  static const unsigned char png_magic[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  RawPixels raw;
  bool ok = false;
  if (got == 8 && std::memcmp(magic, png_magic, 8) == 0) {
    ok = decode_png(file.get(), &raw);
  } else if (got >= 3 && magic[0] == 0xff && magic[1] == 0xd8 && magic[2] == 0xff) {
    ok = decode_jpeg(file.get(), &raw);
  } else {
    fail_image(path, "not a PNG or JPEG file");
  }
  if (!ok) fail_image(path, raw.unsupported ? std::string(raw.message) : std::string("cannot be decoded: ") + raw.message);
  std::unique_ptr<unsigned char, void (*)(void*)> data(raw.data, std::free);
  RgbImage im;
  im.width = raw.width;
  im.height = raw.height;
  im.rgb.resize(static_cast<std::size_t>(im.width * im.height * 3));
  const std::size_t pixels = static_cast<std::size_t>(im.width * im.height);
  const int ch = raw.channels;
  if (ch < 1 || ch > 4) fail_image(path, "cannot be decoded: " + std::to_string(ch) + " channels");
  for (std::size_t i = 0; i < pixels; ++i) {
    const unsigned char* s = raw.data + i * static_cast<std::size_t>(ch);
    // convert("RGB"): grey (1, 2 channels) replicated; alpha (2, 4) dropped, not composited.
    for (int c = 0; c < 3; ++c) im.rgb[i * 3 + static_cast<std::size_t>(c)] = ch >= 3 ? s[c] : s[0];
  }
  return im;
}

RgbImage resize_image(const RgbImage& image, long width, long height, Resample filter) {
  using namespace image_io;
  if (width < 1 || height < 1) throw std::invalid_argument("resize_image: empty target size");
  const Filter f = filter_of(filter);
  // PIL: the horizontal pass when the width changes, then the vertical pass when the height does.
  RgbImage out = width != image.width ? resample_axis(image, width, f, 0) : image;
  if (height != image.height) out = resample_axis(out, height, f, 1);
  return out;
}

std::vector<float> pixel_values(const RgbImage& image, const ImageProcessor& processor) {
  const RgbImage& im = processor.do_resize && (image.width != processor.width || image.height != processor.height)
                           ? resize_image(image, processor.width, processor.height, processor.resample)
                           : image;
  const std::size_t plane = static_cast<std::size_t>(im.width * im.height);
  std::vector<float> out(plane * 3);
  for (std::size_t c = 0; c < 3; ++c) {
    const float mean = static_cast<float>(processor.mean[c]);
    const float std = static_cast<float>(processor.std[c]);
    for (std::size_t i = 0; i < plane; ++i) {
      const double v = im.rgb[i * 3 + c];
      float x = processor.do_rescale ? static_cast<float>(v * processor.rescale_factor) : static_cast<float>(v);
      if (processor.do_normalize) x = (x - mean) / std;
      out[c * plane + i] = x;
    }
  }
  return out;
}

std::vector<InputSpec> read_images(const std::vector<std::string>& paths, const std::string& model_path,
                                   const Model* model) {
  namespace fs = std::filesystem;
  if (model && !(model->embeddings() && model->embeddings()->pixels()))
    throw std::invalid_argument(model->source() + ": takes no images (token ids or X^0; images need a ViT checkpoint)");
  const ImageProcessor processor = read_image_processor(model_path);
  std::vector<std::string> files;
  for (const std::string& p : paths) {
    std::error_code ec;
    if (!fs::is_directory(p, ec)) {
      files.push_back(p);
      continue;
    }
    std::vector<std::string> found;
    for (const fs::directory_entry& e : fs::directory_iterator(p, ec)) {
      const std::string ext = image_io::extension_of(e.path());
      if (e.is_regular_file(ec) && (ext == ".png" || ext == ".jpg" || ext == ".jpeg")) found.push_back(e.path().string());
    }
    if (ec) image_io::fail_image(p, "folder cannot be read: " + ec.message());
    if (found.empty()) image_io::fail_image(p, "no PNG or JPEG file (*.png, *.jpg, *.jpeg) in the folder");
    std::sort(found.begin(), found.end());
    files.insert(files.end(), found.begin(), found.end());
  }
  std::vector<InputSpec> out;
  for (const std::string& f : files) {
    const RgbImage im = read_rgb_image(f);
    const std::vector<float> v = pixel_values(im, processor);
    const long h = processor.do_resize ? processor.height : im.height;
    const long w = processor.do_resize ? processor.width : im.width;
    out.push_back(InputSpec::from_pixels(std::vector<double>(v.begin(), v.end()), {3, h, w}, f));
  }
  return out;
}

bool image_batch(const std::vector<std::string>& paths) {
  std::error_code ec;
  return paths.size() != 1 || std::filesystem::is_directory(paths.front(), ec);
}

}  // namespace sanpath
