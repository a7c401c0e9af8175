// The verbs transport's address exchange (collectives/transport/verbs/verbs_wire.h): a peer's published
// address reaches ibv_modify_qp only when every field checks out, and a bad one is an IoError
// that names the peer and the field. No RDMA device needed.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>

#include "base/errors.h"
#include "collectives/transport/verbs/verbs_wire.h"

namespace vw = ringbench::verbs_wire;

namespace {

// What rank 1 of 3 publishes on RoCE: QP numbers 0x100 + 2*peer (data) and +1 (control).
vw::ConnInfo header() {
  vw::ConnInfo c{};
  c.magic = vw::kMagic;
  c.version = vw::kProtocolVersion;
  c.rank = 1;
  c.world_size = 3;
  c.psn = 0x123456;
  c.mtu = 3;  // 1024
  c.lid = 0;
  c.link_layer = vw::kLinkEthernet;
  const uint8_t gid[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 77, 0, 2};
  std::memcpy(c.gid, gid, 16);
  std::strcpy(c.job_id, "job-7");
  return c;
}
std::vector<uint32_t> qpns() { return {0x100, 0x101, 0, 0, 0x104, 0x105}; }

vw::Expected expected() {
  return {.peer = 1, .rank = 0, .world_size = 3, .job_id = "job-7", .link_layer = vw::kLinkEthernet, .me = "rank 0"};
}

// Decoding `blob` fails with an IoError blaming rank 1 whose text has `part`.
void expect_refused(const std::string& blob, const std::string& part, vw::Expected e = expected()) {
  try {
    vw::decode(blob, e);
    ADD_FAILURE() << "accepted; expected an error with: " << part;
  } catch (const ringbench::IoError& err) {
    EXPECT_EQ(err.peer(), 1) << err.what();
    EXPECT_NE(std::string(err.what()).find(part), std::string::npos) << err.what();
    EXPECT_EQ(std::string(err.what()).rfind("rank 0: rank 1", 0), 0u) << err.what();
  }
}
std::string with(const std::function<void(vw::ConnInfo&)>& change, std::vector<uint32_t> q = qpns()) {
  vw::ConnInfo c = header();
  change(c);
  return vw::encode(c, q);
}

}  // namespace

TEST(VerbsWire, AGoodAddressRoundTrips) {
  const vw::PeerAddress a = vw::decode(vw::encode(header(), qpns()), expected());
  EXPECT_EQ(a.data_qpn, 0x100u);  // the pair meant for rank 0
  EXPECT_EQ(a.ctrl_qpn, 0x101u);
  EXPECT_EQ(a.psn, 0x123456u);
  EXPECT_EQ(a.mtu, 3u);
  EXPECT_EQ(vw::gid_string(a.gid), "::ffff:10.77.0.2");
  vw::Expected e = expected();
  e.rank = 2;
  EXPECT_EQ(vw::decode(vw::encode(header(), qpns()), e).data_qpn, 0x104u);
}

TEST(VerbsWire, EveryBadFieldIsRefusedNamingThePeerAndTheField) {
  const std::string good = vw::encode(header(), qpns());
  expect_refused(good.substr(0, 10), "10 bytes, less than the");
  expect_refused(good + "x", "thinks it is rank 1 of 3 (" + std::to_string(good.size() + 1) + " bytes)");
  expect_refused(good.substr(0, good.size() - 4), "bytes), this is rank 0 of 3");
  expect_refused(with([](auto& c) { c.magic = 0x11111111; }), "not a ringbench verbs address");
  expect_refused(with([](auto& c) { c.version = 9; }), "speaks verbs protocol 9, this rank 2");
  expect_refused(with([](auto& c) { std::memset(c.job_id, 'j', sizeof c.job_id); }), "job id not terminated");
  expect_refused(with([](auto& c) { std::strcpy(c.job_id, "other"); }), "belongs to job 'other'");
  expect_refused(with([](auto& c) { c.rank = 2; }), "thinks it is rank 2 of 3");
  expect_refused(with([](auto& c) { c.world_size = 4; }, {0x100, 0x101, 0, 0, 0x104, 0x105, 0, 0}),
                 "thinks it is rank 1 of 4");
  expect_refused(with([](auto& c) { c.link_layer = vw::kLinkInfiniband; c.lid = 5; }), "another link layer");
  expect_refused(with([](auto& c) { c.mtu = 0; }), "MTU code 0");
  expect_refused(with([](auto& c) { c.mtu = 6; }), "MTU code 6");
  expect_refused(with([](auto& c) { c.psn = 1u << 24; }), "PSN 16777216 is not 24-bit");
  expect_refused(with([](auto& c) { std::memset(c.gid, 0, 16); }), "a zero GID on RoCE");
  expect_refused(with([](auto&) {}, {0, 0x101, 0, 0, 0x104, 0x105}), "data QP number 0 for rank 0");
  expect_refused(with([](auto&) {}, {0x100, 1, 0, 0, 0x104, 0x105}), "control QP number 1 for rank 0");
  expect_refused(with([](auto&) {}, {1u << 24, 0x101, 0, 0, 0x104, 0x105}), "data QP number 16777216");
  // InfiniBand routes by LID: 0 and multicast LIDs are refused.
  vw::Expected ib = expected();
  ib.link_layer = vw::kLinkInfiniband;
  expect_refused(with([](auto& c) { c.link_layer = vw::kLinkInfiniband; c.lid = 0; }), "LID 0 is not a unicast LID", ib);
  expect_refused(with([](auto& c) { c.link_layer = vw::kLinkInfiniband; c.lid = 0xC001; }), "LID 49153", ib);
  EXPECT_NO_THROW(vw::decode(with([](auto& c) { c.link_layer = vw::kLinkInfiniband; c.lid = 7; }), ib));
}
