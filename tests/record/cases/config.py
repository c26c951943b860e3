"""A config dict stored in a checkpoint (Burn's config test)."""
import os
import torch
from common import FIXTURES

config = {"n_head": 2, "n_layer": 3, "d_model": 512, "some_float": 0.1, "some_int": 1, "some_bool": True,
          "some_str": "hello", "some_list_int": [1, 2, 3], "some_list_str": ["hello", "world"],
          "some_list_float": [1.0, 2.0, 3.0], "some_dict": {"some_key": "some_value"}}
os.makedirs(FIXTURES, exist_ok=True)
torch.save({"config": config, "weights": {"w": torch.ones(2)}}, os.path.join(FIXTURES, "config.pt"))
