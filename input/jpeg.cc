#include "input/jpeg.h"

#include <turbojpeg.h>

#include <algorithm>

#include "base/errors.h"

namespace ringbench::input {
namespace {

std::string tj_error(void* handle) { return tjGetErrorStr2(handle); }

}  // namespace

Jpeg::Jpeg() : compressor_(tjInitCompress()), decompressor_(tjInitDecompress()) {
  if (compressor_ == nullptr || decompressor_ == nullptr) {
    tjDestroy(compressor_);
    tjDestroy(decompressor_);
    throw Error(std::string("libjpeg-turbo: cannot start a TurboJPEG instance: ") + tjGetErrorStr2(nullptr));
  }
}

Jpeg::~Jpeg() {
  tjDestroy(compressor_);
  tjDestroy(decompressor_);
}

std::string Jpeg::encode(const RgbImage& image, int quality) {
  unsigned char* buf = nullptr;
  unsigned long size = 0;
  if (tjCompress2(compressor_, image.pixels.data(), image.width, 0, image.height, TJPF_RGB, &buf, &size, TJSAMP_420,
                  quality, 0) != 0) {
    tjFree(buf);
    throw Error("libjpeg-turbo: encoding a " + std::to_string(image.width) + "x" + std::to_string(image.height) +
                " image failed: " + tj_error(compressor_));
  }
  std::string out(reinterpret_cast<const char*>(buf), size);
  tjFree(buf);
  return out;
}

JpegSize Jpeg::size(std::string_view jpeg, const std::string& name) {
  int w = 0, h = 0, subsamp = 0, colorspace = 0;
  if (tjDecompressHeader3(decompressor_, reinterpret_cast<const unsigned char*>(jpeg.data()), jpeg.size(), &w, &h,
                          &subsamp, &colorspace) != 0)
    throw Error(name + ": not a JPEG this decoder reads (" + tj_error(decompressor_) + ")");
  if (w < 1 || h < 1) throw Error(name + ": not a JPEG this decoder reads (its header gives no size)");
  if (w > kMaxJpegSide || h > kMaxJpegSide || int64_t(w) * h > kMaxJpegPixels)
    throw Error(name + ": a " + std::to_string(w) + "x" + std::to_string(h) + " JPEG is larger than the decoder takes (" +
                std::to_string(kMaxJpegSide) + " per side, " + std::to_string(kMaxJpegPixels >> 20) + " Mpixels)");
  return {w, h};
}

void Jpeg::decode(std::string_view jpeg, int num, int denom, RgbImage& out, const std::string& name) {
  const JpegSize full = size(jpeg, name);
  const Scale s{num, denom};
  out.width = scaled(full.width, s);
  out.height = scaled(full.height, s);
  out.pixels.resize(size_t(out.width) * size_t(out.height) * 3);
  if (tjDecompress2(decompressor_, reinterpret_cast<const unsigned char*>(jpeg.data()), jpeg.size(), out.pixels.data(),
                    out.width, 0, out.height, TJPF_RGB, TJFLAG_LIMITSCANS) != 0) {
    // A warning (a truncated file libjpeg pads with gray) is an error too: the image is damaged.
    throw Error(name + ": the JPEG does not decode (" + tj_error(decompressor_) + ")");
  }
}

const std::vector<Scale>& downscales() {
  static const std::vector<Scale> list = [] {
    int n = 0;
    const tjscalingfactor* f = tjGetScalingFactors(&n);
    std::vector<Scale> out;
    for (int i = 0; f != nullptr && i < n; ++i)
      if (f[i].num <= f[i].denom) out.push_back({f[i].num, f[i].denom});
    std::sort(out.begin(), out.end(),
              [](Scale a, Scale b) { return int64_t(a.num) * b.denom > int64_t(b.num) * a.denom; });
    if (out.empty()) out.push_back({1, 1});
    return out;
  }();
  return list;
}

int scaled(int side, Scale s) { return int((int64_t(side) * s.num + s.denom - 1) / s.denom); }

}  // namespace ringbench::input
