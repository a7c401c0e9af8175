// JPEG through libjpeg-turbo's TurboJPEG API: encoding (for generated data sets) and decoding
// with DCT-domain downscaling (the decoder computes the image at 1/8 ... 1 of its size directly
// from the DCT coefficients, far cheaper than decoding it whole and shrinking it).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ringbench::input {

// Interleaved 8-bit RGB.
struct RgbImage {
  int width = 0, height = 0;
  std::vector<uint8_t> pixels;  // height * width * 3
};

struct JpegSize {
  int width = 0, height = 0;
};

// Largest image the decoder accepts: a hostile header must not make it allocate gigabytes.
constexpr int kMaxJpegSide = 16384;
constexpr int64_t kMaxJpegPixels = int64_t(64) << 20;

// One TurboJPEG compressor and one decompressor (a handle per thread: they are not shared).
class Jpeg {
 public:
  Jpeg();
  ~Jpeg();
  Jpeg(const Jpeg&) = delete;
  Jpeg& operator=(const Jpeg&) = delete;

  std::string encode(const RgbImage& image, int quality);
  // The image's size from its header. Throws Error naming `name` for data that is not a JPEG or
  // an image larger than kMaxJpegSide / kMaxJpegPixels.
  JpegSize size(std::string_view jpeg, const std::string& name);
  // Decodes at the scale num/denom (one of TurboJPEG's factors; 1/1 decodes it whole) into
  // `out`. Throws Error naming `name` for data that does not decode (a corrupt or truncated file).
  void decode(std::string_view jpeg, int num, int denom, RgbImage& out, const std::string& name);

 private:
  void* compressor_ = nullptr;
  void* decompressor_ = nullptr;
};

// The decoder's downscaling factors no larger than 1, largest first: {num, denom}.
struct Scale {
  int num = 1, denom = 1;
};
const std::vector<Scale>& downscales();
// A side of `side` pixels at `s` (as the decoder rounds it: up).
int scaled(int side, Scale s);

}  // namespace ringbench::input
