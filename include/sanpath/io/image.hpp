#pragma once
/// \file image.hpp
/// Images for a ViT model: PNG and JPEG files turned into the `pixel_values`
/// HuggingFace's ViTImageProcessor computes from them, as its
/// preprocessor_config.json says (docs/families.md, "ViT images").
///
/// Each step is the one of the Python pipeline, to the bit:
/// - decode (libpng, libjpeg) and convert to RGB as PIL's `convert("RGB")`
///   does: grey replicated, alpha dropped (not composited), palettes looked up;
/// - `do_resize`: PIL's `Image.resize(size, resample)` on the 8-bit image:
///   separable convolution, horizontal pass then vertical, each with PIL's
///   filter weights in 22-bit fixed point, rounded and clipped to 8 bits;
/// - `do_rescale`: \f$ x = \mathrm{float32}(\mathrm{float64}(v) \cdot f) \f$;
/// - `do_normalize`: \f$ (x - m) / s \f$ in float32, m and s rounded to float32;
/// - channels first, [3, height, width].
///
/// \code
///   const ImageProcessor p = read_image_processor("vit-folder");
///   const std::vector<float> v = pixel_values(read_rgb_image("cat.png"), p);  // [3, H, W]
///   std::vector<InputSpec> in = read_images({"cat.png"}, "vit-folder", &model);
/// \endcode

#include "sanpath/model/input.hpp"

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace sanpath {

/// An 8-bit RGB image: `rgb` holds height × width × 3 bytes, rows top to
/// bottom, each pixel R, G, B.
struct RgbImage {
  long width = 0;
  long height = 0;
  std::vector<std::uint8_t> rgb;
};

/// PIL's convolution filters under their codes in preprocessor_config.json
/// (PIL.Image.Resampling). NEAREST (0) is another algorithm and not offered.
enum class Resample { lanczos = 1, bilinear = 2, bicubic = 3, box = 4, hamming = 5 };

/// The ViTImageProcessor settings of a checkpoint's preprocessor_config.json.
struct ImageProcessor {
  std::string source;  ///< the file, for messages
  bool do_resize = false;
  long height = 0, width = 0;  ///< `size`, when do_resize
  Resample resample = Resample::bilinear;
  bool do_rescale = false;
  double rescale_factor = 1.0;
  bool do_normalize = false;
  std::array<double, 3> mean{0, 0, 0}, std{1, 1, 1};  ///< image_mean, image_std
};

/// preprocessor_config.json in the folder `model_path` (or beside it, when
/// it is a file). Throws std::invalid_argument "<file>: <key>: <why>" for a
/// missing or unreadable file, a processor other than ViTImageProcessor, a
/// step it does not compute (do_center_crop) and for each of do_resize,
/// do_rescale, do_normalize absent or, when true, without its keys
/// (size with height and width, resample 1..5; rescale_factor; image_mean
/// and image_std, three numbers each).
ImageProcessor read_image_processor(const std::string& model_path);

/// A PNG or JPEG file (recognised by its first bytes) as RGB, converted as
/// PIL's convert("RGB"). Throws std::invalid_argument "<path>: image: <why>"
/// for a missing or unreadable file, another format, a damaged file, a
/// CMYK JPEG or a 16-bit grey PNG (PIL clips those rather than scaling).
RgbImage read_rgb_image(const std::string& path);

/// `image` resized to width × height exactly as PIL's Image.resize with
/// `filter` (reducing_gap None): a copy when the size is the same.
RgbImage resize_image(const RgbImage& image, long width, long height, Resample filter);

/// The pixel_values of `image` under `processor`: [3, H, W], row-major.
std::vector<float> pixel_values(const RgbImage& image, const ImageProcessor& processor);

/// The images of `paths` (files, or folders whose *.png, *.jpg, *.jpeg files
/// are taken in name order) as inputs of kind pixels named by their files,
/// preprocessed as the model at `model_path` says (read_image_processor).
/// With `model`, a model that takes no images is refused first, naming it.
/// Throws std::invalid_argument as read_image_processor and read_rgb_image,
/// and "<folder>: image: no PNG or JPEG file" for an empty folder.
std::vector<InputSpec> read_images(const std::vector<std::string>& paths, const std::string& model_path,
                                   const Model* model = nullptr);
/// `paths` make a batch (several, or a folder) rather than one image (one file).
bool image_batch(const std::vector<std::string>& paths);

}  // namespace sanpath
