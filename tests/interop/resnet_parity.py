"""torchvision ResNets against examples/resnet (test_interop_resnet.cpp).

  resnet_parity.py make ARCH DIR
      DIR/weights.pt          the state_dict() of a random-initialised
                              torchvision ARCH whose BatchNorm layers have
                              non-trivial statistics and affine parameters
      DIR/input.safetensors   'input', F32 [2, 3, 64, 64]
      DIR/expected.pt         {'logits': torch's eval-mode output}
  resnet_parity.py compare DIR RTOL
      reads DIR/output.safetensors (what resnet_infer wrote) with the
      pure-Python reader and exits 1 unless 'logits' has torch's shape and
      max|output - logits| <= RTOL * max|logits|. Prints the numbers.
"""

import os
import sys
import zlib

import torch
import torchvision

import safetensors_reader
import safetensors_writer


def make(arch, out):
    os.makedirs(out, exist_ok=True)
    seed = zlib.crc32(arch.encode())  # a different, reproducible model per depth
    torch.manual_seed(seed)
    model = getattr(torchvision.models, arch)()  # torchvision's own random initialisation
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                c = m.num_features
                # A freshly built BatchNorm is the identity (mean 0, var 1,
                # weight 1, bias 0): perturb all four so every term of the
                # eval-mode formula is exercised. Weights in [0.5, 1) keep
                # resnet152's logits near 1e2 (around 1 they reach 1e9, as
                # every residual block adds to the activations).
                m.running_mean.copy_(torch.randn(c, generator=g) * 0.2)
                m.running_var.copy_(torch.rand(c, generator=g) + 0.5)
                m.weight.copy_(0.5 + torch.rand(c, generator=g) * 0.5)
                m.bias.copy_(torch.randn(c, generator=g) * 0.2)
                m.num_batches_tracked.fill_(7)
    model.eval()
    x = torch.randn(2, 3, 64, 64, generator=g)
    with torch.no_grad():
        logits = model(x)
    torch.save(model.state_dict(), os.path.join(out, "weights.pt"))
    safetensors_writer.save({"input": x}, os.path.join(out, "input.safetensors"))
    torch.save({"logits": logits}, os.path.join(out, "expected.pt"))


def compare(out, rtol):
    want = torch.load(os.path.join(out, "expected.pt"))["logits"]
    tensors, _ = safetensors_reader.load(os.path.join(out, "output.safetensors"))
    if "logits" not in tensors:
        print(f"output.safetensors holds {sorted(tensors)}, not 'logits'")
        return 1
    got = tensors["logits"]
    if got.dtype != torch.float32 or got.shape != want.shape:
        print(f"logits: {got.dtype}{list(got.shape)}, torch's {want.dtype}{list(want.shape)}")
        return 1
    err = (got - want).abs().max().item()
    scale = want.abs().max().item()
    ok = err <= rtol * scale  # NaN fails
    print(f"max|err| {err:.3e}, max|logits| {scale:.3e}, ratio {err / scale:.3e} (tolerance {rtol:g}): "
          + ("ok" if ok else "TOO LARGE"))
    return 0 if ok else 1


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "make":
        make(sys.argv[2], sys.argv[3])
    elif len(sys.argv) == 4 and sys.argv[1] == "compare":
        sys.exit(compare(sys.argv[2], float(sys.argv[3])))
    else:
        print(__doc__)
        sys.exit(2)
