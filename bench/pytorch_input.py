#!/usr/bin/env python3
"""The PyTorch side of bench/compare_input_pytorch.py: torchvision's default ImageNet training
input path on a ringbench image set (`ringbench data make`'s shards, read through their index):
PIL decode, RandomResizedCrop, RandomHorizontalFlip, ToTensor, Normalize, batched by a
DataLoader with --workers worker processes. Prints one line as `ringbench data bench` does:

  img_s X  img_s_per_cpu Y  cpus Z

CPU time is the main process's and every worker's (from /proc), over the timed batches.
"""
import argparse
import io
import os
import struct
import time

import torch
from PIL import Image
from torch.utils.data import DataLoader, Dataset
from torchvision import transforms


def read_records(set_dir):
    """Every record of the set: (shard path, offset, bytes, label), from the shards' indexes."""
    records = []
    with open(os.path.join(set_dir, "manifest.txt")) as f:
        shards = [line.split()[1] for line in f if line.startswith("shard ")]
    for name in shards:
        path = os.path.join(set_dir, name)
        with open(path, "rb") as f:
            head = f.read(16)
            if head[:8] != b"RBSHARD1":
                raise SystemExit(path + ": not a ringbench shard")
            count = struct.unpack_from("<I", head, 8)[0]
            index = f.read(24 * count)
        for i in range(count):
            offset, size, label = struct.unpack_from("<QII", index, 24 * i)
            records.append((path, offset, size, label))
    return records


class ShardImages(Dataset):
    def __init__(self, records, size):
        self.records = records
        self.transform = transforms.Compose([
            transforms.RandomResizedCrop(size),
            transforms.RandomHorizontalFlip(),
            transforms.ToTensor(),
            transforms.Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225]),
        ])

    def __len__(self):
        return len(self.records)

    def __getitem__(self, i):
        path, offset, size, label = self.records[i]
        with open(path, "rb") as f:
            f.seek(offset)
            data = f.read(size)
        image = Image.open(io.BytesIO(data)).convert("RGB")
        return self.transform(image), label


def cpu_seconds(pids):
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for pid in pids:
        try:
            with open("/proc/%d/stat" % pid) as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / tick  # utime, stime
        except OSError:
            pass
    return total


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("set_dir")
    p.add_argument("--workers", type=int, default=1)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--batches", type=int, default=20)
    p.add_argument("--image-size", type=int, default=224)
    p.add_argument("--seed", type=int, default=1)
    a = p.parse_args()
    torch.manual_seed(a.seed)
    torch.set_num_threads(1)
    loader = DataLoader(ShardImages(read_records(a.set_dir), a.image_size), batch_size=a.batch, shuffle=True,
                        num_workers=a.workers, drop_last=True, persistent_workers=True, prefetch_factor=2)
    it = iter(loader)
    next(it)  # the workers started, the first batch made
    pids = [os.getpid()] + [w.pid for w in it._workers]
    cpu0, wall0 = cpu_seconds(pids), time.perf_counter()
    for _ in range(a.batches):
        try:
            next(it)
        except StopIteration:
            it = iter(loader)
            next(it)
    wall = time.perf_counter() - wall0
    cpu = cpu_seconds(pids) - cpu0
    images = a.batches * a.batch
    print("# pytorch %s torchvision DataLoader, %d workers, batch %d, %dx%d crops, %d batches after the first"
          % (torch.__version__, a.workers, a.batch, a.image_size, a.image_size, a.batches))
    print("img_s %.1f  img_s_per_cpu %.1f  cpus %.2f" % (images / wall, images / cpu if cpu > 0 else 0, cpu / wall))


if __name__ == "__main__":
    main()
