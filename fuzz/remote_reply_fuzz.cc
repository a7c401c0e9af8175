// libFuzzer: the client's decoders of what a device server sends (runner/remote/client.cc):
// the reply loop (headers, 'E' messages, 'P' gradient chunks and where they may land, the final
// 'O' payload) and the hello's device description, fed an arbitrary byte stream as the server's
// replies. The first byte picks what the client asked for. A reply must be taken or refused,
// never crash; a backward takes each LeNet node's chunk at most once.
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "base/errors.h"
#include "models/zoo.h"
#include "fuzz/memory_channel.h"
#include "runner/remote/channel.h"
#include "runner/remote/client.h"
#include "runner/remote/remote_network.h"

namespace {

using namespace ringbench;

using fuzzing::MemoryChannel;  // the input as what the other side sends

const models::Graph& lenet() {
  static const models::Graph g = models::build_model("lenet", {0, 0, false, -1});
  return g;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  MemoryChannel c(data + 1, size - 1);
  const std::string who = "fuzz server";
  const remote::Millis timeout(1000);
  uint64_t received = 0;
  try {
    switch (data[0] % 4) {
      case 0: {  // hello: a JSON description of at most 1 MiB
        std::string answer;
        remote::receive_reply(c, timeout, who, remote::Op::hello, {.out = &answer}, &received);
        remote::parse_device_description(answer, who);
        break;
      }
      case 1: {  // alloc: exactly 4 bytes
        char id[4];
        remote::receive_reply(c, timeout, who, remote::Op::alloc, {.into = id, .into_len = 4}, &received);
        break;
      }
      case 2: {  // backward: gradient chunks into LeNet's buffer
        const models::Graph& g = lenet();
        std::vector<float> grads(g.param_count);
        size_t done = 0;
        const remote::ChunkSink sink{
            [&](const remote::GradChunk& ch) { return remote::grad_chunk_destination(g, grads.data(), ch, who); },
            [&](const remote::GradChunk&) { ++done; }, remote::nodes_with_params(g)};
        try {
          remote::receive_reply(c, timeout, who, remote::Op::backward, {.chunks = &sink}, &received);
        } catch (const Error&) {
        }
        if (done > remote::nodes_with_params(g)) __builtin_trap();  // each node once at most
        break;
      }
      default:  // close: an empty reply
        remote::receive_reply(c, timeout, who, remote::Op::close_network, {}, &received);
    }
  } catch (const Error&) {  // refused, as the client would: the connection is then dropped
  }
  if (received > size - 1) __builtin_trap();  // counts only what was read
  return 0;
}
