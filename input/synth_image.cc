#include "input/synth_image.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "input/rng.h"

namespace ringbench::input {

namespace {

struct Colour {
  float r, g, b;
};

Colour random_colour(Rng& rng) { return {float(rng.uniform(20, 235)), float(rng.uniform(20, 235)), float(rng.uniform(20, 235))}; }

// A float RGB canvas, stored planar-interleaved as RgbImage will be.
struct Canvas {
  int w, h;
  std::vector<float> px;  // h * w * 3
  float* at(int x, int y) { return &px[(size_t(y) * size_t(w) + size_t(x)) * 3]; }
};

void sky_and_ground(Canvas& c, Rng& rng) {
  const Colour top = random_colour(rng), horizon = random_colour(rng), ground = random_colour(rng);
  const int line = int(c.h * rng.uniform(0.3, 0.7));
  for (int y = 0; y < c.h; ++y) {
    const bool above = y < line;
    const float t = above ? float(y) / float(std::max(line, 1)) : float(y - line) / float(std::max(c.h - line, 1));
    const Colour a = above ? top : horizon, b = above ? horizon : ground;
    const Colour row{a.r + (b.r - a.r) * t, a.g + (b.g - a.g) * t, a.b + (b.b - a.b) * t};
    for (int x = 0; x < c.w; ++x) {
      float* p = c.at(x, y);
      p[0] = row.r, p[1] = row.g, p[2] = row.b;
    }
  }
}

// An ellipse or a rectangle, shaded from one side to the other; its colour from the class's palette.
void shape(Canvas& c, Rng& rng, const Colour& base) {
  const int rw = int(c.w * rng.uniform(0.04, 0.35)) + 1, rh = int(c.h * rng.uniform(0.04, 0.35)) + 1;
  const int cx = rng.integer(0, c.w - 1), cy = rng.integer(0, c.h - 1);
  const bool ellipse = rng.uniform() < 0.6;
  const float shade = float(rng.uniform(0.3, 1.0));
  const Colour col{base.r + float(rng.uniform(-30, 30)), base.g + float(rng.uniform(-30, 30)),
                   base.b + float(rng.uniform(-30, 30))};
  for (int y = std::max(0, cy - rh); y < std::min(c.h, cy + rh); ++y)
    for (int x = std::max(0, cx - rw); x < std::min(c.w, cx + rw); ++x) {
      const float dx = float(x - cx) / float(rw), dy = float(y - cy) / float(rh);
      if (ellipse && dx * dx + dy * dy > 1) continue;
      const float light = 1 - shade * 0.5f * (dx + dy + 2) / 4;
      float* p = c.at(x, y);
      p[0] = col.r * light, p[1] = col.g * light, p[2] = col.b * light;
    }
}

// Value noise: random values on a grid of `cell` pixels, interpolated bilinearly, added to all
// three channels with `amplitude`.
void texture(Canvas& c, Rng& rng, int cell, float amplitude) {
  const int gw = c.w / cell + 2, gh = c.h / cell + 2;
  std::vector<float> grid(size_t(gw) * size_t(gh));
  for (float& v : grid) v = float(rng.uniform(-1, 1)) * amplitude;
  for (int y = 0; y < c.h; ++y) {
    const int gy = y / cell;
    const float fy = float(y % cell) / float(cell);
    for (int x = 0; x < c.w; ++x) {
      const int gx = x / cell;
      const float fx = float(x % cell) / float(cell);
      const float* g0 = &grid[size_t(gy) * size_t(gw) + size_t(gx)];
      const float* g1 = g0 + gw;
      const float v = (g0[0] * (1 - fx) + g0[1] * fx) * (1 - fy) + (g1[0] * (1 - fx) + g1[1] * fx) * fy;
      float* p = c.at(x, y);
      p[0] += v, p[1] += v * 0.9f, p[2] += v * 0.8f;
    }
  }
}

void grain(Canvas& c, uint64_t seed, float amplitude) {
  for (size_t i = 0; i < c.px.size(); ++i) {
    const uint64_t h = splitmix64(seed ^ (i * 0x9e3779b97f4a7c15ull));
    c.px[i] += (float(h & 0xffff) / 65535.0f - 0.5f) * 2 * amplitude;
  }
}

}  // namespace

ImageShape draw_image_shape(uint64_t seed, uint64_t index) {
  Rng rng(seed, index * 2 + 1);
  const double width = 400 * std::exp(0.25 * rng.normal());
  const double aspect = 0.875 * std::exp(0.18 * rng.normal());  // height / width
  const int w = std::clamp(int(std::lround(width)), 96, 1600);
  return {w, std::clamp(int(std::lround(width * aspect)), 96, 1600)};
}

RgbImage synth_image(uint64_t seed, uint64_t index, uint32_t label, ImageShape shape_wh) {
  Rng rng(seed, index * 2);
  Rng palette(seed ^ 0x5eed, label);  // a class's shapes share colours
  Canvas c{shape_wh.width, shape_wh.height, std::vector<float>(size_t(shape_wh.width) * size_t(shape_wh.height) * 3)};
  sky_and_ground(c, rng);
  const Colour class_colour = random_colour(palette);
  const int shapes = rng.integer(6, 24);
  for (int i = 0; i < shapes; ++i) shape(c, rng, i % 2 == 0 ? class_colour : random_colour(rng));
  texture(c, rng, 24, 14);
  texture(c, rng, 6, 16);
  texture(c, rng, 2, 28);
  grain(c, rng.next(), 22);
  RgbImage out{c.w, c.h, std::vector<uint8_t>(c.px.size())};
  for (size_t i = 0; i < c.px.size(); ++i) out.pixels[i] = uint8_t(std::clamp(std::lround(c.px[i]), 0L, 255L));
  return out;
}

}  // namespace ringbench::input
