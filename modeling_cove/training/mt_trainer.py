"""The MT pretraining loop: Accelerate-prepared model and optimizer, length-grouped epoch batches, the perplexity
schedule, checkpoints that resume exactly (mid-epoch too), per-epoch evaluation, the metrics JSON and curves, and
at the end the test BLEU, the final MT checkpoint and the exported encoder.

transformers' Seq2SeqTrainer is not used: the paper's schedule acts on validation perplexity after each epoch, the
loss is the summed NLL over the GLOBAL batch size, and exact resume mid-epoch relies on our (seed, epoch) batch
order; Accelerate does the distribution, mixed devices and checkpoint files.
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

import numpy as np
import torch

from .export import export_encoder
from .mt_data import collate, epoch_batches, rank_share
from .mt_eval import compute_bleu, decode_split, evaluate_perplexity, parameters_sha256
from .mt_schedule import PerplexitySchedule, stop_reason
from .mt_state import TrainerState, restore_state, save_checkpoint
from .run_info import command_line, git_commit, machine_info, plot_curves, write_json

CONFIG_FIELDS = ("vocab_size", "target_vocab_size", "hidden_size", "decoder_hidden_size", "decoder_embedding_dim",
                 "decoder_dropout", "encoder_dropout", "attention_bias")


def make_optimizer(name: str, parameters: list, lr: float):
    if name == "sgd":
        return torch.optim.SGD(parameters, lr=lr)
    if name == "adam":
        return torch.optim.Adam(parameters, lr=lr)
    raise ValueError(f"unknown optimizer {name!r}; choose sgd or adam")


class MTTrainer:
    """One run: `train()` until a stop reason, then `finish()`. The TrainerState (`self.state`) is everything the
    checkpoints hold besides Accelerate's model/optimizer/RNG states."""

    def __init__(self, args, settings: dict, accelerator, data, preset_name=None, on_step=None, command=None,
                 start_time=None):
        self.args, self.settings, self.accelerator, self.data = args, settings, accelerator, data
        self.output_dir = Path(args.output_dir)
        self.on_step = on_step
        self.start_time = start_time or time.time()
        self.preset_name = preset_name
        self.world, self.rank = accelerator.num_processes, accelerator.process_index
        self.trainable = [p for p in data.model.parameters() if p.requires_grad]
        optimizer = make_optimizer(settings["optimizer"], self.trainable, settings["lr"])
        self.model, self.optimizer = accelerator.prepare(data.model, optimizer)
        self.unwrapped = accelerator.unwrap_model(self.model)
        self.pad_id = self.unwrapped.config.pad_token_id
        self.schedule = PerplexitySchedule(settings["lr_decay"], settings["start_decay_at"])
        self.run_info = {"command": command or command_line(), "commit": git_commit(), "machine": {
            **machine_info(), "processes": self.world, "device": str(accelerator.device),
            "distributed_type": str(accelerator.distributed_type)}}
        self.state = self._restore_or_start()

    def _restore_or_start(self) -> TrainerState:
        from accelerate.utils import set_seed

        state = None
        if self.args.resume:
            state = restore_state(self.accelerator, self.output_dir, self.settings, self.args.time_budget_minutes)
            if state is None:
                self.accelerator.print("--resume: no complete checkpoint yet, starting from the beginning")
        if state is None:
            set_seed(self.settings["seed"] + self.rank)  # dropout streams: distinct per process
            state = TrainerState(lr=self.settings["lr"])
        self._set_lr(state.lr)
        return state

    def _set_lr(self, lr: float):
        for group in self.optimizer.param_groups:
            group["lr"] = lr

    # -----------------------------------------------------------------------------------------------------------
    # training

    def train(self):
        while not self.state.finished:
            self._run_epoch(self.state.epoch + 1)
        self.accelerator.print(f"stopped: {self.state.stop_reason}")

    def _run_epoch(self, epoch: int):
        from tqdm.auto import tqdm

        state, train = self.state, self.data.train
        batches = [b for b in epoch_batches(train.src_lengths, train.tgt_lengths, self.settings["batch_size"],
                                            self.settings["chunk_batches"], self.settings["seed"], epoch)
                   if len(b) >= self.world]
        self.model.train()
        epoch_start = time.time()
        bar = tqdm(total=len(batches), initial=state.step_in_epoch, desc=f"epoch {epoch}",
                   disable=not self.accelerator.is_main_process, dynamic_ncols=True)
        max_steps, save_steps = self.settings["max_steps"], self.args.save_steps
        stopped_early = False
        for batch in batches[state.step_in_epoch:]:
            loss, nll_per_token = self._train_step(batch)
            bar.update(1)
            bar.set_postfix(loss=f"{loss:.2f}", ppl=f"{math.exp(min(nll_per_token, 50)):.1f}", lr=f"{state.lr:g}")
            if max_steps and state.global_step >= max_steps:
                stopped_early = state.step_in_epoch < len(batches)  # inside the epoch (not at its last batch)
                break
            if save_steps and state.global_step % save_steps == 0 and state.step_in_epoch < len(batches):
                save_checkpoint(self.accelerator, self.output_dir, state, self.args.keep_checkpoints)
        bar.close()
        self._end_epoch(epoch, stopped_early, epoch_start)

    def _train_step(self, batch: list):
        """One optimizer step on a global batch (this process trains on its share); returns (loss, nll per token)."""
        state, accelerator = self.state, self.accelerator
        step_start = time.time()
        if state.running_logged:  # continuing after a max_steps stop: its partial loss-log entry grows again
            state.loss_log.pop()
            state.running_logged = False
        inputs = collate(self.data.train.rows(rank_share(batch, self.rank, self.world)), self.pad_id,
                         accelerator.device)
        out = self.model(**inputs)
        # paper loss: summed NLL / global batch size; DDP averages over processes, hence the factor `world`
        accelerator.backward(out.nll_sum * self.world / len(batch))
        accelerator.clip_grad_norm_(self.trainable, self.settings["grad_clip"])
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        state.global_step += 1
        state.step_in_epoch += 1
        stats = accelerator.reduce(torch.stack([out.nll_sum.detach().double(), out.num_tokens.detach().double()]),
                                   "sum")
        loss, nll_per_token = float(stats[0]) / len(batch), float(stats[0] / stats[1])
        state.train_target_tokens += int(stats[1])
        state.epoch_nll_sum += float(stats[0])
        state.epoch_tokens += int(stats[1])
        state.running.append((loss, nll_per_token))
        state.train_seconds += time.time() - step_start
        if len(state.running) == self.args.log_every:
            self._log_running(clear=True)
        if self.on_step is not None:
            self.on_step(state, loss)
        return loss, nll_per_token

    def _log_running(self, clear: bool):
        state = self.state
        state.loss_log.append([state.global_step, float(np.mean([r[0] for r in state.running])),
                               float(np.mean([r[1] for r in state.running]))])
        if clear:
            state.running = []

    def _end_epoch(self, epoch: int, stopped_early: bool, epoch_start: float):
        """End of an epoch (or a max_steps stop inside it): loss log, validation, lr schedule, stop, checkpoint."""
        state = self.state
        if state.running:  # the steps since the last log entry (logging windows end with the epoch)
            # after a max_steps stop inside the epoch the window stays open: resume replaces this entry
            self._log_running(clear=not stopped_early)
            state.running_logged = stopped_early
        record = self._evaluate_epoch(epoch, stopped_early, epoch_start)
        if state.history and state.history[-1]["epoch"] == epoch and not state.history[-1]["complete"]:
            state.history.pop()  # the record of this epoch's earlier max_steps stop, now superseded
        state.history.append(record)
        if stopped_early:
            # a max_steps stop inside the epoch keeps its position (epoch, step, training NLL sums) and the lr, so
            # that resume with a larger max_steps continues exactly as an uninterrupted run
            state.finished, state.stop_reason = True, f"max steps {self.settings['max_steps']} reached"
        else:
            self._set_lr(self.schedule.after_epoch(state, epoch, record["val_perplexity"]))
            state.epoch, state.step_in_epoch = epoch, 0
            state.epoch_nll_sum, state.epoch_tokens = 0.0, 0
            state.epoch_wall_seconds.append(time.time() - epoch_start)
            state.stop_reason = stop_reason(state, self.settings, self.args.time_budget_minutes)
            state.finished = state.stop_reason is not None
        save_checkpoint(self.accelerator, self.output_dir, state, self.args.keep_checkpoints)
        self._write_metrics()

    def _evaluate_epoch(self, epoch: int, stopped_early: bool, epoch_start: float) -> dict:
        state, settings = self.state, self.settings
        val = evaluate_perplexity(self.unwrapped, self.data.eval_stores["validation"], settings["eval_batch_size"],
                                  self.accelerator, self.pad_id)
        train_nll = state.epoch_nll_sum / state.epoch_tokens if state.epoch_tokens else None
        record = {
            "epoch": epoch,
            "steps": state.step_in_epoch,
            "global_step": state.global_step,
            "lr": state.lr,
            "train_nll_per_token": train_nll,
            "val_nll_per_token": val["nll_per_token"],
            "val_perplexity": val["perplexity"],
            "seconds": round(time.time() - epoch_start, 1),
            "complete": not stopped_early,
            "train_perplexity": math.exp(min(train_nll, 50.0)) if train_nll is not None else None,
        }
        if not self.args.no_bleu:
            hyps = decode_split(self.unwrapped, self.data.eval_stores["validation"], settings["eval_batch_size"],
                                self.accelerator, self.data.target_tokens, settings["eval_num_beams"],
                                desc="validation BLEU")
            if self.accelerator.is_main_process:
                bleu = compute_bleu(hyps, self.data.references["validation"])
                record["val_bleu"], record["val_sacrebleu"] = bleu["bleu"], bleu["sacrebleu"]
        self.accelerator.print(json.dumps(record))
        return record

    # -----------------------------------------------------------------------------------------------------------
    # metrics, curves, the end of the run

    def metrics_payload(self, test=None) -> dict:
        state, config = self.state, self.unwrapped.config
        return {
            **self.run_info,
            "preset": self.preset_name,
            "settings": self.settings,
            "config": {k: getattr(config, k) for k in CONFIG_FIELDS},
            "trainable_parameters": sum(p.numel() for p in self.trainable),
            "data": self.data.stats,
            "epochs": state.history,
            "global_step": state.global_step,
            "stop_reason": state.stop_reason,
            "loss_log_every": self.args.log_every,
            "train_seconds": round(state.train_seconds, 1),
            "train_target_tokens_per_second": round(state.train_target_tokens / max(state.train_seconds, 1e-9), 1),
            "wall_seconds": round(time.time() - self.start_time, 1),
            "test": test,
        }

    def _write_metrics(self, payload: dict | None = None):
        if not self.accelerator.is_main_process:
            return
        write_json(self.output_dir / "metrics.json", payload or self.metrics_payload())
        history, log = self.state.history, self.state.loss_log
        epochs = [h["epoch"] for h in history]
        bleu = [(h["epoch"], h["val_bleu"]) for h in history if h.get("val_bleu") is not None]
        plot_curves([
            {"title": "training loss (NLL summed / batch size)", "xlabel": "step",
             "series": {"train": ([r[0] for r in log], [r[1] for r in log])}},
            {"title": "perplexity", "xlabel": "epoch", "log_y": True,
             "series": {"train": (epochs, [h["train_perplexity"] for h in history]),
                        "validation": (epochs, [h["val_perplexity"] for h in history])}},
            {"title": "validation BLEU (uncased, tokenized)", "xlabel": "epoch",
             "series": {"validation": ([b[0] for b in bleu], [b[1] for b in bleu])}},
        ], self.output_dir / "curves.png", title=f"MT pretraining: {self.preset_name or self.output_dir.name}")

    def _test(self) -> dict | None:
        settings, test_store = self.settings, self.data.eval_stores["test"]
        test_ppl = evaluate_perplexity(self.unwrapped, test_store, settings["eval_batch_size"], self.accelerator,
                                       self.pad_id)
        hyps = decode_split(self.unwrapped, test_store, settings["eval_batch_size"], self.accelerator,
                            self.data.target_tokens, settings["test_num_beams"], desc="test BLEU")
        if not self.accelerator.is_main_process:
            return None
        bleu = compute_bleu(hyps, self.data.references["test"])
        (self.output_dir / "test_hypotheses.txt").write_text("\n".join(" ".join(h) for h in hyps) + "\n")
        self.accelerator.print(f"test: BLEU {bleu['bleu']:.2f} (uncased, tokenized), sacreBLEU "
                               f"{bleu['sacrebleu']:.2f}, perplexity {test_ppl['perplexity']:.2f}")
        return {"perplexity": test_ppl["perplexity"], "num_beams": settings["test_num_beams"], **bleu}

    def finish(self) -> dict | None:
        """Test BLEU, the replicas' weight fingerprints, the final MT checkpoint, metrics, the exported encoder."""
        from accelerate.utils import gather_object

        from modeling_cove.modeling_cove_mt import TARGET_TOKENIZER_SUBFOLDER

        accelerator = self.accelerator
        test = None if self.args.no_test else self._test()
        fingerprint = [parameters_sha256(self.unwrapped)]
        fingerprints = gather_object(fingerprint) if self.world > 1 else fingerprint
        payload = None
        if accelerator.is_main_process:
            mt_dir = self.output_dir / "mt"
            self.unwrapped.save_pretrained(mt_dir)
            self.data.source_tokenizer.save_pretrained(mt_dir)
            self.data.target_tokenizer.save_pretrained(mt_dir / TARGET_TOKENIZER_SUBFOLDER)
            payload = {**self.metrics_payload(test), "replica_weight_sha256": fingerprints}
            self._write_metrics(payload)
            if not self.args.no_export:
                export_encoder(mt_dir, self.output_dir / "encoder", metrics=payload,
                               name=self.preset_name or self.output_dir.name)
            accelerator.print(f"done: {self.output_dir} ({payload['wall_seconds']} s; stopped: "
                              f"{self.state.stop_reason})")
        accelerator.wait_for_everyone()
        accelerator.end_training()
        return payload
