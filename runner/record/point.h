// Where a sweep point sits: its kind and coordinates. The one typed description of a point: the
// sweep expands configs into it, writes it to raw.jsonl with write(), and the report reads it
// back with read(). A new option swept over (precision, fusion_mb, ...) is one declaration in
// axes.cc, not a field here: its value sits in `axes`.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "runner/record/axes.h"

namespace ringbench {

// Bounds of a point's coordinates: what a config may ask for, and what a record may hold.
constexpr int kMaxNodes = 4096;        // any cluster, mpirun's included
constexpr int kMaxBatch = 65536;       // images per rank per step
constexpr int kMaxImageSize = 4096;    // pixels a side
constexpr int kMaxVms = 64;            // VMs time-sliced on one device
constexpr size_t kMaxNameChars = 64;   // sweep, profile and framebuffer names
constexpr int kMaxSteps = 1000000;     // training steps (and warmup steps) of a point
constexpr double kMaxTimeoutS = 7 * 86400.0;  // a point's timeout or duration: a week
constexpr size_t kMaxPoints = 10000;   // points of a sweep, repeats included (and so a record's repeat)

// A name that can start a directory name and go anywhere in a report or a plot script:
// [A-Za-z0-9][A-Za-z0-9._-]*, at most kMaxNameChars.
bool is_safe_name(const std::string& s);

// train --compression's values: the gradients' type on the wire (auto: the training precision's).
inline const std::vector<std::string> kCompressionNames{"auto", "none", "fp16", "bf16"};
// train --data's values: what the ranks train on.
inline const std::vector<std::string> kDataNames{"synthetic", "fashion-mnist", "jpeg"};

enum class PointKind { train, collectives, share, infer, migrate, remote };
const char* kind_name(PointKind k);  // "train", "collectives", "share", "infer", "migrate", "remote"

// A remote point's setup (runner/sweep/remote_sweep.h): the same training on the device itself
// (local_device), through a device server on the device's node over loopback (loopback), with k
// clients sharing it (partial), or over the link from another node (link).
inline const std::vector<std::string> kRemoteSetups{"local_device", "loopback", "partial", "link"};
constexpr double kMaxLinkGbps = 10000, kMaxLatencyUs = 1e7;

struct PointCoords {
  PointKind kind = PointKind::train;
  std::string model;      // train, share, infer and migrate
  int batch = 0;          // train and share: images per rank (share: per VM) per step; infer: the largest batch served
  int image_size = 0;     // train, share and infer: 0 is the model's default
  int nodes = 1;
  std::string transport;  // a backend's name; "none" for one node: nothing to communicate
  std::string profile;    // a vGPU profile, or "none"
  std::string policy;     // share, and infer with vms > 0: the scheduler policy
  int vms = 0;            // share, and infer with vms > 0: VMs on the device (infer: 0 without a scheduler)
  std::string method;       // migrate: "precopy" | "stopcopy"
  std::string framebuffer;  // migrate: the framebuffer as configured ("4G"); "" where a profile gives it
  std::string setup;        // remote: one of kRemoteSetups
  int clients = 0;          // remote: clients of the device server (0: local_device, none)
  double link_gbps = 0;     // remote link: the device link's rate (0: unshaped)
  double latency_us = 0;    // remote link: its added one-way latency
  std::vector<std::string> axes = axis_defaults();  // every sweep axis's value (sweep_axes()'s order)

  // The value of sweep axis `key` ("precision", "fusion_mb"); the default where the kind has none.
  const std::string& axis(const std::string& key) const { return axes[axis_index(key)]; }
  // Whether any axis of the point is off its default.
  bool axes_set() const { return axes != axis_defaults(); }

  bool has_model() const { return kind != PointKind::collectives; }
  // k VMs time-sliced on one device by a scheduler: a share point, or an infer point with VMs.
  bool shared() const { return kind == PointKind::share || (kind == PointKind::infer && vms > 0); }
  // The coordinates as raw.jsonl records them (a model only where the kind has one).
  void write(nlohmann::json& record) const;
  // Back from a record, which may be hostile (results directories are shared and downloaded):
  // only known kinds, models, transports and policies, safe names, and numbers in their bounds;
  // anything else is an Error naming `where` and the field.
  static PointCoords read(const nlohmann::json& record, const std::string& where);
};

}  // namespace ringbench
