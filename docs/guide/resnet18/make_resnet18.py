"""Makes the files of the guide's chapter 12 (Run a torchvision ResNet-18 in C++).

  python3 make_resnet18.py [DIR]

writes into DIR (default: the current directory)

  resnet18.pt            torchvision's ResNet-18, its state_dict(), as
                         torch.save writes it
  resnet18_expected.pt   {"logits": torch's output, F32 [1, 1000]} for the
                         image the C++ program builds: pixel i of the
                         [1, 3, 224, 224] input, in C order, is
                         ((i * 37) % 256) / 128 - 1 (exact in float32)

The weights are torchvision's random initialisation with seed 0 (so the
script needs no download), with BatchNorm statistics and affine parameters
of a trained network rather than a fresh one's identity. With
--pretrained, torchvision's ImageNet weights instead (downloaded by
torchvision).

Needs torch and torchvision (any torch the repository checks: 1.13, 2.6 or
the current release).
"""

import os
import sys

import torch
import torchvision


def main():
    """Writes resnet18.pt and resnet18_expected.pt into the directory given (or the current one)."""
    args = [a for a in sys.argv[1:] if a != "--pretrained"]
    out = args[0] if args else "."
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    if "--pretrained" in sys.argv:
        model = torchvision.models.resnet18(weights="IMAGENET1K_V1")
    else:
        model = torchvision.models.resnet18()
        g = torch.Generator().manual_seed(0)
        with torch.no_grad():
            for m in model.modules():
                if isinstance(m, torch.nn.BatchNorm2d):
                    c = m.num_features
                    m.running_mean.copy_(torch.randn(c, generator=g) * 0.1)
                    m.running_var.copy_(torch.rand(c, generator=g) + 0.5)
                    m.weight.copy_(0.5 + torch.rand(c, generator=g) * 0.5)
                    m.bias.copy_(torch.randn(c, generator=g) * 0.1)
    model.eval()
    torch.save(model.state_dict(), os.path.join(out, "resnet18.pt"))

    i = torch.arange(3 * 224 * 224, dtype=torch.int64)
    x = (((i * 37) % 256).to(torch.float32) / 128 - 1).reshape(1, 3, 224, 224)
    with torch.no_grad():
        logits = model(x)
    torch.save({"logits": logits.contiguous()}, os.path.join(out, "resnet18_expected.pt"))
    top = torch.topk(logits[0], 5)
    print("torch's top 5:", ", ".join(f"{c} ({v:.4f})" for v, c in zip(top.values.tolist(), top.indices.tolist())))


if __name__ == "__main__":
    main()
