"""Independent reference for `--image` (io/image.hpp): the pixel_values of
HuggingFace's ViTImageProcessor, computed with PIL and numpy alone, written
from the processor's documented steps (not from sanpath's sources):

    Image.open(path).convert("RGB")
    .resize((width, height), resample=resample)        if do_resize
    float32(float64(v) * rescale_factor)                if do_rescale
    (x - float32(mean)) / float32(std), in float32      if do_normalize
    channels first: [3, height, width]

Commands (Debian's python3 with python3-pil and python3-numpy):
    make DIR                   write the test images into DIR (PNG modes 1, L,
                               LA, P, P with transparency, 2-bit P, RGB, RGBA,
                               16-bit RGB, interlaced; baseline, progressive,
                               grey and 4:4:4 JPEGs; odd sizes), and the refused
                               files (GIF, BMP, CMYK JPEG, 16-bit grey PNG,
                               a truncated PNG); prints the image names
    config FILE RESAMPLE SIZE  write a ViT preprocessor_config.json
    pixels CONFIG OUT IMAGE..  pixel_values of the images, [3, H, W] for one,
                               [b, 3, H, W] for several, as F32 safetensors
"""
import json
import os
import struct
import sys
import warnings

import numpy as np
from PIL import Image

MEAN = [0.485, 0.456, 0.406]
STD = [0.229, 0.224, 0.225]


def pixel_values(path, config):
    with warnings.catch_warnings():  # a palette's transparency is dropped, as it should be here
        warnings.simplefilter("ignore")
        image = Image.open(path).convert("RGB")
    if config["do_resize"]:
        size = config["size"]
        image = image.resize((size["width"], size["height"]), resample=config["resample"])
    x = np.asarray(image)  # uint8 [H, W, 3]
    if config["do_rescale"]:
        x = (x.astype(np.float64) * config["rescale_factor"]).astype(np.float32)
    if config["do_normalize"]:
        x = x.astype(np.float32)
        mean = np.array(config["image_mean"], dtype=np.float32)
        std = np.array(config["image_std"], dtype=np.float32)
        x = (x - mean) / std
    return np.ascontiguousarray(x.astype(np.float32).transpose(2, 0, 1))


def write_safetensors(path, array):
    data = np.ascontiguousarray(array, dtype="<f4").tobytes()
    header = json.dumps({"pixel_values": {"dtype": "F32", "shape": list(array.shape),
                                          "data_offsets": [0, len(data)]}}).encode()
    header += b" " * (-len(header) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(header)) + header + data)


def write_config(path, resample, size):
    config = {"image_processor_type": "ViTImageProcessor", "do_resize": True,
              "size": {"height": size, "width": size}, "resample": resample, "do_rescale": True,
              "rescale_factor": 1 / 255, "do_normalize": True, "image_mean": MEAN, "image_std": STD}
    with open(path, "w") as f:
        json.dump(config, f, indent=2)


