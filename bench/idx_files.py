"""Fashion-MNIST's IDX files (gzipped or not) as NumPy arrays, for the PyTorch
references of the bench scripts: the files netc train reads, read the same way."""
import gzip, os
import numpy as np

def idx(path):
    op = gzip.open if path.endswith(".gz") else open
    with op(path, "rb") as f:
        data = f.read()
    magic = int.from_bytes(data[:4], "big"); rank = magic & 0xff
    dims = [int.from_bytes(data[4 + 4 * i: 8 + 4 * i], "big") for i in range(rank)]
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * rank).reshape(dims)

def find(d, stem):
    for name in (stem + ".gz", stem):
        if os.path.exists(os.path.join(d, name)): return os.path.join(d, name)
    raise FileNotFoundError(stem)
