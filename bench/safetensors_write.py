"""Writes a safetensors file of f32 tensors: what the bench's loss comparisons
hand netc as the initial weights both sides start from."""

import json
import struct

import torch


def write_safetensors(path, tensors):
    header, blobs, at = {}, [], 0
    for name, t in tensors.items():
        data = t.detach().float().contiguous().cpu().numpy().tobytes()
        header[name] = {"dtype": "F32", "shape": list(t.shape), "data_offsets": [at, at + len(data)]}
        blobs.append(data)
        at += len(data)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)   # the data starts 8-byte aligned
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for data in blobs:
            f.write(data)


def write_adamw_start(path, params):
    """params and the AdamW moments netc keeps as state parameters, zero at the start."""
    state = dict(params)
    for name, t in params.items():
        state[name + ".adam_m"] = torch.zeros_like(t)
        state[name + ".adam_v"] = torch.zeros_like(t)
    write_safetensors(path, state)
