"""What the bench's PyTorch references share so that one code path measures on
the GPU (--device cuda, the default: what the lent GPU machine runs) and runs
on the CPU at tiny sizes (--device cpu: bench/rehearse.sh, which has no GPU,
runs each script that way to find what rotted before a GPU session spends its
minutes on it). On the CPU the CUDA-only parts change and nothing else: a
call's device time by time.perf_counter instead of CUDA events, no
synchronisation, and the CUDA allocator's peak memory a null whose reason is
in the row's "null_because" (bench/rehearse.sh accepts only those nulls)."""
import time

import torch


def add_device_arg(parser):
    parser.add_argument("--device", default="cuda", choices=("cuda", "cpu"),
                        help="cuda (the measurement) or cpu (a rehearsal at tiny sizes)")


def device_of(args):
    """The device --device names. On the CPU one thread: the rehearsal runs on shared,
    busy cores, where PyTorch's OpenMP threads spin against each other (a forward pass
    of the tiny GPT-2 took 300 ms on 2 threads, 1 ms on one)."""
    device = torch.device(args.device)
    if device.type == "cpu":
        torch.set_num_threads(1)
    return device


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


def call_us(device, fn):
    """Microseconds of device time one call of fn takes: CUDA events around it on the
    GPU (the host's launch overhead left out), the host's clock on the CPU."""
    if device.type == "cuda":
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        return a.elapsed_time(b) * 1e3
    t = time.perf_counter()
    fn()
    return (time.perf_counter() - t) * 1e6


def reset_peak(device):
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats()


def peak_gib(device, row, key):
    """row[key]: the CUDA allocator's peak since reset_peak, in GiB; null on the CPU,
    where PyTorch keeps no such count, with the reason beside it."""
    if device.type == "cuda":
        row[key] = round(torch.cuda.max_memory_allocated() / 2**30, 2)
    else:
        row[key] = None
        row.setdefault("null_because", {})[key] = "the CUDA allocator's peak: no CUDA allocator on the CPU"
    return row
