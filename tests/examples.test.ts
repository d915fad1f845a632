/**
 * The MLP example trains to the same losses eagerly and lazily, and the loss drops.
 */
import { expect, test } from "bun:test";
import { train } from "../examples/mlp_regression.ts";

test("MLP regression: eager and lazy losses are identical and fall", () => {
  const eager = train("eager", 60);
  const lazy = train("lazy", 60);
  expect(lazy).toEqual(eager);
  expect(eager.at(-1)!).toBeLessThan(eager[0]! * 0.5);
});
