"""The MT pretraining loop on the Accelerate loop (`accelerate_loop.AccelerateLoop`): length-grouped epoch batches
(`mt_epoch_batches`), the paper's loss (summed NLL over the global batch), the perplexity schedule, per-epoch
evaluation, the metrics JSON and curves, and at the end the test BLEU, the final MT checkpoint and the exported
encoder. With `early_stopping_patience` the run also stops once the first corpus's validation BLEU has not risen for
that many epochs, and what it tests, saves and exports are the weights of its best-BLEU epoch (`best_state.safetensors`
in the run folder, written at each new best once that epoch's checkpoint is saved, and naming its epoch and step; a
resume checks the file against the checkpoint's epoch records). Why that loop is no transformers `Trainer`:
`accelerate_loop`'s docstring.
"""

from __future__ import annotations

import json
import math
import time

import numpy as np
import torch

from ..publishing.export import export_encoder
from ..data.translation import collate
from .mt_eval import compute_bleu, decode_split, evaluate_perplexity, parameters_sha256
from .mt_schedule import PerplexitySchedule
from .accelerate_loop import (BEST_STATE_FILE, AccelerateLoop, LoopState, StopLimits, check_best_state, end_run,
                              epoch_batches, make_optimizer, rank_share)
from ..common.run_info import command_line, git_commit, machine_info, plot_curves
from ..common.files import atomic_path, write_json
from . import stopping

CONFIG_FIELDS = ("vocab_size", "target_vocab_size", "hidden_size", "decoder_hidden_size", "decoder_embedding_dim",
                 "decoder_dropout", "encoder_dropout", "attention_bias")
SEED_STRIDE = 100003  # epoch batches: the generator seed is seed x SEED_STRIDE + epoch

__all__ = ["MTPretraining", "mt_epoch_batches"]


def mt_epoch_batches(train, settings: dict, epoch: int) -> list:
    """The global batches of `epoch` over the training pairs `train` (a `TokenStore`), as the MT loop takes them: a
    pure function of the settings' seed and `epoch`, pairs of similar source and target lengths grouped together
    (`chunk_batches` batches sorted at a time), the batches shuffled."""
    return epoch_batches(len(train), settings["batch_size"], settings["seed"], epoch, SEED_STRIDE,
                         lengths=(train.src_lengths, train.tgt_lengths), chunk_batches=settings["chunk_batches"])


