// The verbs transport's memory registration: a buffer as MRs of at most mr_chunk_bytes, its SGEs.
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "base/errors.h"
#include "collectives/transport/verbs/verbs_internal.h"

namespace ringbench::verbs_detail {
namespace {

class VerbsBuffer : public Buffer {
 public:
  VerbsBuffer(std::shared_ptr<Device> dev, const void* owner, void* data, size_t bytes,
              size_t chunk)
      : Buffer(data, bytes, MemKind::host), dev_(std::move(dev)), owner_(owner), chunk_(chunk) {
    for (size_t off = 0; off < bytes; off += chunk) {
      size_t n = std::min(chunk, bytes - off);
      ibv_mr* mr = ibv_reg_mr(dev_->pd, static_cast<char*>(data) + off, n, kLocalWriteAccess);
      if (!mr) {
        int err = errno;
        release();
        throw Error("ibv_reg_mr of " + std::to_string(n) + " bytes (chunk " +
                    std::to_string(mrs_.size()) + " of a " + std::to_string(bytes) +
                    "-byte buffer) on " + dev_->name + " failed: " + std::strerror(err) +
                    (err == ENOMEM ? " (locked-memory limit? see ulimit -l)" : ""));
      }
      mrs_.push_back(mr);
    }
  }
  ~VerbsBuffer() override { release(); }
  const void* owner() const { return owner_; }
  size_t chunk() const { return chunk_; }
  const std::vector<ibv_mr*>& mrs() const { return mrs_; }

 private:
  void release() {
    for (ibv_mr* mr : mrs_) ibv_dereg_mr(mr);
    mrs_.clear();
  }
  std::shared_ptr<Device> dev_;
  const void* owner_;
  size_t chunk_;
  std::vector<ibv_mr*> mrs_;
};

}  // namespace

std::unique_ptr<Buffer> VerbsTransport::register_buffer(void* data, size_t bytes, MemKind kind) {
  if (kind != MemKind::host)
    throw Error("the verbs transport takes host memory only (no GPUDirect RDMA yet)");
  return std::make_unique<VerbsBuffer>(dev_, this, data, bytes, chunk_);
}

// A message no longer than the port takes (after the common checks), and its SGEs.
void VerbsTransport::prepare(ReqState& r, const Buffer& buf, size_t offset) const {
  if (r.length > port_attr_.max_msg_sz)
    throw Error(me() + ": a " + std::to_string(r.length) + "-byte message exceeds " + dev_->name +
                "'s maximum of " + std::to_string(port_attr_.max_msg_sz) + " bytes");
  r.sges = sg_list(buf, offset, r.length);
}

// One SGE per memory region the range crosses.
std::vector<ibv_sge> VerbsTransport::sg_list(const Buffer& buf, size_t offset, size_t length) const {
  auto* vb = dynamic_cast<const VerbsBuffer*>(&buf);
  if (!vb || vb->owner() != this)
    throw Error(me() + ": buffer was not registered with this verbs transport");
  std::vector<ibv_sge> v;
  const size_t chunk = vb->chunk();
  const size_t nsge = length == 0 ? 0 : (offset + length - 1) / chunk - offset / chunk + 1;
  if (nsge > max_sge_)
    throw Error(me() + ": a " + std::to_string(length) + "-byte transfer spans " +
                std::to_string(nsge) + " memory regions of " + std::to_string(chunk) +
                " bytes, more than the " + std::to_string(max_sge_) + " scatter/gather entries " +
                dev_->name + " allows: use a larger --mr-chunk or smaller segments");
  v.reserve(nsge);
  auto* base = static_cast<char*>(buf.data());
  while (length > 0) {
    size_t i = offset / chunk;
    size_t n = std::min(length, chunk - (offset - i * chunk));
    v.push_back({reinterpret_cast<uint64_t>(base + offset), static_cast<uint32_t>(n),
                 vb->mrs()[i]->lkey});
    offset += n;
    length -= n;
  }
  return v;
}

}  // namespace ringbench::verbs_detail
