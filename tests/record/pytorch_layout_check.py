"""A torch module whose parts torchport lays out differently from PyTorch
(test_record_to_pytorch.cpp): torchport loads its state_dict into the C++
twin, saves the module as a record, and `torchport convert` writes that
record as .pt and .safetensors; torch's own module must take each with
load_state_dict(strict=True) and hold the original tensors.

  pytorch_layout_check.py make DIR     DIR/ref.pt: the module's state_dict
  pytorch_layout_check.py check DIR FILE...
      loads each FILE (.pt with torch.load, .safetensors with the
      safetensors package or the pure-Python reader) into a fresh module
      with load_state_dict(strict=True) and compares every tensor of its
      state_dict with ref.pt's, bit for bit. Prints one line per file.
"""

import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "interop"))


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 3)
        self.head = torch.nn.Linear(3, 2, bias=False)
        self.bn = torch.nn.BatchNorm2d(3)
        self.ln = torch.nn.LayerNorm(5)
        self.gn = torch.nn.GroupNorm(2, 4)
        self.prelu = torch.nn.PReLU(3)
        self.conv = torch.nn.Conv2d(2, 3, 3)
        self.emb = torch.nn.Embedding(10, 4)
        self.attn = torch.nn.MultiheadAttention(8, 2)
        self.cross = torch.nn.MultiheadAttention(8, 2, kdim=6, vdim=4)
        self.lstm = torch.nn.LSTM(4, 6, num_layers=2)
        self.gru = torch.nn.GRU(3, 5)


def make(out):
    torch.manual_seed(41)
    net = Net()
    with torch.no_grad():
        for p in net.parameters():
            p.copy_(torch.randn_like(p))
        net.bn.running_mean.copy_(torch.randn(3))
        net.bn.running_var.copy_(torch.rand(3) + 0.5)
        net.bn.num_batches_tracked.fill_(5)
    torch.save(net.state_dict(), os.path.join(out, "ref.pt"))


def load_any(path):
    if path.endswith(".safetensors"):
        try:
            from safetensors.torch import load_file
            return load_file(path)
        except ImportError:
            import safetensors_reader
            return safetensors_reader.load(path)[0]
    return torch.load(path)


def check(out, files):
    ref = torch.load(os.path.join(out, "ref.pt"))
    failed = 0
    for f in files:
        net = Net()
        try:
            net.load_state_dict(load_any(f), strict=True)
        except Exception as e:  # noqa: BLE001 - the message is the answer
            print(f"{os.path.basename(f)}: load_state_dict refused it: {e}")
            failed += 1
            continue
        got = net.state_dict()
        bad = [k for k in ref if got[k].dtype != ref[k].dtype or not torch.equal(got[k], ref[k])]
        if bad:
            print(f"{os.path.basename(f)}: {len(bad)} tensors differ: {bad[:5]}")
            failed += 1
        else:
            print(f"{os.path.basename(f)}: load_state_dict(strict=True) took all {len(ref)} tensors, equal")
    return 1 if failed else 0


if __name__ == "__main__":
    if sys.argv[1] == "make":
        make(sys.argv[2])
    else:
        sys.exit(check(sys.argv[2], sys.argv[3:]))