class MTPretraining(AccelerateLoop):
    """One run: `train()` until a stop reason, then `finish()`. `self.state` (a `LoopState`) is everything
    the checkpoints hold besides Accelerate's model/optimizer/RNG states."""

    def __init__(self, args, settings: dict, accelerator, data, preset_name=None, on_step=None, command=None,
                 start_time=None):
        limits = StopLimits(settings["max_epochs"], settings["max_steps"], args.time_budget_minutes, settings["min_lr"])
        super().__init__(accelerator, args.output_dir, limits, settings["seed"], args.save_steps, args.keep_checkpoints)
        self.args, self.settings, self.data = args, settings, data
        self.on_step = on_step
        self.start_time = start_time or time.time()
        self.preset_name = preset_name
        self.world, self.rank = accelerator.num_processes, accelerator.process_index
        self.trainable = [p for p in data.model.parameters() if p.requires_grad]
        optimizer = make_optimizer(settings["optimizer"], self.trainable, settings["lr"])
        self.model, self.optimizer = accelerator.prepare(data.model, optimizer)
        self.unwrapped = accelerator.unwrap_model(self.model)
        self.pad_id = self.unwrapped.config.pad_token_id
        self.lr_schedule = PerplexitySchedule(settings["lr_decay"], settings["start_decay_at"])
        self._new_best = False  # the epoch just evaluated is the best so far: its weights go to BEST_STATE_FILE
        self.run_info = {"command": command or command_line(), "commit": git_commit(), "machine": {
            **machine_info(), "processes": self.world, "device": str(accelerator.device),
            "distributed_type": str(accelerator.distributed_type)}}
        self.start(args.resume, LoopState(lr=settings["lr"], schedule=PerplexitySchedule.initial_memory(),
                                                 epoch_sums=self.fresh_epoch_sums()))
        self._set_lr(self.state.lr)

    def _set_lr(self, lr: float):
        for group in self.optimizer.param_groups:
            group["lr"] = lr

    # -----------------------------------------------------------------------------------------------------------
    # the scaffold's hooks

    def fresh_epoch_sums(self) -> list:
        return [0.0, 0]  # training NLL summed over the epoch's target tokens, and their number

    def seconds(self, inside_epoch: bool) -> tuple:
        """The time budget is judged between epochs only: the finished epochs' wall time and the last one's."""
        walls = self.state.epoch_wall_seconds
        return (None, 0.0) if inside_epoch or not walls else (sum(walls), walls[-1])

    def epoch_batches(self, epoch: int) -> list:
        return [b for b in mt_epoch_batches(self.data.train, self.settings, epoch) if len(b) >= self.world]

    def train_step(self, batch: list) -> dict:
        """One optimizer step on a global batch (this process trains on its share)."""
        state, accelerator = self.state, self.accelerator
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
        state.train_tokens += int(stats[1])
        state.epoch_sums[0] += float(stats[0])
        state.epoch_sums[1] += int(stats[1])
        state.running.append((loss, nll_per_token))
        if len(state.running) == self.args.log_every:
            self._log_running(clear=True)
        if self.on_step is not None:
            self.on_step(state, loss)
        return {"loss": f"{loss:.2f}", "ppl": f"{math.exp(min(nll_per_token, 50)):.1f}", "lr": f"{state.lr:g}"}

    def _log_running(self, clear: bool):
        state = self.state
        state.loss_log.append([state.global_step, float(np.mean([r[0] for r in state.running])),
                               float(np.mean([r[1] for r in state.running]))])
        if clear:
            state.running = []

    def close_epoch_log(self, stopped: str | None):
        """Logging windows end with the epoch; after a stop inside the epoch the window stays open (resume
        replaces its entry)."""
        if self.state.running:
            self._log_running(clear=stopped is None)
            self.state.running_logged = stopped is not None

    def schedule(self, epoch: int, record: dict):
        self._set_lr(self.lr_schedule.after_epoch(self.state, epoch, record["val_perplexity"]))

    def _validate(self, corpus: str) -> dict:
        """Perplexity (and BLEU unless --no-bleu) of a corpus's validation split, under the epoch record's keys."""
        settings, store = self.settings, self.data.eval_stores[corpus]["validation"]
        val = evaluate_perplexity(self.unwrapped, store, settings["eval_batch_size"], self.accelerator, self.pad_id)
        record = {"val_nll_per_token": val["nll_per_token"], "val_perplexity": val["perplexity"]}
        if not self.args.no_bleu:
            hyps = decode_split(self.unwrapped, store, settings["eval_batch_size"], self.accelerator,
                                self.data.target_tokens, settings["eval_num_beams"], desc=f"validation BLEU {corpus}")
            # every process scores the gathered hypotheses: early stopping reads the BLEU on each of them alike
            bleu = compute_bleu(hyps, self.data.references[corpus]["validation"])
            record["val_bleu"], record["val_sacrebleu"] = bleu["bleu"], bleu["sacrebleu"]
        return record

    def evaluate(self, epoch: int, stopped: str | None, epoch_start: float) -> dict:
        """The epoch's record: the training perplexity, every corpus's validation figures under "val_by_corpus", and
        the first corpus's also at the top (they drive the lr schedule)."""
        state = self.state
        by_corpus = {corpus: self._validate(corpus) for corpus in self.data.corpora}
        val = by_corpus[self.data.corpora[0]]
        nll_sum, tokens = state.epoch_sums
        train_nll = nll_sum / tokens if tokens else None
        record = {
            "epoch": epoch,
            "steps": state.step_in_epoch,
            "global_step": state.global_step,
            "lr": state.lr,
            "train_nll_per_token": train_nll,
            "val_nll_per_token": val["val_nll_per_token"],
            "val_perplexity": val["val_perplexity"],
            "seconds": round(time.time() - epoch_start, 1),
            "complete": stopped is None,
            "train_perplexity": math.exp(min(train_nll, 50.0)) if train_nll is not None else None,
        }
        record.update({key: val[key] for key in ("val_bleu", "val_sacrebleu") if key in val})
        record["val_by_corpus"] = by_corpus
        # a new best's weights are saved once its checkpoint is (`write_record`): never ahead of the records
        self._new_best = bool(self.patience) and stopped is None and record["val_bleu"] > max(self._bleus() or [-1.0])
        self.accelerator.print(json.dumps(record))
        return record

    # -----------------------------------------------------------------------------------------------------------
    # early stopping on validation BLEU (off when patience is 0)

    @property
    def patience(self) -> int:
        return self.settings.get("early_stopping_patience") or 0

    def _scored(self) -> list:
        """The records of the complete epochs so far that have the first corpus's validation BLEU, in order."""
        return [h for h in self.state.history if h["complete"] and h.get("val_bleu") is not None]

    def _bleus(self) -> list:
        return [h["val_bleu"] for h in self._scored()]

    def best_epoch(self) -> dict | None:
        """The complete epoch of the highest validation BLEU (the first of equals): its number and BLEU."""
        complete = self._scored()
        if not complete:
            return None
        best = max(complete, key=lambda h: h["val_bleu"])  # max keeps the first of equal values
        return {"epoch": best["epoch"], "global_step": best["global_step"], "val_bleu": best["val_bleu"]}

    def _save_best(self):
        """The model's weights now as the best epoch's (`best_epoch()`), its epoch and step in the file's metadata."""
        from safetensors.torch import save_model

        if self.accelerator.is_main_process:
            best = self.best_epoch()
            with atomic_path(self.output_dir / BEST_STATE_FILE) as tmp:  # a kill while writing keeps the previous best
                save_model(self.unwrapped, str(tmp), metadata={k: str(best[k]) for k in ("epoch", "global_step")})

    def _saved_best(self) -> dict | None:
        """The epoch and step `best_state.safetensors` holds the weights of (None: no file; a file cut short, as a
        machine lost while it was written out can leave it, is an error naming it)."""
        from safetensors import safe_open

        path = self.output_dir / BEST_STATE_FILE
        if not path.is_file():
            return None
        check_best_state(path)
        with safe_open(str(path), "pt") as f:
            metadata = f.metadata() or {}
        return {key: int(metadata[key]) for key in ("epoch", "global_step") if key in metadata}

    def _best_is_saved(self) -> bool:
        best = self.best_epoch()
        return best is None or self._saved_best() == {k: best[k] for k in ("epoch", "global_step")}

    def restore_extra(self, folder):
        """On resume: a run killed after its best epoch's checkpoint and before the best weights were written
        resumes from that very checkpoint, whose weights are the best's: they are written now. Best weights saved
        past the checkpoint resumed from (a newer one passed over, not whole) are written again as the replay, the
        same steps, reaches their epoch."""
        best, state = self.best_epoch(), self.state
        if not self.patience or best is None:
            return
        if (state.epoch, state.step_in_epoch, state.global_step) == (best["epoch"], 0, best["global_step"]):
            self._save_best()  # the weights now are the best's, whatever the file holds
            return
        saved = self._saved_best() or {}
        if saved.get("global_step", -1) > state.global_step:
            return  # saved past the checkpoint resumed from: the replay writes it again
        if saved != {k: best[k] for k in ("epoch", "global_step")}:
            raise RuntimeError(f"{self.output_dir / BEST_STATE_FILE} does not hold the weights of epoch "
                               f"{best['epoch']}, the best validation BLEU, and the checkpoint resumed from is past "
                               "it: the run cannot keep its best epoch; start it again")

    def why_stop(self, inside_epoch: bool = False) -> str | None:
        """The scaffold's limits, then, at an epoch end, no better validation BLEU in the last `patience` epochs."""
        reason = super().why_stop(inside_epoch)
        if reason is not None or inside_epoch or not self.patience:
            return reason
        if stopping.no_better_in(self._bleus(), self.patience):
            return stopping.early_stopping(self.patience, "BLEU", "epochs")
        return None

    def write_record(self):
        """metrics.json and the curves; after a new best epoch's checkpoint, its weights (`_save_best`)."""
        if self._new_best:
            self._save_best()
            self._new_best = False
        self._write_metrics()

    # -----------------------------------------------------------------------------------------------------------
    # metrics, curves, the end of the run

    def metrics_payload(self, test=None, test_by_corpus=None) -> dict:
        """metrics.json: the run, its data, its epochs and the test figures (`test`: the first corpus's, as a
        single-corpus run always recorded them; `test_by_corpus`: every corpus's)."""
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
            "train_target_tokens_per_second": round(state.train_tokens / max(state.train_seconds, 1e-9), 1),
            "wall_seconds": round(time.time() - self.start_time, 1),
            "corpora": self.data.corpora,
            "test": test,
            "test_by_corpus": test_by_corpus,
            # with patience: the epoch whose weights the run kept (tested, saved in mt/, exported; None before
            # a complete epoch); without: None, the last weights are the run's
            "best_epoch": self.best_epoch() if self.patience else None,
        }

    def _write_metrics(self, payload: dict | None = None):
        if not self.accelerator.is_main_process:
            return
        write_json(self.output_dir / "metrics.json", payload or self.metrics_payload())
        history, log = self.state.history, self.state.loss_log
        epochs = [h["epoch"] for h in history]
        perplexity, colors = self._validation_series("val_perplexity")
        plot_curves([
            {"title": "training loss (NLL summed / batch size)", "xlabel": "step",
             "series": {"train": ([r[0] for r in log], [r[1] for r in log])}},
            {"title": "perplexity", "xlabel": "epoch", "log_y": True, "colors": {"train": "C0", **colors},
             "series": {"train": (epochs, [h["train_perplexity"] for h in history]), **perplexity}},
            {"title": "validation BLEU (uncased, tokenized)", "xlabel": "epoch", "colors": colors,
             "series": self._validation_series("val_bleu")[0]},
        ], self.output_dir / "curves.png", title=f"MT pretraining: {self.preset_name or self.output_dir.name}")

    def _validation_series(self, key: str) -> tuple[dict, dict]:
        """The validation curves of `key` by epoch, from the epoch records that have it: {"validation": (epochs,
        values)} for one corpus, {"validation <corpus>": ...} for each of several; and {label: color}, one color per
        corpus in every panel (C0 is the training curve's)."""
        history = self.state.history
        if len(self.data.corpora) == 1:
            points = {"validation": [(h["epoch"], h[key]) for h in history if h.get(key) is not None]}
        else:
            points = {f"validation {corpus}": [(h["epoch"], h["val_by_corpus"][corpus][key]) for h in history
                                               if h.get("val_by_corpus", {}).get(corpus, {}).get(key) is not None]
                      for corpus in self.data.corpora}
        series = {label: ([p[0] for p in pairs], [p[1] for p in pairs]) for label, pairs in points.items()}
        return series, {label: f"C{i + 1}" for i, label in enumerate(series)}

    def _test(self, corpus: str) -> dict | None:
        """A corpus's test perplexity and BLEU (main process; None on the others); its translations go to
        test_hypotheses.txt (the first corpus) or test_hypotheses.<corpus>.txt."""
        settings, test_store = self.settings, self.data.eval_stores[corpus]["test"]
        test_ppl = evaluate_perplexity(self.unwrapped, test_store, settings["eval_batch_size"], self.accelerator,
                                       self.pad_id)
        hyps = decode_split(self.unwrapped, test_store, settings["eval_batch_size"], self.accelerator,
                            self.data.target_tokens, settings["test_num_beams"], desc=f"test BLEU {corpus}")
        if not self.accelerator.is_main_process:
            return None
        bleu = compute_bleu(hyps, self.data.references[corpus]["test"])
        first = corpus == self.data.corpora[0]
        name = "test_hypotheses.txt" if first else f"test_hypotheses.{corpus}.txt"
        (self.output_dir / name).write_text("\n".join(" ".join(h) for h in hyps) + "\n")
        self.accelerator.print(f"test{'' if first else ' ' + corpus}: BLEU {bleu['bleu']:.2f} (uncased, tokenized), "
                               f"sacreBLEU {bleu['sacrebleu']:.2f}, perplexity {test_ppl['perplexity']:.2f}")
        return {"perplexity": test_ppl["perplexity"], "num_beams": settings["test_num_beams"], **bleu}

    def _restore_best(self):
        """With early stopping on: the best-BLEU epoch's weights back into the model, on every process (a run
        stopped before its first complete epoch has none and keeps its weights)."""
        from safetensors.torch import load_model

        self.accelerator.wait_for_everyone()
        best = self.best_epoch()
        if not self.patience or best is None:
            return
        if not self._best_is_saved():  # the file is written with each best epoch's checkpoint: never expected
            raise RuntimeError(f"{self.output_dir / BEST_STATE_FILE} holds {self._saved_best()}, not the best epoch "
                               f"{best['epoch']} (step {best['global_step']})")
        device = self.accelerator.device  # safetensors takes "cpu", not DDP's "cpu:0"
        load_model(self.unwrapped, str(self.output_dir / BEST_STATE_FILE),
                   device="cpu" if device.type == "cpu" else str(device))
        self.accelerator.print(f"the weights of epoch {best['epoch']} (validation BLEU {best['val_bleu']:.2f}, the "
                               "best) are the run's")

    def finish(self) -> dict | None:
        """Test BLEU, the replicas' weight fingerprints, the final MT checkpoint, metrics, the exported encoder."""
        from accelerate.utils import gather_object

        from modeling_cove.modeling_cove_mt import TARGET_TOKENIZER_SUBFOLDER

        accelerator = self.accelerator
        self._restore_best()
        test_by_corpus = None if self.args.no_test else {corpus: self._test(corpus) for corpus in self.data.corpora}
        test = test_by_corpus[self.data.corpora[0]] if test_by_corpus else None
        fingerprint = [parameters_sha256(self.unwrapped)]
        fingerprints = gather_object(fingerprint) if self.world > 1 else fingerprint
        payload = None
        if accelerator.is_main_process:
            mt_dir = self.output_dir / "mt"
            self.unwrapped.save_pretrained(mt_dir)
            self.data.source_tokenizer.save_pretrained(mt_dir)
            self.data.target_tokenizer.save_pretrained(mt_dir / TARGET_TOKENIZER_SUBFOLDER)
            payload = {**self.metrics_payload(test, test_by_corpus), "replica_weight_sha256": fingerprints}
            self._write_metrics(payload)
            if not self.args.no_export:
                export_encoder(mt_dir, self.output_dir / "encoder", metrics=payload,
                               name=self.preset_name or self.output_dir.name)
            accelerator.print(f"done: {self.output_dir} ({payload['wall_seconds']} s; stopped: "
                              f"{self.state.stop_reason})")
        end_run(accelerator)
        return payload
