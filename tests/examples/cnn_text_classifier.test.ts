/**
 * The 1-D CNN text classifier port (examples/cnn_text_classifier.ts): the collate_fn pads to the
 * batch's longest sentence and padding does not change a sentence's logits; one epoch of the
 * small setting lowers the validation loss and beats chance; a run resumed from a checkpoint
 * (new model, optimizer, scheduler and loaders, generators moved elsewhere before the load)
 * ends bit-equal to the uninterrupted run, on every backend in lazy mode; eager == lazy for one
 * training step; marking the padded length dynamic shares one plan template across lengths.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as loom from "../../src/index.ts";
import { planCacheStats } from "../../src/scheduler/compile.ts";
import { BACKENDS, useBackend } from "../backends.ts";
import {
  PAD, SentenceDataset, TextCNN, UNK, Vocab, collate_batch, config, evaluate, load_checkpoint, make_run, pad_batch,
  save_checkpoint, tokenize, train_one_epoch, train_step, type Run,
} from "../../examples/cnn_text_classifier.ts";

const dir = mkdtempSync(join(tmpdir(), "loom-cnn-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const small = config(true);
const params = (r: Run) => r.model.parameters().map((p) => Array.from(p.dataSync()));

test("pad_batch pads to the batch's longest sentence with PAD; labels int64 [B]", () => {
  const b = pad_batch([{ ids: [3, 4, 5], label: 0 }, { ids: [6], label: 1 }, { ids: [7, 8], label: 1 }]);
  expect(b.x.dtype).toBe("int64");
  expect(b.x.tolist()).toEqual([[3, 4, 5], [6, PAD, PAD], [7, 8, PAD]]);
  expect(b.y.dtype).toBe("int64");
  expect(b.y.tolist()).toEqual([0, 1, 1]);
  // a dynamic length: shape unchanged, still the batch's longest
  const d = pad_batch([{ ids: [2, 2], label: 0 }], new loom.Dim("seq", { min: 2, max: 8 }));
  expect(d.x.shape).toEqual([1, 2]);
});

test("tokenizer, vocabulary, dataset and collate_fn", () => {
  expect(tokenize("Call me Ishmael. It's 1851!")).toEqual(["call", "me", "ishmael", ".", "it's", "1851", "!"]);
  const v = new Vocab([["b", "a", "b"], ["c", "a", "b"], ["d"]], 1);
  expect(v.itos).toEqual(["<pad>", "<unk>", "b", "a", "c", "d"]); // by count, then alphabetically
  expect(new Vocab([["b", "a", "b"], ["c"]], 2).itos).toEqual(["<pad>", "<unk>", "b"]); // min_freq
  expect(v.encode(["a", "z"])).toEqual([3, UNK]);
  const ds = new SentenceDataset([{ text: "A b.", label: 1 }, { text: "b", label: 0 }]);
  expect(ds.length).toBe(2);
  expect(ds.get(1)).toEqual({ text: "b", label: 0 });
  expect(() => ds.get(2)).toThrow(loom.LoomIndexError);
  const batch = collate_batch([ds.get(0), ds.get(1)], v);
  expect(batch.x.tolist()).toEqual([[3, 2, UNK], [2, PAD, PAD]]);
  expect(batch.y.tolist()).toEqual([1, 0]);
});

test("the small run: a random split of balanced sentences, vocabulary from the training split", () => {
  const run = make_run(small);
  expect([run.train_set.length, run.val_set.length]).toEqual([576, 192]);
  const all = [...run.train_set.indices, ...run.val_set.indices].sort((a, b) => a - b);
  expect(all).toEqual(Array.from({ length: 768 }, (_, i) => i)); // disjoint, complete
  const labels = Array.from({ length: run.val_set.length }, (_, i) => run.val_set.get(i).label);
  expect(Math.abs(labels.filter((l) => l === 1).length - 96)).toBeLessThan(20);
  expect(run.train_loader.length).toBe(18);
  const seen = new Set(Array.from({ length: run.train_set.length }, (_, i) => tokenize(run.train_set.get(i).text)).flat());
  expect(run.vocab.itos.slice(2).every((w) => seen.has(w))).toBe(true);
  expect(run.vocab.length).toBe(seen.size + 2);
});

test("mark_dynamic on the padded length: an epoch over many lengths compiles a plan template, not a plan per length", () => {
  // batches of 4: most batches have their own padded length
  const run = make_run({ ...small, batch_size: 4, per_class: 40 });
  const lengths = new Set([...run.train_loader].map((b) => b.x.size(1)));
  const m0 = planCacheStats.misses;
  train_one_epoch(run);
  expect(lengths.size).toBeGreaterThanOrEqual(6);
  expect(planCacheStats.misses - m0).toBeLessThanOrEqual(3); // without the mark: one per length
});

test("padding does not change a sentence's logits (windows over padding are masked out of the max)", () => {
  loom.manual_seed(3);
  const m = new TextCNN({ vocab_size: 10, embed_dim: 4, channels: 6, kernel_size: 3, dropout: 0.5, num_classes: 2 });
  m.eval();
  // negative biases make some channels all-negative before ReLU: the max must still ignore pads
  loom.no_grad(() => m.conv.bias!.sub_(0.3));
  const alone = m.call(pad_batch([{ ids: [4, 5, 6, 2], label: 0 }]).x).tolist() as number[][];
  const padded = m.call(pad_batch([{ ids: [4, 5, 6, 2], label: 0 }, { ids: [1, 2, 3, 7, 8, 9, 2], label: 1 }]).x).tolist() as number[][];
  for (let k = 0; k < 2; k++) expect(padded[0]![k]!).toBeCloseTo(alone[0]![k]!, 6);
});

for (const backend of BACKENDS) {
  describe(`lazy training on ${backend}`, () => {
    useBackend(backend);

    test("one epoch lowers the validation loss and beats chance", () => {
      const run = make_run(small);
      const before = evaluate(run);
      const losses = train_one_epoch(run);
      const after = evaluate(run);
      expect(losses.length).toBe(run.train_loader.length);
      expect(after.loss).toBeLessThan(before.loss - 0.05);
      // 192 validation sentences: 60% is ~2.8 standard deviations above chance
      expect(after.accuracy).toBeGreaterThan(0.6);
      expect(run.optimizer.param_groups[0]!.lr).toBeCloseTo(small.lr * small.gamma, 12); // StepLR stepped
    });

    test("resume is bit-exact: 2 epochs == 1 epoch, checkpoint, fresh objects, 1 more epoch", () => {
      // the uninterrupted run checkpoints after epoch 1, as the example's main does
      const straight = make_run(small);
      const losses = train_one_epoch(straight);
      const path = join(dir, `resume-${backend}.ckpt`);
      save_checkpoint(straight, path);
      losses.push(...train_one_epoch(straight));

      // a new process: new data, model, optimizer, scheduler and loaders, generators elsewhere
      const second = make_run(small);
      loom.rand([7]); // the default generator (dropout's draws)
      second.shuffle_gen.manual_seed(99);
      const unrestored = [...second.train_loader.sampler!];
      second.shuffle_gen.manual_seed(99);
      load_checkpoint(second, path);
      expect(second.epoch).toBe(1);
      // the checkpoint holds the training loader's state: taken between epochs, nothing of one in progress
      expect(loom.load(path).train_loader).toMatchObject({ format: "loom.DataLoader", iterator_finished: true, num_yielded: 0 });
      // the shuffle generator's saved state is what gives epoch 2 its order (read without consuming it)
      const state = second.shuffle_gen.get_state();
      expect([...second.train_loader.sampler!]).not.toEqual(unrestored);
      second.shuffle_gen.set_state(state);

      const resumed = [...losses.slice(0, losses.length / 2), ...train_one_epoch(second)];
      expect(resumed).toEqual(losses);
      expect(params(second)).toEqual(params(straight));
      expect(second.optimizer.param_groups[0]!.lr).toBe(straight.optimizer.param_groups[0]!.lr);
      expect(second.optimizer.param_groups[0]!.lr).toBeCloseTo(small.lr * small.gamma ** 2, 12);
    });

    test("eager == lazy for one training step (exact on js, float32 tolerance on native)", () => {
      const step = (mode: loom.nn.ExecutionMode) => {
        const r = make_run(small);
        const [batch] = r.train_loader;
        r.model.train();
        const loss = loom.nn.with_execution_mode(mode, () => train_step(r, batch!));
        return { loss, params: params(r) };
      };
      const eager = step("eager");
      const lazy = loom.with_compiler_options({ tolerance: "exact" }, () => step("lazy"));
      if (backend === "js") {
        expect(lazy).toEqual(eager);
        return;
      }
      expect(lazy.loss).toBeCloseTo(eager.loss, 5);
      for (const [i, p] of eager.params.entries()) for (const [j, v] of p.entries()) expect(Math.abs(lazy.params[i]![j]! - v)).toBeLessThan(1e-5 + 1e-4 * Math.abs(v));
    });
  });
}
