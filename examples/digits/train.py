#!/usr/bin/python3
"""Trains the demo's small CNN on scikit-learn's 8x8 digits with Debian's
torch, and writes what the C++ demo needs:

  digits_cnn.pt      the model's state_dict()
  test_images.pt     {"images": F32[N, 1, 8, 8], "labels": I64[N],
                      "torch_predictions": I64[N], "torch_logits": F32[N, 10]}

Usage: /usr/bin/python3 examples/digits/train.py   (about 20 s on 2 cores)
"""
import os

import torch
import torch.nn as nn
import torch.nn.functional as F
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

HERE = os.path.dirname(os.path.abspath(__file__))


class DigitsCNN(nn.Module):
    def __init__(self):
        super().__init__()
        # ReLUs and pooling inside the Sequential: its parameter indices are
        # 0, 1, 4, 5 (non-contiguous), which the C++ side reads as a list.
        self.features = nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1),  # 0
            nn.BatchNorm2d(16),              # 1
            nn.ReLU(),                       # 2
            nn.MaxPool2d(2),                 # 3: 8x8 -> 4x4
            nn.Conv2d(16, 32, 3, padding=1), # 4
            nn.BatchNorm2d(32),              # 5
            nn.ReLU(),                       # 6
            nn.MaxPool2d(2),                 # 7: 4x4 -> 2x2
        )
        self.classifier = nn.Linear(32 * 2 * 2, 10)

    def forward(self, x):
        return self.classifier(torch.flatten(self.features(x), 1))


def main():
    torch.manual_seed(0)
    digits = load_digits()
    x = torch.tensor(digits.images, dtype=torch.float32).unsqueeze(1) / 16.0  # [N, 1, 8, 8] in [0, 1]
    y = torch.tensor(digits.target, dtype=torch.int64)
    x_train, x_test, y_train, y_test = train_test_split(x, y, test_size=0.25, random_state=0, stratify=y)
    model = DigitsCNN()
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    for epoch in range(30):
        model.train()
        perm = torch.randperm(len(x_train))
        for i in range(0, len(perm), 64):
            idx = perm[i:i + 64]
            opt.zero_grad()
            loss = F.cross_entropy(model(x_train[idx]), y_train[idx])
            loss.backward()
            opt.step()
    model.eval()
    with torch.no_grad():
        logits = model(x_test)
    predictions = logits.argmax(1)
    accuracy = (predictions == y_test).float().mean().item()
    torch.save(model.state_dict(), os.path.join(HERE, "digits_cnn.pt"))
    torch.save({"images": x_test, "labels": y_test, "torch_predictions": predictions, "torch_logits": logits},
               os.path.join(HERE, "test_images.pt"))
    print(f"test accuracy {accuracy:.4f} on {len(y_test)} images; wrote digits_cnn.pt and test_images.pt")


if __name__ == "__main__":
    main()
