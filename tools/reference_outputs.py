#!/usr/bin/env python3
"""Writes reference outputs for `winml eval --mode compare --reference-outputs FILE` with transformers.

The file holds, for sample i, the inputs as `inputs.<i>.<name>` and the framework's outputs as
`outputs.<i>.<name>` (names as in the ONNX graph: input_ids, attention_mask, logits,
last_hidden_state ...). Inputs are random token ids below the vocab size and masks of ones.

usage: tools/reference_outputs.py --model HF_FOLDER --out FILE.safetensors
          [--task text-classification|feature-extraction|text-generation] [--samples 20]
          [--batch-size 1] [--seq-len 32] [--seed 0] [--input-dtype int64|int32]
"""
import argparse

import numpy as np
import torch
import transformers
from safetensors.numpy import save_file

CLASSES = {
    "text-classification": (transformers.AutoModelForSequenceClassification, "logits"),
    "feature-extraction": (transformers.AutoModel, "last_hidden_state"),
    "text-generation": (transformers.AutoModelForCausalLM, "logits"),
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--task", default="text-classification", choices=sorted(CLASSES))
    ap.add_argument("--samples", type=int, default=20)
    ap.add_argument("--batch-size", type=int, default=1)
    ap.add_argument("--seq-len", type=int, default=32)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--input-dtype", default="int64", choices=["int64", "int32"])
    a = ap.parse_args()
    cls, out_name = CLASSES[a.task]
    model = cls.from_pretrained(a.model).eval()
    vocab = model.config.vocab_size
    rng = np.random.default_rng(a.seed)
    tensors = {}
    for i in range(a.samples):
        ids = rng.integers(3, vocab, (a.batch_size, a.seq_len))
        mask = np.ones_like(ids)
        with torch.no_grad():
            kw = dict(input_ids=torch.from_numpy(ids), attention_mask=torch.from_numpy(mask))
            if a.task == "text-generation":
                kw["use_cache"] = False
            out = getattr(model(**kw), out_name).numpy().astype(np.float32)
        tensors[f"inputs.{i}.input_ids"] = ids.astype(a.input_dtype)
        tensors[f"inputs.{i}.attention_mask"] = mask.astype(a.input_dtype)
        tensors[f"outputs.{i}.{out_name}"] = out
    save_file(tensors, a.out)


if __name__ == "__main__":
    main()
