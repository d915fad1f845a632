/**
 * The MLP example trains to the same losses eagerly and lazily, and the loss drops.
 */
import { expect, test } from "bun:test";
import { train } from "../examples/mlp_regression.ts";
import { with_compiler_options } from "../src/index.ts";

test("MLP regression: eager and lazy losses are identical and fall", () => {
  const eager = train("eager", 60);
  const lazy = with_compiler_options({ tolerance: "exact" }, () => train("lazy", 60)); // eager's bits
  expect(lazy).toEqual(eager);
  expect(eager.at(-1)!).toBeLessThan(eager[0]! * 0.5);
});
