// `ringbench data`: image sets for `train --data jpeg` (input/).
//   data make imagenet-like DIR --images N --seed S   a generated set in shards with a manifest
//   data verify DIR                                    every shard's SHA-256 against the manifest
//   data bench DIR --threads T                         the pipeline's decode throughput
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>

#include "input/make_set.h"

namespace ringbench {

struct DataArgs {
  CLI::App* make = nullptr;
  CLI::App* verify = nullptr;
  CLI::App* bench = nullptr;
  std::string kind, dir;
  input::MakeOptions make_options;
  // bench
  int threads = 1, image_size = 224, batch = 32;
  int64_t batches = 20;
  uint64_t seed = 1;
  bool allow_damaged = false;
};

void add_data_options(CLI::App& cmd, DataArgs& a);
int run_data(const DataArgs& a);

}  // namespace ringbench
