// End-to-end tests of `ringbench train`: local ranks, the output users read (Horovod's img/sec
// lines), the JSON and timeline files, and clear errors for bad input.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "tests/run_command.h"

namespace ringbench {
namespace {

using namespace ringbench::testing;  // run_command.h
const std::string kBin = RINGBENCH_BIN;

TEST(TrainCli, TwoLocalRanksReportJsonAndTimeline) {
  const std::string json = temp_path("train") + ".json", trace = temp_path("trace") + ".json";
  auto r = run_command(kBin + " train --model lenet --batch 8 --steps 4 --warmup 1 --log-every 2 "
                       "--ranks 2 --fusion-mb 1 --json " + json + " --timeline " + trace);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("Img/sec per rank:"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("Total img/sec on 2 rank(s):"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("ring (ours) over tcp"), std::string::npos) << r.output;
  auto doc = read_json(json);
  EXPECT_EQ(doc["meta"]["params"], 1663370);
  EXPECT_EQ(doc["meta"]["ranks"], 2);
  EXPECT_EQ(doc["meta"]["steps"], 4);
  EXPECT_EQ(doc["meta"]["path"]["transport"], "tcp");
  EXPECT_GE(doc["meta"]["buckets"]["list"].size(), 2u);
  ASSERT_EQ(doc["ranks"].size(), 2u);
  for (const auto& rk : doc["ranks"]) EXPECT_EQ(rk["step_s"].size(), 4u);
  const double per = doc["summary"]["img_s_per_rank"]["mean"], total = doc["summary"]["total_img_s"]["mean"];
  EXPECT_GT(per, 0);
  // Total is summed over ranks per step, so it is close to (not exactly) 2 x per rank.
  EXPECT_GT(total, 1.5 * per);
  EXPECT_LT(total, 2.5 * per);
  EXPECT_GE(doc["summary"]["exposed_s"]["max_over_ranks"].get<double>(),
            doc["summary"]["exposed_s"]["mean_over_ranks"].get<double>());
  for (int rank = 0; rank < 2; ++rank) {
    std::string path = trace.substr(0, trace.size() - 5) + ".rank" + std::to_string(rank) + ".json";
    auto tl = read_json(path);
    int fwd = 0, bwd = 0, ar = 0;
    for (const auto& e : tl["traceEvents"]) {
      if (e["ph"] != "X") continue;
      fwd += e["cat"] == "forward";
      bwd += e["cat"] == "backward";
      ar += e["cat"] == "allreduce";
    }
    EXPECT_GT(fwd, 0) << path;
    EXPECT_GT(bwd, 0) << path;
    EXPECT_GT(ar, 0) << path;
    std::remove(path.c_str());
  }
  std::remove(json.c_str());
}

TEST(TrainCli, SingleRankNoAllreduce) {
  auto r = run_command(kBin + " train --model lenet --batch 4 --steps 2 --warmup 0");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("Total img/sec on 1 rank(s):"), std::string::npos) << r.output;
}

// --weight-grad-thread on: the weight gradients on a second thread, said in the header and the
// JSON, for each rank; where it cannot be (the reference backend), a clear error.
TEST(TrainCli, WeightGradientsOnASecondThread) {
  auto [code, output, doc] = run_json(kBin + " train --model lenet --batch 4 --steps 2 --warmup 1 --ranks 2 "
                                      "--threads 1 --weight-grad-thread on");
  ASSERT_EQ(code, 0) << output;
  EXPECT_NE(output.find("threads per rank 1 (--threads), weight gradients on a second thread"), std::string::npos)
      << output;
  EXPECT_EQ(doc["meta"]["weight_grad_thread"], true);
  for (const auto& h : doc["meta"]["hosts"]) EXPECT_EQ(h["weight_grad_thread"], true) << h.dump();
  EXPECT_TRUE(fails_saying(kBin + " train --backend reference --weight-grad-thread on --steps 1",
                           "--weight-grad-thread on: the reference backend"));
  EXPECT_TRUE(fails_saying(kBin + " train --weight-grad-thread maybe", "--weight-grad-thread"));
  auto [off_code, off_output, off_doc] = run_json(kBin + " train --model lenet --batch 4 --steps 1 --warmup 0 "
                                                  "--weight-grad-thread off");
  ASSERT_EQ(off_code, 0) << off_output;
  EXPECT_EQ(off_doc["meta"]["weight_grad_thread"], false);
  EXPECT_EQ(off_output.find("weight gradients on a second thread"), std::string::npos) << off_output;
}

// How many CPUs the rank kept busy (its CPU time over its wall time): one compute thread and no
// communication thread keep at most about one busy.
TEST(TrainCli, SaysHowManyCpusTheRankKeptBusy) {
  auto [code, output, doc] = run_json(kBin + " train --model lenet --batch 8 --steps 30 --warmup 1 --threads 1 "
                                      "--weight-grad-thread off");
  ASSERT_EQ(code, 0) << output;
  EXPECT_NE(output.find("# CPUs busy per rank (process CPU time / wall time over the measured steps): "),
            std::string::npos) << output;
  ASSERT_EQ(doc["ranks"][0]["cpu_s"].size(), 30u);
  const double busy = doc["summary"]["cpus_busy_per_rank"];
  EXPECT_GT(busy, 0);
  EXPECT_LT(busy, 1.2);
  EXPECT_EQ(doc["summary"]["cpus_busy_min_max"], nlohmann::json({busy, busy}));
  EXPECT_GT(doc["summary"]["cpu_s"]["mean_over_ranks"].get<double>(), 0);
}

// --layer-times: extra steps after the measured ones, every layer timed, the table on rank 0.
TEST(TrainCli, LayerTimesSayWhereTheStepGoes) {
  auto [code, output, doc] =
      run_json(kBin + " train --model lenet --batch 8 --steps 2 --warmup 1 --ranks 2 --layer-times 3");
  ASSERT_EQ(code, 0) << output;
  EXPECT_TRUE(has_all(output, {"# where time goes (rank 0, median of 3 profiled steps", "#   conv 5x5"}));
  EXPECT_EQ(doc["meta"]["steps"], 2);  // the profiled steps are not measured ones
  ASSERT_EQ(doc["ranks"][0]["step_s"].size(), 2u);
  const auto& lt = doc["layer_times"];
  EXPECT_EQ(lt["steps"], 3);
  EXPECT_EQ(lt["layers"].size(), 10u);
  double layers = 0;
  for (const auto& l : lt["layers"]) layers += l["forward_s"].get<double>() + l["backward_s"].get<double>();
  EXPECT_GT(layers, 0);
  // Each step's layers fit in it, but medians taken layer by layer over 3 noisy steps need not
  // add up to at most the median step: allow that noise, not a layer counted twice.
  EXPECT_LE(layers, 1.5 * lt["step_s"].get<double>());
}

TEST(TrainCli, BadInputIsAClearError) {
  EXPECT_TRUE(fails_saying(kBin + " train --model resnet50", "mobilenet_v1"));  // lists the models
  EXPECT_TRUE(fails_saying(kBin + " train --transport rdma", "--transport rdma is not known: use tcp, verbs, "));
  EXPECT_TRUE(fails_saying(kBin + " train --batch 0", "--batch"));
  EXPECT_TRUE(fails_saying(kBin + " train --segment 1K", "--segment 1K must be from 4K to 1G"));
  EXPECT_TRUE(fails_saying(kBin + " train --segment lots", "'lots' is not a size"));
  EXPECT_TRUE(fails_saying(kBin + " train --epochs 1", "real dataset"));
  EXPECT_TRUE(fails_saying(kBin + " train --data fashion-mnist --data-dir /nonexistent --steps 1", "/nonexistent"));
  // More memory than the machine has: refused before any rank starts, with the sizes (it was a
  // bare std::bad_alloc).
  const auto r = run_command(kBin + " train --device cpu --model mobilenet_v1 --batch 8 --image-size 100000 --steps 1");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("--model mobilenet_v1 --batch 8 at 100000x100000 px needs at least "), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find(" GiB per rank (layer outputs and their gradients "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("; this machine has "), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("bad_alloc"), std::string::npos) << r.output;
}

// Without a GPU (or without CUDA in the build) --device cuda and --transport nccl fail at once,
// before any rank starts, saying why; auto falls back to the CPU. On a machine with a GPU they
// run: then there is nothing to check here (the gpu-labelled tests cover them).
TEST(TrainCli, GpuOptionsWithoutAGpuAreClearErrors) {
  const auto cuda = run_command(kBin + " train --device cuda --batch 2 --steps 1 --warmup 0 --ranks 2");
  if (cuda.exit_code == 0) GTEST_SKIP() << "a GPU is here: --device cuda ran";
  EXPECT_TRUE(refused_without_gpu(cuda, "--device cuda: ", "CUDA"));
  const auto nccl = run_command(kBin + " train --transport nccl --batch 2 --steps 1 --warmup 0 --ranks 2");
  EXPECT_TRUE(refused_without_gpu(nccl, "--transport nccl is not available: ", "NCCL"));
  EXPECT_TRUE(fails_saying(kBin + " train --backend cudnn --steps 1", "--backend cudnn needs a GPU"));
  EXPECT_TRUE(fails_saying(kBin + " train --device tpu", "use cpu, cuda or auto"));
  // auto: the CPU, and the metadata says why there is no GPU.
  auto [code, output, doc] = run_json(kBin + " train --batch 2 --steps 1 --warmup 0");
  ASSERT_EQ(code, 0) << output;
  EXPECT_NE(output.find("# gpu: none ("), std::string::npos) << output;
  EXPECT_EQ(doc["meta"]["device"], "cpu");
  EXPECT_EQ(doc["meta"]["hosts"][0]["gpu"]["available"], false);
  EXPECT_FALSE(doc["meta"]["hosts"][0]["gpu"]["reason"].get<std::string>().empty());
}

// --precision and --compression (issues 39, 40): the header and the JSON say what computed in
// which precision and what crossed the wire, and a bucket's bytes are the wire's.
TEST(TrainCli, PrecisionAndGradientWireAreSaidAndRecorded) {
  const std::string json = temp_path("wire") + ".json", trace = temp_path("wire-trace") + ".json";
  auto r = run_command(kBin + " train --model lenet --batch 8 --steps 2 --warmup 1 --ranks 2 --compression bf16 --json " +
                       json + " --timeline " + trace);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(has_all(r.output, {"# precision fp32: forward and backward in fp32; master weights, gradients",
                                 "gradients on the wire: as bf16 (--compression bf16)",
                                 "gradient allreduce: ring (ours) over tcp, gradients as bfloat16 on the wire"}));
  const auto doc = read_json(json);
  EXPECT_EQ(doc["meta"]["precision"]["compute"], "fp32");
  EXPECT_EQ(doc["meta"]["precision"]["master_weights"], "fp32");
  EXPECT_EQ(doc["meta"]["gradient_wire"]["dtype"], "bf16");
  EXPECT_EQ(doc["meta"]["gradient_wire"]["bytes_per_step"], 1663370 * 2);
  for (const auto& b : doc["meta"]["buckets"]["list"]) EXPECT_EQ(b["bytes"], 2 * b["count"].get<size_t>()) << b;
  std::remove(json.c_str());
  // The timeline's bucket tracks name the wire's bytes too.
  const std::string rank0 = trace.substr(0, trace.size() - 5) + ".rank0.json";
  std::ifstream tf(rank0);
  const std::string timeline((std::istreambuf_iterator<char>(tf)), std::istreambuf_iterator<char>());
  const auto& first = doc["meta"]["buckets"]["list"][0];
  EXPECT_NE(timeline.find("allreduce bucket 0 (" + std::to_string(first["bytes"].get<size_t>()) + " B)"),
            std::string::npos) << first;
  for (int rank = 0; rank < 2; ++rank)
    std::remove((trace.substr(0, trace.size() - 5) + ".rank" + std::to_string(rank) + ".json").c_str());
  // Uncompressed: fp32 on the wire, 4 bytes a gradient.
  r = run_command(kBin + " train --model lenet --batch 8 --steps 2 --warmup 1 --ranks 2 --json " + json);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("gradients on the wire: as fp32\n"), std::string::npos) << r.output;
  EXPECT_EQ(read_json(json)["meta"]["gradient_wire"]["bytes_per_step"], 1663370 * 4);
  std::remove(json.c_str());
}

// bf16 end to end where the CPU computes it: two ranks stay bit-identical (train fails when the
// final hashes differ), and the gradients cross the wire as bf16 by default.
TEST(TrainCli, Bf16TrainsTwoRanksWhereTheCpuHasIt) {
  const std::string json = temp_path("bf16") + ".json";
  auto r = run_command(kBin + " train --model mobilenet_v1 --image-size 32 --batch 4 --steps 3 --warmup 1 --ranks 2 "
                       "--backend onednn --precision bf16 --json " + json);
  if (r.output.find("needs a CPU with native bf16") != std::string::npos) GTEST_SKIP() << r.output;
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(has_all(r.output, {"# precision bf16: forward and backward in bf16",
                                 "gradients on the wire: as bf16 (--compression auto: the training precision)"}));
  const auto doc = read_json(json);
  EXPECT_EQ(doc["meta"]["precision"]["compute"], "bf16");
  EXPECT_EQ(doc["meta"]["gradient_wire"]["dtype"], "bf16");
  EXPECT_NE(doc["meta"]["backend_detail"].get<std::string>().find("bf16"), std::string::npos) << doc["meta"];
  std::remove(json.c_str());
}

// A precision the backend or the hardware cannot run is an error naming why, never a fallback.
TEST(TrainCli, PrecisionsThatCannotRunHereAreClearErrors) {
  const std::string train = kBin + " train --model lenet --batch 4 --steps 1 --warmup 0";
  EXPECT_TRUE(fails_saying(train + " --backend onednn --precision fp16", "--precision fp16: this needs a GPU"));
  EXPECT_TRUE(fails_saying(train + " --backend onednn --precision tf32", "--precision tf32: this needs a GPU"));
  EXPECT_TRUE(fails_saying(train + " --backend reference --precision bf16", "the reference backend is the fp32 oracle"));
  EXPECT_TRUE(fails_saying(train + " --precision fp8", "--precision: fp8 not in {fp32,tf32,bf16,fp16}"));
  EXPECT_TRUE(fails_saying(train + " --compression int8", "--compression: int8 not in {auto,none,fp16,bf16}"));
}

// --loss-scale (issue 39): a scale of 2^127 overflows lenet's gradients, so the first steps are
// skipped on both ranks, logged, and counted in the JSON; bad values are clear errors.
TEST(TrainCli, LossScalingSkipsOverflowingStepsAndSaysSo) {
  const std::string json = temp_path("lossscale") + ".json";
  auto r = run_command(kBin + " train --model lenet --batch 8 --steps 3 --warmup 0 --ranks 2 --log-every 0 "
                       "--loss-scale dynamic:170141183460469231731687303715884105728 --json " + json);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("# loss scale: dynamic from 170141183460469231731687303715884105728"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("SKIPPED: inf/NaN gradients at loss scale"), std::string::npos) << r.output;
  auto doc = read_json(json);
  const auto& ls = doc["summary"]["loss_scale"];
  EXPECT_EQ(ls["mode"], "dynamic");
  EXPECT_GE(ls["skipped_steps"].get<int>(), 1) << ls.dump();
  EXPECT_LT(ls["final"].get<double>(), 0x1p127);
  const std::string train = kBin + " train --model lenet --batch 4 --steps 1 --warmup 0";
  EXPECT_TRUE(fails_saying(train + " --loss-scale dynamic:1000", "--loss-scale 'dynamic:1000': use auto, none"));
  EXPECT_TRUE(fails_saying(train + " --loss-scale static", "--loss-scale 'static'"));
  auto plain = run_command(train + " --json " + json);
  ASSERT_EQ(plain.exit_code, 0) << plain.output;
  EXPECT_EQ(read_json(json)["summary"]["loss_scale"]["mode"], "none") << "auto is none in fp32";
  std::remove(json.c_str());
}

TEST(TrainCli, RanksWithDifferentOptionsFail) {
  // Ranks started by hand through the environment, rank 1 with another batch size.
  const std::string port = std::to_string(20000 + getpid() % 20000);
  const std::string env = "RINGBENCH_WORLD_SIZE=2 RINGBENCH_STORE=127.0.0.1:" + port + " RINGBENCH_JOB_ID=t" + port;
  auto r = run_command("(" + env + " RINGBENCH_RANK=0 RINGBENCH_STORE_SERVE=1 " + kBin +
                       " train --batch 4 --steps 1 --timeout 5 & " + env + " RINGBENCH_RANK=1 " + kBin +
                       " train --batch 8 --steps 1 --timeout 5; wait)");
  EXPECT_NE(r.output.find("differ from rank 0's"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace ringbench
