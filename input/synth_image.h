// Natural-image-like pictures for a generated data set: smooth gradients (sky, ground), shapes
// with shaded colours from a palette of their class, and mild texture and grain. Random noise
// would compress unlike photos (JPEG spends its bytes very differently on it); these land near
// ImageNet's bytes per pixel instead.
#pragma once

#include <cstdint>

#include "input/jpeg.h"

namespace ringbench::input {

// ImageNet's training images: median about 400x350 (width and height drawn around it).
struct ImageShape {
  int width = 0, height = 0;
};
ImageShape draw_image_shape(uint64_t seed, uint64_t index);

// Image `index` of the set made with `seed`, of class `label`: the same pixels everywhere.
RgbImage synth_image(uint64_t seed, uint64_t index, uint32_t label, ImageShape shape);

}  // namespace ringbench::input
