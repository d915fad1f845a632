/**
 * A tiny MLP (Linear-ReLU-Linear, MSE on y = x0 - 2·x1 + 0.5) trained for 8 steps with SGD+momentum
 * and with AdamW, from torch's initial weights: the losses match torch's (nn_goldens.json), and
 * three ways of running it give bit-identical losses and weights: eager execution mode, lazy
 * forward (default), and a fully lazy step (forward and loss recorded, realized once).
 */
import { describe, expect, test } from "bun:test";
import * as loom from "../../src/index.ts";
import { nn, optim } from "../../src/index.ts";
import { expectClose, fromArr, readGolden, type Arr } from "./helpers.ts";

interface Training { state: Record<string, Arr>; x: Arr; y: Arr; losses: Record<"sgd" | "adamw", number[]> }
const golden = readGolden<{ mlp_training: Training }>(new URL("./nn_goldens.json", import.meta.url)).mlp_training;

type Way = "eager" | "lazy" | "fully_lazy";
const MAKE = {
  sgd: (ps: nn.Parameter[]) => new optim.SGD(ps, { lr: 0.05, momentum: 0.9 }),
  adamw: (ps: nn.Parameter[]) => new optim.AdamW(ps, { lr: 0.01 }),
};

function train(opt_name: "sgd" | "adamw", way: Way): { losses: number[]; params: loom.Tensor[] } {
  const model = new nn.Sequential(new nn.Linear(2, 8), new nn.ReLU(), new nn.Linear(8, 1));
  model.load_state_dict(Object.fromEntries(Object.entries(golden.state).map(([k, v]) => [k, fromArr(v)])));
  const opt = MAKE[opt_name](model.parameters());
  const x = fromArr(golden.x), y = fromArr(golden.y);
  const losses: number[] = [];
  for (let step = 0; step < 8; step++) {
    opt.zero_grad();
    let loss: loom.Tensor;
    if (way === "eager") loss = nn.F.mse_loss(model.forward_eager(x), y);
    else if (way === "lazy") loss = nn.F.mse_loss(model.call(x), y);
    else loss = nn.F.mse_loss(model.call(x.lazy()), y.lazy()).eval();
    loss.backward();
    opt.step();
    losses.push(loss.item());
  }
  return { losses, params: model.parameters() };
}

describe("tiny MLP training", () => {
  for (const name of ["sgd", "adamw"] as const) {
    test(`${name}: losses match torch and decrease`, () => {
      const { losses } = train(name, "lazy");
      expectClose(losses, golden.losses[name], { rtol: 1e-5, atol: 1e-6, what: `${name} losses` });
      expect(losses[7]!).toBeLessThan(losses[0]!);
    });
    test(`${name}: eager, lazy and fully lazy steps give identical losses and weights`, () => {
      const runs = (["eager", "lazy", "fully_lazy"] as Way[]).map((w) => loom.with_compiler_options({ tolerance: "exact" }, () => train(name, w))); // eager's bits
      for (const r of runs.slice(1)) {
        expect(r.losses).toEqual(runs[0]!.losses);
        r.params.forEach((p, i) => expect(Array.from(p.dataSync())).toEqual(Array.from(runs[0]!.params[i]!.dataSync())));
      }
    });
  }
});
