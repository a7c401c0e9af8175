#include "input/augment.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "input/decode_budget.h"

namespace ringbench::input {
namespace {

constexpr float kMean[3] = {0.485f, 0.456f, 0.406f};
constexpr float kStd[3] = {0.229f, 0.224f, 0.225f};

// Source coordinate `i` of `out` samples over [start, start + length) of a side of `limit`
// pixels: the lower neighbour and the weight of the upper one.
struct Tap {
  int lo, hi;
  float w;
};
Tap tap(int i, int out, double start, double length, int limit) {
  double s = start + (i + 0.5) * length / out - 0.5;
  s = std::clamp(s, 0.0, double(limit - 1));
  const int lo = int(s);
  return {lo, std::min(lo + 1, limit - 1), float(s - lo)};
}

}  // namespace

Crop random_crop(int width, int height, Rng& rng) {
  Crop c;
  const double area = double(width) * height;
  const double lo = std::log(3.0 / 4.0), hi = std::log(4.0 / 3.0);
  bool found = false;
  for (int attempt = 0; attempt < 10 && !found; ++attempt) {
    const double target = area * rng.uniform(0.08, 1.0);
    const double ratio = std::exp(rng.uniform(lo, hi));
    const int w = int(std::lround(std::sqrt(target * ratio))), h = int(std::lround(std::sqrt(target / ratio)));
    if (w > 0 && h > 0 && w <= width && h <= height) {
      c = {rng.integer(0, width - w), rng.integer(0, height - h), w, h, false};
      found = true;
    }
  }
  if (!found) {  // the centre crop, its aspect ratio clamped into [3/4, 4/3]
    const double in_ratio = double(width) / height;
    int w = width, h = height;
    if (in_ratio < 3.0 / 4.0) h = std::min(height, int(std::lround(width / (3.0 / 4.0))));
    if (in_ratio > 4.0 / 3.0) w = std::min(width, int(std::lround(height * (4.0 / 3.0))));
    c = {(width - w) / 2, (height - h) / 2, w, h, false};
  }
  c.flip = rng.uniform() < 0.5;
  return c;
}

Scale decode_scale(const Crop& c, int size) {
  Scale best{1, 1};
  for (const Scale s : downscales())  // largest first
    if (int64_t(c.width) * s.num >= int64_t(size) * s.denom && int64_t(c.height) * s.num >= int64_t(size) * s.denom)
      best = s;
  return best;
}

void crop_resize_normalise(const RgbImage& decoded, JpegSize full, const Crop& c, int size, float* chw) {
  const double sx = double(decoded.width) / full.width, sy = double(decoded.height) / full.height;
  std::vector<Tap> cols(size_t(size), Tap{}), rows(size_t(size), Tap{});
  for (int i = 0; i < size; ++i) {
    cols[size_t(i)] = tap(i, size, c.x * sx, c.width * sx, decoded.width);
    rows[size_t(i)] = tap(i, size, c.y * sy, c.height * sy, decoded.height);
  }
  const size_t plane = size_t(size) * size_t(size);
  const size_t stride = size_t(decoded.width) * 3;
  float scale[3], shift[3];
  for (int ch = 0; ch < 3; ++ch) {
    scale[ch] = 1.0f / (255.0f * kStd[ch]);
    shift[ch] = -kMean[ch] / kStd[ch];
  }
  for (int y = 0; y < size; ++y) {
    const Tap r = rows[size_t(y)];
    const uint8_t* top = decoded.pixels.data() + size_t(r.lo) * stride;
    const uint8_t* bottom = decoded.pixels.data() + size_t(r.hi) * stride;
    for (int x = 0; x < size; ++x) {
      const Tap t = cols[size_t(c.flip ? size - 1 - x : x)];
      for (int ch = 0; ch < 3; ++ch) {
        const float a = top[size_t(t.lo) * 3 + size_t(ch)], b = top[size_t(t.hi) * 3 + size_t(ch)];
        const float d = bottom[size_t(t.lo) * 3 + size_t(ch)], e = bottom[size_t(t.hi) * 3 + size_t(ch)];
        const float upper = a + (b - a) * t.w, lower = d + (e - d) * t.w;
        const float v = upper + (lower - upper) * r.w;
        chw[size_t(ch) * plane + size_t(y) * size_t(size) + size_t(x)] = v * scale[ch] + shift[ch];
      }
    }
  }
}

void Augmenter::run(std::string_view jpeg, const std::string& name, Rng& rng, int size, float* chw) {
  const JpegSize full = jpeg_.size(jpeg, name);
  const Crop c = random_crop(full.width, full.height, rng);
  const Scale s = decode_scale(c, size);
  DecodeReservation hold(decode_budget(), decode_memory_bytes(full, s));
  jpeg_.decode(jpeg, s.num, s.denom, scratch_, name);
  crop_resize_normalise(scratch_, full, c, size, chw);
  // A large image's pixels go back with the reservation; a usual one's buffer is kept for the next.
  if (scratch_.pixels.capacity() > kKeptScratchBytes) scratch_.pixels = std::vector<uint8_t>();
}

}  // namespace ringbench::input
