#include "runner/cli/data_cmd.h"

#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <vector>

#include "base/cpu_time.h"
#include "base/errors.h"
#include "input/image_set.h"
#include "input/pipeline.h"

namespace ringbench {
namespace {

int run_make(const DataArgs& a) {
  if (a.kind != "imagenet-like") throw Error("data make: '" + a.kind + "' is not a kind of set: use imagenet-like");
  const input::MakeSummary s = input::make_imagenet_like(a.dir, a.make_options, [&](uint64_t done) {
    std::fprintf(stderr, "\rdata make: %llu / %llu images", (unsigned long long)done,
                 (unsigned long long)a.make_options.images);
  });
  std::fprintf(stderr, "\n");
  std::printf("wrote %s: %llu images in %zu shards, %.1f MB; median %dx%d, %.1f KB per image\n", a.dir.c_str(),
              (unsigned long long)s.images, s.shards, double(s.bytes) / 1e6, s.median_width, s.median_height,
              double(s.median_bytes) / 1e3);
  return 0;
}

int run_verify(const DataArgs& a) {
  const auto set = input::open_image_set(a.dir);
  const std::vector<std::string> problems = input::verify_packed_set(a.dir);
  for (const std::string& p : problems) std::cout << "damaged: " << p << "\n";
  std::cout << a.dir << ": " << set->describe() << (problems.empty() ? ", every shard's SHA-256 matches\n" : "\n");
  return problems.empty() ? 0 : 1;
}

// The pipeline alone, as train would run it on one rank: batches of random resized crops, flips
// and normalisation from every image of the set, on --threads threads; img/s and CPU time.
int run_bench(const DataArgs& a) {
  input::PipelineOptions o;
  o.batch = a.batch;
  o.image_size = a.image_size;
  o.threads = a.threads;
  o.seed = a.seed;
  o.allow_damaged = a.allow_damaged;
  auto set = std::shared_ptr<const input::ImageSet>(input::open_image_set(a.dir));
  input::Pipeline p(set, o);
  std::vector<float> images(size_t(a.batch) * 3 * size_t(a.image_size) * size_t(a.image_size));
  std::vector<int32_t> labels(size_t(a.batch));
  p.next(images.data(), labels.data());  // the threads started, the first batch made
  const input::PipelineTotals t0 = p.totals();
  const double cpu0 = process_cpu_seconds();
  const auto w0 = std::chrono::steady_clock::now();
  for (int64_t b = 0; b < a.batches; ++b) p.next(images.data(), labels.data());
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - w0).count();
  const double cpu = process_cpu_seconds() - cpu0;
  const input::PipelineTotals t1 = p.totals();
  const double img = double(a.batches) * a.batch;
  std::printf("# data bench: %s; batch %d, %dx%d crops, %d threads, %lld batches after the first\n",
              set->describe().c_str(), a.batch, a.image_size, a.image_size, a.threads, (long long)a.batches);
  std::printf("img_s %.1f  img_s_per_cpu %.1f  cpus %.2f  pipeline_cpu_s %.3f  stall_s %.3f  skipped %lld\n", img / wall,
              img / cpu, cpu / wall, t1.cpu_s - t0.cpu_s, t1.stall_s - t0.stall_s, (long long)(t1.skipped - t0.skipped));
  return 0;
}

}  // namespace

void add_data_options(CLI::App& cmd, DataArgs& a) {
  cmd.require_subcommand(1);
  a.make = cmd.add_subcommand("make", "Write a generated set: ringbench data make imagenet-like DIR --images N --seed S");
  a.make->add_option("kind", a.kind, "imagenet-like: natural-image-like JPEGs of ImageNet's sizes, 1000 classes")
      ->required();
  a.make->add_option("dir", a.dir, "Directory to write (new, or empty)")->required();
  input::MakeOptions& m = a.make_options;
  a.make->add_option("--images", m.images, "Images")->capture_default_str();
  a.make->add_option("--seed", m.seed, "Seed: the same seed makes the same bytes")->capture_default_str();
  a.make->add_option("--classes", m.classes, "Classes (labels)")->capture_default_str();
  a.make->add_option("--shard-images", m.shard_images, "Images per shard")->capture_default_str();
  a.make->add_option("--quality", m.quality, "JPEG quality")->capture_default_str();
  a.verify = cmd.add_subcommand("verify", "Check every shard of a packed set against its manifest's SHA-256");
  a.verify->add_option("dir", a.dir, "The set's directory")->required();
  a.bench = cmd.add_subcommand("bench", "Decode throughput of the input pipeline alone on a set (img/s, img/s per CPU)");
  a.bench->add_option("dir", a.dir, "The set's directory (packed or an image folder)")->required();
  a.bench->add_option("--threads", a.threads, "Pipeline threads")->capture_default_str()->check(CLI::Range(1, 256));
  a.bench->add_option("--batch", a.batch, "Images per batch")->capture_default_str()->check(CLI::Range(1, 4096));
  a.bench->add_option("--batches", a.batches, "Batches timed")->capture_default_str()->check(CLI::Range(1, 1000000));
  a.bench->add_option("--image-size", a.image_size, "Crop size")->capture_default_str()->check(CLI::Range(8, 2048));
  a.bench->add_option("--seed", a.seed, "Shuffle and augmentation seed")->capture_default_str();
  a.bench->add_flag("--allow-damaged-data", a.allow_damaged, "Go on although shards are missing or more than 1% of "
                    "the records cannot be read");
}

int run_data(const DataArgs& a) {
  if (a.make->parsed()) return run_make(a);
  if (a.bench->parsed()) return run_bench(a);
  return run_verify(a);
}

}  // namespace ringbench
