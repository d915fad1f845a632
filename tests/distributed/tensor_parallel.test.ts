/**
 * Tensor parallelism on 2 ranks (Megatron-LM): a GPT-2 block whose attention is split by heads
 * and whose MLP is split column/row equals the single-rank GPT2Block with the same weights, in
 * its output, the input's gradient and every parameter's gradient (sharded ones against the
 * matching slice of the full gradient); ColumnParallelLinear(gather_output) and RowParallelLinear
 * equal nn.Linear of the same seed. js and native, eager and lazy.
 */
import { describe, expect, test } from "bun:test";
import { MPI_SKIP, runRanks } from "./helpers.ts";

describe.skipIf(MPI_SKIP !== "")(`tensor-parallel layers on 2 ranks${MPI_SKIP ? ` (skipped: ${MPI_SKIP})` : ""}`, () => {
  test("a 2-rank tensor-parallel GPT-2 block equals the single-rank block (forward and backward)", () => {
    const run = runRanks(2, "tensor_parallel.ts");
    expect(run.status).toBe(0);
    for (const res of run.results) {
      const cases = Object.keys(res).filter((k) => k.includes("/"));
      expect(cases).toContain("js/lazy");
      for (const c of cases) {
        const { block, layers } = res[c];
        // float32: the row-parallel sums add the two halves of each dot product in another order
        for (const k of ["y", "x_grad", "ln_1_grad", "c_fc_grad", "c_fc_bias_grad", "mlp_proj_grad", "mlp_proj_bias_grad", "attn_proj_grad"]) {
          expect({ c, k, d: block[k] < 1e-6 }).toEqual({ c, k, d: true });
        }
        // C = 16, 4 heads, 2 ranks: q/k/v of 2 heads each (3·8 rows), c_proj's 8 input columns, 4C/2 = 32
        expect(block.shapes).toEqual([[24, 16], [16, 8], [32, 16], [16, 32]]);
        for (const k of ["col_y", "col_gx", "row_y", "row_gx"]) expect({ c, k, d: layers[k] < 1e-6 }).toEqual({ c, k, d: true });
        expect([layers.col_shape, layers.row_shape]).toEqual([[2, 6], [4, 3]]);
      }
    }
  }, 60_000);
});