def make_images(folder):
    rng = np.random.default_rng(51)
    os.makedirs(folder, exist_ok=True)
    names = []

    def smooth(h, w, channels):
        # Random noise plus a gradient: both extremes and smooth ramps, so that
        # bicubic overshoots get clipped.
        noise = rng.integers(0, 256, size=(h, w, channels))
        ramp = np.linspace(0, 255, w)[None, :, None]
        return np.where(rng.random((h, w, channels)) < 0.5, noise, ramp).astype(np.uint8)

    def save(name, image, **kw):
        image.save(os.path.join(folder, name), **kw)
        names.append(name)

    save("rgb-37x23.png", Image.fromarray(smooth(23, 37, 3), "RGB"))
    save("rgb-16x16.png", Image.fromarray(smooth(16, 16, 3), "RGB"))        # no resize
    save("rgb-16x9.png", Image.fromarray(smooth(9, 16, 3), "RGB"))          # vertical pass only
    save("rgb-5x16.png", Image.fromarray(smooth(16, 5, 3), "RGB"))          # horizontal pass only
    save("rgba-7x5.png", Image.fromarray(smooth(5, 7, 4), "RGBA"))          # alpha dropped, upscaled
    save("grey-41x13.png", Image.fromarray(smooth(13, 41, 1)[:, :, 0], "L"))
    save("greyalpha-11x29.png", Image.fromarray(smooth(29, 11, 2), "LA"))
    save("bits-19x17.png", Image.fromarray(smooth(17, 19, 1)[:, :, 0], "L").convert("1"))
    save("interlaced-33x31.png", Image.fromarray(smooth(31, 33, 3), "RGB"), interlace=1)
    palette = Image.fromarray(smooth(21, 25, 3), "RGB").quantize(colors=37)
    save("palette-25x21.png", palette)
    palette_t = Image.fromarray(smooth(9, 10, 3), "RGB").quantize(colors=5)
    palette_t.info["transparency"] = bytes([0, 128, 255, 255, 17])
    save("palette-trns-10x9.png", palette_t, transparency=bytes([0, 128, 255, 255, 17]))
    palette_small = Image.fromarray(smooth(12, 14, 3), "RGB").quantize(colors=4)
    save("palette-4bit-14x12.png", palette_small, bits=2)
    # PIL writes RGB in 8 bits only: the 16-bit file is written by hand.
    wide = (smooth(15, 18, 3).astype(np.uint16) * 257 + rng.integers(0, 257, size=(15, 18, 3))).astype(">u2")
    write_png16_rgb(os.path.join(folder, "rgb16-raw-18x15.png"), wide)
    names.append("rgb16-raw-18x15.png")
    save("jpeg-base-45x27.jpg", Image.fromarray(smooth(27, 45, 3), "RGB"), quality=90)
    save("jpeg-prog-23x35.jpeg", Image.fromarray(smooth(35, 23, 3), "RGB"), quality=75, progressive=True)
    save("jpeg-grey-17x19.jpg", Image.fromarray(smooth(19, 17, 1)[:, :, 0], "L"), quality=85)
    save("jpeg-444-20x20.jpg", Image.fromarray(smooth(20, 20, 3), "RGB"), quality=95, subsampling=0)

    refused = os.path.join(folder, "..", "refused")
    os.makedirs(refused, exist_ok=True)
    Image.fromarray(smooth(8, 8, 3), "RGB").save(os.path.join(refused, "image.gif"))
    Image.fromarray(smooth(8, 8, 3), "RGB").save(os.path.join(refused, "image.bmp"))
    Image.fromarray(smooth(8, 8, 4), "CMYK").save(os.path.join(refused, "cmyk.jpg"))
    Image.fromarray(smooth(8, 8, 1)[:, :, 0].astype(np.uint16) * 200, "I;16").save(
        os.path.join(refused, "grey16.png"))
    whole = open(os.path.join(folder, "rgb-37x23.png"), "rb").read()
    open(os.path.join(refused, "truncated.png"), "wb").write(whole[: len(whole) // 2])
    return names


def write_png16_rgb(path, samples):
    """A 16-bit RGB PNG written with zlib directly (samples: big-endian uint16 [H, W, 3])."""
    import zlib
    h, w, _ = samples.shape
    rows = b"".join(b"\0" + samples[y].tobytes() for y in range(h))

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    ihdr = struct.pack(">IIBBBBB", w, h, 16, 2, 0, 0, 0)
    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))


def main(argv):
    if argv[0] == "make":
        print("\n".join(make_images(argv[1])))
    elif argv[0] == "config":
        write_config(argv[1], int(argv[2]), int(argv[3]))
    elif argv[0] == "pixels":
        config = json.load(open(argv[1]))
        values = [pixel_values(p, config) for p in argv[3:]]
        write_safetensors(argv[2], values[0] if len(values) == 1 else np.stack(values))
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
