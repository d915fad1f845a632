/**
 * A small MLP (1 -> 32 -> 32 -> 1, tanh) fits y = sin(3x) + 0.3x² on [-1, 1] with SGD,
 * once eagerly and once lazily; both print the same losses.
 *
 *   bun examples/mlp_regression.ts [--steps 200]
 */
import * as loom from "../src/index.ts";
import type { Tensor } from "../src/index.ts";
import { Progress } from "./progress.ts";

type Params = Tensor[];

function init(seed: number): Params {
  const g = new loom.Generator(seed);
  const layer = (fin: number, fout: number) => {
    const bound = 1 / Math.sqrt(fin); // torch.nn.Linear's default bound
    const w = loom.rand([fout, fin], { generator: g }).mul(2 * bound).sub(bound);
    const b = loom.rand([fout], { generator: g }).mul(2 * bound).sub(bound);
    return [w.requires_grad_(), b.requires_grad_()];
  };
  return [...layer(1, 32), ...layer(32, 32), ...layer(32, 1)];
}

/** The model, written once against the shared surface: runs on Tensor or LazyTensor. */
function forward<S extends loom.TensorOps<S>>(x: S, p: S[]): S {
  let h = loom.linear(x, p[0]!, p[1]!).tanh();
  h = loom.linear(h, p[2]!, p[3]!).tanh();
  return loom.linear(h, p[4]!, p[5]!);
}

/**
 * Train for `steps` full-batch SGD steps (lr 0.1 per step) and return the loss after each step.
 * Lazy mode records forward and backward as graphs and realizes them once per step.
 * `progress` (optional) gets a tick per step, counting the 64 samples of the batch.
 */
export function train(mode: "eager" | "lazy", steps: number, progress?: Progress): number[] {
  const x = loom.linspace(-1, 1, 64).reshape(64, 1);
  const y = x.mul(3).sin().add(x.square().mul(0.3));
  const params = init(0);
  const losses: number[] = [];
  progress?.start(steps);
  for (let s = 0; s < steps; s++) {
    const args = mode === "lazy" ? params.map((p) => p.lazy()) : params;
    const xin = mode === "lazy" ? x.lazy() : x;
    const loss = loom.mse_loss(forward(xin as any, args as any[]) as any, mode === "lazy" ? y.lazy() : y) as Tensor;
    loss.backward();
    loom.no_grad(() => {
      for (const p of params) {
        p.sub_(p.grad!.mul(0.1));
        p.grad = null;
      }
    });
    losses.push(loss.item());
    progress?.tick(s + 1, losses[s]!, x.shape[0]!);
  }
  progress?.stop();
  return losses;
}

if (import.meta.main) {
  const i = process.argv.indexOf("--steps");
  const steps = i > 0 ? Number(process.argv[i + 1]) : 200;
  const t0 = performance.now();
  const eager = train("eager", steps, new Progress("eager", { unit: "samples" }));
  const t1 = performance.now();
  const lazy = train("lazy", steps, new Progress("lazy ", { unit: "samples" }));
  const t2 = performance.now();
  for (let s = 0; s < steps; s += Math.max(1, Math.floor(steps / 10))) {
    console.log(`step ${String(s).padStart(4)}  eager loss ${eager[s]!.toFixed(6)}  lazy loss ${lazy[s]!.toFixed(6)}`);
  }
  console.log(`final   eager ${eager.at(-1)!.toFixed(6)}  lazy ${lazy.at(-1)!.toFixed(6)}  identical: ${eager.every((v, k) => v === lazy[k])}`);
  console.log(`time    eager ${(t1 - t0).toFixed(0)} ms  lazy ${(t2 - t1).toFixed(0)} ms`);
}
