// One training image from its JPEG bytes, as torchvision's ImageNet training transform makes it
// (RandomResizedCrop(size), RandomHorizontalFlip(), ToTensor(), Normalize(ImageNet's mean and
// std)), except that the JPEG is decoded at the smallest DCT scale that still leaves the crop at
// least `size` pixels on each side.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "input/jpeg.h"
#include "input/rng.h"

namespace ringbench::input {

// A crop in the full image's pixels, and whether to mirror it.
struct Crop {
  int x = 0, y = 0, width = 0, height = 0;
  bool flip = false;
};

// RandomResizedCrop's defaults (scale 0.08 to 1 of the area, aspect ratio 3/4 to 4/3, 10 tries,
// then the centre crop), then a flip with probability 1/2.
Crop random_crop(int width, int height, Rng& rng);

// The smallest of the decoder's scales at which the crop keeps at least `size` pixels on each
// side (1/1 when none does).
Scale decode_scale(const Crop& c, int size);

// Crop `c` (in the full image's pixels, the full image `full`) of `decoded` (the image decoded at
// some scale) resized bilinearly to size x size (pixel centres aligned), mirrored when c.flip,
// normalised ((v / 255 - mean) / std per channel) into `chw` (3 x size x size floats).
void crop_resize_normalise(const RgbImage& decoded, JpegSize full, const Crop& c, int size, float* chw);

// The scratch image a thread keeps between images, at most (a 1000x700 RGB image); a larger one
// is freed after use, so the memory of a large image is held only under its DecodeReservation.
constexpr size_t kKeptScratchBytes = size_t(2) << 20;

// The whole transform with one decoder and scratch image (one per thread). Each decode holds a
// reservation of the process's decode memory (decode_budget.h) while it runs.
class Augmenter {
 public:
  // Decodes `jpeg` (named `name` in errors), crops with `rng`, writes `chw`. Throws Error for a
  // JPEG that does not decode.
  void run(std::string_view jpeg, const std::string& name, Rng& rng, int size, float* chw);

 private:
  Jpeg jpeg_;
  RgbImage scratch_;
};

}  // namespace ringbench::input
